#include "workload/compute_bound.hpp"

#include "memory/memory_model.hpp"
#include "plan/parallel_plan.hpp"
#include "workload/layer_program.hpp"

#include <algorithm>
#include <map>

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

// The least time `gpu`'s share of an all-to-all can take: its flows to the group's other members (the buffer spread
// evenly over the group, workload/collectives) start together, and none crosses a link faster than the engine lets
// it (bandwidth x efficiency per direction), so the link its flows load most takes at least their bytes over its
// capacity. A DeepEP exchange (deduplicated per node) counts nothing.
double all_to_all_floor(const topology::ClusterGraph& g, int gpu, const std::vector<int>& group, double bytes)
{
  const double share = bytes / static_cast<double>(group.size());
  std::map<std::pair<std::size_t, bool>, double> load; // bytes per link and direction
  double floor = 0;
  for (int peer : group) {
    if (peer == gpu)
      continue;
    const auto links = topology::route(g, gpu, peer);
    const auto forward = topology::link_directions(g, g.gpu[static_cast<std::size_t>(gpu)], links);
    for (std::size_t i = 0; i < links.size(); ++i) {
      const topology::Link& l = g.graph[links[i]];
      double& b = load[{l.id, forward[i]}];
      b += share;
      floor = std::max(floor, b / (l.bandwidth * l.efficiency));
    }
  }
  return floor;
}

plan::GroupDim group_dim(Group group)
{
  switch (group) {
    case Group::TP:
      return plan::GroupDim::TP;
    case Group::EP:
      return plan::GroupDim::EP;
    case Group::ETP:
      return plan::GroupDim::ETP;
    case Group::CP:
      return plan::GroupDim::CP;
  }
  return plan::GroupDim::TP;
}

// A pass's time on `gpu` when it waits for nothing but its own all-to-alls: its kernels, and the floor of each
// all-to-all it stops for (collectives running beside compute, and the others, count nothing).
double pass_floor(const Program& program, const plan::ParallelPlan& plan, const topology::ClusterGraph& g, int gpu)
{
  double s = kernel_time(program);
  for (const auto& step : program)
    if (step.kind == Step::Kind::COLLECTIVE && step.collective == CollectiveKind::ALL_TO_ALL && !step.deduplicated)
      s += all_to_all_floor(g, gpu, plan::group_of(plan, group_dim(step.group), gpu), step.bytes);
  return s;
}

} // namespace

double compute_lower_bound_s(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                             const hardware::GpuSpec& gpu, const topology::ClusterGraph& graph)
{
  const LayerPrograms programs = build_programs(model, plan, gpu);
  const double microbatches = static_cast<double>(plan.microbatches());
  // DualPipe's micro-batches take one of two paths over two copies of the model, half each: a GPU runs each of its
  // chunks for half of them, and both end stages embed and project half (DualPipeV's and the others' micro-batches
  // cross every chunk).
  const bool two_paths = plan.schedule == plan::Schedule::DUALPIPE;
  const double per_chunk = two_paths ? microbatches / 2 : microbatches;
  const bool sharded = plan.zero_stage >= 1 || plan.distributed_optimizer;
  const auto memory = memory::estimate_memory(model, plan, gpu);
  // The pipeline's fill and drain, where each stage runs one pass at a time and its last is a backward of its first
  // chunk (1F1B, GPipe, interleaved; not DualPipe's deferred weight gradients nor passes run side by side): stage s
  // starts only once the first micro-batch's forward has crossed the first chunks of the stages before it, and after
  // its last backward those stages still run theirs.
  const bool fill_and_drain = !plan.dualpipe() && !plan.moe_a2a_overlap;
  // Passes run one at a time there, so a pass also waits for its all-to-alls; side by side, another pass's kernels
  // may fill that wait (and in an ideal pipeline transfers are free). Each stage's GPU with tp and dp coordinates 0
  // stands for its stage (any GPU's time bounds the step).
  const auto pass = [&](const Program& program, int stage) {
    return fill_and_drain && !plan.ideal ? pass_floor(program, plan, graph, plan::rank_of(plan, {0, 0, stage}))
                                         : kernel_time(program);
  };
  double before_forward = 0;
  double before_backward = 0;
  double busiest = 0;
  for (int s = 0; s < plan.pp; ++s) {
    double work = 0;
    double first_forward = 0;
    double first_backward = 0;
    std::map<const Program*, double> floors; // per program (one per kind of layer and direction)
    const auto time_of = [&](const Program& program) {
      const auto [it, inserted] = floors.try_emplace(&program, 0.0);
      if (inserted)
        it->second = pass(program, s);
      return it->second;
    };
    for (int c = 0; c < plan.virtual_stages; ++c) {
      for (int l = 0; l < plan.layers_in_chunk(s, c); ++l) {
        const int layer = plan.first_layer_of_chunk(s, c) + l;
        const double forward = time_of(programs.forward_of(model, layer));
        const double backward = time_of(programs.backward_of(model, layer));
        work += per_chunk * (forward + backward);
        if (c == 0) {
          first_forward += forward;
          first_backward += backward;
        }
      }
    }
    // (An ideal pipeline has no embedding or output layer.)
    const double embedding = kernel_time(programs.embedding_forward) + kernel_time(programs.embedding_backward);
    const double head = kernel_time(programs.head_forward) + kernel_time(programs.head_backward);
    if (s == 0 && !plan.ideal) {
      first_forward += kernel_time(programs.embedding_forward);
      first_backward += kernel_time(programs.embedding_backward);
      work += per_chunk * (embedding + (two_paths ? head : 0.0));
    }
    if (s == plan.pp - 1 && !plan.ideal)
      work += per_chunk * (head + (two_paths ? embedding : 0.0));
    // What the optimizer updates: every parameter, or LoRA's adapters alone.
    const double params =
        memory.per_stage[static_cast<std::size_t>(s)].trainable_params / (sharded ? plan.shards() : 1);
    // (Offloaded, the GPU runs no optimizer kernel: its host's update, after its last kernel, is left out.)
    const double optimizer =
        plan.offload_optimizer == plan::OffloadDevice::NONE ? params * programs.per_param.optimizer_s : 0.0;
    busiest = std::max(busiest, fill_and_drain ? before_forward + std::max(work + optimizer, work + before_backward)
                                               : work + optimizer);
    before_forward += first_forward;
    before_backward += first_backward;
  }
  return busiest;
}

} // namespace sim::workload
