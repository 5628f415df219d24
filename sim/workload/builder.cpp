#include "workload/builder.hpp"

#include "plan/lora.hpp"

#include "plan/schedule.hpp"
#include "topology/symmetry.hpp"
#include "workload/builder_rooms.hpp"
#include "workload/builder_state.hpp"
#include "workload/fold.hpp"
#include "workload/graph_size.hpp"

#include <algorithm>
#include <numeric>
#include <set>

namespace sim::workload {
namespace {

using plan::Pass;

// The layer programs for each kind of GPU in the cluster (topology::gpu_kind): the same steps, each costed on its part.
std::vector<LayerPrograms> programs_by_kind(const model::ModelSpec& m, const plan::ParallelPlan& p,
                                            const topology::ClusterSpec& cluster)
{
  std::vector<LayerPrograms> out{build_programs(m, p, cluster.gpu)};
  for (const auto& kind : cluster.node_gpus)
    out.push_back(build_programs(m, p, kind.gpu));
  return out;
}

} // namespace

BuildState::BuildState(const model::ModelSpec& model_spec, const plan::ParallelPlan& parallel_plan,
                       const topology::ClusterSpec& cluster_spec, const topology::ClusterGraph& cluster_graph,
                       const Fold* fold)
    : m(model_spec), p(parallel_plan), cluster(cluster_spec), graph(cluster_graph), lowering(cluster_graph),
      programs(programs_by_kind(model_spec, parallel_plan, cluster_spec)), counts(model::count_params(model_spec)),
      folding(fold != nullptr), tp_fold(fold ? fold->tp : CoordinateFold{parallel_plan.tp, 1, parallel_plan.tp}),
      dp_fold(fold ? fold->dp : CoordinateFold{parallel_plan.dp_cp(), 1, parallel_plan.dp_cp()}),
      tp_simulated_(fold ? tp_fold.simulated() : all(parallel_plan.tp)),
      dp_simulated_(fold ? dp_fold.simulated() : all(parallel_plan.dp_cp()))
{
  const int gpus = p.gpus();
  for (int r = 0; r < gpus; ++r) {
    coords_.push_back(plan::coords_of(p, r));
    plan::RankCoords c = coords_.back();
    c.tp = tp_fold.representative(c.tp);
    c.dp = dp_fold.representative(c.dp);
    representative_.push_back(plan::rank_of(p, c));
  }
  for (int r = 0; r < gpus; ++r)
    kind_of_gpu.push_back(topology::gpu_kind(cluster, r));
  tail.resize(static_cast<std::size_t>(gpus));
  reduce_tail.assign(static_cast<std::size_t>(gpus), no_task);
  gather_tail.assign(static_cast<std::size_t>(gpus), no_task);
  offload_tail.assign(static_cast<std::size_t>(gpus), no_task);
  fetch_tail.assign(static_cast<std::size_t>(gpus), no_task);
  grad_ready.resize(static_cast<std::size_t>(gpus));
  params_ready.resize(static_cast<std::size_t>(gpus));
  g.gpus = gpus;
  g.folded = folding;
  // The estimate is within a factor of about two; a task has one to two dependencies.
  const double estimate = estimate_graph_size(m, p, cluster, fold, programs.front()).tasks;
  g.reserve(static_cast<std::size_t>(2.0 * estimate), static_cast<std::size_t>(4.0 * estimate));
  if (fold) {
    g.multiplicity = fold->multiplicity;
    g.link_class = fold->link_class;
    g.link_weight = fold->link_weight;
    private_links_ = *std::max_element(fold->link_weight.begin(), fold->link_weight.end()) <= 1;
  }
  g.cluster_gpus = graph.gpus();
  for (int s = 0; s < p.pp; ++s)
    g.stage_leaders.push_back(rank(0, 0, s));
  for (int r = 0; r < gpus; ++r)
    if (simulated(r))
      g.simulated.push_back(r);
  act_bytes = static_cast<double>(p.micro_batch) * p.local_seq() * static_cast<double>(m.hidden_size) * p.value_bytes();
  grad_bytes = p.fp32_grad_accumulation ? 4.0 : 2.0;
  for (std::int64_t l = 0; l < m.num_layers; ++l)
    layer_params_.push_back(memory::layer_params_per_rank(m, p, l));
  for (int vs = 0; vs < p.chunks(); ++vs)
    first_layer_.push_back(p.first_layer(vs));
}

// GPU y as the simulated GPU of x's class sees it: moved as x is to reach that GPU.
int BuildState::shifted(int x, int y) const
{
  const plan::RankCoords& cx = coords_[static_cast<std::size_t>(x)];
  plan::RankCoords c = coords_[static_cast<std::size_t>(y)];
  c.tp = tp_fold.relative(cx.tp, c.tp);
  c.dp = dp_fold.relative(cx.dp, c.dp);
  return plan::rank_of(p, c);
}

std::vector<int> BuildState::all(int n)
{
  std::vector<int> out(static_cast<std::size_t>(n));
  std::iota(out.begin(), out.end(), 0);
  return out;
}

std::vector<int> BuildState::simulated_of(const std::vector<int>& group) const
{
  std::vector<int> out;
  for (int r : group)
    if (simulated(r))
      out.push_back(r);
  return out;
}

std::vector<int> BuildState::stage_group(int s) const
{
  std::vector<int> all;
  for (int d = 0; d < p.dp_cp(); ++d)
    for (int t = 0; t < p.tp; ++t)
      all.push_back(rank(t, d, s));
  return all;
}

const std::vector<std::vector<int>>& BuildState::groups(Dim dim, int s)
{
  auto& cached = groups_[static_cast<std::size_t>(dim)];
  if (cached.empty())
    cached.resize(static_cast<std::size_t>(p.pp));
  auto& out = cached[static_cast<std::size_t>(s)];
  if (out.empty()) {
    std::set<int> seen; // groups by their first member
    for (int r : stage_gpus(s)) {
      auto group = plan::group_of(p, dim, r);
      if (seen.insert(group.front()).second)
        out.push_back(std::move(group));
    }
  }
  return out;
}

TaskId BuildState::add(Task t, const std::vector<TaskId>& deps)
{
  const TaskId id = g.add(t);
  for (TaskId d : deps)
    if (d != no_task)
      g.depend(id, d);
  return id;
}

TaskId BuildState::sync(Category category, const std::vector<TaskId>& deps, std::uint32_t collective)
{
  Task t;
  t.kind = TaskKind::SYNC;
  t.category = category;
  t.collective = collective;
  return add(t, deps);
}

TaskId BuildState::compute(int gpu, const Step& step, const Where& w)
{
  Task t;
  t.kind = TaskKind::COMPUTE;
  t.category = step.recompute ? Category::RECOMPUTE : w.category;
  t.rank = gpu;
  t.stage = static_cast<std::int16_t>(w.stage);
  t.chunk = static_cast<std::int16_t>(w.chunk);
  t.microbatch = w.microbatch;
  t.layer = w.layer;
  t.label = g.label(step.label);
  t.duration_s = step.duration_s / topology::compute_share(cluster, gpu);
  t.flops = step.flops;
  t.host_s = step.host_s;
  t.host_waits = step.host_waits ? 1 : 0;
  if (step.duration_s > 0)
    t.memory_share =
        static_cast<std::uint16_t>(std::lround(65535.0 * std::clamp(step.memory_s / step.duration_s, 0.0, 1.0)));
  return add(t, tail[static_cast<std::size_t>(gpu)]);
}

TaskId BuildState::transfer(const Flow& f, Category category, std::uint32_t collective, std::uint32_t label,
                            const Where& w, const std::vector<TaskId>& deps)
{
  Task t;
  t.kind = TaskKind::TRANSFER;
  t.category = category;
  t.rank = f.src;
  t.peer = folding ? endpoint(f.src, f.dst) : f.dst;
  t.bytes = p.ideal ? 0.0 : f.bytes; // the ideal pipeline's transfers are free
  t.latency_s = p.ideal ? 0.0 : f.latency_s;
  t.collective = collective;
  t.label = label;
  t.stage = static_cast<std::int16_t>(w.stage);
  t.chunk = static_cast<std::int16_t>(w.chunk);
  t.microbatch = w.microbatch;
  t.layer = w.layer;
  return add(t, deps);
}

TaskId BuildState::host_copy(int gpu, double bytes, std::int32_t direction, const std::string& label, const Where& w,
                             const std::vector<TaskId>& deps)
{
  Task t;
  t.kind = TaskKind::HOST_COPY;
  t.category = Category::OFFLOAD;
  t.rank = gpu;
  t.peer = direction;
  t.bytes = bytes;
  t.latency_s = p.ideal ? 0.0 : graph_latency_to_host(gpu);
  t.label = g.label(label);
  t.stage = static_cast<std::int16_t>(w.stage);
  t.microbatch = w.microbatch;
  return add(t, deps);
}

double BuildState::graph_latency_to_host(int gpu) const
{
  return topology::route_latency(graph, topology::route_to_host_memory(graph, gpu));
}

TaskId BuildState::nvme_copy(int gpu, double bytes, bool read, const std::string& label, const Where& w,
                             const std::vector<TaskId>& deps)
{
  // Each drive's link runs at the faster of its read and write rates (topology/cluster_graph): a copy the slower way
  // counts as more bytes on it.
  const topology::NvmeSpec& nvme = cluster.node.host.nvme;
  const double faster = std::max(nvme.read_bandwidth, nvme.write_bandwidth);
  const double wire = bytes / nvme.drives * faster / (read ? nvme.read_bandwidth : nvme.write_bandwidth);
  std::vector<TaskId> parts;
  for (int d = 0; d < nvme.drives; ++d) {
    Task t;
    t.kind = TaskKind::HOST_COPY;
    t.category = Category::OFFLOAD;
    t.rank = gpu;
    t.peer = read ? nvme_read(d) : nvme_write(d);
    t.bytes = wire;
    t.latency_s = p.ideal ? 0.0 : topology::route_latency(graph, topology::route_to_nvme(graph, gpu, d));
    t.label = g.label(label);
    t.stage = static_cast<std::int16_t>(w.stage);
    t.microbatch = w.microbatch;
    parts.push_back(add(t, deps));
  }
  return parts.size() == 1 ? parts.front() : sync(Category::OFFLOAD, parts);
}

TaskId BuildState::host_compute(int gpu, double seconds, const std::string& label, const Where& w,
                                const std::vector<TaskId>& deps)
{
  Task t;
  t.kind = TaskKind::HOST_COMPUTE;
  t.category = w.category;
  t.rank = gpu;
  t.duration_s = seconds;
  t.label = g.label(label);
  t.stage = static_cast<std::int16_t>(w.stage);
  return add(t, deps);
}

TaskId BuildState::collective(CollectiveKind kind, const std::vector<int>& ranks, double bytes, Category category,
                              const std::string& label, const Where& w, const std::vector<TaskId>& deps,
                              const CollectiveOptions& options)
{
  const bool deduplicated = options.deduplicated;
  const std::uint32_t text = g.label(label);
  if (kind == CollectiveKind::ALL_TO_ALL) {
    const int sender = simulated_of(ranks).front();
    const CollectivePhase& phase = all_to_all(ranks, bytes, options);
    double sent = 0; // by one rank: the buffer the collective moves per rank
    for (const Flow& f : phase)
      sent += f.src == sender ? f.bytes : 0.0;
    const std::uint32_t id = g.add_collective(
        CollectiveInfo{text, category, kind, static_cast<std::uint32_t>(ranks.size()), deduplicated ? sent : bytes});
    return lower(std::span(&phase, 1), category, id, text, w, deps);
  }
  const std::uint32_t id =
      g.add_collective(CollectiveInfo{text, category, kind, static_cast<std::uint32_t>(ranks.size()), bytes});
  return lower(phases(kind, ranks, bytes), category, id, text, w, deps);
}

// A collective's phases as transfers, each phase's flows after the previous phase's (the first's after `deps`);
// returns the task that marks its end. Syncs join where many tasks wait for many: a phase of one flow (a folded
// collective inside a node) waits for what came before directly, and ends the collective itself if it is last.
TaskId BuildState::lower(std::span<const CollectivePhase> phases, Category category, std::uint32_t id,
                         std::uint32_t text, const Where& w, const std::vector<TaskId>& deps)
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

const std::vector<CollectivePhase>& BuildState::phases(CollectiveKind kind, const std::vector<int>& ranks, double bytes)
{
  auto key = std::make_tuple(static_cast<int>(kind), ranks, bytes);
  const auto found = phases_.find(key);
  if (found != phases_.end())
    return found->second;
  auto lowered = lowering.collective(kind, ranks, bytes, p.collective_algorithm);
  if (folding)
    for (auto& phase : lowered)
      phase = folded(phase);
  return phases_.emplace(std::move(key), std::move(lowered)).first->second;
}

// An all-to-all's flows as lowered and, folded, as the simulated GPUs send them (lowered for every member and
// checked as any phase, once per group).
const CollectivePhase& BuildState::all_to_all(const std::vector<int>& ranks, double bytes,
                                              const CollectiveOptions& options)
{
  const bool deduplicated = options.deduplicated;
  auto key = std::make_tuple(deduplicated ? -1 : -2, ranks, bytes);
  const auto found = phases_.find(key);
  if (found != phases_.end())
    return found->second.front();
  const auto senders = folding ? ranks : simulated_of(ranks);
  CollectivePhase phase = deduplicated ? lowering.deduplicated_all_to_all(ranks, bytes, *m.moe, senders)
                                       : lowering.all_to_all(ranks, bytes, senders);
  if (folding)
    phase = folded(phase);
  return phases_.emplace(std::move(key), std::vector<CollectivePhase>{std::move(phase)}).first->second.front();
}

// A phase's flows as the simulated GPUs send them: every GPU must send what the simulated GPU of its class sends,
// moved as it is (the same receivers, bytes and latencies); the simulated GPUs' own flows stand for them all. Where
// no two flows of a class share a link (every weight 1: each GPU's links its own, a non-blocking network), a flow
// need only cross the same classes of links as its counterpart: every GPU of a symmetric collective sends and
// receives alike, whichever peer it pairs with.
std::vector<Flow> BuildState::folded(const std::vector<Flow>& phase)
{
  using Sent = std::vector<std::tuple<int, double, double>>;
  std::map<int, Sent> sent; // per sender: its flows as the simulated GPU of its class sends them
  std::map<int, Sent> keys; // and what must match
  for (const Flow& f : phase) {
    sent[f.src].emplace_back(shifted(f.src, f.dst), f.bytes, f.latency_s);
    keys[f.src].emplace_back(private_links_ ? route_class(f.src, f.dst) : shifted(f.src, f.dst), f.bytes, f.latency_s);
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
int BuildState::route_class(int a, int b)
{
  const std::uint64_t key = (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint32_t>(b);
  const auto found = route_classes_.find(key);
  if (found != route_classes_.end())
    return found->second;
  std::vector<std::uint32_t> classes;
  for (const Crossing& c : crossings(graph, g.link_class, g.link_weight, a, b))
    classes.insert(classes.end(), c.weight, c.cls);
  const auto [it, added] = route_ids_.try_emplace(classes, static_cast<int>(route_ids_.size()));
  return route_classes_[key] = it->second;
}

// The endpoint of a folded flow from a simulated GPU to `target` (workload/task_graph).
std::int32_t BuildState::endpoint(int sender, int target)
{
  if (!simulated(sender))
    throw std::logic_error("a folded flow from a GPU that is not simulated");
  const std::uint64_t key = (static_cast<std::uint64_t>(sender) << 32) | static_cast<std::uint32_t>(target);
  const auto [it, inserted] = endpoints_.try_emplace(key, static_cast<std::int32_t>(g.endpoints.size()));
  if (inserted)
    g.endpoints.push_back(TaskGraph::Endpoint{sender, target, representative(target)});
  return g.cluster_gpus + it->second;
}

std::vector<TaskId> BuildState::tails_of(const std::vector<int>& gpus) const
{
  std::vector<TaskId> deps;
  for (int r : gpus)
    for (TaskId t : tail[static_cast<std::size_t>(r)])
      deps.push_back(t);
  return deps;
}

std::vector<int> BuildState::pass_items(int vs, Pass pass) const
{
  std::vector<int> items;
  if (p.path_start(vs) && !p.ideal)
    items.push_back(embedding_item);
  const int first = first_layer_[static_cast<std::size_t>(vs)];
  for (int l = 0; l < p.layers_per_chunk[static_cast<std::size_t>(vs)]; ++l)
    items.push_back(first + l);
  if (p.path_end(vs) && !p.ideal) {
    items.push_back(head_item);
    for (int k = 0; k < m.mtp_layers; ++k)
      items.push_back(mtp_item(k));
  }
  if (pass != Pass::FORWARD)
    std::reverse(items.begin(), items.end());
  return items;
}

double BuildState::item_expert_params(int item) const
{
  if (is_mtp(item))
    return layer_params_.back().experts; // an MTP module's layer is built like the last one
  return item >= 0 ? layer_params_[static_cast<std::size_t>(item)].experts : 0.0;
}

double BuildState::item_params(int item, int s) const
{
  const double t = p.tp;
  if (item == embedding_item)
    return counts.word_embedding / t + counts.position_embedding + counts.embedding_norm;
  if (item == head_item) {
    double params = counts.final_norm + counts.lm_head / t;
    // The last stage's copy of a tied embedding, or of the one MTP looks the next tokens up in (DualPipe: beside the
    // embedding).
    if ((m.tie_embeddings || m.mtp_layers > 0) && p.pp > 1 && !p.dualpipe() && s == p.pp - 1)
      params += counts.word_embedding / t;
    return params;
  }
  if (is_mtp(item))
    return memory::mtp_params_per_rank(m, p).dense;
  return layer_params_[static_cast<std::size_t>(item)].dense;
}

double BuildState::item_trainable_params(int item, int s) const
{
  if (!p.lora())
    return item_params(item, s);
  return item >= 0 && !is_mtp(item) ? plan::lora_layer_params(m, p) / static_cast<double>(p.tp) : 0.0;
}

double BuildState::item_gather_bytes(int item, int s, double weight_bytes) const
{
  if (!p.lora() || item < 0 || is_mtp(item))
    return weight_bytes * item_params(item, s);
  // QLoRA under FSDP (bitsandbytes' quant_storage): the packed 4-bit weights and their absmax travel as they are.
  const model::LayerParams l = model::layer_params(m, model::FfnPart::DENSE);
  const double linear = (l.attention + l.ffn) / static_cast<double>(p.tp);
  return plan::base_weight_bytes(p.base_quantization, p.value_bytes()) * linear +
         weight_bytes * (item_params(item, s) - linear + item_trainable_params(item, s));
}

std::int64_t BuildState::microbatches_through() const
{
  return p.schedule == plan::Schedule::DUALPIPE ? p.microbatches() / 2 : p.microbatches();
}

std::vector<int> BuildState::stage_gpus(int s) const
{
  std::vector<int> r;
  for (int d : dp_simulated())
    for (int t : tp_simulated())
      r.push_back(rank(t, d, s));
  return r;
}

TaskId BuildState::join(int gpu)
{
  auto& waits = tail[static_cast<std::size_t>(gpu)];
  if (waits.size() == 1)
    return waits.front();
  const TaskId s = sync(Category::BACKWARD, waits);
  waits = {s};
  return s;
}

namespace {

// A step's tasks in the order they are built: the parameters gathered before the first forward pass, each stage's
// passes with their sends, the gradient reductions, the optimizer step.
class Builder {
 public:
  Builder(const model::ModelSpec& m, const plan::ParallelPlan& p, const topology::ClusterSpec& cluster,
          const topology::ClusterGraph& graph, const Fold* fold)
      : state_(m, p, cluster, graph, fold), dp_(state_), optimizer_(state_, dp_), passes_(state_, dp_, optimizer_)
  {}

  TaskGraph build()
  {
    const plan::ParallelPlan& p = state_.p;
    TaskGraph& g = state_.g;
    dp_.check_gradient_reductions();
    if (dp_.gathers_before_forward())
      for (int s = 0; s < p.pp; ++s)
        dp_.gather_updated_parameters(s);
    for (int s = 0; s < p.pp; ++s)
      passes_.run_stage(s);
    dp_.reduce_copies();
    if (p.zero_stage < 2)
      for (int s = 0; s < p.pp; ++s)
        dp_.reduce_gradients(s, -1);
    dp_.reduce_tied_embedding();
    for (int s = 0; s < p.pp; ++s)
      optimizer_.step(s);
    finish();
    if (state_.folding && std::find(g.link_weight.begin(), g.link_weight.end(), 0U) != g.link_weight.end()) {
      std::vector<std::pair<int, int>> flows;
      for (const auto& e : g.endpoints)
        flows.emplace_back(e.sender, e.target);
      g.unsimulated = unsimulated_crossings(state_.tp_fold, state_.dp_fold, p, state_.graph, g.link_weight, flows);
    }
    g.finalize();
    return std::move(g);
  }

 private:
  // The step ends once every GPU's last compute, gradient reduction and parameter gather are done.
  void finish()
  {
    std::vector<TaskId> all;
    for (std::size_t r = 0; r < state_.tail.size(); ++r) {
      for (TaskId t : state_.tail[r])
        all.push_back(t);
      all.push_back(state_.reduce_tail[r]);
      all.push_back(state_.gather_tail[r]);
      all.push_back(state_.offload_tail[r]);
      all.push_back(state_.fetch_tail[r]);
    }
    state_.g.step_end = state_.sync(Category::OPTIMIZER, all);
  }

  BuildState state_;
  DataParallel dp_;
  OptimizerStep optimizer_;
  PipelinePasses passes_;
};

} // namespace

std::string fold_blocker(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                         const topology::ClusterSpec& cluster, const topology::ClusterGraph& graph)
{
  FoldSearch search(plan, cluster, graph);
  bool symmetric = false;
  while (auto fold = search.next()) {
    try {
      Builder(model, plan, cluster, graph, &*fold).build();
      return "";
    } catch (const NotFoldable&) {
      // a collective is not symmetric under this fold: try one with fewer GPUs per class
      symmetric = true;
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
