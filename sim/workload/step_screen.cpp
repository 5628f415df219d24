#include "workload/step_screen.hpp"

#include "memory/memory_model.hpp"
#include "plan/parallel_plan.hpp"
#include "workload/collectives.hpp"
#include "workload/layer_program.hpp"
#include "workload/optimizer_step.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_map>

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

} // namespace

// What screening learns of one cluster: each GPU pair's route (its links, directions and capacities), and the
// collectives it priced.
struct ScreenCache::State {
  State(const topology::ClusterGraph& graph, const topology::ClusterSpec& spec)
      : g(graph), cluster(spec), lowering(graph)
  {}

  struct Hop {
    std::size_t link = 0;
    bool forward = true;
    double capacity = 0; // bytes per second through it in that direction (bandwidth x efficiency)
  };
  const std::vector<Hop>& route(int src, int dst)
  {
    const auto key = (static_cast<std::uint64_t>(src) << 32) | static_cast<std::uint32_t>(dst);
    const auto [it, inserted] = routes.try_emplace(key);
    if (inserted) {
      const auto links = topology::route(g, src, dst);
      const auto forward = topology::link_directions(g, g.gpu[static_cast<std::size_t>(src)], links);
      for (std::size_t i = 0; i < links.size(); ++i) {
        const topology::Link& l = g.graph[links[i]];
        it->second.push_back({l.id, forward[i], l.bandwidth * l.efficiency});
      }
    }
    return it->second;
  }

  // A phase priced alone on the links: its latency, then as long as the link its flows load most needs for their
  // bytes, as the engine would move them with nothing else in flight.
  double phase(const CollectivePhase& flows)
  {
    load.clear();
    double latency = 0;
    double longest = 0;
    for (const Flow& f : flows) {
      latency = std::max(latency, f.latency_s);
      if (f.src == f.dst || f.bytes <= 0)
        continue;
      for (const Hop& h : route(f.src, f.dst)) {
        double& b = load[{h.link, h.forward}];
        b += f.bytes;
        longest = std::max(longest, b / h.capacity);
      }
    }
    return latency + longest;
  }

  // A collective priced alone: its phases one after another (an all-to-all: `gpu`'s own flows, every member's being
  // alike). Remembered, but for DeepEP's exchanges (they depend on the model's routing).
  double collective(const model::ModelSpec& model, const plan::ParallelPlan& plan, CollectiveKind kind,
                    const std::vector<int>& ranks, double bytes, int gpu, bool deduplicated)
  {
    if (ranks.size() <= 1 || bytes <= 0)
      return 0.0;
    if (kind == CollectiveKind::ALL_TO_ALL && deduplicated)
      return phase(lowering.deduplicated_all_to_all(ranks, bytes, *model.moe, {gpu}));
    const int algorithm = kind == CollectiveKind::ALL_TO_ALL ? -1 : static_cast<int>(plan.collective_algorithm);
    auto key =
        std::make_tuple(static_cast<int>(kind), algorithm, kind == CollectiveKind::ALL_TO_ALL ? gpu : -1, ranks, bytes);
    if (const auto found = prices.find(key); found != prices.end())
      return found->second;
    double s = 0;
    if (kind == CollectiveKind::ALL_TO_ALL)
      s = phase(lowering.all_to_all(ranks, bytes, {gpu}));
    else
      for (const auto& p : lowering.collective(kind, ranks, bytes, plan.collective_algorithm))
        s += phase(p);
    return prices.emplace(std::move(key), s).first->second;
  }

  double send(int src, int dst, double bytes) { return phase({lowering.send(src, dst, bytes)}); }

  const topology::ClusterGraph& g;
  const topology::ClusterSpec& cluster;
  Lowering lowering;
  std::unordered_map<std::uint64_t, std::vector<Hop>> routes;
  std::map<std::tuple<int, int, int, std::vector<int>, double>, double> prices;
  std::map<std::pair<std::size_t, bool>, double> load; // (phase's scratch)
};

ScreenCache::ScreenCache(const topology::ClusterGraph& graph, const topology::ClusterSpec& cluster)
    : state_(std::make_unique<State>(graph, cluster))
{}
ScreenCache::~ScreenCache() = default;

