// How long a GPU kernel takes: a per-operation roofline on the GPU's catalogue data, plus a fixed per-kernel
// overhead. GEMMs run at peak x measured large-GEMM efficiency, less the wave quantisation of their output tiles
// over the SMs; fused attention at its own measured efficiency (the GEMM's when not measured); memory-bound
// kernels at the achievable memory bandwidth. Every kernel is also bounded by its memory traffic.
#pragma once

#include "hardware/gpu_spec.hpp"

#include <string_view>

namespace sim::hardware {

enum class KernelKind { GEMM, ATTENTION, ATTENTION_BACKWARD, MEMORY };

struct Kernel {
  std::string_view name;
  KernelKind kind = KernelKind::MEMORY;
  double m = 0; // GEMM: (m x k) times (k x n), `batch` times
  double n = 0;
  double k = 0;
  double batch = 1;
  double flops = 0; // as executed (GEMM: 2mnk x batch; attention: with the causal mask's saving)
  double bytes = 0; // memory traffic
};

// A GEMM of 16-bit operands: its FLOPs and the bytes of its three matrices.
Kernel gemm(std::string_view name, double m, double n, double k, double batch = 1);
Kernel memory_bound(std::string_view name, double bytes);

// Output tiles of 128 x 128 spread over the SMs in waves: useful work / work done (1 without an SM count).
double wave_efficiency(double m, double n, double batch, int sms);

// The kernel's fixed overhead plus its busy time, the slower of its arithmetic and its memory traffic.
double kernel_time(const Kernel& kernel, const GpuSpec& gpu, Precision precision);
double busy_time(const Kernel& kernel, const GpuSpec& gpu, Precision precision);

} // namespace sim::hardware
