#include "report/metrics.hpp"

#include "model/flops.hpp"
#include "plan/parallel_plan.hpp"

#include <algorithm>
#include <functional>
#include <iterator>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace sim::report {
namespace {

using workload::Category;
using workload::TaskId;
using workload::TaskKind;

// What one pass over the tasks tells (a large step has millions: each pass reads them all from memory).
struct TaskScan {
  std::vector<std::vector<TaskId>> compute_by_gpu; // per GPU, its compute tasks in the order they ran
  double pipeline_end_s = 0;                       // the last kernel's end that is not the optimizer's
  // Per GPU, the end of the last transfer it sent or received, and that transfer's kind.
  std::vector<double> last_comm;
  std::vector<Category> last_comm_category;
  // Per collective, its first flow's issue and its last flow's end.
  std::vector<std::pair<double, double>> collective_span;
  bool host_work = false; // copies to or from host memory and drives, or work on a host's CPU (offload)
};

TaskScan scan_tasks(const workload::TaskGraph& g, const engine::Timeline& tl)
{
  constexpr double inf = std::numeric_limits<double>::infinity();
  const auto gpus = static_cast<std::size_t>(g.gpus);
  TaskScan s{std::vector<std::vector<TaskId>>(gpus),
             0.0,
             std::vector<double>(gpus, 0.0),
             std::vector<Category>(gpus, Category::DP),
             std::vector<std::pair<double, double>>(g.collectives().size(), {inf, -inf}),
             false};
  for (TaskId t = 0; t < g.size(); ++t) {
    const auto& task = g[t];
    const auto& timing = tl.tasks[t];
    switch (task.kind) {
      case TaskKind::COMPUTE:
        s.compute_by_gpu[static_cast<std::size_t>(task.rank)].push_back(t);
        if (task.category != Category::OPTIMIZER)
          s.pipeline_end_s = std::max(s.pipeline_end_s, timing.end_s);
        break;
      case TaskKind::TRANSFER:
        for (int r : {task.rank, g.gpu_of(task.peer)})
          if (timing.end_s > s.last_comm[static_cast<std::size_t>(r)]) {
            s.last_comm[static_cast<std::size_t>(r)] = timing.end_s;
            s.last_comm_category[static_cast<std::size_t>(r)] = task.category;
          }
        if (task.collective != workload::no_task) {
          auto& span = s.collective_span[task.collective];
          span = {std::min(span.first, timing.start_s), std::max(span.second, timing.end_s)};
        }
        break;
      case TaskKind::HOST_COPY:
      case TaskKind::HOST_COMPUTE:
        s.host_work = true;
        break;
      case TaskKind::SYNC:
        break;
    }
  }
  const auto earlier = [&tl](TaskId a, TaskId b) { return tl.tasks[a].start_s < tl.tasks[b].start_s; };
  for (auto& v : s.compute_by_gpu)
    if (!std::is_sorted(v.begin(), v.end(), earlier)) // (mostly they ran in the order they were built)
      std::sort(v.begin(), v.end(), earlier);
  return s;
}

class Attribution {
 public:
  Attribution(const workload::TaskGraph& g, const engine::Timeline& tl) : g_(g), tl_(tl) {}

  // Splits the idle gap [from, to) before `task` by what the task was waiting for.
  void gap(TaskId task, double from, double to, Breakdown& b) const
  {
    if (to <= from)
      return;
    blame(latest_dependency(task), from, to, b, 0);
  }

 private:
  TaskId latest_dependency(TaskId t) const
  {
    TaskId best = workload::no_task;
    for (TaskId d : g_.dependencies(t))
      if (best == workload::no_task || tl_.tasks[d].end_s > tl_.tasks[best].end_s)
        best = d;
    return best;
  }

