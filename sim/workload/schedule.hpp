// Pipeline schedules: the order in which each stage runs the forward and backward passes of its micro-batches
// (GPipe, 1F1B, Megatron-LM's interleaved 1F1B), and which pass on which stage feeds which.
#pragma once

#include "plan/parallel_plan.hpp"

#include <vector>

namespace sim::workload {

enum class Pass { FORWARD, BACKWARD };

struct PassRef {
  Pass pass = Pass::FORWARD;
  int chunk = 0; // model chunk on this stage (0 unless interleaved)
  int microbatch = 0;
  bool operator==(const PassRef&) const = default;
};

// The passes stage `stage` runs, in order.
std::vector<PassRef> stage_order(const plan::ParallelPlan& p, int stage);

// The virtual stage (position along the whole pipeline) of a chunk on a stage: chunk * pp + stage.
inline int virtual_stage(const plan::ParallelPlan& p, int stage, int chunk)
{
  return chunk * p.pp + stage;
}

} // namespace sim::workload
