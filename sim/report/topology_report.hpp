// What `simtrain inspect` prints about a cluster: devices, links per class, per-GPU bandwidth, bisection.
#pragma once

#include "core/document.hpp"
#include "topology/cluster_graph.hpp"

#include <string>

namespace sim::report {

core::Json topology_json(const topology::ClusterSpec& spec, const topology::ClusterSummary& s);
std::string topology_text(const topology::ClusterSpec& spec, const topology::ClusterSummary& s);

} // namespace sim::report
