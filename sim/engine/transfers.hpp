// Point-to-point transfers replayed on the SimGrid platform: the simplest use of the engine, for measuring
// links and collectives. One simulation per process (SimGrid allows one engine per process).
#pragma once

#include "topology/cluster_graph.hpp"

#include <vector>

namespace sim::engine {

struct Transfer {
  int src_gpu = 0;
  int dst_gpu = 0;
  double bytes = 0;
  double start_s = 0;         // when the sender issues it
  double extra_latency_s = 0; // on top of the route's latency (protocol overheads)
};

struct TransferTiming {
  double start_s = 0; // issue time
  double end_s = 0;   // last byte received
};

struct TransferRun {
  std::vector<TransferTiming> transfers;
  std::vector<double> bytes_forward;  // per graph link id: bytes carried from the link's source to its target
  std::vector<double> bytes_backward; // and back
  double end_s = 0;
};

// Each transfer waits its route latency (plus extra_latency_s), then shares bandwidth max-min fairly with
// every other transfer on its links.
TransferRun simulate_transfers(const topology::ClusterGraph& g, const std::vector<Transfer>& transfers);

} // namespace sim::engine