  void blame(TaskId d, double from, double to, Breakdown& b, int depth) const
  {
    if (d == workload::no_task || depth > 8) {
      b.bubble += to - from;
      return;
    }
    const auto& task = g_[d];
    if (task.kind != TaskKind::COMPUTE && task.collective != workload::no_task) {
      // Waiting for a collective (its last sync or flow): exposed for as long as it ran, the rest is waiting for it to
      // start.
      const TaskId start = collective_start(d);
      const double started = g_[start].kind == TaskKind::SYNC ? tl_.tasks[start].end_s : tl_.tasks[start].start_s;
      const double exposed_from = std::max(from, started);
      add(task.category, to - exposed_from, b);
      if (exposed_from > from)
        blame(latest_dependency(start), from, exposed_from, b, depth + 1);
      return;
    }
    if (task.kind == TaskKind::TRANSFER || task.kind == TaskKind::HOST_COPY || task.kind == TaskKind::HOST_COMPUTE) {
      const double issued = tl_.tasks[d].start_s;
      const double exposed_from = std::max(from, issued);
      add(task.kind == TaskKind::HOST_COMPUTE ? Category::OFFLOAD : task.category, to - exposed_from, b);
      if (exposed_from > from && task.kind != TaskKind::TRANSFER)      // a host's copy or update waited for what came
        blame(latest_dependency(d), from, exposed_from, b, depth + 1); // before it (the copy before, the copy out)
      else if (exposed_from > from)
        b.bubble += exposed_from - from; // the sender had not finished yet
      return;
    }
    if (task.kind == TaskKind::SYNC) {
      blame(latest_dependency(d), from, to, b, depth + 1);
      return;
    }
    b.bubble += to - from; // waiting for compute elsewhere
  }

  // The first task of a collective: its first sync, or the flow that waited for what came before it.
  TaskId collective_start(TaskId end) const
  {
    TaskId t = end;
    for (int i = 0; i < 16; ++i) {
      const TaskId d = latest_dependency(t);
      if (d == workload::no_task || g_[d].collective != g_[end].collective)
        return t;
      t = d;
    }
    return t;
  }

  static void add(Category c, double seconds, Breakdown& b)
  {
    switch (c) {
      case Category::TP:
        b.tp_exposed += seconds;
        break;
      case Category::PP:
        b.pp_exposed += seconds;
        break;
      case Category::DP:
        b.dp_exposed += seconds;
        break;
      case Category::EP:
        b.ep_exposed += seconds;
        break;
      case Category::CP:
        b.cp_exposed += seconds;
        break;
      case Category::OFFLOAD:
        b.offload_exposed += seconds;
        break;
      default:
        b.bubble += seconds;
    }
  }

