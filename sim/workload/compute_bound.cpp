#include "workload/compute_bound.hpp"

#include "memory/memory_model.hpp"
#include "workload/layer_program.hpp"

#include <algorithm>

namespace sim::workload {
namespace {

double kernel_time(const Program& program)
{
  double s = 0;
  for (const auto& step : program)
    if (step.kind != Step::Kind::COLLECTIVE)
      s += step.duration_s;
  return s;
}

} // namespace

double compute_lower_bound_s(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                             const hardware::GpuSpec& gpu)
{
  const LayerPrograms programs = build_programs(model, plan, gpu);
  const double microbatches = static_cast<double>(plan.microbatches());
  const bool sharded = plan.zero_stage >= 1 || plan.distributed_optimizer;
  const auto memory = memory::estimate_memory(model, plan, gpu);
  // The pipeline's fill and drain, where each stage runs one pass at a time and its last is a backward of its first
  // chunk (1F1B, GPipe, interleaved; not DualPipe's deferred weight gradients nor passes run side by side): stage s
  // starts only once the first micro-batch's forward has crossed the first chunks of the stages before it, and after
  // its last backward those stages still run theirs.
  const bool fill_and_drain = !plan.dualpipe() && !plan.moe_a2a_overlap;
  double before_forward = 0;
  double before_backward = 0;
  double busiest = 0;
  for (int s = 0; s < plan.pp; ++s) {
    double per_microbatch = 0;
    double first_forward = 0;
    double first_backward = 0;
    for (int c = 0; c < plan.virtual_stages; ++c) {
      for (int l = 0; l < plan.layers_in_chunk(s, c); ++l) {
        const int layer = plan.first_layer_of_chunk(s, c) + l;
        const double forward = kernel_time(programs.forward_of(model, layer));
        const double backward = kernel_time(programs.backward_of(model, layer));
        per_microbatch += forward + backward;
        if (c == 0) {
          first_forward += forward;
          first_backward += backward;
        }
      }
    }
    if (s == 0) {
      first_forward += kernel_time(programs.embedding_forward);
      first_backward += kernel_time(programs.embedding_backward);
      per_microbatch += kernel_time(programs.embedding_forward) + kernel_time(programs.embedding_backward);
    }
    if (s == plan.pp - 1)
      per_microbatch += kernel_time(programs.head_forward) + kernel_time(programs.head_backward);
    const double params = memory.per_stage[static_cast<std::size_t>(s)].params / (sharded ? plan.dp_cp() : 1);
    const double work = microbatches * per_microbatch;
    const double optimizer = params * programs.optimizer_s_per_param;
    busiest = std::max(busiest, fill_and_drain ? before_forward + std::max(work + optimizer, work + before_backward)
                                               : work + optimizer);
    before_forward += first_forward;
    before_backward += first_backward;
  }
  return busiest;
}

} // namespace sim::workload
