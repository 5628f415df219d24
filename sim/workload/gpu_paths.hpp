// What NCCL's model sees of the path between two GPUs of a cluster (the kind of its slowest hop, its narrowest link),
// worked out once per pair.
#pragma once

#include "topology/cluster_graph.hpp"

#include <cstdint>
#include <unordered_map>

namespace sim::workload {

enum class Hop { NVLINK, PCIE, NETWORK };

struct PathInfo {
  Hop hop = Hop::NETWORK;
  double bandwidth = 0;     // achievable, of the narrowest link
  bool direct = false;      // one NVLink-class link of its own (a mesh), no switch between
  bool through_cpu = false; // crosses a CPU (NCCL's PHB/SYS): its GPU and NIC are not under one PCIe switch
};

// The paths between the GPUs of one cluster, each routed on first use and remembered.
class GpuPaths {
 public:
  explicit GpuPaths(const topology::ClusterGraph& g) : g_(g) {}

  const PathInfo& path(int a, int b);
  const topology::ClusterGraph& graph() const { return g_; }

 private:
  const topology::ClusterGraph& g_;
  std::unordered_map<std::uint64_t, PathInfo> paths_;
};

} // namespace sim::workload
