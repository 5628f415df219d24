// How long a GPU kernel takes, from the catalogue's measurements. GEMMs: the chip's measured GEMM table interpolated
// by shape (without one, the sustained large-GEMM efficiency less the wave quantisation of the output tiles over the
// SMs); FP8 GEMMs at that rate times the chip's measured FP8/BF16 GEMM speedup. Fused attention: the measured curve of
// its implementation by sequence length and head size, less its measured occupancy loss when few heads fill the SMs
// (without one, a flat efficiency). Memory-bound kernels: the achieved bandwidth of their class. Every kernel is also
// bounded by its memory traffic, tensor-core work runs at the node's sustained clock, and every kernel pays a fixed
// overhead except table GEMMs, whose measured times already hold it.
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
  GemmLayout layout = GemmLayout::FORWARD;
  bool fp8 = false;             // GEMM: FP8 operands (Transformer Engine's linear layers), a 16-bit output
  bool weight_gradient = false; // a weight's gradient (which zero-bubble schedules may compute later)
  // Attention: sequence length, head size, batch x heads on the GPU (0: unknown), causal mask, implementation.
  double seq = 0;
  double head_dim = 0;
  double heads = 0;
  bool causal = true;
  AttentionImpl attention = AttentionImpl::FLASH2;
  MemoryKernel memory = MemoryKernel::ELEMENTWISE; // memory-bound: its class and pass
  KernelPass pass = KernelPass::FORWARD;
  double flops = 0;    // as executed (GEMM: 2mnk x batch; attention: with the causal mask's saving)
  double bytes = 0;    // memory traffic
  double launches = 1; // kernels the host launches for it (a grouped expert GEMM: one per local expert)
};

// A GEMM of 16-bit operands (or of `element` bytes each: 4 in full precision): its FLOPs and the bytes of its three
// matrices.
Kernel gemm(std::string_view name, double m, double n, double k, double batch = 1,
            GemmLayout layout = GemmLayout::FORWARD, double element = 2.0);
// The same GEMM with FP8 operands: one byte per input element, the output still 16-bit.
Kernel fp8_gemm(Kernel g);
Kernel memory_bound(std::string_view name, double bytes, MemoryKernel memory = MemoryKernel::ELEMENTWISE,
                    KernelPass pass = KernelPass::FORWARD);

// The slowest of `gpus` GPUs whose sustained throughput spreads uniformly over `spread` of the mean, relative to the
// mean: the pace of a step in which they all wait for each other (1 for one GPU, 1 - spread/2 for very many).
double slowest_of(double spread, int gpus);

// Output tiles of 128 x 128 spread over the SMs in waves: useful work / work done (1 without an SM count).
double wave_efficiency(double m, double n, double batch, int sms);

// The kernel's fixed overhead plus its busy time, the slower of its arithmetic and its memory traffic.
double kernel_time(const Kernel& kernel, const GpuSpec& gpu, Precision precision);
double busy_time(const Kernel& kernel, const GpuSpec& gpu, Precision precision);
// The part of kernel_time spent streaming memory (the busy time of memory-bound kernels): what contention for HBM
// bandwidth slows down.
double memory_bound_time(const Kernel& kernel, const GpuSpec& gpu, Precision precision);

} // namespace sim::hardware
