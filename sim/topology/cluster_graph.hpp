// The cluster as an explicit graph on Boost.Graph: GPUs, NVSwitches, PCIe switches, CPUs, NICs and network
// switches as vertices; full-duplex links with a class, a bandwidth per direction and a latency as edges.
// It is exactly what the engine simulates (the SimGrid platform mirrors it link for link).
#pragma once

#include "topology/cluster_spec.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sim::topology {

// CPU: between sockets; DRAM: a socket to its memory.
enum class LinkClass { NVLINK, PCIE, IB, ETHERNET, CPU, DRAM };

inline constexpr std::array<core::Choice<LinkClass>, 6> link_class_choices{{{"nvlink", LinkClass::NVLINK},
                                                                            {"pcie", LinkClass::PCIE},
                                                                            {"ib", LinkClass::IB},
                                                                            {"ethernet", LinkClass::ETHERNET},
                                                                            {"cpu", LinkClass::CPU},
                                                                            {"dram", LinkClass::DRAM}}};

// A link class as people read it in a report ("NVLink", "PCIe", "InfiniBand"; "Infinity Fabric" between AMD parts);
// its name in JSON (link_class_choices) stays the same whoever makes the GPUs. By that name too (an unknown one as it
// is).
std::string_view link_label(LinkClass c, hardware::Vendor vendor);
std::string link_label(std::string_view key, hardware::Vendor vendor);

enum class DeviceKind { GPU, NVSWITCH, PCIE_SWITCH, CPU, HOST_MEMORY, NVME, NIC, LEAF, SPINE, CORE };

struct Device {
  DeviceKind kind = DeviceKind::GPU;
  int node = -1; // -1 for network switches
  int index = 0; // within its node (GPU i, NIC k, ...) or its level (leaf group g, pod p)
};

struct Link {
  std::size_t id = 0; // 0 .. num_edges - 1, in creation order
  // The link's two ends as created: "forward" is from -> to. (An undirected Boost edge descriptor's source
  // depends on how it was reached, so it is not used for direction.)
  std::size_t from = 0;
  std::size_t to = 0;
  LinkClass cls = LinkClass::NVLINK;
  double bandwidth = 0;  // bytes/s per direction, nominal
  double latency = 0;    // seconds
  double efficiency = 1; // the share of `bandwidth` NCCL achieves (measured bus bandwidth / nominal)
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, Device, Link>;
using VertexId = Graph::vertex_descriptor;
using EdgeId = Graph::edge_descriptor;

struct ClusterGraph {
  Graph graph;
  int nodes = 0;
  int gpus_per_node = 0;
  std::vector<VertexId> gpu;              // by global GPU index (node * gpus_per_node + local)
  std::vector<std::vector<VertexId>> nic; // per node, per NIC
  std::vector<int> nic_of_gpu;            // local GPU -> the NIC it uses
  std::vector<VertexId> leaf;             // per leaf group (one switch for single_switch)
  std::vector<VertexId> spine;            // per pod (one for leaf_spine), empty with a single leaf group
  std::optional<VertexId> core;           // fat_tree with several pods
  int nodes_per_leaf = 1;
  int leaves_per_pod = 1;
  bool sharp = false; // the switches reduce in the network (SHARP)
  // Whether a flow's rate can depend on the links between switches: an oversubscribed leaf-spine or fat tree, or one
  // with a slow uplink (a straggler's). Above a non-blocking network's leaves every link carries at least what its
  // leaves' NIC cables can, so no flow is limited there and a node's place in the network does not matter.
  bool blocking = false;
  // The GPUs have no peer-to-peer (GeForce): what a GPU sends to another GPU of its node is written into host memory
  // and read from there (NCCL's SHM transport), in the memory of the receiver's socket; what it sends to or receives
  // from a NIC is staged in the memory of the NIC's socket (no GPUDirect RDMA).
  bool staged = false;
  std::vector<std::vector<VertexId>> host_memory; // per node, per CPU socket (with a PCIe tree and a host bandwidth)
  std::vector<std::vector<VertexId>> nvme;        // per node, per NVMe drive
  std::vector<int> socket_of_gpu;                 // local GPU -> its CPU socket (0 without a PCIe tree)
  std::vector<int> socket_of_nic;                 // local NIC -> its CPU socket
  // Per kind of GPU (topology::gpu_kind; 0: the topology's part): the share of its compute rate left to kernels while
  // its NCCL kernels run (the SMs they hold are taken), and the HBM bandwidth a memory-bound kernel streams at
  // (nominal x STREAM efficiency). With the HBM bytes NCCL moves per byte it sends or receives, what a collective
  // beside a kernel takes from it.
  // Also the bytes/s each GPU of an NVSwitch node sends (and receives) in an NVLink SHARP all-reduce, which moves
  // the whole buffer once each way (the switch reduces and multicasts); 0 without NVLS. And its CUDA compute
  // capability, by which NCCL picks its tuning (0: not an NVIDIA part).
  struct GpuRates {
    double compute_share_during_comm = 1.0;
    double memory_bandwidth = 0;
    double nvls_rate = 0;
    double compute_capability = 0;
  };
  std::vector<GpuRates> rates;
  std::vector<std::uint8_t> kind; // per GPU
  double nccl_memory_traffic = 0;

