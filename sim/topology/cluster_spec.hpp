// A cluster as the user describes it (topology/v1): the GPU, the node's NVLink fabric, PCIe tree and NICs, and
// the network between nodes. The explicit graph of devices and links is built from this by cluster_graph.
#pragma once

#include "core/input_error.hpp"
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
  bool given = false;   // `bandwidth` set in the file (a cap for every node); else the part's NVLink, node by node
  bool operator==(const NvSwitchFabric&) const = default;
};

// Direct NVLink lanes between pairs of GPUs (DGX-1's hybrid cube mesh).
struct NvLinkMeshFabric {
  struct Link {
    int a = 0;
    int b = 0;
    int lanes = 1;
    bool operator==(const Link&) const = default;
  };
  double lane_bandwidth = 0; // bytes/s per lane per direction
  double latency = 0;        // GPU to GPU over a direct link
  std::vector<Link> links;

  // Every pair of the node's `gpus` on a link of its own, all with the same lanes (MI300X's Infinity Fabric): any
  // GPU can stand for any other.
  bool uniform_full_mesh(int gpus) const;
  bool operator==(const NvLinkMeshFabric&) const = default;
};

using NvLinkFabric = std::variant<NvSwitchFabric, NvLinkMeshFabric>;

// GPUs and NICs under PCIe switches under CPU sockets, the sockets joined by an inter-socket link.
struct PcieTree {
  struct Switch {
    int socket = 0;
    std::vector<int> gpus;
    std::vector<int> nics;
    bool operator==(const Switch&) const = default;
  };
  double link_bandwidth = 0;         // device to its switch, per direction
  double uplink_bandwidth = 0;       // switch to its CPU root complex, per direction
  double inter_socket_bandwidth = 0; // per direction; 0 with one socket
  double latency = 0;                // GPU to GPU under one switch
  int sockets = 1;
  std::vector<Switch> switches;
  bool operator==(const PcieTree&) const = default;
};

enum class NicKind { INFINIBAND, ETHERNET };

inline constexpr std::array<core::Choice<NicKind>, 2> nic_kind_choices{
    {{"infiniband", NicKind::INFINIBAND}, {"ethernet", NicKind::ETHERNET}}};

struct NicSpec {
  NicKind kind = NicKind::INFINIBAND;
  int count = 0;
  double bandwidth = 0;               // bytes/s per direction
  double latency = 0;                 // GPU to GPU across the network, switch hops aside
  double efficiency = 1;              // achievable / nominal bandwidth through NCCL
  std::vector<std::vector<int>> gpus; // GPUs that use each NIC
  bool operator==(const NicSpec&) const = default;
};

// The node's host: its DRAM. GPUs whose driver allows no peer-to-peer (GeForce) stage what they send to another GPU
// or a NIC in it, so each socket's memory is a device of the PCIe tree.
// Its NVMe drives (what ZeRO-Infinity offloads to), each on a root port of a CPU socket: DeepSpeed's asynchronous I/O
// stripes each process's swap files over all of them (a RAID-0 array, as DeepNVMe runs it).
struct NvmeSpec {
  int drives = 0;
  double capacity_bytes = 0;  // each
  double read_bandwidth = 0;  // each, sequential, bytes/s
  double write_bandwidth = 0; // each, sequential, bytes/s
  std::vector<int> sockets;   // per drive
  bool operator==(const NvmeSpec&) const = default;
};

struct HostSpec {
  double memory_bytes = 0;     // DRAM of the whole node (0: not given)
  double memory_bandwidth = 0; // per CPU socket, reads and writes together (0: not given)
  NvmeSpec nvme;
  bool operator==(const HostSpec&) const = default;
};

struct NodeSpec {
  int gpus = 0;
  int collective_sms = 0; // SMs a running NCCL kernel holds (its CTAs do not share SMs with compute kernels)
  // HBM bytes an NCCL kernel moves per byte it puts on a link: it stores what it receives and reads it back, and
  // reads or writes the user buffers (NVIDIA/nccl#1428, maintainer: "at least 2x ... can be 3x"; central 2.5).
  double nccl_memory_traffic = 2.5;
  std::optional<NvLinkFabric> nvlink;
  std::optional<PcieTree> pcie;
  NicSpec nics;
  HostSpec host;
  double power_w = 0;              // the whole node at full load (0: its GPUs' TDP alone)
  std::optional<double> price_usd; // the whole node, GPUs included (else the GPUs' list price)
  bool operator==(const NodeSpec&) const = default;
};

enum class NetworkKind { SINGLE_SWITCH, LEAF_SPINE, FAT_TREE };

inline constexpr std::array<core::Choice<NetworkKind>, 3> network_kind_choices{
    {{"single_switch", NetworkKind::SINGLE_SWITCH},
     {"leaf_spine", NetworkKind::LEAF_SPINE},
     {"fat_tree", NetworkKind::FAT_TREE}}};

struct NetworkSpec {
  NetworkKind kind = NetworkKind::FAT_TREE;
  bool rail_optimized = true;       // NIC k of every node of a leaf group on that group's rail-k leaf
  int nodes_per_leaf = 32;          // nodes in one leaf group (a scalable unit when rail-optimised)
  double oversubscription = 1;      // leaf-group downlink : uplink bandwidth
  int leaves_per_pod = 0;           // fat_tree: leaf groups per pod (0: one pod)
  double core_oversubscription = 1; // fat_tree: pod downlink : uplink bandwidth
  double latency = 0;               // per switch hop above the leaf
  bool sharp = false;               // InfiniBand switches reduce in the network (SHARP): NCCL's CollNet all-reduce
  bool operator==(const NetworkSpec&) const = default;
};

