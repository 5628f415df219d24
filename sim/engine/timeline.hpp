// What a replay measured: when every task ran, the bytes each link carried and how busy the measured links were over
// time. Plain data, so that reports read it without the replayer (engine/replay.hpp) or SimGrid.
#pragma once

#include "core/big_vector.hpp"

#include <cstddef>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

namespace sim::engine {

struct TaskTiming {
  double start_s = -1; // compute: kernel start; transfer: issue (its flow starts latency_s later); sync: when reached
  double end_s = -1;
};

// Instantaneous use of one direction of a link, as SimGrid's bandwidth sharing set it.
struct LinkUsage {
  // (time, bytes/s from then on); a deque, which grows by blocks without copying what it holds (a large step records
  // millions of changes: a vector doubling its way there writes twice the memory).
  using Changes = std::deque<std::pair<double, double>>;
  std::size_t link = 0; // graph link id
  bool forward = true;  // from -> to
  double peak = 0;      // bytes/s
  // Shared by the links that carried the same (folded: the links of one class, which the link standing for it
  // measured).
  std::shared_ptr<const Changes> changes;
};

struct Timeline {
  core::BigVector<TaskTiming> tasks; // by task id
  // The compute tasks whose GPU waited for its host to launch them, with how long (their start_s is after it).
  std::vector<std::pair<std::size_t, double>> host_waits;
  std::vector<double> link_bytes_forward; // per graph link id, from the link's `from` end to its `to` end
  std::vector<double> link_bytes_backward;
  // Usage over time of the links of each stage's first GPU (its NVLink, PCIe and NIC links) and of the network's
  // switch-to-switch links: every link a simulated GPU uses when the graph is folded.
  std::vector<LinkUsage> usage;
  double step_time_s = 0;
};

} // namespace sim::engine
