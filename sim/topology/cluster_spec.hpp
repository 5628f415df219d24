// A cluster as the user describes it (topology/v1): the GPU, the node's internal fabric and NICs, the network
// between nodes. Expansion into an explicit graph of links lives elsewhere; this is the description.
#pragma once

#include "hardware/gpu_spec.hpp"

#include <array>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace sim::topology {

// All GPUs of a node on NVSwitches: any pair talks at the per-GPU NVLink bandwidth.
struct NvSwitchFabric {
  double bandwidth = 0; // bytes/s per GPU per direction
  double latency = 0;   // seconds, GPU to GPU
};

// Direct NVLink lanes between pairs of GPUs (DGX-1's hybrid cube mesh).
struct NvLinkMeshFabric {
  struct Link {
    int a = 0;
    int b = 0;
    int lanes = 1;
  };
  double lane_bandwidth = 0; // bytes/s per lane per direction
  double latency = 0;
  std::vector<Link> links;
};

// GPUs under PCIe switches under CPU sockets, sockets joined by an inter-socket link; NICs hang off switches.
struct PcieFabric {
  struct Switch {
    int socket = 0;
    std::vector<int> gpus;
    std::vector<int> nics;
  };
  double link_bandwidth = 0;         // GPU or NIC to its switch, per direction
  double uplink_bandwidth = 0;       // switch to its CPU root complex, per direction
  double inter_socket_bandwidth = 0; // per direction
  double latency = 0;                // per PCIe hop
  std::vector<Switch> switches;
};

using IntraNodeFabric = std::variant<NvSwitchFabric, NvLinkMeshFabric, PcieFabric>;

struct NicSpec {
  int count = 0;
  double bandwidth = 0; // bytes/s per direction
  double latency = 0;
  std::vector<std::vector<int>> gpus; // GPUs that use each NIC
};

enum class FabricKind { SINGLE_SWITCH, LEAF_SPINE, FAT_TREE };

inline constexpr std::array<core::Choice<FabricKind>, 3> fabric_kind_choices{
    {{"single_switch", FabricKind::SINGLE_SWITCH},
     {"leaf_spine", FabricKind::LEAF_SPINE},
     {"fat_tree", FabricKind::FAT_TREE}}};

struct NetworkSpec {
  FabricKind kind = FabricKind::FAT_TREE;
  bool rail_optimized = true;  // NIC k of every node on leaf k (rail k)
  int nodes_per_leaf = 0;      // nodes under one leaf switch (per rail when rail-optimized)
  double oversubscription = 1; // leaf downlink / uplink bandwidth
  double link_bandwidth = 0;   // per switch-to-switch link, per direction
  double latency = 0;          // per switch hop
};

struct ClusterSpec {
  std::string name;
  std::string description;
  std::vector<std::string> sources;
  hardware::GpuSpec gpu;
  int gpus_per_node = 0;
  IntraNodeFabric intra;
  NicSpec nics;
  NetworkSpec network;
  std::optional<int> nodes; // pinned node count; otherwise it follows from the plan's GPU count
};

// Reads a topology/v1 object whose `node.gpu` has already been resolved to a gpu/v1 object.
ClusterSpec read_cluster(const core::Node& node);

} // namespace sim::topology