namespace {

using State = ScreenCache::State;

// The least time a pass takes on `gpu` where its passes run one at a time: its kernels, then each collective it stops
// for and what one beside its compute takes beyond that compute, each at least its phases' latencies and the bytes
// of the link their flows load most over that link's capacity (a collective starts after the GPU's work before it,
// and the work after it waits for its end; other flows and the GPU's own traffic only slow it). A DeepEP exchange
// (deduplicated per node, its forwarding pipelined) counts nothing.
double pass_floor(const Program& program, const model::ModelSpec& model, const plan::ParallelPlan& plan, State& state,
                  int gpu)
{
  double s = kernel_time(program);
  for (const auto& step : program) {
    if (step.kind == Step::Kind::COMPUTE || step.deduplicated)
      continue;
    const double c = state.collective(model, plan, step.collective, plan::group_of(plan, group_dim(step.group), gpu),
                                      step.bytes, gpu, false);
    s += step.kind == Step::Kind::COLLECTIVE ? c : std::max(0.0, c - step.duration_s);
  }
  return s;
}

// A pass's estimated time on `gpu`: its kernels (at `speed`, a straggler's share), each blocking collective, and what
// an overlapped one takes beyond the compute beside it.
double pass_estimate(const Program& program, const model::ModelSpec& model, const plan::ParallelPlan& plan,
                     State& state, int gpu, double speed)
{
  double s = 0;
  for (const auto& step : program) {
    if (step.kind != Step::Kind::COLLECTIVE)
      s += step.duration_s / speed;
    if (step.kind == Step::Kind::COMPUTE)
      continue;
    const double c = state.collective(model, plan, step.collective, plan::group_of(plan, group_dim(step.group), gpu),
                                      step.bytes, gpu, step.deduplicated);
    s += step.kind == Step::Kind::COLLECTIVE ? c : std::max(0.0, c - step.duration_s / speed);
  }
  return s;
}

// Per stage, the share of the kernels' speed its slowest GPU has (a straggler's compute; 1 for none): a synchronous
// step waits for it.
std::vector<double> stage_speeds(const plan::ParallelPlan& plan, const topology::ClusterSpec& cluster)
{
  std::vector<double> speed(static_cast<std::size_t>(plan.pp), 1.0);
  const int per_node = cluster.node.gpus;
  for (const auto& x : cluster.stragglers) {
    if (x.compute >= 1 || x.node < 0)
      continue;
    for (int local = x.gpu >= 0 ? x.gpu : 0; local < (x.gpu >= 0 ? x.gpu + 1 : per_node); ++local)
      if (const int g = x.node * per_node + local; g < plan.gpus()) {
        double& v = speed[static_cast<std::size_t>(plan::coords_of(plan, g).pp)];
        v = std::min(v, x.compute);
      }
  }
  return speed;
}

} // namespace

StepScreen screen_step(const model::ModelSpec& model, const plan::ParallelPlan& plan, const hardware::GpuSpec& gpu,
                       const topology::ClusterGraph& graph, const topology::ClusterSpec& cluster)
{
  ScreenCache cache(graph, cluster);
  return screen_step(model, plan, gpu, cache);
}

