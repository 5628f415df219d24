#include "workload/builder.hpp"

#include "memory/memory_model.hpp"
#include "model/param_count.hpp"
#include "plan/parallel_plan.hpp"
#include "plan/schedule.hpp"
#include "topology/symmetry.hpp"
#include "workload/collectives.hpp"
#include "workload/fold.hpp"
#include "workload/graph_size.hpp"
#include "workload/layer_program.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <map>
#include <numeric>
#include <set>
#include <span>
#include <tuple>

namespace sim::workload {
namespace {

using plan::Pass;
using plan::PassRef;
using plan::PipelineOp;

constexpr double element_bytes = 2.0;

// Where a task sits in the step, for reports.
struct Where {
  Category category = Category::FORWARD;
  int stage = -1;
  int chunk = -1;
  int microbatch = -1;
  int layer = -1;
};

// Thrown while building a folded graph that turns out not to be symmetric; the builder starts over unfolded.
struct NotFoldable {};

// Gradients are reduced per item: a transformer layer, or the embedding or output layer of a stage.
constexpr int embedding_item = -1;
constexpr int head_item = -2;

// The layer programs for each kind of GPU in the cluster (topology::gpu_kind): the same steps, each costed on its part.
std::vector<LayerPrograms> programs_by_kind(const model::ModelSpec& m, const plan::ParallelPlan& p,
                                            const topology::ClusterSpec& cluster)
{
  std::vector<LayerPrograms> out{build_programs(m, p, cluster.gpu)};
  for (const auto& kind : cluster.node_gpus)
    out.push_back(build_programs(m, p, kind.gpu));
  return out;
}

class Builder {
 public:
  Builder(const model::ModelSpec& m, const plan::ParallelPlan& p, const topology::ClusterSpec& cluster,
          const topology::ClusterGraph& graph, const Fold* fold)
      : m_(m), p_(p), cluster_(cluster), graph_(graph), lowering_(graph), programs_(programs_by_kind(m, p, cluster)),
        counts_(model::count_params(m)), fold_(fold != nullptr),
        tp_fold_(fold ? fold->tp : CoordinateFold{p.tp, 1, p.tp}),
        dp_fold_(fold ? fold->dp : CoordinateFold{p.dp_cp(), 1, p.dp_cp()}),
        tp_simulated_(fold ? tp_fold_.simulated() : all(p.tp)),
        dp_simulated_(fold ? dp_fold_.simulated() : all(p.dp_cp()))
  {
    const int gpus = p.gpus();
    for (int r = 0; r < gpus; ++r) {
      coords_.push_back(plan::coords_of(p, r));
      plan::RankCoords c = coords_.back();
      c.tp = tp_fold_.representative(c.tp);
      c.dp = dp_fold_.representative(c.dp);
      representative_.push_back(plan::rank_of(p, c));
    }
    for (int r = 0; r < gpus; ++r)
      kind_.push_back(topology::gpu_kind(cluster, r));
    tail_.resize(static_cast<std::size_t>(gpus));
    reduce_tail_.assign(static_cast<std::size_t>(gpus), no_task);
    gather_tail_.assign(static_cast<std::size_t>(gpus), no_task);
    grad_ready_.resize(static_cast<std::size_t>(gpus));
    params_ready_.resize(static_cast<std::size_t>(gpus));
    g_.gpus = gpus;
    g_.folded = fold_;
    // The estimate is within a factor of about two; a task has one to two dependencies.
    const double estimate = estimate_graph_size(m, p, cluster, fold, programs_.front()).tasks;
    g_.reserve(static_cast<std::size_t>(2.0 * estimate), static_cast<std::size_t>(4.0 * estimate));
    if (fold) {
      g_.multiplicity = fold->multiplicity;
      g_.link_class = fold->link_class;
      g_.link_weight = fold->link_weight;
      private_links_ = *std::max_element(fold->link_weight.begin(), fold->link_weight.end()) <= 1;
    }
    g_.cluster_gpus = graph.gpus();
    for (int s = 0; s < p.pp; ++s)
      g_.stage_leaders.push_back(rank(0, 0, s));
    for (int r = 0; r < gpus; ++r)
      if (simulated(r))
        g_.simulated.push_back(r);
    act_bytes_ =
        static_cast<double>(p.micro_batch) * p.local_seq() * static_cast<double>(m.hidden_size) * element_bytes;
    grad_bytes_ = p.fp32_grad_accumulation ? 4.0 : 2.0;
    for (std::int64_t l = 0; l < m.num_layers; ++l)
      layer_params_.push_back(memory::layer_params_per_rank(m, p, l));
    for (int vs = 0; vs < p.chunks(); ++vs)
      first_layer_.push_back(p.first_layer(vs));
    forwards_.assign(static_cast<std::size_t>(p.chunks()), 0);
    gradients_.assign(static_cast<std::size_t>(p.chunks()), 0);
  }

  TaskGraph build()
  {
    check_gradient_reductions();
    if (gathers_before_forward())
      for (int s = 0; s < p_.pp; ++s)
        gather_updated_parameters(s);
    for (int s = 0; s < p_.pp; ++s) {
      if (p_.dualpipe()) {
        dualpipe_loop(s);
        continue;
      }
      const auto order = stage_order(p_, s);
      for (std::size_t k = 0; k < order.size(); ++k) {
        if (p_.moe_a2a_overlap && k + 1 < order.size() && pairable(order[k], order[k + 1])) {
          side_by_side(s, order[k], order[k + 1]);
          ++k;
        } else {
          pass(s, order[k]);
        }
      }
    }
    reduce_copies();
    if (p_.zero_stage < 2)
      for (int s = 0; s < p_.pp; ++s)
        reduce_gradients(s, -1);
    reduce_tied_embedding();
    for (int s = 0; s < p_.pp; ++s)
      optimizer(s);
    finish();
    if (fold_ && std::find(g_.link_weight.begin(), g_.link_weight.end(), 0U) != g_.link_weight.end()) {
      std::vector<std::pair<int, int>> flows;
      for (const auto& e : g_.endpoints)
        flows.emplace_back(e.sender, e.target);
      g_.unsimulated = unsimulated_crossings(tp_fold_, dp_fold_, p_, graph_, g_.link_weight, flows);
    }
    g_.finalize();
    return std::move(g_);
  }