  int gpus() const { return nodes * gpus_per_node; }
  std::string device_name(VertexId v) const;
  std::string link_name(EdgeId e) const; // "n0.gpu3--n0.nic3"
};

ClusterGraph build_graph(const ClusterSpec& spec, int nodes);

// The links a transfer from one GPU to another crosses, in order (fewest hops; GPUs never forward traffic).
std::vector<EdgeId> route(const ClusterGraph& g, int src_gpu, int dst_gpu);
// From a GPU to its leaf switch: to its NIC, then the NIC's cable.
std::vector<EdgeId> route_to_network(const ClusterGraph& g, int gpu);
// From a GPU to the memory of its CPU socket (what it offloads there): up its PCIe tree, then the socket's DRAM link.
std::vector<EdgeId> route_to_host_memory(const ClusterGraph& g, int gpu);
// From the memory of a GPU's socket to NVMe drive `drive` of its node (what its process swaps there): the socket's
// DRAM link, the link between the sockets if the drive hangs on the other, the drive's link.
std::vector<EdgeId> route_to_nvme(const ClusterGraph& g, int gpu, int drive);
// The same from the memory of socket `socket` of node `node`.
std::vector<EdgeId> route_to_nvme(const ClusterGraph& g, int node, int socket, int drive);
// Whether `links`, walked from `from`, crosses each link from its source to its target (true) or back.
std::vector<bool> link_directions(const ClusterGraph& g, VertexId from, const std::vector<EdgeId>& links);
double route_latency(const ClusterGraph& g, const std::vector<EdgeId>& links);

// Connected, every GPU reaches every GPU, no link without bandwidth; throws core::InputError naming the topology.
void check_graph(const ClusterGraph& g, const std::string& topology_name);

// The largest flow from the first half of the nodes' GPUs to the second half (one node: its first half of GPUs
// to the other half), in bytes/s per direction.
double bisection_bandwidth(const ClusterGraph& g);

// GraphViz DOT, one cluster per node.
std::string to_dot(const ClusterGraph& g, const std::string& title);

} // namespace sim::topology

namespace sim::topology {

// What `simtrain inspect` shows about a cluster.
struct LinkClassSummary {
  int count = 0;                // links of this class in the whole cluster
  double per_gpu_bandwidth = 0; // bytes/s per direction: a GPU's own links, or its share of the node's (NICs, CPU)
  double total_bandwidth = 0;   // sum over the class's links, per direction
};

struct ClusterSummary {
  int gpus = 0;
  int nodes = 0;
  std::map<DeviceKind, int> devices;
  std::map<LinkClass, LinkClassSummary> links;
  double bisection_bandwidth = 0;
};

ClusterSummary summarize(const ClusterGraph& g);

} // namespace sim::topology
