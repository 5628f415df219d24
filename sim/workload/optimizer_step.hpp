// The optimizer step and the passes over a GPU's parameters beside it (gradient accumulation, FP8 weight casts): their
// bytes and time per parameter as the plan's software runs them. (Their tasks in the step: workload/builder_rooms.)
#pragma once

#include "hardware/compute_model.hpp"
#include "plan/parallel_plan.hpp"

namespace sim::workload {

// Seconds per parameter on one GPU.
struct ParameterPassTimes {
  double optimizer_s = 0;                   // the optimizer step's passes, per parameter updated
  double grad_accumulation_s = 0;           // a micro-batch's gradients added to the accumulated ones (0: fused)
  bool grad_accumulation_from_first = true; // false: autograd's accumulation starts with the second micro-batch
  double fp8_weight_cast_s = 0;             // FP8 copies of a transformer layer's weights, made once per step
};

// Bytes the optimizer step moves per parameter it updates, and the gradient accumulation per parameter per
// micro-batch, as the plan's software runs them.
double optimizer_bytes_per_param(const plan::ParallelPlan& p);
double grad_accumulation_bytes_per_param(const plan::ParallelPlan& p);
double fp8_weight_cast_bytes_per_param(const plan::ParallelPlan& p);

// Those passes' times on `gpu` (as the layer programs pace it: workload/layer_program).
ParameterPassTimes parameter_pass_times(const plan::ParallelPlan& p, const hardware::GpuSpec& gpu);

} // namespace sim::workload
