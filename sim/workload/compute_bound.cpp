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
  const double embedding = kernel_time(programs.embedding_forward) + kernel_time(programs.embedding_backward);
  const double head = kernel_time(programs.head_forward) + kernel_time(programs.head_backward);
  const double microbatches = static_cast<double>(plan.microbatches());
  const bool sharded = plan.zero_stage >= 1 || plan.distributed_optimizer;
  const auto memory = memory::estimate_memory(model, plan, gpu);
  double busiest = 0;
  for (int s = 0; s < plan.pp; ++s) {
    double per_microbatch = 0;
    for (int c = 0; c < plan.virtual_stages; ++c) {
      for (int l = 0; l < plan.layers_in_chunk(s, c); ++l) {
        const int layer = plan.first_layer_of_chunk(s, c) + l;
        per_microbatch +=
            kernel_time(programs.forward_of(model, layer)) + kernel_time(programs.backward_of(model, layer));
      }
    }
    if (s == 0)
      per_microbatch += embedding;
    if (s == plan.pp - 1)
      per_microbatch += head;
    const double params = memory.per_stage[static_cast<std::size_t>(s)].params / (sharded ? plan.dp_cp() : 1);
    busiest = std::max(busiest, microbatches * per_microbatch + params * programs.optimizer_s_per_param);
  }
  return busiest;
}

} // namespace sim::workload
