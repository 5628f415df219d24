// The SimGrid platform built from the cluster graph: one full zone per node (GPU hosts, every intra-node link,
// the NIC cables), star zones for leaf groups, pods and the top of the network. Links are split-duplex and
// carry no latency: the engine applies latencies itself, so that SimGrid's max-min sharing is exactly fair
// whatever the route length (see sim/engine/README.md).
#pragma once

#include "topology/cluster_graph.hpp"

#include <cstdint>
#include <simgrid/s4u.hpp>
#include <vector>

namespace sim::engine {

// GPU hosts are the ends of flows; they run no SimGrid executions (the replay times compute itself), so their speed is
// only a placeholder.
inline constexpr double host_speed = 1e9;

struct Platform {
  std::vector<simgrid::s4u::Host*> gpu; // by GPU index (folded: the simulated GPUs only)
  // Unfolded: by GPU index, the memory of its CPU socket (null where the node's host is not described).
  std::vector<simgrid::s4u::Host*> host_memory;
  // Unfolded: by GPU index, its node's NVMe drives (empty where it has none).
  std::vector<std::vector<simgrid::s4u::Host*>> nvme;
  std::vector<simgrid::s4u::SplitDuplexLink*> link; // by graph link id (UP: from -> to); folded: the classes' links
  // Folded: per endpoint (workload::TaskGraph::Endpoint), the two hosts its flows go between.
  std::vector<std::pair<simgrid::s4u::Host*, simgrid::s4u::Host*>> endpoint;
  // Folded: per endpoint, a link of its own that its flows cross and that never limits them (its usage is their
  // rate), or null.
  std::vector<simgrid::s4u::Link*> meter;
};

// Builds the platform in the current SimGrid engine (one per process), with a host for every GPU.
Platform build_platform(const topology::ClusterGraph& g);

// A folded simulation's platform: hosts for the simulated GPUs, and per endpoint two hosts whose route crosses
// `routes[i]`, link directions (topology::directed), each as many times as its weight, and a meter where `metered[i]`.
Platform build_folded_platform(const topology::ClusterGraph& g, const std::vector<int>& simulated,
                               const std::vector<std::vector<std::uint32_t>>& routes, const std::vector<bool>& metered);

// SimGrid settings for exact latency-free max-min sharing; must run before any zone is created.
void configure_network_model();

} // namespace sim::engine
