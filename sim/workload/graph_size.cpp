#include "workload/graph_size.hpp"

#include "memory/memory_model.hpp"
#include "plan/parallel_plan.hpp"
#include "workload/fold.hpp"
#include "workload/layer_program.hpp"

#include <algorithm>
#include <cmath>

namespace sim::workload {
namespace {

// Bytes per task, measured: the full 16,384-GPU Llama 3 405B graph held 55.6M tasks in 5.9 GB (106 B each with its
// dependencies); a whole unfolded run of the SC21 1T row (65.8M tasks: graph, replay and report) peaked at 7.5 GB,
// 114 B per task. The estimate keeps room above that for plans whose tasks have more dependencies.
constexpr double bytes_per_task = 200.0;

// How a collective over one parallel dimension is lowered (workload/collectives): one ring when its members share a
// node or each sits in a different node, else reduce-scatter, across and all-gather phases. On a full mesh, the
// members inside a node (three or more) send to each other directly instead of around a ring.
struct GroupShape {
  double simulated = 1; // members that have tasks
  int phases = 1;
  int mesh_peers = 0; // on a full mesh, the members in its node each member sends to at once (0: a ring)
};

bool on_full_mesh(const topology::ClusterSpec& cluster)
{
  const auto* mesh = cluster.node.nvlink ? std::get_if<topology::NvLinkMeshFabric>(&*cluster.node.nvlink) : nullptr;
  return mesh != nullptr && mesh->uniform_full_mesh(cluster.node.gpus);
}

GroupShape group_shape(const plan::ParallelPlan& p, int gpus_per_node, plan::ParallelDim dim, int simulated,
                       bool full_mesh)
{
  int stride = 1;
  for (plan::ParallelDim d : p.rank_order) {
    if (d == dim)
      break;
    stride *= p.size(d);
  }
  const int size = p.size(dim);
  const int per_node = std::clamp(gpus_per_node / stride, 1, size);
  GroupShape shape;
  shape.simulated = simulated;
  shape.phases = per_node > 1 && per_node < size ? 3 : 1;
  shape.mesh_peers = full_mesh && per_node >= 3 ? per_node - 1 : 0;
  return shape;
}

// A collective's tasks: a sync before, and per phase a flow per simulated member and a sync (with one simulated
// member, its flows alone). On a full mesh a phase inside the node has a flow to each peer, and an all-reduce inside
// one node is two such phases (reduce-scatter, all-gather), as is the in-node part of a hierarchical one.
double collective_tasks(const GroupShape& g, CollectiveKind kind = CollectiveKind::REDUCE_SCATTER)
{
  if (g.mesh_peers == 0)
    return g.simulated > 1 ? 1.0 + g.phases * (g.simulated + 1.0) : g.phases;
  const double direct = g.phases > 1 || kind == CollectiveKind::ALL_REDUCE ? 2.0 : 1.0;
  const double across = g.phases > 1 ? 1.0 : 0.0;
  return 1.0 + direct * (g.simulated * g.mesh_peers + 1.0) + across * (g.simulated + 1.0);
}

// Tasks of one pass through a program on one TP group. An all-to-all over an expert-parallel group has a flow from
// each simulated member to every other member, and a sync before and after; per TP group (of which there are dp
// per stage, tp x dp / ep expert-parallel groups), tp x (ep - 1) flows; folded, its simulated members' ep - 1 each.
// A TP group's GPUs make tp / etp expert-tensor-parallel groups (one ring each, taken as inside a node).
double program_tasks(const Program& program, const GroupShape& tp, const plan::ParallelPlan& p)
{
  const double ep = p.ep;
  const bool folded = tp.simulated < p.tp;
  const double all_to_all = folded ? tp.simulated * (ep - 1.0) + 2.0 : p.tp * (ep - 1.0) + 2.0 * p.tp / ep;
  const double expert_tp = folded ? collective_tasks(GroupShape{})
                                  : static_cast<double>(p.tp) / p.etp * collective_tasks(GroupShape{1.0 * p.etp, 1});
  double tasks = 0;
  for (const Step& s : program) {
    if (s.kind != Step::Kind::COLLECTIVE)
      tasks += tp.simulated;
    if (s.kind != Step::Kind::COMPUTE)
      tasks += s.group == Group::EP    ? all_to_all
               : s.group == Group::ETP ? expert_tp
                                       : collective_tasks(tp, s.collective);
  }
  return tasks;
}

} // namespace

GraphSize estimate_graph_size(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                              const topology::ClusterSpec& cluster, const BuildOptions& options)
{
  // The fold the builder tries first (it may take one with more simulated GPUs where a collective is not symmetric).
  std::optional<Fold> first;
  if (options.fold) {
    const auto graph = topology::build_graph(cluster, (plan.gpus() + cluster.node.gpus - 1) / cluster.node.gpus);
    first = FoldSearch(plan, cluster, graph).next();
  }
  return estimate_graph_size(model, plan, cluster, first ? &*first : nullptr, build_programs(model, plan, cluster.gpu));
}

GraphSize estimate_graph_size(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                              const topology::ClusterSpec& cluster, const Fold* first, const LayerPrograms& programs)
{
  GraphSize size;
  size.folded = first != nullptr;
  const int tp_simulated = first ? first->tp.classes() : plan.tp;
  const int dp_simulated = first ? first->dp.classes() : plan.dp_cp();
  size.simulated_gpus = plan.pp * tp_simulated * dp_simulated;
  const bool folded = size.folded;
  const int gpn = cluster.node.gpus;
  const GroupShape tp = group_shape(plan, gpn, plan::ParallelDim::TP, tp_simulated, on_full_mesh(cluster));
  const GroupShape dp = group_shape(plan, gpn, plan::ParallelDim::DP, dp_simulated, on_full_mesh(cluster));
  const double groups = dp_simulated; // TP groups per stage that have tasks
  const double stage_gpus = groups * tp.simulated;
  const double stages = plan.pp;
  const double chunks = plan.chunks();
  const auto layers = static_cast<double>(model.num_layers);
  const double microbatches = static_cast<double>(plan.microbatches());

  // The programs' lengths are what the builder repeats.
  auto tasks_of = [&](const Program& program) { return program_tasks(program, tp, plan); };
  double all_layers = 0; // every layer's forward and backward pass
  double stage_bytes = 0;
  const double grad_bytes = plan.fp32_grad_accumulation ? 4.0 : 2.0;
  for (std::int64_t l = 0; l < model.num_layers; ++l) {
    all_layers += tasks_of(programs.forward_of(model, l)) + tasks_of(programs.backward_of(model, l));
    stage_bytes += memory::layer_params_per_rank(model, plan, l).total() * grad_bytes / plan.pp;
  }
  const auto mtp = static_cast<double>(model.mtp_layers); // (MTP modules beside the output layer)
  const double ends = tasks_of(programs.embedding_forward) + tasks_of(programs.embedding_backward) +
                      tasks_of(programs.head_forward) + tasks_of(programs.head_backward) +
                      mtp * (tasks_of(programs.mtp_forward) + tasks_of(programs.mtp_backward));
  const double items = layers + 2.0 + mtp;
  const double accumulate = programs.per_param.grad_accumulation_s > 0 ? stage_gpus : 0.0;

  // Per micro-batch: every layer once forward and backward on its stage (a gradient accumulation and a join after
  // each backward item), host syncs per pass, and per virtual-stage boundary and direction an input sync, the sends
  // (two legs when relayed) and the receiving group's all-gather.
  double per_microbatch = groups * (all_layers + ends) + items * (accumulate + stage_gpus);
  if (plan.software.host_syncs_per_microbatch > 0)
    per_microbatch += 2.0 * chunks * stage_gpus;
  const double boundaries = plan.schedule == plan::Schedule::DUALPIPE ? stages - 1.0 : chunks - 1.0; // on a path
  per_microbatch += 2.0 * boundaries * groups * (1.0 + 2.0 * tp.simulated + collective_tasks(tp));
  if (plan.dualpipe()) // at most every item's weight gradients later, each with its accumulation and join
    per_microbatch += items * (accumulate + 2.0 * stage_gpus);

  // Data parallelism: gradient buckets per stage (an item never split, except per tensor), reduced every micro-batch
  // with ZeRO-2/3 or once per step; ZeRO-3 gathers each item's parameters before each pass.
  const double per_bucket = plan.dp_bucket_bytes > 0 ? plan.dp_bucket_bytes : stage_bytes;
  const double tensors = plan.zero_stage >= 3 && plan.software.zero3_per_tensor ? 4.0 : 1.0;
  const double buckets_per_stage =
      tensors > 1.0 ? tensors * items / stages : std::min(items / stages, std::ceil(stage_bytes / per_bucket) + 1.0);
  // (MoE: the experts' buckets too, over expert-data-parallel groups, etp x ep of them per stage unfolded, counted
  // here per TP rank.)
  const double expert_groups =
      model.moe && plan.edp() > 1 ? (folded ? 1.0 : static_cast<double>(plan.etp) * plan.ep / plan.tp) : 0.0;
  // (Hybrid sharding: each bucket's reduce-scatter in its shard group, then an all-reduce across the groups, counted
  // here at most as many tasks again.)
  const double hybrid = plan.shard_replicas() > 1 ? 2.0 : 1.0;
  const double reductions = plan.dp_cp() > 1 ? hybrid * stages * buckets_per_stage * tp.simulated *
                                                   collective_tasks(dp) * (1.0 + expert_groups)
                                             : 0.0;
  double per_step = 0;
  if (plan.zero_stage >= 2)
    per_microbatch += reductions;
  else
    per_step += 2.0 * reductions; // the reduction, and the updated parameters gathered back
  if (plan.zero_stage >= 3 && plan.dp_cp() > 1)
    per_microbatch += 2.0 * items * (tensors + expert_groups) * tp.simulated * collective_tasks(dp);
  if ((model.tie_embeddings || model.mtp_layers > 0) && plan.pp > 1)
    per_step += groups * tp.simulated * collective_tasks(GroupShape{folded ? 1.0 : 2.0, 1});
  per_step += stages * stage_gpus + 1.0;                                // the optimizer, the step's end
  if (programs.per_param.fp8_weight_cast_s > 0 && plan.zero_stage >= 3) // ZeRO-3: a cast per layer and pass
    per_microbatch += 2.0 * layers * stage_gpus;
  else if (programs.per_param.fp8_weight_cast_s > 0) // FP8 weight casts in the first micro-batch's forward
    per_step += layers * stage_gpus;

  size.tasks = microbatches * per_microbatch + per_step;
  size.bytes = size.tasks * bytes_per_task;
  return size;
}

} // namespace sim::workload