StepScreen screen_step(const model::ModelSpec& model, const plan::ParallelPlan& plan, const hardware::GpuSpec& gpu,
                       ScreenCache& cache, const memory::MemoryEstimate* known)
{
  State& prices = *cache.state_;
  const LayerPrograms programs = build_programs(model, plan, gpu);
  const double microbatches = static_cast<double>(plan.microbatches());
  // DualPipe's micro-batches take one of two paths over two copies of the model, half each: a GPU runs each of its
  // chunks for half of them, and both end stages embed and project half (DualPipeV's and the others' micro-batches
  // cross every chunk).
  const bool two_paths = plan.schedule == plan::Schedule::DUALPIPE;
  const double per_chunk = two_paths ? microbatches / 2 : microbatches;
  const bool sharded = plan.zero_stage >= 1 || plan.distributed_optimizer;
  std::optional<memory::MemoryEstimate> estimated_here; // (the caller's when given: not copied)
  if (known == nullptr)
    estimated_here = memory::estimate_memory(model, plan, gpu);
  const memory::MemoryEstimate& memory = known != nullptr ? *known : *estimated_here;
  // The pipeline's fill and drain, where each stage runs one pass at a time and its last is a backward of its first
  // chunk (1F1B, GPipe, interleaved; not DualPipe's deferred weight gradients nor passes run side by side): stage s
  // starts only once the first micro-batch's forward has crossed the first chunks of the stages before it, and after
  // its last backward those stages still run theirs.
  const bool fill_and_drain = !plan.dualpipe() && !plan.moe_a2a_overlap;
  const bool communicates = !plan.ideal; // (an ideal pipeline's transfers are free)
  // Passes run one at a time there, so a pass also waits for its all-to-alls; side by side, another pass's kernels
  // may fill that wait. Each stage's GPU with tp and dp coordinates 0 stands for its stage (any GPU's time bounds the
  // step).
  const auto pass = [&](const Program& program, int stage) {
    return fill_and_drain && communicates ? pass_floor(program, model, plan, prices, plan::rank_of(plan, {0, 0, stage}))
                                          : kernel_time(program);
  };
  const auto speeds = stage_speeds(plan, prices.cluster);
  const auto estimated = [&](const Program& program, int stage) {
    const double speed = speeds[static_cast<std::size_t>(stage)];
    return communicates ? pass_estimate(program, model, plan, prices, plan::rank_of(plan, {0, 0, stage}), speed)
                        : kernel_time(program) / speed;
  };
  // What a stage boundary's send of one micro-batch's activations (or gradients) takes: each TP rank its slice under
  // sequence parallelism.
  const double act_bytes = static_cast<double>(plan.micro_batch) * plan.local_seq() *
                           static_cast<double>(model.hidden_size) * plan.value_bytes() /
                           (plan.sequence_parallel ? plan.tp : 1);
  const auto send = [&](int stage) {
    return communicates && stage + 1 < plan.pp
               ? prices.send(plan::rank_of(plan, {0, 0, stage}), plan::rank_of(plan, {0, 0, stage + 1}), act_bytes)
               : 0.0;
  };
  const double grad_bytes = plan.fp32_grad_accumulation ? 4.0 : 2.0;
  const bool deepspeed = plan.software.pipeline_engine == plan::PipelineEngine::DEEPSPEED;
  StepScreen out;
  double before_forward = 0;
  double before_backward = 0;
  double forward_fill = 0; // the same with estimated passes and the sends between stages
  double backward_fill = 0;
  for (int s = 0; s < plan.pp; ++s) {
    const int rank = plan::rank_of(plan, {0, 0, s});
    double work = 0;
    double first_forward = 0;
    double first_backward = 0;
    double work_e = 0;
    double first_forward_e = 0;
    double first_backward_e = 0;
    double gathers = 0; // ZeRO-3's parameter gathers beyond the passes they prefetch for
    double largest_layer = 0;
    double last_backward = 0;                                  // one micro-batch's backward through the stage's chunks
    std::map<const Program*, std::pair<double, double>> times; // per program: floor and estimate
    const auto time_of = [&](const Program& program) {
      const auto [it, inserted] = times.try_emplace(&program);
      if (inserted)
        it->second = {pass(program, s), estimated(program, s)};
      return it->second;
    };
    for (int c = 0; c < plan.virtual_stages; ++c) {
      for (int l = 0; l < plan.layers_in_chunk(s, c); ++l) {
        const int layer = plan.first_layer_of_chunk(s, c) + l;
        const auto [forward, forward_e] = time_of(programs.forward_of(model, layer));
        const auto [backward, backward_e] = time_of(programs.backward_of(model, layer));
        work += per_chunk * (forward + backward);
        work_e += per_chunk * (forward_e + backward_e);
        last_backward += backward_e;
        if (c == 0) {
          first_forward += forward;
          first_backward += backward;
          first_forward_e += forward_e;
          first_backward_e += backward_e;
        }
        const double params = memory::layer_params_per_rank(model, plan, layer).dense;
        largest_layer = std::max(largest_layer, params);
        if (plan.zero_stage >= 3 && communicates) {
          const double gather = prices.collective(model, plan, CollectiveKind::ALL_GATHER,
                                                  plan::group_of(plan, plan::GroupDim::SHARD, rank),
                                                  params * plan.value_bytes(), rank, false);
          gathers += per_chunk * (std::max(0.0, gather - forward_e) + std::max(0.0, gather - backward_e));
        }
      }
    }
    // (An ideal pipeline has no embedding or output layer.)
    const double embedding = kernel_time(programs.embedding_forward) + kernel_time(programs.embedding_backward);
    const double head = kernel_time(programs.head_forward) + kernel_time(programs.head_backward);
    double ends = 0; // the embedding's and output layer's kernels on this stage
    if (s == 0 && !plan.ideal) {
      first_forward += kernel_time(programs.embedding_forward);
      first_backward += kernel_time(programs.embedding_backward);
      first_forward_e += kernel_time(programs.embedding_forward);
      first_backward_e += kernel_time(programs.embedding_backward);
      ends += per_chunk * (embedding + (two_paths ? head : 0.0));
    }
    if (s == plan.pp - 1 && !plan.ideal)
      ends += per_chunk * (head + (two_paths ? embedding : 0.0));
    work += ends;
    work_e += ends;
    // What the optimizer updates: every parameter, or LoRA's adapters alone.
    const auto& stage = memory.per_stage[static_cast<std::size_t>(s)];
    const double params = stage.trainable_params / (sharded ? plan.shards() : 1);
    // (Offloaded, the GPU runs no optimizer kernel: its host's update, after its last kernel, is left out.)
    const double optimizer =
        plan.offload_optimizer == plan::OffloadDevice::NONE ? params * programs.per_param.optimizer_s : 0.0;
    out.bound_s =
        std::max(out.bound_s, fill_and_drain ? before_forward + std::max(work + optimizer, work + before_backward)
                                             : work + optimizer);
    // The gradients' reduction after the last backward: the last bucket when it overlaps the backward pass (a bucket
    // holds whole layers), all of them when it does not; then the sharded optimizer's updated parameters gathered.
    double after = 0;
    if (communicates && plan.dp_cp() > 1) {
      const double dense = stage.trainable_params - stage.expert_params;
      const bool overlapped = plan.overlap_grad_reduce && !deepspeed;
      const auto reduce = [&](double params) { // one reduction of `params` gradients
        if (sharded && !deepspeed)
          return prices.collective(model, plan, CollectiveKind::REDUCE_SCATTER,
                                   plan::group_of(plan, plan::GroupDim::SHARD, rank), params * grad_bytes, rank,
                                   false) +
                 prices.collective(model, plan, CollectiveKind::ALL_REDUCE,
                                   plan::group_of(plan, plan::GroupDim::REPLICA, rank),
                                   params / plan.shards() * grad_bytes, rank, false);
        return prices.collective(model, plan, CollectiveKind::ALL_REDUCE,
                                 plan::group_of(plan, plan::GroupDim::DP, rank), params * grad_bytes, rank, false);
      };
      if (overlapped && dense > 0) {
        // Bucket by bucket during the last micro-batch's backward pass: the last bucket after it, and whatever the
        // buckets take beyond that pass.
        const double bucket = std::min(dense, std::max(plan.dp_bucket_bytes / grad_bytes, largest_layer));
        const double one = reduce(bucket);
        after += std::max(one, std::ceil(dense / bucket) * one - last_backward);
      } else if (dense > 0) {
        after += reduce(dense);
      }
      if (stage.expert_params > 0 && plan.edp() > 1)
        after += prices.collective(
            model, plan, CollectiveKind::ALL_REDUCE, plan::group_of(plan, plan::GroupDim::EDP, rank),
            (overlapped ? std::min(stage.expert_params, plan.dp_bucket_bytes / grad_bytes) : stage.expert_params) *
                grad_bytes,
            rank, false);
      if (sharded && plan.zero_stage < 3 && !plan.overlap_param_gather)
        after += prices.collective(model, plan, CollectiveKind::ALL_GATHER,
                                   plan::group_of(plan, plan::GroupDim::SHARD, rank), dense * plan.value_bytes(), rank,
                                   false);
    }
    // Offloaded, the host's update of its share after the GPU's reductions (its copies and drives left out).
    const double host_update =
        plan.offload_optimizer == plan::OffloadDevice::NONE
            ? 0.0
            : plan.offload_fraction * params * cpu_optimizer_seconds_per_param(plan, prices.cluster);
    const double tail = optimizer + after + (plan.delayed_update ? 0.0 : host_update);
    // DualPipe's bubble (DeepSeek-V3 technical report, 2024, Table 2): (pp/2 - 1) x (F&B + B - 3W) against 1F1B's
    // (pp - 1) x (F + B); with F&B as F + B and W as half of B, that of pp/2 - 1 stages' forward and half backward.
    const double dualpipe_bubble = two_paths && s == plan.pp - 1 && plan.pp > 2
                                       ? (forward_fill + backward_fill / 2) * (plan.pp / 2.0 - 1) / (plan.pp - 1)
                                       : 0.0;
    out.estimate_s = std::max(out.estimate_s, fill_and_drain ? forward_fill + work_e + gathers + backward_fill + tail
                                                             : work_e + gathers + dualpipe_bubble + tail);
    before_forward += first_forward + send(s);
    before_backward += first_backward + send(s);
    forward_fill += first_forward_e + send(s);
    backward_fill += first_backward_e + send(s);
  }
  out.estimate_s = std::max(out.estimate_s, out.bound_s);
  return out;
}

} // namespace sim::workload
