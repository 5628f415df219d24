#include "workload/graph_size.hpp"

#include "workload/builder.hpp"
#include "workload/layer_program.hpp"

namespace sim::workload {
namespace {

// Bytes per task, measured: the full 16,384-GPU Llama 3 405B graph held 55.6M tasks in 5.9 GB (106 B each with its
// dependencies); the replay adds each task's times, its pending count and its activity.
constexpr double bytes_per_task = 200.0;

// Tasks of one pass through a program on one TP group: a task per kernel step per simulated GPU, and per collective
// its syncs and up to three phases of flows among its simulated members.
double program_tasks(const Program& program, double members)
{
  double tasks = 0;
  for (const Step& s : program) {
    if (s.kind != Step::Kind::COLLECTIVE)
      tasks += members;
    if (s.kind != Step::Kind::COMPUTE)
      tasks += 4.0 + 3.0 * members;
  }
  return tasks;
}

} // namespace

GraphSize estimate_graph_size(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                              const topology::ClusterSpec& cluster, bool fold)
{
  GraphSize size;
  size.folded = fold && fold_precondition(plan, cluster).empty();
  // Costing a layer's kernels is cheap, and the programs' lengths are what the builder repeats.
  hardware::GpuSpec gpu = cluster.gpu;
  const LayerPrograms programs = build_programs(model, plan, gpu);
  const double groups = size.folded ? 1.0 : plan.dp;  // TP groups per stage
  const double members = size.folded ? 1.0 : plan.tp; // simulated GPUs per TP group
  const double layer = program_tasks(programs.layer_forward, members) + program_tasks(programs.layer_backward, members);
  const double ends = program_tasks(programs.embedding_forward, members) +
                      program_tasks(programs.embedding_backward, members) +
                      program_tasks(programs.head_forward, members) + program_tasks(programs.head_backward, members);
  const double microbatches = static_cast<double>(plan.microbatches());
  const double layers = static_cast<double>(model.num_layers);
  // Per micro-batch: every layer of the model once on its stage, the embedding and output layer, a pipeline send
  // and receive per stage boundary, a host-sync step and a gradient accumulation per item.
  double per_microbatch = groups * (layers * (layer + 2.0 * members) + ends) + 8.0 * plan.pp * groups * members;
  // Per step: gradient buckets and parameter gathers (at most one per layer and direction) over the data-parallel
  // groups, the optimizer.
  const double dp_members = size.folded ? 1.0 : plan.dp;
  if (plan.zero_stage >= 2) // gradients reduce-scattered (and ZeRO-3 parameters gathered) every micro-batch
    per_microbatch += (size.folded ? 1.0 : plan.tp) * 3.0 * layers * (4.0 + 3.0 * dp_members) *
                      (plan.software.zero3_per_tensor ? 4.0 : 1.0);
  const double per_step =
      (size.folded ? 1.0 : plan.tp) * 3.0 * layers * (4.0 + 3.0 * dp_members) + plan.pp * groups * members;
  size.tasks = microbatches * per_microbatch + per_step;
  size.bytes = size.tasks * bytes_per_task;
  return size;
}

} // namespace sim::workload
