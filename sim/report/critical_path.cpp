#include "report/critical_path.hpp"

#include <algorithm>
#include <cmath>

namespace sim::report {
namespace {

// Times closer than this are a tie: ends that symmetric GPUs reach together differ in the last bits with the order
// floating-point sums were taken in, and a tie is broken by the graph's order, not by that.
constexpr double tie_s = 1e-9;

} // namespace

using workload::TaskId;
using workload::TaskKind;

CriticalPath critical_path(const workload::TaskGraph& g, const engine::Timeline& tl)
{
  CriticalPath path;
  std::map<int, CriticalPath::Gpu> by_gpu;
  for (TaskId t = g.step_end; t != workload::no_task;) {
    const workload::Task& task = g[t];
    const double span = tl.tasks[t].end_s - tl.tasks[t].start_s;
    path.chain.push_back(t);
    if (task.kind == TaskKind::COMPUTE) {
      path.compute_s += span;
      auto& gpu = by_gpu[task.rank];
      gpu.gpu = task.rank;
      gpu.stage = task.stage;
      gpu.compute_s += span;
    } else if (task.kind == TaskKind::TRANSFER) {
      path.transfer_s += span;
      path.transfer_by_category[task.category] += span;
    } else if (task.kind == TaskKind::HOST_COPY || task.kind == TaskKind::HOST_COMPUTE) {
      path.host_s += span;
    }
    // The dependency that ended last held this task back (the first of equals, in the graph's order).
    TaskId last = workload::no_task;
    for (TaskId d : g.dependencies(t))
      if (last == workload::no_task || tl.tasks[d].end_s > tl.tasks[last].end_s + tie_s)
        last = d;
    t = last;
  }
  for (const auto& [gpu, time] : by_gpu)
    path.gpus.push_back(time);
  const auto ticks = [](double s) { return std::llround(s / tie_s); };
  std::stable_sort(path.gpus.begin(), path.gpus.end(),
                   [&ticks](const auto& a, const auto& b) { return ticks(a.compute_s) > ticks(b.compute_s); });
  return path;
}

double time_on_path(const CriticalPath& path, const workload::TaskGraph& g, const engine::Timeline& tl,
                    const topology::ClusterGraph& cluster, const topology::Straggler& straggler)
{
  const int per_node = cluster.gpus_per_node;
  const auto slowed_gpu = [&](int gpu) { return straggler.compute < 1 && topology::on_gpu(straggler, gpu, per_node); };
  const auto slowed_nic = [&](int gpu, int other) {
    return straggler.bandwidth < 1 && gpu / per_node == straggler.node && other / per_node != straggler.node &&
           (straggler.nic < 0 || straggler.nic == cluster.nic_of_gpu[static_cast<std::size_t>(gpu % per_node)]);
  };
  const auto slowed_nvlink = [&](int gpu, int other) {
    return straggler.nvlink < 1 && topology::on_gpu(straggler, gpu, per_node) && other / per_node == straggler.node;
  };
  // A flow leaves a leaf group (or a pod) through its uplink when its other end is outside.
  const int per_leaf = per_node * cluster.nodes_per_leaf;
  const int per_pod = per_leaf * cluster.leaves_per_pod;
  const auto slowed_uplink = [&](int gpu, int other) {
    return (straggler.leaf >= 0 && gpu / per_leaf == straggler.leaf && other / per_leaf != straggler.leaf) ||
           (straggler.spine >= 0 && gpu / per_pod == straggler.spine && other / per_pod != straggler.spine);
  };
  double s = 0;
  for (TaskId t : path.chain) {
    const workload::Task& task = g[t];
    const double span = tl.tasks[t].end_s - tl.tasks[t].start_s;
    if (task.kind == TaskKind::COMPUTE && slowed_gpu(task.rank))
      s += span;
    if (task.kind == TaskKind::TRANSFER) {
      const int peer = g.gpu_of(task.peer);
      if (slowed_nic(task.rank, peer) || slowed_nic(peer, task.rank) || slowed_nvlink(task.rank, peer) ||
          slowed_nvlink(peer, task.rank) || slowed_uplink(task.rank, peer) || slowed_uplink(peer, task.rank))
        s += span;
    }
  }
  return s;
}

} // namespace sim::report
