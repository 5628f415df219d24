// Replays a task graph on the SimGrid platform: compute tasks run on their GPU's stream, transfers wait their latency
// and then share links max-min fairly with everything else in flight, syncs join. Records when every task ran and
// the bytes each link carried.
#pragma once

#include "topology/cluster_graph.hpp"
#include "workload/task_graph.hpp"

#include <functional>
#include <stdexcept>
#include <vector>

namespace sim::engine {

// A GPU's compute slows while its own collectives take SMs and HBM bandwidth; its speed is quantised to
// 1/speed_levels of full speed.
inline constexpr int speed_levels = 256;

struct TaskTiming {
  double start_s = -1; // compute: kernel start; transfer: issue (its flow starts latency_s later); sync: when reached
  double end_s = -1;
};

// Instantaneous use of one direction of a link, as SimGrid's bandwidth sharing set it.
struct LinkUsage {
  std::size_t link = 0;                           // graph link id
  bool forward = true;                            // from -> to
  double peak = 0;                                // bytes/s
  std::vector<std::pair<double, double>> changes; // (time, bytes/s from then on)
};

struct Timeline {
  std::vector<TaskTiming> tasks;          // by task id
  std::vector<double> link_bytes_forward; // per graph link id, from the link's `from` end to its `to` end
  std::vector<double> link_bytes_backward;
  // Usage over time of the links of each stage's first GPU (its NVLink, PCIe and NIC links) and of the network's
  // switch-to-switch links: every link a simulated GPU uses when the graph is folded.
  std::vector<LinkUsage> usage;
  double step_time_s = 0;
};

// The simulation could not finish (a dependency cycle, or a task that never completed).
class SimulationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How far a replay has come: tasks finished of the graph's, and the simulated clock.
struct ReplayProgress {
  std::size_t done = 0;
  std::size_t total = 0;
  double clock_s = 0;
};
using ProgressFn = std::function<void(const ReplayProgress&)>;

// One simulation per process (SimGrid allows one engine per process). `progress`, if given, hears every 65,536
// finished tasks.
Timeline replay(const workload::TaskGraph& tasks, const topology::ClusterGraph& cluster,
                const ProgressFn& progress = {});

} // namespace sim::engine
