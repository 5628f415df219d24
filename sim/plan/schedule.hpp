// Pipeline schedules: the order in which each stage runs the forward and backward passes of its micro-batches
// (GPipe, 1F1B, Megatron-LM's interleaved 1F1B), and which pass on which stage feeds which.
#pragma once

#include "plan/parallel_plan.hpp"

#include <vector>

namespace sim::plan {

// A backward pass computes the gradients of the pass's inputs and of its weights; under zero-bubble scheduling the
// weight gradients may be left for a later WEIGHT pass of the same micro-batch and chunk.
enum class Pass { FORWARD, BACKWARD, WEIGHT };

struct PassRef {
  Pass pass = Pass::FORWARD;
  int chunk = 0; // model chunk on this stage (0 unless interleaved or DualPipe)
  int microbatch = 0;
  bool defer_weight = false; // BACKWARD: its weight gradients wait for a WEIGHT pass
  bool operator==(const PassRef&) const = default;
};

// One step of a GPU's loop under DualPipe or DualPipeV, as deepseek-ai/DualPipe's step() runs it: post the receive
// of a pass's input (activations for a forward pass, output gradients for a backward one), post the send of a pass's
// output, wait for everything posted so far, or run a pass -- or a forward and a backward pass side by side.
struct PipelineOp {
  enum class Kind { RECEIVE, SEND, WAIT, RUN };
  Kind kind = Kind::WAIT;
  PassRef pass;
  bool paired = false; // RUN: `beside` runs side by side with `pass`
  PassRef beside;
};

// The passes stage `stage` runs, in order.
std::vector<PassRef> stage_order(const plan::ParallelPlan& p, int stage);

// DualPipe's or DualPipeV's loop on stage `stage`. Micro-batch numbers are global: DualPipe's first half enter at the
// first stage (chunk 0 path), its second half at the last (chunk 1 path).
std::vector<PipelineOp> dualpipe_ops(const plan::ParallelPlan& p, int stage);

// The virtual stage (position along a micro-batch's path) of a chunk on a stage.
inline int virtual_stage(const plan::ParallelPlan& p, int stage, int chunk)
{
  return p.virtual_stage(stage, chunk);
}

} // namespace sim::plan
