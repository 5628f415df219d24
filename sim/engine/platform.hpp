// The SimGrid platform built from the cluster graph: one full zone per node (GPU hosts, every intra-node link,
// the NIC cables), star zones for leaf groups, pods and the top of the network. Links are split-duplex and
// carry no latency: the engine applies latencies itself, so that SimGrid's max-min sharing is exactly fair
// whatever the route length (see the design notes in README).
#pragma once

#include "topology/cluster_graph.hpp"

#include <simgrid/s4u.hpp>
#include <vector>

namespace sim::engine {

// GPU hosts run a task's duration as flops at host_speed; their pstate k runs at (speed_levels - k) / speed_levels of
// it, so that the replay can slow a GPU's compute while its collectives take SMs and HBM bandwidth.
inline constexpr double host_speed = 1e9;
inline constexpr int speed_levels = 256;

struct Platform {
  std::vector<simgrid::s4u::Host*> gpu;             // by GPU index, then each GPU's mirror (topology::mirror)
  std::vector<simgrid::s4u::SplitDuplexLink*> link; // by graph link id (UP: from -> to)
};

// Builds the platform in the current SimGrid engine (one per process), with hosts for every GPU, or only for
// `active` ones (a folded simulation), which then also get a mirror host and loopback routes.
Platform build_platform(const topology::ClusterGraph& g, const std::vector<int>& active = {});

// SimGrid settings for exact latency-free max-min sharing; must run before any zone is created.
void configure_network_model();

} // namespace sim::engine
