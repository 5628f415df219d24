#include "hardware/compute_model.hpp"

#include <algorithm>
#include <cmath>

namespace sim::hardware {
namespace {

constexpr double tile = 128.0;
constexpr double element_bytes = 2.0; // an FP8 GEMM's output

bool sixteen_bit(Precision p)
{
  return p == Precision::BF16 || p == Precision::FP16;
}

// The measured table answers for 16-bit GEMMs when the GPU has one (and, scaled, for FP8 GEMMs).
const KernelTables* gemm_table(const Kernel& kernel, const GpuSpec& gpu, Precision precision)
{
  return kernel.kind == KernelKind::GEMM && gpu.kernel_tables && (sixteen_bit(precision) || kernel.fp8)
             ? gpu.kernel_tables.get()
             : nullptr;
}

// A GEMM's sustained rate at its shape: the measured table's, or the large-GEMM efficiency less wave quantisation. An
// FP8 GEMM's: the 16-bit rate times the table's measured FP8 speed-up around its shape, else the part's.
double gemm_rate(const Kernel& kernel, const GpuSpec& gpu, Precision precision)
{
  if (kernel.fp8) {
    const double speedup = gpu.fp8_speedup().value_or(0.0);
    if (const KernelTables* table = gemm_table(kernel, gpu, precision))
      return table->gemm_rate(kernel.m, kernel.n, kernel.k, kernel.batch) *
             table->fp8_speedup(kernel.m, kernel.n, kernel.k, kernel.batch).value_or(speedup);
    const double sixteen = gpu.peak(Precision::BF16).value_or(gpu.peak(Precision::FP16).value_or(0.0));
    return sixteen * speedup * gpu.gemm_efficiency * wave_efficiency(kernel.m, kernel.n, kernel.batch, gpu.sms);
  }
  if (const KernelTables* table = gemm_table(kernel, gpu, precision))
    return table->gemm_rate(kernel.m, kernel.n, kernel.k, kernel.batch);
  return gpu.peak(precision).value_or(0.0) * gpu.gemm_efficiency *
         wave_efficiency(kernel.m, kernel.n, kernel.batch, gpu.sms);
}

double memory_time(const Kernel& kernel, const GpuSpec& gpu)
{
  const double efficiency = kernel.kind == KernelKind::MEMORY
                                ? gpu.memory_kernel_efficiency(kernel.memory, kernel.pass)
                                : gpu.memory_kernel_efficiency(MemoryKernel::ELEMENTWISE, KernelPass::FORWARD);
  return kernel.bytes / (gpu.memory_bandwidth * efficiency);
}

double attention_rate(const Kernel& kernel, const GpuSpec& gpu, Precision precision)
{
  const bool backward = kernel.kind == KernelKind::ATTENTION_BACKWARD;
  if (gpu.kernel_tables && sixteen_bit(precision))
    if (auto rate = gpu.kernel_tables->attention_rate({.impl = kernel.attention,
                                                       .pass = backward ? KernelPass::BACKWARD : KernelPass::FORWARD,
                                                       .causal = kernel.causal,
                                                       .seq = kernel.seq,
                                                       .head_dim = kernel.head_dim,
                                                       .heads = kernel.heads}))
      return *rate;
  double efficiency = gpu.attention_efficiency > 0 ? gpu.attention_efficiency : gpu.gemm_efficiency;
  if (backward && gpu.attention_backward_efficiency > 0)
    efficiency = gpu.attention_backward_efficiency;
  return gpu.peak(precision).value_or(0.0) * efficiency;
}

} // namespace

Kernel gemm(std::string_view name, double m, double n, double k, double batch, GemmLayout layout, double element)
{
  Kernel g;
  g.name = name;
  g.kind = KernelKind::GEMM;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch;
  g.layout = layout;
  g.flops = 2.0 * m * n * k * batch;
  g.bytes = element * (m * k + k * n + m * n) * batch;
  return g;
}

Kernel fp8_gemm(Kernel g)
{
  g.fp8 = true;
  g.bytes = (g.m * g.k + g.k * g.n + element_bytes * g.m * g.n) * g.batch;
  return g;
}

Kernel memory_bound(std::string_view name, double bytes, MemoryKernel memory, KernelPass pass)
{
  Kernel g;
  g.name = name;
  g.bytes = bytes;
  g.memory = memory;
  g.pass = pass;
  return g;
}

double slowest_of(double spread, int gpus)
{
  if (gpus <= 1 || spread <= 0)
    return 1.0;
  // The expected minimum of n uniform draws on [mean - spread/2, mean + spread/2].
  return 1.0 - spread / 2.0 + spread / (gpus + 1.0);
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
  const double overhead = gemm_table(kernel, gpu, precision) ? 0.0 : gpu.kernel_overhead_s;
  return overhead + busy_time(kernel, gpu, precision);
}

double busy_time(const Kernel& kernel, const GpuSpec& gpu, Precision precision)
{
  const double streaming = memory_time(kernel, gpu);
  const double sustained = gpu.sustained_compute_ratio;
  switch (kernel.kind) {
    case KernelKind::GEMM:
      return std::max(kernel.flops / (gemm_rate(kernel, gpu, precision) * sustained), streaming);
    case KernelKind::ATTENTION:
    case KernelKind::ATTENTION_BACKWARD:
      return std::max(kernel.flops / (attention_rate(kernel, gpu, precision) * sustained), streaming);
    case KernelKind::MEMORY:
      return streaming;
  }
  return streaming;
}

double memory_bound_time(const Kernel& kernel, const GpuSpec& gpu, Precision precision)
{
  return kernel.kind == KernelKind::MEMORY ? busy_time(kernel, gpu, precision) : 0.0;
}

} // namespace sim::hardware
