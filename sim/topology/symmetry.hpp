// Symmetries of a cluster: permutations of its GPUs that extend to an automorphism of the whole graph (every device
// onto one of its kind, every link onto one of the same class, bandwidth, latency and efficiency, every GPU onto one
// that computes as fast). A simulation may fold GPUs that such permutations exchange (workload/fold).
#pragma once

#include "topology/cluster_graph.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace sim::topology {

// A direction of a link: 2 * id from its `from` end to its `to` end, 2 * id + 1 back.
inline std::uint32_t directed(std::size_t link_id, bool forward)
{
  return static_cast<std::uint32_t>(2 * link_id + (forward ? 0 : 1));
}

// The permutation of link directions (topology::directed) that `gpu_perm` (GPU i goes to gpu_perm[i]) induces, if it
// extends to an automorphism of the cluster; nothing if it does not. Unless the network is blocking
// (ClusterGraph::blocking), a node's leaf does not count and the links between switches are left where they are. Unless
// something goes through host memory
// (`host_traffic`: offload; or GPUs without peer-to-peer), a permutation that does not extend over the host's side
// of the PCIe tree may leave it out: each GPU's and NIC's link to its PCIe switch goes onto its image's, each GPU's
// NIC onto its image's, the rest stays, and the routes must then still map onto routes (a GPU reaching its NIC or
// another GPU through a CPU socket keeps its place).
std::optional<std::vector<std::uint32_t>> link_permutation(const ClusterGraph& g, const ClusterSpec& spec,
                                                           const std::vector<int>& gpu_perm, bool host_traffic);

} // namespace sim::topology
