// Internal to the layer programs: the attention half of a transformer layer, forward and backward, with its tensor-
// and context-parallel communication.
#pragma once

#include "workload/program_steps.hpp"

#include <vector>

namespace sim::workload {

// The attention half of a layer's forward pass, up to its output's tensor-parallel reduction. With
// tp_comm_overlap (Megatron-core / Transformer Engine, sequence parallelism) each all-gather is pipelined with the
// GEMM that consumes it and each reduce-scatter with the GEMM that produces its input, chunk by chunk.
Program attention_forward(const Shape& x, const Costing& c, bool recompute);

// The attention half of a layer's backward pass, from the attention residual's gradient to the input norm's input.
Program attention_backward(const Shape& x, const Costing& c);

// Attention core, forward: fused (FlashAttention: the causal mask skips half the score tiles) or unfused
// (two batched GEMMs over the full s x s scores, softmax and dropout in between).
std::vector<hardware::Kernel> core_forward(const Shape& x);

struct CoreOptions {
  bool backward = false;
  bool recompute = false; // the forward core recomputed in the backward pass
};
// The attention core over a context-parallel group, forward or backward. Ring: the attention kernels beside the
// key/value blocks passed round the group (cp - 1 hops of this GPU's block, as a ring all-gather moves them; the
// backward pass sends the blocks and their gradients). All-to-all: queries, keys and values go from sequence to
// head sharding before the core, its output back after (the backward mirrors it).
Program context_parallel_core(const Shape& x, const Costing& c, const CoreOptions& options);

} // namespace sim::workload