// A part of the cluster running below its rating (a scenario's `stragglers`): one GPU or all of a node's at a share
// of their kernels' speed or of their NVLink bandwidth, one NIC or all of a node's at a share of their bandwidth, or
// the cables from a leaf group up to its spine (or from a pod's spine up to the core) at a share of their bandwidth.
// GPUs or their routes then differ, so a step is simulated GPU by GPU or by finer classes.
struct Straggler {
  int node = -1;        // -1 only for a switch's uplink
  int gpu = -1;         // local index; -1: every GPU of the node
  int nic = -1;         // local index; -1: every NIC of the node
  int leaf = -1;        // leaf group whose uplink is slow
  int spine = -1;       // pod whose spine's uplink to the core is slow
  double compute = 1;   // share of the kernels' speed left
  double nvlink = 1;    // share of the GPUs' NVLink bandwidth left (each link at its slower end's)
  double bandwidth = 1; // share of the NICs' (or the uplink's) bandwidth left

  bool on_switch() const { return leaf >= 0 || spine >= 0; }
  bool operator==(const Straggler&) const = default;
};

// Nodes whose GPUs are of another kind than the topology's (a scenario's `node_gpus`, a cluster grown with a newer
// part): the same node design (GPUs per node, NVLink or PCIe fabric, NICs), the other part's kernels, memory, price
// and power; on an NVSwitch, its own NVLink bandwidth (an export-capped H800 beside H100s).
struct NodeGpus {
  int first = 0; // node indices, inclusive
  int last = 0;
  hardware::GpuSpec gpu;
  bool operator==(const NodeGpus&) const = default;
};

struct ClusterSpec {
  std::string name;
  std::string description;
  std::vector<std::string> sources;
  hardware::GpuSpec gpu;
  NodeSpec node;
  NetworkSpec network;
  std::optional<int> nodes;            // pinned node count; otherwise it follows from the plan's GPU count
  std::vector<Straggler> stragglers;   // set by the scenario
  std::vector<NodeGpus> node_gpus;     // set by the scenario
  std::vector<core::Warning> warnings; // what the file leaves to a default worth knowing
  bool operator==(const ClusterSpec&) const = default;
};

// Reads a topology/v1 object whose `node.gpu` has already been resolved to a gpu/v1 object.
ClusterSpec read_cluster(const core::Node& node);

// Reads a scenario's `stragglers` array (objects with `node`, optional `gpu` or `nic`, and `compute`, `nvlink` or
// `bandwidth`, shares 0-1) for this cluster of `nodes` nodes.
std::vector<Straggler> read_stragglers(const core::Node& list, const ClusterSpec& cluster, int nodes);
// The most ranges a `node_gpus` list may hold (each resolves its part's preset and kernel tables).
inline constexpr std::size_t max_node_gpus = 256;
// Reads a scenario's `node_gpus` array (objects with `nodes`, a [first, last] pair of node indices, and `gpu`, already
// resolved to a gpu/v1 object) for this cluster of `nodes` nodes: ranges that do not overlap, of parts that fit the
// topology's node design.
std::vector<NodeGpus> read_node_gpus(const core::Node& list, const ClusterSpec& cluster, int nodes);
// The kind of a GPU (global index): 0 for the topology's, k for node_gpus[k - 1]'s.
int gpu_kind(const ClusterSpec& cluster, int gpu);
// The part of that kind.
const hardware::GpuSpec& gpu_of_kind(const ClusterSpec& cluster, int kind);
// Every kind of part in the cluster, the topology's first.
std::vector<const hardware::GpuSpec*> gpu_kinds(const ClusterSpec& cluster);
// The mean of the GPUs' peak FLOP/s at a precision (0 where a part has none), over `gpus` GPUs from the first node.
double mean_peak(const ClusterSpec& cluster, hardware::Precision precision, int gpus);
// Whether a straggler is on this GPU (global index): its node, and its GPU or all of them.
bool on_gpu(const Straggler& s, int gpu, int gpus_per_node);
// The share of its kernels' speed a GPU (global index) has left: 1 unless a straggler slows it.
double compute_share(const ClusterSpec& cluster, int gpu);
// The share of its NVLink bandwidth a GPU (global index) has left.
double nvlink_share(const ClusterSpec& cluster, int gpu);
// The share of its bandwidth a node's NIC has left.
double nic_share(const ClusterSpec& cluster, int node, int nic);
// The share of their bandwidth the uplinks of a leaf group (to its spine) or of a pod's spine (to the core) have left.
double leaf_uplink_share(const ClusterSpec& cluster, int leaf_group);
double spine_uplink_share(const ClusterSpec& cluster, int pod);

// How `nodes` nodes sit in the network: leaf groups, leaf groups per pod (one spine each), pods (a core above
// several).
struct NetworkShape {
  int nodes_per_leaf = 1;
  int groups = 1;
  int leaves_per_pod = 1;
  int pods = 1;
};
NetworkShape network_shape(const NetworkSpec& net, int nodes);

// Switch tiers the network of `nodes` nodes climbs: 0 for one node (no network), 1 under one leaf group, 2 with
// spines, 3 with a core above several pods.
int network_tiers(const NetworkSpec& net, int nodes);

// PCIe x16 bandwidth per direction of a generation: 8/16/32/64 GT/s x 16 lanes x 128/130 encoding.
double pcie_x16_bandwidth(int generation);

} // namespace sim::topology