  const workload::TaskGraph& g_;
  const engine::Timeline& tl_;
};

double median(std::vector<double> v)
{
  if (v.empty())
    return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

// Per pass (forward or backward, micro-batch, chunk) of one GPU, the spans of its layers in the order they ran;
// the median of the distances between consecutive layers' starts, per direction.
std::pair<double, double> layer_times(const workload::TaskGraph& g, const engine::Timeline& tl,
                                      const std::vector<TaskId>& gpu_tasks)
{
  using Pass = std::tuple<int, int, int>; // (0 forward, 1 backward, 2 weight gradients), micro-batch, chunk
  std::map<Pass, std::map<int, std::pair<double, double>>> spans; // pass -> layer -> (first start, last end)
  for (TaskId t : gpu_tasks) {
    const auto& task = g[t];
    if (task.layer < 0 || task.category == Category::OPTIMIZER)
      continue;
    const Pass pass{task.category == Category::FORWARD  ? 0
                    : task.category == Category::WEIGHT ? 2
                                                        : 1,
                    task.microbatch, task.chunk};
    auto [it, inserted] = spans[pass].try_emplace(task.layer, tl.tasks[t].start_s, tl.tasks[t].end_s);
    it->second.first = std::min(it->second.first, tl.tasks[t].start_s);
    it->second.second = std::max(it->second.second, tl.tasks[t].end_s);
  }
  // Passes that ran beside another (MoE all-to-all overlap, DualPipe's pairs, a backward pass whose weight gradients
  // came later) interleave their layers with its: measured only when no pass ran alone.
  std::vector<std::pair<double, double>> extents; // (first start, last end) per pass, in the order of `spans`
  for (const auto& [pass, layers] : spans) {
    std::pair<double, double> extent{layers.begin()->second.first, layers.begin()->second.second};
    for (const auto& [layer, span] : layers)
      extent = {std::min(extent.first, span.first), std::max(extent.second, span.second)};
    extents.push_back(extent);
  }
  std::vector<std::pair<double, double>> by_start = extents;
  std::sort(by_start.begin(), by_start.end());
  auto alone = [&](const std::pair<double, double>& e) {
    const auto at = std::lower_bound(by_start.begin(), by_start.end(), e);
    const bool after_previous = at == by_start.begin() || std::prev(at)->second <= e.first;
    const bool before_next = std::next(at) == by_start.end() || e.second <= std::next(at)->first;
    return after_previous && before_next;
  };
  const bool any_alone = std::any_of(extents.begin(), extents.end(), alone);
  std::vector<double> forward, backward;
  std::size_t k = 0;
  for (const auto& [pass, layers] : spans) {
    const auto [kind, microbatch, chunk] = pass;
    // A backward pass whose weight gradients came later is only part of one; the weight gradients are not a pass.
    const bool partial = kind == 1 && spans.count(Pass{2, microbatch, chunk}) > 0;
    if ((any_alone && !alone(extents[k++])) || partial || kind == 2)
      continue;
    std::vector<std::pair<double, double>> ordered;
    for (const auto& [layer, span] : layers)
      ordered.push_back(span);
    std::sort(ordered.begin(), ordered.end());
    auto& out = kind == 1 ? backward : forward;
    if (ordered.size() == 1)
      out.push_back(ordered.front().second - ordered.front().first);
    for (std::size_t i = 1; i < ordered.size(); ++i)
      out.push_back(ordered[i].first - ordered[i - 1].first);
  }
  return {median(forward), median(backward)};
}

std::string class_name(topology::LinkClass c)
{
  return std::string(core::choice_name(c, topology::link_class_choices));
}

} // namespace

Metrics compute_metrics(const scenario::Scenario& s, const workload::TaskGraph& g,
                        const topology::ClusterGraph& cluster, const engine::Timeline& tl)
{
  const auto& p = s.plan;
  Metrics m;
  m.step_time_s = tl.step_time_s;
  const double tokens = static_cast<double>(p.global_batch) * static_cast<double>(p.seq_length);
  // Steps the loss scaler skips train no tokens: tokens/s is what the steps it keeps train.
  m.tokens_per_s = tokens * (1.0 - p.skipped_steps) / m.step_time_s;
  // Packed documents count as sequences of their own: the same tokens, attention over each document.
  const double documents = static_cast<double>(p.seq_length) / p.attention_span();
  const auto flops = model::step_flops(s.model, p.attention_span(), static_cast<double>(p.global_batch) * documents,
                                       p.recompute, p.recompute_modules, p.lora());
  m.model_flops = flops.model();
  m.hardware_flops = flops.hardware();
  // FP8 runs: against the BF16 peak; GPUs of several kinds: against their mean.
  const double peak = topology::mean_peak(s.cluster, p.compute_precision(), s.gpus);
  m.tflops_per_gpu = m.model_flops / m.step_time_s / s.gpus / 1e12;
  m.mfu = m.model_flops / m.step_time_s / s.gpus / peak;
  m.hfu = m.hardware_flops / m.step_time_s / s.gpus / peak;
  m.memory = memory::estimate_memory(s.model, p, s.cluster);

  const double microbatches = static_cast<double>(p.microbatches());
  m.bubble_theory = (p.pp - 1) / (microbatches + p.pp - 1);
  if (p.schedule == plan::Schedule::INTERLEAVED)
    m.bubble_theory = (p.pp - 1) / (microbatches * p.virtual_stages + p.pp - 1);
  // DualPipe's bubble, (pp/2 - 1)(F&B + B - 3W) per its README, and DualPipeV's, (pp - 1)(F&B + B - 3W) in half-size
  // chunks, over the pipeline phase, with F : B : W = 1 : 2 : 1 and an overlapped pair as long as F + B.
  if (p.schedule == plan::Schedule::DUALPIPE)
    m.bubble_theory = (p.pp - 2) / (3.0 * microbatches + p.pp - 2);
  if (p.schedule == plan::Schedule::DUALPIPE_V)
    m.bubble_theory = (p.pp - 1) / (3.0 * microbatches + p.pp - 1);
  m.bubble_formula = p.pp == 1                                   ? "none (one stage)"
                     : p.schedule == plan::Schedule::INTERLEAVED ? "(p-1)/(m*v+p-1)"
                     : p.schedule == plan::Schedule::DUALPIPE    ? "DualPipe's (p-2)/(3m+p-2)"
                     : p.schedule == plan::Schedule::DUALPIPE_V  ? "DualPipeV's (p-1)/(3m+p-1)"
                                                                 : "(p-1)/(m+p-1)";

  m.critical_path = critical_path(g, tl);
  for (const auto& straggler : s.cluster.stragglers)
    m.straggler_path_s.push_back(time_on_path(m.critical_path, g, tl, cluster, straggler));

  const TaskScan scan = scan_tasks(g, tl);
  const auto& by_gpu = scan.compute_by_gpu;
  // The pipeline phase ends with the last backward pass anywhere.
  m.pipeline_time_s = scan.pipeline_end_s;

  // Per GPU: compute time by category, and the gaps between compute tasks attributed to what they waited for.
  const Attribution attribution(g, tl);
  std::vector<Breakdown> per_gpu(static_cast<std::size_t>(g.gpus));
  std::vector<double> last_kernel_end(static_cast<std::size_t>(g.gpus), 0.0);
  const std::unordered_map<std::size_t, double> host_waits(tl.host_waits.begin(), tl.host_waits.end());
  for (int r : g.simulated) {
    Breakdown& b = per_gpu[static_cast<std::size_t>(r)];
    double& cursor = last_kernel_end[static_cast<std::size_t>(r)];
    for (TaskId t : by_gpu[static_cast<std::size_t>(r)]) {
      const auto waited = host_waits.find(t);
      const double host = waited == host_waits.end() ? 0.0 : waited->second;
      attribution.gap(t, cursor, tl.tasks[t].start_s - host, b);
      b.host += host;
      const double d = tl.tasks[t].end_s - tl.tasks[t].start_s; // a GPU runs one compute task at a time
      (g[t].category == Category::OPTIMIZER ? b.optimizer : b.compute) += d;
      cursor = std::max(cursor, tl.tasks[t].end_s);
    }
  }
  // After its last kernel a GPU may still take part in collectives (a parameter all-gather), then idles until the
  // step ends: the last transfer it sends or receives tells which.
  const auto& last_comm = scan.last_comm;
  const auto& last_comm_category = scan.last_comm_category;
  // Offload: from the host's update starting (its first sub-group's, or the swap from NVMe before it, once the GPU's
  // kernels are done) to the updated parameters' arrival or the last swap out.
  std::vector<std::pair<double, double>> host_update(static_cast<std::size_t>(g.gpus), {0.0, 0.0});
  auto widen = [&](TaskId t) {
    auto& span = host_update[static_cast<std::size_t>(g[t].rank)];
    span.first = span.second > 0 ? std::min(span.first, tl.tasks[t].start_s) : tl.tasks[t].start_s;
    span.second = std::max(span.second, tl.tasks[t].end_s);
  };
  if (scan.host_work) {
    for (TaskId t = 0; t < g.size(); ++t)
      if (g[t].kind == TaskKind::HOST_COMPUTE)
        widen(t);
    for (TaskId t = 0; t < g.size(); ++t)
      if (g[t].kind == TaskKind::HOST_COPY && workload::is_nvme(g[t].peer) &&
          host_update[static_cast<std::size_t>(g[t].rank)].second > 0 &&
          tl.tasks[t].start_s >= last_kernel_end[static_cast<std::size_t>(g[t].rank)])
        widen(t);
    for (TaskId t = 0; t < g.size(); ++t) { // and the parameters copied back after it
      auto& span = host_update[static_cast<std::size_t>(std::max(g[t].rank, 0))];
      if (g[t].kind == TaskKind::HOST_COPY && g[t].peer == workload::copy_from_host && span.second > 0 &&
          tl.tasks[t].start_s >= span.second)
        span.second = std::max(span.second, tl.tasks[t].end_s);
    }
  }
  for (int r : g.simulated) {
    Breakdown& b = per_gpu[static_cast<std::size_t>(r)];
    const double busy_until = last_kernel_end[static_cast<std::size_t>(r)];
    const auto [update_start, update_end] = host_update[static_cast<std::size_t>(r)];
    const double comm_until =
        std::max(busy_until, std::min(std::max(last_comm[static_cast<std::size_t>(r)], update_end), m.step_time_s));
    const double offload = std::max(0.0, std::min(update_end, comm_until) - std::max(update_start, busy_until));
    b.offload_exposed += offload;
    const double trailing = comm_until - busy_until - offload;
    if (last_comm_category[static_cast<std::size_t>(r)] == Category::PP)
      b.pp_exposed += trailing;
    else if (last_comm_category[static_cast<std::size_t>(r)] == Category::TP)
      b.tp_exposed += trailing;
    else if (last_comm_category[static_cast<std::size_t>(r)] == Category::EP)
      b.ep_exposed += trailing;
    else if (last_comm_category[static_cast<std::size_t>(r)] == Category::CP)
      b.cp_exposed += trailing;
    else
      b.dp_exposed += trailing;
    b.bubble += m.step_time_s - comm_until;
  }
  const auto simulated = static_cast<double>(g.simulated.size());
  for (int r : g.simulated) {
    const Breakdown& b = per_gpu[static_cast<std::size_t>(r)];
    m.breakdown.compute += b.compute / simulated;
    m.breakdown.tp_exposed += b.tp_exposed / simulated;
    m.breakdown.pp_exposed += b.pp_exposed / simulated;
    m.breakdown.dp_exposed += b.dp_exposed / simulated;
    m.breakdown.ep_exposed += b.ep_exposed / simulated;
    m.breakdown.cp_exposed += b.cp_exposed / simulated;
    m.breakdown.bubble += b.bubble / simulated;
    m.breakdown.optimizer += b.optimizer / simulated;
    m.breakdown.host += b.host / simulated;
    m.breakdown.offload_exposed += b.offload_exposed / simulated;
  }

  // Communication in flight per GPU and kind: collectives from their first flow's issue to their last flow's end.
  {
    const auto& collective_span = scan.collective_span;
    std::map<std::pair<int, Category>, std::vector<std::pair<double, double>>> intervals;
    // A collective's span once per sender (a repeat would change nothing: the spans are merged below), and a rank's
    // flows of one collective are built one after another.
    std::vector<std::uint32_t> last_collective(static_cast<std::size_t>(g.gpus), workload::no_task);
    for (TaskId t = 0; t < g.size(); ++t) {
      const auto& task = g[t];
      if (task.kind != TaskKind::TRANSFER)
        continue;
      if (task.collective == workload::no_task)
        intervals[{task.rank, task.category}].emplace_back(tl.tasks[t].start_s, tl.tasks[t].end_s);
      else if (std::exchange(last_collective[static_cast<std::size_t>(task.rank)], task.collective) != task.collective)
        intervals[{task.rank, task.category}].push_back(collective_span[task.collective]);
    }
    for (auto& [key, list] : intervals) {
      std::sort(list.begin(), list.end());
      double total = 0;
      double from = list.front().first;
      double to = list.front().second;
      for (const auto& [a, b] : list) {
        if (a > to) {
          total += to - from;
          from = a;
        }
        to = std::max(to, b);
      }
      total += to - from;
      const double share = total / static_cast<double>(g.simulated.size());
      if (key.second == Category::TP)
        m.comm.tp += share;
      else if (key.second == Category::PP)
        m.comm.pp += share;
      else if (key.second == Category::EP)
        m.comm.ep += share;
      else if (key.second == Category::CP)
        m.comm.cp += share;
      else
        m.comm.dp += share;
    }
  }

  std::tie(m.layer_forward_s, m.layer_backward_s) =
      layer_times(g, tl, by_gpu[static_cast<std::size_t>(plan::rank_of(p, {0, 0, 0}))]);

  // Bubble per stage: the idle fraction of the pipeline phase on the stage's first GPU, counting its passes'
  // compute and their blocking tensor- and expert-parallel collectives as busy.
  for (int stage = 0; stage < p.pp; ++stage) {
    StageMetrics st;
    st.stage = stage;
    st.rank = plan::rank_of(p, {0, 0, stage});
    st.breakdown = per_gpu[static_cast<std::size_t>(st.rank)];
    double busy = 0;
    double cursor = 0;
    for (TaskId t : by_gpu[static_cast<std::size_t>(st.rank)]) {
      if (g[t].category == Category::OPTIMIZER)
        continue;
      Breakdown gap;
      attribution.gap(t, cursor, std::min(tl.tasks[t].start_s, m.pipeline_time_s), gap);
      busy += gap.tp_exposed + gap.ep_exposed + gap.cp_exposed + std::min(tl.tasks[t].end_s, m.pipeline_time_s) -
              std::min(tl.tasks[t].start_s, m.pipeline_time_s);
      cursor = tl.tasks[t].end_s;
    }
    st.pipeline_busy_s = busy;
    // Busy time summed task by task can exceed the phase by a rounding error: a share is never below zero.
    st.bubble = m.pipeline_time_s > 0 ? std::clamp(1.0 - busy / m.pipeline_time_s, 0.0, 1.0) : 0.0;
    m.bubble_mean += st.bubble / p.pp;
    m.per_stage.push_back(st);
  }

  // Links: traffic and utilisation per class (folded, the replay gives every link what its class's link carried).
  const auto& graph = cluster.graph;
  std::map<std::string, std::vector<BusyLink>> candidates;
  std::map<std::string, double> capacity;
  for (auto [e, end] = boost::edges(graph); e != end; ++e) {
    const auto& l = graph[*e];
    const std::string cls = class_name(l.cls);
    const double bytes = tl.link_bytes_forward[l.id] + tl.link_bytes_backward[l.id];
    auto& c = m.links[cls];
    ++c.links;
    c.bytes += bytes;
    capacity[cls] += 2.0 * l.bandwidth;
    if (bytes > 0)
      candidates[cls].push_back({cluster.link_name(*e), bytes, bytes / (2.0 * l.bandwidth * m.step_time_s)});
  }
  for (auto& [cls, c] : m.links) {
    c.avg_util = c.bytes / (capacity[cls] * m.step_time_s);
    auto& list = candidates[cls];
    std::sort(list.begin(), list.end(), [](const BusyLink& a, const BusyLink& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.name < b.name;
    });
    if (list.size() > 3)
      list.resize(3);
    c.busiest = list;
  }
  // Peak utilisation: the busiest instant of the tracked links, as SimGrid shared their bandwidth.
  std::vector<const topology::Link*> by_id(boost::num_edges(graph));
  for (auto [e, end] = boost::edges(graph); e != end; ++e)
    by_id[graph[*e].id] = &graph[*e];
  std::map<std::string, int> tracked; // link directions per class
  const double bin_s = m.step_time_s / utilization_bins;
  for (const auto& u : tl.usage) {
    const auto* l = by_id[u.link];
    auto& c = m.links[class_name(l->cls)];
    c.peak_util = std::max(c.peak_util.value_or(0.0), u.peak / l->bandwidth);
    // The rate is piecewise constant between changes: each piece adds its share to the slices it overlaps.
    c.utilization.resize(utilization_bins, 0.0);
    ++tracked[class_name(l->cls)];
    const auto& changes = *u.changes;
    for (std::size_t i = 0; i < changes.size() && bin_s > 0; ++i) {
      const double from = changes[i].first;
      const double to = i + 1 < changes.size() ? changes[i + 1].first : m.step_time_s;
      const double util = changes[i].second / l->bandwidth;
      for (int b = std::max(0, static_cast<int>(from / bin_s)); b < utilization_bins && b * bin_s < to; ++b) {
        const double overlap = std::min(to, (b + 1) * bin_s) - std::max(from, b * bin_s);
        if (overlap > 0)
          c.utilization[static_cast<std::size_t>(b)] += util * overlap / bin_s;
      }
    }
  }
  for (auto& [cls, c] : m.links)
    for (double& u : c.utilization)
      u /= tracked[cls];
  return m;
}

} // namespace sim::report
