// Replays a task graph on the SimGrid platform: compute tasks run on their GPU's stream, transfers wait their latency
// and then share links max-min fairly with everything else in flight, syncs join. Records when every task ran and
// the bytes each link carried.
#pragma once

#include "engine/timeline.hpp"
#include "topology/cluster_graph.hpp"
#include "workload/task_graph.hpp"

#include <functional>
#include <stdexcept>

namespace sim::engine {

// A GPU's compute slows while its own collectives take SMs and HBM bandwidth; its speed is quantised to
// 1/speed_levels of full speed.
inline constexpr int speed_levels = 256;

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

struct ReplayOptions {
  // A flow alone on every link of its route gets, under max-min sharing, its bottleneck's bandwidth: it is timed in
  // closed form (one timer, no SimGrid activity) until another flow joins one of its links, when it goes into SimGrid
  // with the bytes it has left. False: every flow through SimGrid (slower, the same result).
  bool lone_flows = true;
};

// One simulation per process (SimGrid allows one engine per process). `progress`, if given, hears every 65,536
// finished tasks.
Timeline replay(const workload::TaskGraph& tasks, const topology::ClusterGraph& cluster,
                const ProgressFn& progress = {}, const ReplayOptions& options = {});

} // namespace sim::engine
