// The chain of tasks that set a step's length, read back from its replay: from the step's end, each task's
// dependency that finished last, down to a task that waited for nothing. Where a GPU or a link slows the step (a
// straggler), its tasks are on it.
#pragma once

#include "engine/timeline.hpp"
#include "topology/cluster_graph.hpp"
#include "workload/task_graph.hpp"

#include <map>
#include <vector>

namespace sim::report {

struct CriticalPath {
  double compute_s = 0;  // kernels on the path
  double transfer_s = 0; // flows on the path, their latency included
  double host_s = 0;     // the hosts' work on the path: copies to and from host memory or NVMe, CPU updates
  std::map<workload::Category, double> transfer_by_category;
  struct Gpu {
    int gpu = 0;
    int stage = 0;
    double compute_s = 0;
  };
  std::vector<Gpu> gpus;               // every GPU with kernels on the path, most time first (then by index)
  std::vector<workload::TaskId> chain; // from the step's end back
};

CriticalPath critical_path(const workload::TaskGraph& g, const engine::Timeline& timeline);

// The time the path spends in a straggler's kernels, in the flows its slow NVLink carries inside its node, or in
// those its slow NICs (or a switch's slow uplink) carry to or from other nodes (leaf groups, pods).
double time_on_path(const CriticalPath& path, const workload::TaskGraph& g, const engine::Timeline& timeline,
                    const topology::ClusterGraph& cluster, const topology::Straggler& straggler);

} // namespace sim::report
