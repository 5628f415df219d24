// The closed sets that name GPU kernels by how they run: GEMM operand layouts, fused-attention implementations and
// the classes of memory-bound kernels, each of which the catalogue can give its own measured rate.
#pragma once

#include "core/json_reader.hpp"

#include <array>

namespace sim::hardware {

// A linear layer's three GEMMs (Megatron's Y = X W^T): forward, data gradient dX = dY W, weight gradient dW = dY^T X.
// cuBLAS runs them with different operand layouts; the tables record which one a row measured.
enum class GemmLayout { FORWARD, DGRAD, WGRAD };

inline constexpr std::array<core::Choice<GemmLayout>, 3> gemm_layout_choices{
    {{"fwd", GemmLayout::FORWARD}, {"dgrad", GemmLayout::DGRAD}, {"wgrad", GemmLayout::WGRAD}}};

// Fused attention kernels whose published throughput curves (by sequence length and head size) the catalogue holds.
enum class AttentionImpl { FLASH1, FLASH2, FLASH3, CUDNN };

inline constexpr std::array<core::Choice<AttentionImpl>, 4> attention_impl_choices{{{"flash1", AttentionImpl::FLASH1},
                                                                                    {"flash2", AttentionImpl::FLASH2},
                                                                                    {"flash3", AttentionImpl::FLASH3},
                                                                                    {"cudnn", AttentionImpl::CUDNN}}};

// What a measured attention rate covers: the forward kernel, the backward kernel, or both together (published curves
// often give only the sum).
enum class AttentionPass { FORWARD, BACKWARD, FORWARD_BACKWARD };

inline constexpr std::array<core::Choice<AttentionPass>, 3> attention_pass_choices{
    {{"fwd", AttentionPass::FORWARD}, {"bwd", AttentionPass::BACKWARD}, {"fwd_bwd", AttentionPass::FORWARD_BACKWARD}}};

// The pass a memory-bound kernel runs in: a class's backward kernel may reach another bandwidth than its forward one.
enum class KernelPass { FORWARD, BACKWARD };

// Memory-bound kernels, by what they compute and, for norms, by implementation: their achieved bandwidth differs by
// up to 3x (apex's 2021 LayerNorm backward against a plain add).
enum class MemoryKernel {
  ELEMENTWISE, // casts, copies, scales: a streaming kernel
  LAYERNORM_APEX,
  LAYERNORM_FAST,
  LAYERNORM_TE,
  LAYERNORM_TORCH,
  RMSNORM_APEX,
  RMSNORM_TE,
  RMSNORM_TORCH,
  SOFTMAX,
  DROPOUT,
  GELU,
  SWIGLU,
  BIAS_DROPOUT_ADD,
  RESIDUAL_ADD,
  ROPE,
  CROSS_ENTROPY,
  EMBEDDING,
  GRADIENT_ACCUMULATION,
  ADAM,
};

inline constexpr std::array<core::Choice<MemoryKernel>, 19> memory_kernel_choices{
    {{"elementwise", MemoryKernel::ELEMENTWISE},
     {"layernorm_apex", MemoryKernel::LAYERNORM_APEX},
     {"layernorm_fast", MemoryKernel::LAYERNORM_FAST},
     {"layernorm_te", MemoryKernel::LAYERNORM_TE},
     {"layernorm_torch", MemoryKernel::LAYERNORM_TORCH},
     {"rmsnorm_apex", MemoryKernel::RMSNORM_APEX},
     {"rmsnorm_te", MemoryKernel::RMSNORM_TE},
     {"rmsnorm_torch", MemoryKernel::RMSNORM_TORCH},
     {"softmax", MemoryKernel::SOFTMAX},
     {"dropout", MemoryKernel::DROPOUT},
     {"gelu", MemoryKernel::GELU},
     {"swiglu", MemoryKernel::SWIGLU},
     {"bias_dropout_add", MemoryKernel::BIAS_DROPOUT_ADD},
     {"residual_add", MemoryKernel::RESIDUAL_ADD},
     {"rope", MemoryKernel::ROPE},
     {"cross_entropy", MemoryKernel::CROSS_ENTROPY},
     {"embedding", MemoryKernel::EMBEDDING},
     {"gradient_accumulation", MemoryKernel::GRADIENT_ACCUMULATION},
     {"adam", MemoryKernel::ADAM}}};

} // namespace sim::hardware
