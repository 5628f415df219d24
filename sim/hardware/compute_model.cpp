#include "hardware/compute_model.hpp"

#include <algorithm>
#include <cmath>

namespace sim::hardware {
namespace {

constexpr double tile = 128.0;
constexpr double element_bytes = 2.0;

} // namespace

Kernel gemm(std::string_view name, double m, double n, double k, double batch)
{
  Kernel g;
  g.name = name;
  g.kind = KernelKind::GEMM;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch;
  g.flops = 2.0 * m * n * k * batch;
  g.bytes = element_bytes * (m * k + k * n + m * n) * batch;
  return g;
}

Kernel memory_bound(std::string_view name, double bytes)
{
  Kernel g;
  g.name = name;
  g.bytes = bytes;
  return g;
}

double wave_efficiency(double m, double n, double batch, int sms)
{
  if (sms <= 0 || m <= 0 || n <= 0)
    return 1.0;
  const double tiles = std::ceil(m / tile) * std::ceil(n / tile) * batch;
  const double waves = std::ceil(tiles / sms);
  return (m * n * batch) / (waves * sms * tile * tile);
}

double kernel_time(const Kernel& kernel, const GpuSpec& gpu, Precision precision)
{
  return gpu.kernel_overhead_s + busy_time(kernel, gpu, precision);
}

double busy_time(const Kernel& kernel, const GpuSpec& gpu, Precision precision)
{
  const double memory_rate = gpu.memory_bandwidth * (gpu.memory_efficiency > 0 ? gpu.memory_efficiency : 1.0);
  const double memory_time = kernel.bytes / memory_rate;
  const double peak = gpu.peak(precision).value_or(0.0);
  switch (kernel.kind) {
    case KernelKind::GEMM: {
      const double rate = peak * gpu.gemm_efficiency * wave_efficiency(kernel.m, kernel.n, kernel.batch, gpu.sms);
      return std::max(kernel.flops / rate, memory_time);
    }
    case KernelKind::ATTENTION:
    case KernelKind::ATTENTION_BACKWARD: {
      double efficiency = gpu.attention_efficiency > 0 ? gpu.attention_efficiency : gpu.gemm_efficiency;
      if (kernel.kind == KernelKind::ATTENTION_BACKWARD && gpu.attention_backward_efficiency > 0)
        efficiency = gpu.attention_backward_efficiency;
      return std::max(kernel.flops / (peak * efficiency), memory_time);
    }
    case KernelKind::MEMORY:
      return memory_time;
  }
  return memory_time;
}

} // namespace sim::hardware
