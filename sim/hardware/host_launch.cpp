#include "hardware/host_launch.hpp"

#include <algorithm>

namespace sim::hardware {
namespace {

// CPU microseconds per call of eager PyTorch 2.11 on the Xeon host of an H100 SXM machine, the GPU idle, median of
// 5 x 2,000 calls (tools/kernels/measure_host.py, data/h100/host/dispatch.csv): F.linear 17.3, torch._scaled_mm
// with FP8 operands 27.2, F.rms_norm 12.8, F.layer_norm 13.4, a 16-bit add 8.1. Attention's launch (SDPA) is not in
// the data: taken as a linear's. A backward kernel's launch is taken as its forward's (autograd's engine dispatches
// each through the same dispatcher); tools/kernels/measure_host.py --sections autograd measures both.
constexpr double gemm_us = 17.27;
constexpr double fp8_gemm_us = 27.23;
constexpr double norm_us = 13.1; // mean of rms_norm's and layer_norm's
constexpr double elementwise_us = 8.10;
// A grouped expert GEMM (Transformer Engine's GroupedLinear) is one call whose C++ loop launches a cuBLAS GEMM per
// local expert: each further GEMM costs the CUDA launch alone, 2.5-3.4 us of cudaLaunchKernel API time under nsys
// (argonne-lcf/ALCFBeginnersGuide polaris/02_profiling.md, cuda_api_sum), the middle taken.
constexpr double cuda_launch_us = 2.95;

bool is_norm(MemoryKernel m)
{
  switch (m) {
    case MemoryKernel::LAYERNORM_APEX:
    case MemoryKernel::LAYERNORM_FAST:
    case MemoryKernel::LAYERNORM_TE:
    case MemoryKernel::LAYERNORM_TORCH:
    case MemoryKernel::RMSNORM_APEX:
    case MemoryKernel::RMSNORM_TE:
    case MemoryKernel::RMSNORM_TORCH:
      return true;
    default:
      return false;
  }
}

double launch_us(const Kernel& k)
{
  switch (k.kind) {
    case KernelKind::GEMM:
      return k.fp8 ? fp8_gemm_us : gemm_us;
    case KernelKind::ATTENTION:
    case KernelKind::ATTENTION_BACKWARD:
      return gemm_us;
    case KernelKind::MEMORY:
      return is_norm(k.memory) ? norm_us : elementwise_us;
  }
  return elementwise_us;
}

} // namespace

double host_launch_time(const Kernel& k)
{
  return (launch_us(k) + cuda_launch_us * (std::max(k.launches, 1.0) - 1.0)) * 1e-6;
}

} // namespace sim::hardware