 private:
  int rank(int t, int d, int s) const { return plan::rank_of(p_, plan::RankCoords{t, d, s}); }
  // Folded, one GPU stands for each class (workload/fold).
  int representative(int r) const { return representative_[static_cast<std::size_t>(r)]; }
  // GPU y as the simulated GPU of x's class sees it: moved as x is to reach that GPU.
  int shifted(int x, int y) const
  {
    const plan::RankCoords& cx = coords_[static_cast<std::size_t>(x)];
    plan::RankCoords c = coords_[static_cast<std::size_t>(y)];
    c.tp = tp_fold_.relative(cx.tp, c.tp);
    c.dp = dp_fold_.relative(cx.dp, c.dp);
    return plan::rank_of(p_, c);
  }
  bool simulated(int r) const { return representative(r) == r; }
  // The tensor- and data-parallel coordinates simulated.
  const std::vector<int>& dp_simulated() const { return dp_simulated_; }
  const std::vector<int>& tp_simulated() const { return tp_simulated_; }
  static std::vector<int> all(int n)
  {
    std::vector<int> out(static_cast<std::size_t>(n));
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  std::vector<int> simulated_of(const std::vector<int>& group) const
  {
    std::vector<int> out;
    for (int r : group)
      if (simulated(r))
        out.push_back(r);
    return out;
  }
  int last_virtual_stage() const { return p_.chunks() - 1; }
  bool sharded_optimizer() const { return p_.zero_stage >= 1 || p_.distributed_optimizer; }

  std::vector<int> tp_group(int d, int s) const { return plan::group_of(p_, plan::GroupDim::TP, rank(0, d, s)); }

  // Every GPU of stage s, simulated or not.
  std::vector<int> stage_group(int s) const
  {
    std::vector<int> all;
    for (int d = 0; d < p_.dp_cp(); ++d)
      for (int t = 0; t < p_.tp; ++t)
        all.push_back(rank(t, d, s));
    return all;
  }
  // The groups along `dim` of stage s that have simulated GPUs, in the order of their first simulated member: built
  // once per stage (collectives ask for them at every step).
  using Dim = plan::GroupDim;
  const std::vector<std::vector<int>>& groups(Dim dim, int s)
  {
    auto& cached = groups_[static_cast<std::size_t>(dim)];
    if (cached.empty())
      cached.resize(static_cast<std::size_t>(p_.pp));
    auto& out = cached[static_cast<std::size_t>(s)];
    if (out.empty()) {
      std::set<int> seen; // groups by their first member
      for (int r : stage_gpus(s)) {
        auto group = plan::group_of(p_, dim, r);
        if (seen.insert(group.front()).second)
          out.push_back(std::move(group));
      }
    }
    return out;
  }

  // --- task creation -------------------------------------------------------------------------------------------

  TaskId add(Task t, const std::vector<TaskId>& deps)
  {
    const TaskId id = g_.add(t);
    for (TaskId d : deps)
      if (d != no_task)
        g_.depend(id, d);
    return id;
  }

  TaskId sync(Category category, const std::vector<TaskId>& deps, std::uint32_t collective = no_task)
  {
    Task t;
    t.kind = TaskKind::SYNC;
    t.category = category;
    t.collective = collective;
    return add(t, deps);
  }

  TaskId compute(int gpu, const Step& step, const Where& w)
  {
    Task t;
    t.kind = TaskKind::COMPUTE;
    t.category = step.recompute ? Category::RECOMPUTE : w.category;
    t.rank = gpu;
    t.stage = static_cast<std::int16_t>(w.stage);
    t.chunk = static_cast<std::int16_t>(w.chunk);
    t.microbatch = w.microbatch;
    t.layer = w.layer;
    t.label = g_.label(step.label);
    t.duration_s = step.duration_s / topology::compute_share(cluster_, gpu);
    t.flops = step.flops;
    if (step.duration_s > 0)
      t.memory_share =
          static_cast<std::uint16_t>(std::lround(65535.0 * std::clamp(step.memory_s / step.duration_s, 0.0, 1.0)));
    return add(t, tail_[static_cast<std::size_t>(gpu)]);
  }

  // A compute step on every GPU of stage s, made for its kind of part (its programs' rates and its kernel overhead).
  template <class Make>
  void on_stage(int s, const Where& w, Make make)
  {
    for (int r : stage_gpus(s)) {
      const int k = kind_[static_cast<std::size_t>(r)];
      tail_[static_cast<std::size_t>(r)] = {
          compute(r, make(programs_[static_cast<std::size_t>(k)], topology::gpu_of_kind(cluster_, k)), w)};
    }
  }

  TaskId transfer(const Flow& f, Category category, std::uint32_t collective, std::uint32_t label, const Where& w,
                  const std::vector<TaskId>& deps)
  {
    Task t;
    t.kind = TaskKind::TRANSFER;
    t.category = category;
    t.rank = f.src;
    t.peer = fold_ ? endpoint(f.src, f.dst) : f.dst;
    t.bytes = p_.ideal ? 0.0 : f.bytes; // the ideal pipeline's transfers are free
    t.latency_s = p_.ideal ? 0.0 : f.latency_s;
    t.collective = collective;
    t.label = label;
    t.stage = static_cast<std::int16_t>(w.stage);
    t.chunk = static_cast<std::int16_t>(w.chunk);
    t.microbatch = w.microbatch;
    t.layer = w.layer;
    return add(t, deps);
  }

  // A collective over `ranks` once every task in `deps` is done; returns the sync that marks its end.
  // (`deduplicated`: a MoE all-to-all as DeepEP runs it, `bytes` one copy of a rank's tokens.)
  TaskId collective(CollectiveKind kind, const std::vector<int>& ranks, double bytes, Category category,
                    const std::string& label, const Where& w, const std::vector<TaskId>& deps,
                    bool deduplicated = false)
  {
    const std::uint32_t text = g_.label(label);
    if (kind == CollectiveKind::ALL_TO_ALL) {
      const int sender = simulated_of(ranks).front();
      const CollectivePhase& phase = all_to_all(ranks, bytes, deduplicated);
      double sent = 0; // by one rank: the buffer the collective moves per rank
      for (const Flow& f : phase)
        sent += f.src == sender ? f.bytes : 0.0;
      const std::uint32_t id = g_.add_collective(
          CollectiveInfo{text, category, kind, static_cast<std::uint32_t>(ranks.size()), deduplicated ? sent : bytes});
      return lower(std::span(&phase, 1), category, id, text, w, deps);
    }
    const std::uint32_t id =
        g_.add_collective(CollectiveInfo{text, category, kind, static_cast<std::uint32_t>(ranks.size()), bytes});
    return lower(phases(kind, ranks, bytes), category, id, text, w, deps);
  }

  // A collective's phases as transfers, each phase's flows after the previous phase's (the first's after `deps`);
  // returns the task that marks its end. Syncs join where many tasks wait for many: a phase of one flow (a folded
  // collective inside a node) waits for what came before directly, and ends the collective itself if it is last.
  TaskId lower(std::span<const CollectivePhase> phases, Category category, std::uint32_t id, std::uint32_t text,
               const Where& w, const std::vector<TaskId>& deps)
  {
    std::vector<TaskId> before = deps;
    bool sent = false;
    for (const CollectivePhase& phase : phases) {
      if (phase.empty())
        continue;
      if (phase.size() > 1 && before.size() > 1)
        before = {sync(category, before, id)};
      std::vector<TaskId> flows;
      for (const Flow& f : phase)
        flows.push_back(transfer(f, category, id, text, w, before));
      before = std::move(flows);
      sent = true;
    }
    return sent && before.size() == 1 ? before.front() : sync(category, before, id);
  }

  // A collective's phases as lowered and, folded, as the simulated GPUs send them: the same collective over the same
  // group recurs every layer and micro-batch, so each is lowered and checked once.
  const std::vector<CollectivePhase>& phases(CollectiveKind kind, const std::vector<int>& ranks, double bytes)
  {
    auto key = std::make_tuple(static_cast<int>(kind), ranks, bytes);
    const auto found = phases_.find(key);
    if (found != phases_.end())
      return found->second;
    auto lowered = lowering_.collective(kind, ranks, bytes, p_.collective_algorithm);
    if (fold_)
      for (auto& phase : lowered)
        phase = folded(phase);
    return phases_.emplace(std::move(key), std::move(lowered)).first->second;
  }

  // An all-to-all's flows as lowered and, folded, as the simulated GPUs send them (lowered for every member and
  // checked as any phase, once per group).
  const CollectivePhase& all_to_all(const std::vector<int>& ranks, double bytes, bool deduplicated)
  {
    auto key = std::make_tuple(deduplicated ? -1 : -2, ranks, bytes);
    const auto found = phases_.find(key);
    if (found != phases_.end())
      return found->second.front();
    const auto senders = fold_ ? ranks : simulated_of(ranks);
    CollectivePhase phase = deduplicated ? lowering_.deduplicated_all_to_all(ranks, bytes, *m_.moe, senders)
                                         : lowering_.all_to_all(ranks, bytes, senders);
    if (fold_)
      phase = folded(phase);
    return phases_.emplace(std::move(key), std::vector<CollectivePhase>{std::move(phase)}).first->second.front();
  }

  // A phase's flows as the simulated GPUs send them: every GPU must send what the simulated GPU of its class sends,
  // moved as it is (the same receivers, bytes and latencies); the simulated GPUs' own flows stand for them all. Where
  // no two flows of a class share a link (every weight 1: each GPU's links its own, a non-blocking network), a flow
  // need only cross the same classes of links as its counterpart: every GPU of a symmetric collective sends and
  // receives alike, whichever peer it pairs with.
  std::vector<Flow> folded(const std::vector<Flow>& phase)
  {
    using Sent = std::vector<std::tuple<int, double, double>>;
    std::map<int, Sent> sent; // per sender: its flows as the simulated GPU of its class sends them
    std::map<int, Sent> keys; // and what must match
    for (const Flow& f : phase) {
      sent[f.src].emplace_back(shifted(f.src, f.dst), f.bytes, f.latency_s);
      keys[f.src].emplace_back(private_links_ ? route_class(f.src, f.dst) : shifted(f.src, f.dst), f.bytes,
                               f.latency_s);
    }
    std::map<int, Sent> sorted;
    for (const auto& [src, flows] : keys) {
      Sent s = flows;
      std::sort(s.begin(), s.end());
      sorted.emplace(src, std::move(s));
    }
    std::vector<Flow> out;
    for (const auto& [src, flows] : sorted) {
      const auto own = sorted.find(representative(src));
      if (own == sorted.end() || flows != own->second)
        throw NotFoldable{};
      if (own->first == src)
        for (const auto& [dst, bytes, latency] : sent.at(src))
          out.push_back(Flow{src, dst, bytes, latency});
    }
    return out;
  }

  // The classes of the link directions a flow from a to b crosses, with their weights, as a number (interned).
  int route_class(int a, int b)
  {
    const std::uint64_t key = (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint32_t>(b);
    const auto found = route_classes_.find(key);
    if (found != route_classes_.end())
      return found->second;
    std::vector<std::uint32_t> classes;
    for (const Crossing& c : crossings(graph_, g_.link_class, g_.link_weight, a, b))
      classes.insert(classes.end(), c.weight, c.cls);
    const auto [it, added] = route_ids_.try_emplace(classes, static_cast<int>(route_ids_.size()));
    return route_classes_[key] = it->second;
  }

  // The endpoint of a folded flow from a simulated GPU to `target` (workload/task_graph).
  std::int32_t endpoint(int sender, int target)
  {
    if (!simulated(sender))
      throw std::logic_error("a folded flow from a GPU that is not simulated");
    const std::uint64_t key = (static_cast<std::uint64_t>(sender) << 32) | static_cast<std::uint32_t>(target);
    const auto [it, inserted] = endpoints_.try_emplace(key, static_cast<std::int32_t>(g_.endpoints.size()));
    if (inserted)
      g_.endpoints.push_back(TaskGraph::Endpoint{sender, target, representative(target)});
    return g_.cluster_gpus + it->second;
  }

  std::vector<TaskId> tails_of(const std::vector<int>& gpus) const
  {
    std::vector<TaskId> deps;
    for (int r : gpus)
      for (TaskId t : tail_[static_cast<std::size_t>(r)])
        deps.push_back(t);
    return deps;
  }

  // --- passes --------------------------------------------------------------------------------------------------

  // Runs a program on every GPU of stage `s`: compute on each (its kind of part's step: `select` picks the program
  // from a kind's programs), collectives per tensor- or expert-parallel group.
  template <class Select>
  void run(Select select, int s, const Where& w)
  {
    const Program& program = select(programs_.front());
    const auto mine = [&](int r, std::size_t i) -> const Step& {
      return kind_[static_cast<std::size_t>(r)] == 0 ? program[i]
                                                     : select(programs_[kind_[static_cast<std::size_t>(r)]])[i];
    };
    for (std::size_t i = 0; i < program.size(); ++i) {
      const Step& step = program[i];
      if (step.kind == Step::Kind::COMPUTE) {
        for (int r : stage_gpus(s))
          tail_[static_cast<std::size_t>(r)] = {compute(r, mine(r, i), w)};
        continue;
      }
      const auto [dim, category] = step.group == Group::EP    ? std::pair{Dim::EP, Category::EP}
                                   : step.group == Group::ETP ? std::pair{Dim::ETP, Category::TP}
                                   : step.group == Group::CP  ? std::pair{Dim::CP, Category::CP}
                                                              : std::pair{Dim::TP, Category::TP};
      for (const auto& group : groups(dim, s)) {
        const auto members = simulated_of(group);
        const TaskId end = collective(step.collective, group, step.bytes, category, step.label, w, tails_of(members),
                                      step.deduplicated);
        for (int r : members) {
          if (step.kind == Step::Kind::OVERLAP)
            tail_[static_cast<std::size_t>(r)] = {compute(r, mine(r, i), w), end};
          else
            tail_[static_cast<std::size_t>(r)] = {end};
        }
      }
    }
  }

  std::uint64_t input_key(Pass pass, int d, int vs, int mb) const
  {
    return (static_cast<std::uint64_t>(d) << 40) | (static_cast<std::uint64_t>(vs) << 22) |
           (static_cast<std::uint64_t>(mb) << 1) | (pass == Pass::BACKWARD ? 1U : 0U);
  }

  TaskId input(Pass pass, int d, int vs, int mb)
  {
    const auto [it, inserted] = inputs_.try_emplace(input_key(pass, d, vs, mb), no_task);
    if (inserted)
      it->second = sync(Category::PP, {});
    return it->second;
  }

  // The stage waits for the activations (or gradients) of this micro-batch; without sequence parallelism each TP
  // rank received a 1/tp slice, gathered inside the TP group.
  void wait_input(int s, Pass pass, int vs, const Where& w)
  {
    for (int d : dp_simulated()) {
      const TaskId ready = input(pass, d, vs, w.microbatch);
      const auto group = tp_group(d, s);
      const auto members = simulated_of(group);
      for (int r : members)
        tail_[static_cast<std::size_t>(r)].push_back(ready);
      if (scatter_gather()) {
        const TaskId end = collective(CollectiveKind::ALL_GATHER, group, act_bytes_, Category::PP,
                                      pass == Pass::FORWARD ? "pp activation all-gather" : "pp gradient all-gather", w,
                                      tails_of(members));
        for (int r : members)
          tail_[static_cast<std::size_t>(r)] = {end};
      }
      // DeepSpeed's engine freed the stage's partitioned output after sending it: backward gathers it again over the
      // tensor-parallel group (PartitionedTensor.full(), v0.5).
      if (pass == Pass::BACKWARD && deepspeed_engine() && p_.tp > 1 && !p_.sequence_parallel) {
        const TaskId end = collective(CollectiveKind::ALL_GATHER, group, act_bytes_, Category::PP,
                                      "pp output re-gather", w, tails_of(members));
        for (int r : members)
          tail_[static_cast<std::size_t>(r)] = {end};
      }
    }
  }

  // Each TP rank sends its slice to its counterpart on the next (or previous) virtual stage. The sender does not
  // wait. With rail-optimised networks a cross-rail send is relayed over NVLink to the GPU on the receiver's rail
  // (NCCL's PXN), both legs running together.
  // (`posted`: DualPipe, which waits for its sends at its next wait: the sends are added there instead.)
  using Posted = std::vector<std::pair<int, TaskId>>; // a GPU, and a task it waits for
  void send(int s, Pass pass, int vs, const Where& w, Posted* posted = nullptr)
  {
    const int to_vs = pass == Pass::FORWARD ? vs + 1 : vs - 1;
    const int to_stage = p_.stage_of(to_vs);
    const std::uint32_t label = g_.label(pass == Pass::FORWARD ? "pp send activations" : "pp send gradients");
    for (int d : dp_simulated()) {
      const TaskId ready = input(pass, d, to_vs, w.microbatch);
      for (int t : tp_simulated()) {
        const int src = rank(t, d, s);
        const int dst = rank(t, d, to_stage);
        const double bytes = scatter_gather() || p_.sequence_parallel ? act_bytes_ / p_.tp : act_bytes_;
        const auto deps = tail_[static_cast<std::size_t>(src)];
        for (const Flow& f : point_to_point(src, dst, bytes)) {
          const TaskId sent = transfer(f, Category::PP, no_task, label, w, deps);
          g_.depend(ready, sent);
          if (posted != nullptr)
            posted->emplace_back(src, sent);
          // The device is synchronised after the send: the sender's next kernel waits for it.
          else if (p2p_sync() && f.src == src)
            tail_[static_cast<std::size_t>(src)].push_back(sent);
        }
      }
    }
  }

  // Each TP rank sends a 1/tp slice of the activations and the receiving TP group all-gathers them. DeepSpeed's
  // pipeline engine always partitions them over the tensor-parallel group.
  bool scatter_gather() const
  {
    return p_.tp > 1 && !p_.sequence_parallel && (p_.pp_scatter_gather || deepspeed_engine());
  }
  bool deepspeed_engine() const { return p_.software.pipeline_engine == plan::PipelineEngine::DEEPSPEED; }
  bool p2p_sync() const { return p_.software.p2p_sync || deepspeed_engine(); }

  std::vector<Flow> point_to_point(int src, int dst, double bytes)
  {
    const int per_node = graph_.gpus_per_node;
    const int src_node = src / per_node;
    const int dst_node = dst / per_node;
    if (cluster_.network.rail_optimized && src_node != dst_node) {
      const int dst_nic = graph_.nic_of_gpu[static_cast<std::size_t>(dst % per_node)];
      if (graph_.nic_of_gpu[static_cast<std::size_t>(src % per_node)] != dst_nic) {
        if (fold_) // the relay's NIC would also carry another GPU's traffic: not symmetric
          throw NotFoldable{};
        const int relay = src_node * per_node + cluster_.node.nics.gpus[static_cast<std::size_t>(dst_nic)].front();
        return {lowering_.send(src, relay, bytes), lowering_.send(relay, dst, bytes)};
      }
    }
    return {lowering_.send(src, dst, bytes)};
  }

  std::vector<int> pass_items(int vs, bool forward) const
  {
    std::vector<int> items;
    if (p_.path_start(vs) && !p_.ideal)
      items.push_back(embedding_item);
    const int first = first_layer_[static_cast<std::size_t>(vs)];
    for (int l = 0; l < p_.layers_per_chunk[static_cast<std::size_t>(vs)]; ++l)
      items.push_back(first + l);
    if (p_.path_end(vs) && !p_.ideal)
      items.push_back(head_item);
    if (!forward)
      std::reverse(items.begin(), items.end());
    return items;
  }

  const Program& program_of(const LayerPrograms& programs, int item, bool forward) const
  {
    if (item == embedding_item)
      return forward ? programs.embedding_forward : programs.embedding_backward;
    if (item == head_item)
      return forward ? programs.head_forward : programs.head_backward;
    return forward ? programs.forward_of(m_, item) : programs.backward_of(m_, item);
  }
  // A zero-bubble backward pass's programs: without the weight gradients (`weights` false), or those alone.
  const Program& split_program_of(const LayerPrograms& programs, int item, bool weights) const
  {
    if (item == embedding_item)
      return weights ? no_program_ : programs.embedding_backward;
    if (item == head_item)
      return weights ? programs.head_weight : programs.head_backward_input;
    const LayerKind kind = layer_kind(m_, item);
    return weights ? programs.layer_weight[kind] : programs.layer_backward_input[kind];
  }

  // Routed-expert parameters of an item on one GPU (reduced over its expert-data-parallel group).
  double item_expert_params(int item) const
  {
    return item >= 0 ? layer_params_[static_cast<std::size_t>(item)].experts : 0.0;
  }

  // Parameters of an item on one GPU (its tensor-parallel shard) that every data-parallel replica holds.
  double item_params(int item, int s) const
  {
    const double t = p_.tp;
    if (item == embedding_item)
      return counts_.word_embedding / t + counts_.position_embedding + counts_.embedding_norm;
    if (item == head_item) {
      double params = counts_.final_norm + counts_.lm_head / t;
      if (m_.tie_embeddings && p_.pp > 1 && !p_.dualpipe() && s == p_.pp - 1) // (DualPipe: beside the embedding)
        params += counts_.word_embedding / t;
      return params;
    }
    return layer_params_[static_cast<std::size_t>(item)].dense;
  }

  // A pass of a micro-batch through a chunk: a forward pass, a backward pass (with or without its weight gradients),
  // or the weight gradients a zero-bubble backward pass left. Its output goes on to the next virtual stage: sent
  // (unless `send_output` is false: DualPipe posts its sends itself), or handed over on the same GPU.
  void pass(int s, const PassRef& ref, bool send_output = true)
  {
    const bool forward = ref.pass == Pass::FORWARD;
    const int mb = ref.microbatch;
    const int vs = virtual_stage(p_, s, ref.chunk);
    const auto v = static_cast<std::size_t>(vs);
    const Where base{forward                    ? Category::FORWARD
                     : ref.pass == Pass::WEIGHT ? Category::WEIGHT
                                                : Category::BACKWARD,
                     s, ref.chunk, mb, -1};
    if (ref.pass == Pass::WEIGHT) {
      weight_pass(s, vs, base);
      return;
    }
    const bool has_input = forward ? !p_.path_start(vs) : !p_.path_end(vs);
    if (has_input)
      wait_input(s, ref.pass, vs, base);
    host_syncs(s, base);

    const bool first_forward = forward && forwards_[v]++ == 0;
    const bool weights = !forward && !ref.defer_weight; // this pass computes the weight gradients
    const bool first_gradient = weights && gradients_[v] == 0;
    const bool last_gradient = weights && ++gradients_[v] == microbatches_through();
    const auto items = pass_items(vs, forward);
    std::vector<Gathered> gathered(items.size()); // per item, per GPU
    if (p_.zero_stage >= 3 && !items.empty())
      gathered[0] = gather_parameters(s, items[0], base);
    // FSDP's BACKWARD_POST issues the next unit's gather after the current unit's gradients are computed.
    const bool prefetch_after = !forward && p_.software.backward_prefetch == plan::BackwardPrefetch::POST;
    for (std::size_t i = 0; i < items.size(); ++i) {
      Where w = base;
      w.layer = items[i] >= 0 ? items[i] : -1;
      if (first_forward && gathers_before_forward())
        for (int r : stage_gpus(s))
          tail_[static_cast<std::size_t>(r)].push_back(params_ready_[static_cast<std::size_t>(r)].at(items[i]));
      if (p_.zero_stage >= 3) {
        if (i + 1 < items.size() && !prefetch_after) // prefetch the next item's parameters while this one computes
          gathered[i + 1] = gather_parameters(s, items[i + 1], w);
        for (int r : stage_gpus(s))
          for (TaskId end : gathered[i][r])
            tail_[static_cast<std::size_t>(r)].push_back(end);
      }
      if (first_forward || p_.zero_stage >= 3) // ZeRO-3 gathers, and so casts, the weights for every pass
        cast_weights(s, items[i], w);
      run(
          [&](const LayerPrograms& programs) -> const Program& {
            return ref.defer_weight ? split_program_of(programs, items[i], false)
                                    : program_of(programs, items[i], forward);
          },
          s, w);
      if (weights)
        accumulate_gradients(s, items[i], w, first_gradient);

      if (p_.zero_stage >= 3 && i + 1 < items.size() && prefetch_after)
        gathered[i + 1] = gather_parameters(s, items[i + 1], w);
      if (weights && (p_.zero_stage >= 2 || last_gradient))
        for (int r : stage_gpus(s))
          grad_ready_[static_cast<std::size_t>(r)][items[i]] = join(r);
    }
    reduce_amaxes(s, items, forward, base);
    pass_on(s, ref.pass, vs, base, send_output);
    if (weights && p_.zero_stage >= 2)
      reduce_gradients(s, mb);
  }

  // FP8 with delayed scaling: when a pass leaves Transformer Engine's fp8_autocast region (forward) or ends its first
  // FP8 module's backward, the amaxes of the pass's FP8 tensors are max-reduced over Megatron's amax reduction group
  // (every GPU of the stage: TP x CP x DP), blocking the GPU (reduce_and_update_fp8_tensors). One fp32 per tensor:
  // input, weight and output per GEMM forward, output and input gradient per GEMM backward.
  void reduce_amaxes(int s, const std::vector<int>& items, bool forward, const Where& w)
  {
    if (!p_.fp8() || p_.fp8_recipe != plan::Fp8Recipe::DELAYED || p_.tp * p_.dp_cp() == 1)
      return;
    double gemms = 0;
    for (int item : items)
      if (item >= 0)
        gemms += fp8_gemms(item);
    if (gemms == 0)
      return;
    const auto group = stage_group(s);
    const auto members = simulated_of(group);
    const TaskId end = collective(CollectiveKind::ALL_REDUCE, group, 4.0 * (forward ? 3.0 : 2.0) * gemms, Category::DP,
                                  "fp8 amax all-reduce", w, tails_of(members));
    for (int r : members)
      tail_[static_cast<std::size_t>(r)] = {end};
  }

  // The FP8 GEMMs of a transformer layer on one GPU: the attention's projections, and the FFN's two or, in a MoE
  // layer, two per local expert and two for the shared expert.
  double fp8_gemms(int layer) const
  {
    double attention = 2; // QKV and the output projection
    if (m_.mla)
      attention = (m_.mla->q_lora_rank > 0 ? 4.0 : 3.0) + 1.0;
    if (!m_.is_moe_layer(layer))
      return attention + 2.0;
    const double local = static_cast<double>(m_.moe->num_experts) / p_.ep;
    return attention + 2.0 * local + (m_.moe->shared_expert_ffn_hidden_size > 0 ? 2.0 : 0.0);
  }

  // The weight gradients a zero-bubble backward pass left, item by item in backward order.
  void weight_pass(int s, int vs, const Where& base)
  {
    const auto v = static_cast<std::size_t>(vs);
    const bool first_gradient = gradients_[v] == 0;
    const bool last_gradient = ++gradients_[v] == microbatches_through();
    for (int item : pass_items(vs, false)) {
      Where w = base;
      w.layer = item >= 0 ? item : -1;
      run([&](const LayerPrograms& programs) -> const Program& { return split_program_of(programs, item, true); }, s,
          w);
      accumulate_gradients(s, item, w, first_gradient);
      if (last_gradient)
        for (int r : stage_gpus(s))
          grad_ready_[static_cast<std::size_t>(r)][item] = join(r);
    }
  }

  // The micro-batches that pass through each virtual stage: DualPipe's two paths carry half of them each.
  std::int64_t microbatches_through() const
  {
    return p_.schedule == plan::Schedule::DUALPIPE ? p_.microbatches() / 2 : p_.microbatches();
  }

  // After a forward or backward pass, its output goes to the next virtual stage on the micro-batch's path: sent to
  // another stage, or (DualPipeV's turn at the last GPU) ready at once on this one.
  void pass_on(int s, Pass pass, int vs, const Where& w, bool send_output)
  {
    const bool forward = pass == Pass::FORWARD;
    if (forward ? p_.path_end(vs) : p_.path_start(vs))
      return;
    const int to_vs = forward ? vs + 1 : vs - 1;
    if (p_.stage_of(to_vs) != s) {
      if (send_output)
        send(s, pass, vs, w);
      return;
    }
    for (int d : dp_simulated()) {
      const TaskId ready = input(pass, d, to_vs, w.microbatch);
      for (int r : simulated_of(tp_group(d, s)))
        g_.depend(ready, join(r));
    }
  }

  // DualPipe's or DualPipeV's loop on stage s (workload/schedule): receives and sends are posted, and each wait makes
  // the GPU's next work wait for everything posted before it.
  void dualpipe_loop(int s)
  {
    Posted posted;
    auto wait = [&] {
      for (const auto& [r, t] : posted)
        tail_[static_cast<std::size_t>(r)].push_back(t);
      posted.clear();
    };
    for (const PipelineOp& op : dualpipe_ops(p_, s)) {
      const int vs = virtual_stage(p_, s, op.pass.chunk);
      const Where w{op.pass.pass == Pass::FORWARD ? Category::FORWARD : Category::BACKWARD, s, op.pass.chunk,
                    op.pass.microbatch, -1};
      switch (op.kind) {
        case PipelineOp::Kind::RECEIVE:
          for (int d : dp_simulated()) {
            const TaskId ready = input(op.pass.pass, d, vs, op.pass.microbatch);
            for (int r : simulated_of(tp_group(d, s)))
              posted.emplace_back(r, ready);
          }
          break;
        case PipelineOp::Kind::SEND:
          send(s, op.pass.pass, vs, w, &posted);
          break;
        case PipelineOp::Kind::WAIT:
          wait();
          break;
        case PipelineOp::Kind::RUN:
          if (op.paired)
            side_by_side(s, op.pass, op.beside, false);
          else
            pass(s, op.pass, false);
          break;
      }
    }
    wait(); // the step ends with a last wait
  }

  // Device synchronisations the framework makes per micro-batch (timers, meta-data copies), half in each pass: the
  // GPU idles for a kernel launch after each while the host issues the next kernel.
  void host_syncs(int s, const Where& w)
  {
    const int syncs = p_.software.host_syncs_per_microbatch;
    if (syncs == 0)
      return;
    on_stage(s, w, [&](const LayerPrograms&, const hardware::GpuSpec& gpu) {
      Step step;
      step.label = "host synchronisation";
      step.duration_s = 0.5 * syncs * gpu.kernel_overhead_s;
      return step;
    });
  }

  // FP8: the first micro-batch's forward pass casts a transformer layer's weights, which later ones reuse.
  void cast_weights(int s, int item, const Where& w)
  {
    if (programs_.front().per_param.fp8_weight_cast_s <= 0 || item < 0)
      return;
    parameter_pass(s, item, w, "fp8 weight cast", &ParameterPassTimes::fp8_weight_cast_s);
  }

  // A micro-batch's weight gradients added to the accumulated ones, unless the GEMM accumulated them (fused) or this
  // is the first micro-batch of autograd's accumulation.
  void accumulate_gradients(int s, int item, const Where& w, bool first)
  {
    const ParameterPassTimes& base = programs_.front().per_param;
    if (base.grad_accumulation_s <= 0 || (first && !base.grad_accumulation_from_first))
      return;
    parameter_pass(s, item, w, "gradient accumulation", &ParameterPassTimes::grad_accumulation_s);
  }

  // A memory-bound kernel over an item's parameters on every GPU of stage s, at its kind's rate per parameter.
  void parameter_pass(int s, int item, const Where& w, const char* label, double ParameterPassTimes::*s_per_param)
  {
    const double params = item_params(item, s) + item_expert_params(item);
    on_stage(s, w, [&](const LayerPrograms& programs, const hardware::GpuSpec& gpu) {
      Step step;
      step.label = label;
      step.memory_s = params * programs.per_param.*s_per_param;
      step.duration_s = gpu.kernel_overhead_s + step.memory_s;
      return step;
    });
  }

  // 1F1B with the all-to-all overlapped (Megatron-core's --overlap-moe-expert-parallel-comm): a forward and a
  // backward pass of different micro-batches, next to each other in the stage's order, run side by side as two
  // streams of work on each GPU, so that one's all-to-alls proceed while the other computes (the replay still runs a
  // GPU's kernels one at a time, in the order they become ready). The passes after them wait for both.
  static bool pairable(const PassRef& a, const PassRef& b) { return a.pass != b.pass && a.microbatch != b.microbatch; }
  void side_by_side(int s, const PassRef& a, const PassRef& b, bool send_output = true)
  {
    g_.concurrent_passes = true;
    const auto gpus = stage_gpus(s);
    std::vector<std::vector<TaskId>> before;
    for (int r : gpus)
      before.push_back(tail_[static_cast<std::size_t>(r)]);
    pass(s, a, send_output);
    for (std::size_t i = 0; i < gpus.size(); ++i)
      std::swap(before[i], tail_[static_cast<std::size_t>(gpus[i])]); // `before` now holds a's tails
    pass(s, b, send_output);
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      auto& tail = tail_[static_cast<std::size_t>(gpus[i])];
      tail.insert(tail.end(), before[i].begin(), before[i].end());
    }
  }

  std::vector<int> stage_gpus(int s) const
  {
    std::vector<int> r;
    for (int d : dp_simulated())
      for (int t : tp_simulated())
        r.push_back(rank(t, d, s));
    return r;
  }

  // One task standing for everything a GPU's next compute would wait for.
  TaskId join(int gpu)
  {
    auto& tail = tail_[static_cast<std::size_t>(gpu)];
    if (tail.size() == 1)
      return tail.front();
    const TaskId s = sync(Category::BACKWARD, tail);
    tail = {s};
    return s;
  }

  // --- data parallelism -----------------------------------------------------------------------------------------

  // ZeRO-3: all-gather an item's parameters before it runs, its dense ones over the data-parallel group and its routed
  // experts' over the expert-data-parallel group; per simulated GPU, the syncs that end its gathers.
  using Gathered = std::unordered_map<int, std::vector<TaskId>>;
  Gathered gather_parameters(int s, int item, const Where& w)
  {
    Gathered ends;
    auto gather = [&](const std::vector<int>& group, double bytes, const char* label) {
      const auto members = simulated_of(group);
      std::vector<TaskId> deps = tails_of(members);
      for (int r : members)
        deps.push_back(gather_tail_[static_cast<std::size_t>(r)]);
      const TaskId end = collective(CollectiveKind::ALL_GATHER, group, bytes, Category::DP, label, w, deps);
      for (int r : members)
        gather_tail_[static_cast<std::size_t>(r)] = end;
      return end;
    };
    if (p_.dp_cp() > 1)
      for (const auto& group : groups(Dim::DP, s)) {
        // One gather per parameter tensor (DeepSpeed of 2021, each after a device synchronisation), or per item;
        // each waits for the one before, so the last ends them all.
        TaskId end = no_task;
        // FP8 parameters (torchao's float8 all-gather) travel in one byte: the layers' matrices, not the embedding.
        const double bytes = item >= 0 && p_.fp8_param_gather ? 1.0 : element_bytes;
        for (double share : tensor_shares(item))
          end = gather(group, bytes * share * item_params(item, s), "zero-3 parameter all-gather");
        for (int r : simulated_of(group))
          ends[r].push_back(end);
      }
    if (item_expert_params(item) > 0 && p_.edp() > 1)
      for (const auto& group : groups(Dim::EDP, s)) {
        const TaskId end =
            gather(group, element_bytes * item_expert_params(item), "zero-3 expert parameter all-gather");
        for (int r : simulated_of(group))
          ends[r].push_back(end);
      }
    return ends;
  }

  // How an item's parameters split into the tensors a per-tensor ZeRO-3 gathers and reduces one by one: a layer's
  // weight matrices (biases and norms, below DeepSpeed's persistence threshold, stay gathered and ride with the
  // largest), the embedding or output matrix whole.
  std::vector<double> tensor_shares(int item) const
  {
    if (!p_.software.zero3_per_tensor || item < 0)
      return {1.0};
    const double h = static_cast<double>(m_.hidden_size);
    const double q = static_cast<double>(m_.q_width());
    const double kv = static_cast<double>(m_.kv_width());
    const double f = static_cast<double>(m_.ffn_hidden_size);
    std::vector<double> weights{h * (q + 2.0 * kv), q * h, f * h};
    if (model::is_gated(m_.ffn_kind))
      weights.push_back(f * h);
    weights.push_back(f * h);
    double total = 0;
    for (double x : weights)
      total += x;
    for (double& x : weights)
      x /= total;
    return weights;
  }

  // Gradients in buckets of dp_bucket_size, in the order the backward pass produces them; each bucket is reduced
  // (all-reduce, or reduce-scatter when the optimizer is sharded) as soon as its items are done, one after the
  // other on the data-parallel stream. `mb` < 0: once, after the last micro-batch; else after micro-batch mb.
  // Stage s's items in the order their gradients are ready (the last chunk's first).
  std::vector<int> gradient_order(int s) const
  {
    std::vector<int> order;
    for (int c = p_.virtual_stages - 1; c >= 0; --c)
      for (int item : pass_items(virtual_stage(p_, s, c), false))
        order.push_back(item);
    return order;
  }

  // DeepSpeed's engine all-reduces even with ZeRO-1 (the stage keeps its partition of the result), after the flush.
  CollectiveKind gradient_reduction() const
  {
    return sharded_optimizer() && !deepspeed_engine() ? CollectiveKind::REDUCE_SCATTER : CollectiveKind::ALL_REDUCE;
  }

  // Folded, a fold that breaks a data-parallel group's collectives would show only at the first gradient reduction,
  // late in the step: every stage's reductions are lowered (and checked) before anything is built.
  void check_gradient_reductions()
  {
    if (!fold_ || p_.dp_cp() == 1)
      return;
    for (int s = 0; s < p_.pp; ++s) {
      const auto order = gradient_order(s);
      for (bool experts : {false, true}) {
        if (experts && p_.edp() <= 1)
          continue;
        for (const auto& bucket : buckets(order, s, experts))
          for (const auto& group : groups(experts ? Dim::EDP : Dim::DP, s))
            phases(gradient_reduction(), group, bucket.second * grad_bytes_);
      }
    }
  }

  void reduce_gradients(int s, int mb)
  {
    if (p_.dp_cp() == 1)
      return;
    const std::vector<int> order = gradient_order(s);
    const CollectiveKind kind = gradient_reduction();
    const bool after_flush = !p_.overlap_grad_reduce || deepspeed_engine();
    const Where w{Category::DP, s, -1, mb, -1};
    // The dense parameters' buckets over the data-parallel groups and the routed experts' over the expert-data-
    // parallel groups, issued on one stream in the order their last item's gradients are ready.
    const auto dense = buckets(order, s, false);
    const auto experts = p_.edp() > 1 ? buckets(order, s, true) : decltype(dense){};
    auto last_position = [&](const std::vector<int>& items) {
      return std::find(order.begin(), order.end(), items.back()) - order.begin();
    };
    std::size_t di = 0;
    std::size_t ei = 0;
    while (di < dense.size() || ei < experts.size()) {
      const bool expert = di == dense.size() ||
                          (ei < experts.size() && last_position(experts[ei].first) < last_position(dense[di].first));
      const auto& [items, params] = expert ? experts[ei] : dense[di];
      const std::string label =
          expert ? fmt::format("expert gradient bucket {}", ei) : fmt::format("dp gradient bucket {}", di);
      for (const auto& group : groups(expert ? Dim::EDP : Dim::DP, s)) {
        const auto members = simulated_of(group);
        std::vector<TaskId> deps;
        for (int r : members) {
          deps.push_back(reduce_tail_[static_cast<std::size_t>(r)]);
          for (int item : items)
            deps.push_back(grad_ready_[static_cast<std::size_t>(r)].at(item));
          if (after_flush)
            for (TaskId t2 : tail_[static_cast<std::size_t>(r)])
              deps.push_back(t2);
        }
        const TaskId end = collective(kind, group, params * grad_bytes_, Category::DP, label, w, deps);
        for (int r : members)
          reduce_tail_[static_cast<std::size_t>(r)] = end;
      }
      ++(expert ? ei : di);
    }
  }

  // Items of stage s in `order`, grouped into data-parallel buckets of at least dp_bucket_size worth of gradients
  // (the last may be smaller), each with its parameter count: of the parameters every replica holds, or of the
  // routed experts (`experts`; items without experts are left out).
  std::vector<std::pair<std::vector<int>, double>> buckets(const std::vector<int>& order, int s,
                                                           bool experts = false) const
  {
    const double bucket_params = p_.dp_bucket_bytes / grad_bytes_;
    std::vector<std::pair<std::vector<int>, double>> out;
    for (int item : order) {
      if (experts) {
        if (item_expert_params(item) <= 0)
          continue;
        if (out.empty() || out.back().second >= bucket_params)
          out.emplace_back();
        out.back().first.push_back(item);
        out.back().second += item_expert_params(item);
        continue;
      }
      if (p_.zero_stage >= 3 && p_.software.zero3_per_tensor) { // one reduce-scatter per tensor
        for (double share : tensor_shares(item))
          out.push_back({{item}, share * item_params(item, s)});
        continue;
      }
      if (out.empty() || out.back().second >= bucket_params)
        out.emplace_back();
      out.back().first.push_back(item);
      out.back().second += item_params(item, s);
    }
    return out;
  }

  // Megatron-LM's --overlap-param-gather: the previous step's updated parameters arrive bucket by bucket, in forward
  // order, while the first forward pass runs; each item's first forward waits for its bucket.
  bool gathers_before_forward() const
  {
    return p_.overlap_param_gather && sharded_optimizer() && p_.zero_stage < 3 && p_.dp_cp() > 1;
  }

  void gather_updated_parameters(int s)
  {
    std::vector<int> order;
    for (int c = 0; c < p_.virtual_stages; ++c)
      for (int item : pass_items(virtual_stage(p_, s, c), true))
        order.push_back(item);
    const Where w{Category::DP, s, -1, -1, -1};
    // The dense parameters' buckets over the data-parallel groups, then the routed experts' over the expert-data-
    // parallel groups; an item is ready when both of its buckets are.
    for (const bool experts : {false, true}) {
      if (experts && p_.edp() == 1)
        break;
      const auto all = buckets(order, s, experts);
      for (std::size_t bucket = 0; bucket < all.size(); ++bucket) {
        const auto& [items, params] = all[bucket];
        for (const auto& group : groups(experts ? Dim::EDP : Dim::DP, s)) {
          const auto members = simulated_of(group);
          std::vector<TaskId> deps;
          for (int r : members)
            deps.push_back(gather_tail_[static_cast<std::size_t>(r)]);
          const TaskId end =
              collective(CollectiveKind::ALL_GATHER, group, element_bytes * params, Category::DP,
                         fmt::format("{}parameter all-gather, bucket {}", experts ? "expert " : "", bucket), w, deps);
          for (int r : members) {
            gather_tail_[static_cast<std::size_t>(r)] = end;
            for (int item : items) {
              auto& ready = params_ready_[static_cast<std::size_t>(r)][item];
              ready = experts ? sync(Category::DP, {ready, end}) : end;
            }
          }
        }
      }
    }
  }

  // DualPipe's two copies of the model: GPU s and its mirror pp - 1 - s hold the same layers, so each pair sums its
  // gradients (an all-reduce of the pair, as deepseek-ai/DualPipe's example does) once the last micro-batch's are
  // done, before the data-parallel reduction.
  void reduce_copies()
  {
    if (p_.schedule != plan::Schedule::DUALPIPE)
      return;
    const Where w{Category::DP, -1, -1, -1, -1};
    for (int s = 0; s < p_.pp / 2; ++s) {
      const int mirror = p_.pp - 1 - s;
      std::vector<int> items;
      double params = 0;
      for (int c = 0; c < p_.virtual_stages; ++c)
        for (int item : pass_items(virtual_stage(p_, s, c), true)) {
          items.push_back(item);
          params += item_params(item, s) + item_expert_params(item);
        }
      for (int d : dp_simulated())
        for (int t : tp_simulated()) {
          const std::vector<int> pair{rank(t, d, s), rank(t, d, mirror)};
          std::vector<TaskId> deps;
          for (int r : pair) {
            deps.push_back(reduce_tail_[static_cast<std::size_t>(r)]);
            for (int item : items)
              deps.push_back(grad_ready_[static_cast<std::size_t>(r)].at(item));
          }
          const TaskId end = collective(CollectiveKind::ALL_REDUCE, pair, params * grad_bytes_, Category::DP,
                                        "model copies' gradient all-reduce", w, deps);
          for (int r : pair)
            reduce_tail_[static_cast<std::size_t>(r)] = end;
        }
    }
  }

  // Tied embeddings across the pipeline: the first and last stages all-reduce the embedding's gradient (DualPipe and
  // DualPipeV keep the output layer beside an embedding).
  void reduce_tied_embedding()
  {
    if (!m_.tie_embeddings || p_.pp == 1 || p_.dualpipe())
      return;
    const Where w{Category::DP, -1, -1, -1, -1};
    for (int d : dp_simulated())
      for (int t : tp_simulated()) {
        const std::vector<int> group{rank(t, d, 0), rank(t, d, p_.pp - 1)};
        std::vector<TaskId> deps;
        for (int r : group) {
          deps.push_back(reduce_tail_[static_cast<std::size_t>(r)]);
          deps.push_back(grad_ready_[static_cast<std::size_t>(r)].at(r == group[0] ? embedding_item : head_item));
        }
        const TaskId end = collective(CollectiveKind::ALL_REDUCE, group, counts_.word_embedding / p_.tp * grad_bytes_,
                                      Category::DP, "embedding gradient all-reduce", w, deps);
        for (int r : group)
          reduce_tail_[static_cast<std::size_t>(r)] = end;
      }
  }

  // Adam on each GPU's parameters (its shard of them with a sharded optimizer), after every gradient is reduced;
  // then the updated shards are all-gathered (distributed optimizer, ZeRO-1/2).
  void optimizer(int s)
  {
    double params = 0;
    double expert_params = 0;
    for (int c = 0; c < p_.virtual_stages; ++c)
      for (int item : pass_items(virtual_stage(p_, s, c), true)) {
        params += item_params(item, s);
        expert_params += item_expert_params(item);
      }
    const double updated =
        sharded_optimizer() ? params / p_.dp_cp() + expert_params / p_.edp() : params + expert_params;
    const Where w{Category::OPTIMIZER, s, -1, -1, -1};
    for (int r : stage_gpus(s))
      tail_[static_cast<std::size_t>(r)].push_back(reduce_tail_[static_cast<std::size_t>(r)]);
    on_stage(s, w, [&](const LayerPrograms& programs, const hardware::GpuSpec&) {
      Step step;
      step.label = "optimizer";
      step.duration_s = updated * programs.per_param.optimizer_s;
      step.memory_s = step.duration_s;
      return step;
    });
    if (sharded_optimizer() && p_.zero_stage < 3 && p_.dp_cp() > 1 && !gathers_before_forward()) {
      auto gather = [&](const std::vector<std::vector<int>>& groups, double bytes, const char* label) {
        for (const auto& group : groups) {
          const auto members = simulated_of(group);
          const TaskId end =
              collective(CollectiveKind::ALL_GATHER, group, bytes, Category::DP, label, w, tails_of(members));
          for (int r : members)
            tail_[static_cast<std::size_t>(r)] = {end};
        }
      };
      gather(groups(Dim::DP, s), element_bytes * params, "parameter all-gather");
      if (expert_params > 0 && p_.edp() > 1)
        gather(groups(Dim::EDP, s), element_bytes * expert_params, "expert parameter all-gather");
    }
  }

  void finish()
  {
    std::vector<TaskId> all;
    for (std::size_t r = 0; r < tail_.size(); ++r) {
      for (TaskId t : tail_[r])
        all.push_back(t);
      all.push_back(reduce_tail_[r]);
      all.push_back(gather_tail_[r]);
    }
    g_.step_end = sync(Category::OPTIMIZER, all);
  }

  const model::ModelSpec& m_;
  const plan::ParallelPlan& p_;
  const topology::ClusterSpec& cluster_;
  const topology::ClusterGraph& graph_;
  Lowering lowering_;
  const std::vector<LayerPrograms> programs_; // per kind of GPU (topology::gpu_kind)
  std::vector<int> kind_;                     // per GPU
  const model::ParamCount counts_;
  const bool fold_;
  const CoordinateFold tp_fold_;
  const CoordinateFold dp_fold_;
  const std::vector<int> tp_simulated_;
  const std::vector<int> dp_simulated_;
  std::vector<plan::RankCoords> coords_; // per GPU
  std::vector<int> representative_;      // per GPU: the simulated GPU of its class
  // Per collective (kind, or -1 and -2 for deduplicated and plain all-to-alls; group; bytes): its phases.
  std::map<std::tuple<int, std::vector<int>, double>, std::vector<CollectivePhase>> phases_;
  std::unordered_map<std::uint64_t, std::int32_t> endpoints_;
  bool private_links_ = false; // folded with every link weight 1
  std::unordered_map<std::uint64_t, int> route_classes_;
  std::map<std::vector<std::uint32_t>, int> route_ids_;
  double act_bytes_ = 0;
  double grad_bytes_ = 0;
  std::vector<memory::RankParams> layer_params_;                     // per layer, on one GPU
  std::array<std::vector<std::vector<std::vector<int>>>, 6> groups_; // per Dim, per stage: groups()
  std::vector<int> first_layer_;                                     // per virtual stage
  std::vector<int> forwards_, gradients_; // per virtual stage: forward passes, and weight gradients, built so far
  const Program no_program_;

  TaskGraph g_;
  std::vector<std::vector<TaskId>> tail_; // per GPU: what its next compute waits for
  std::vector<TaskId> reduce_tail_;       // per GPU: the last gradient reduction on its data-parallel stream
  std::vector<TaskId> gather_tail_;       // per GPU: the last ZeRO-3 parameter gather
  std::unordered_map<std::uint64_t, TaskId> inputs_;
  std::vector<std::unordered_map<int, TaskId>> grad_ready_;   // per GPU: item -> its gradient is complete
  std::vector<std::unordered_map<int, TaskId>> params_ready_; // per GPU: item -> its parameters are gathered
};

} // namespace

std::string fold_blocker(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                         const topology::ClusterSpec& cluster, const topology::ClusterGraph& graph)
{
  FoldSearch search(plan, cluster, graph);
  bool symmetric = false;
  while (auto fold = search.next()) {
    symmetric = true;
    try {
      Builder(model, plan, cluster, graph, &*fold).build();
      return "";
    } catch (const NotFoldable&) {
      // a collective is not symmetric under this fold: try one with fewer GPUs per class
    }
  }
  return symmetric ? "a group's GPUs are not interchangeable (spread unevenly over nodes or NICs)" : search.why_not();
}

TaskGraph build_task_graph(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                           const topology::ClusterSpec& cluster, const topology::ClusterGraph& graph,
                           const BuildOptions& options)
{
  if (options.fold) {
    FoldSearch search(plan, cluster, graph);
    while (auto fold = search.next()) {
      try {
        return Builder(model, plan, cluster, graph, &*fold).build();
      } catch (const NotFoldable&) {
        // some flow is not symmetric under this fold after all: try one with fewer GPUs per class
      }
    }
  }
  return Builder(model, plan, cluster, graph, nullptr).build();
}

} // namespace sim::workload
