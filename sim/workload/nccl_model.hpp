// NCCL's cost model (src/graph/tuning.cc, NVIDIA/nccl): its tuning tables and protocols, how a collective meets the
// network, and its plans of a ring, a tree, NVLS, NVLS-Tree and CollNet, by which it picks algorithm and protocol.
#pragma once

#include "workload/gpu_paths.hpp"
#include "workload/layer_program.hpp"

#include <cstddef>
#include <map>
#include <optional>
#include <vector>

namespace sim::workload {

// A group's GPUs per node (by node index), in group order.
using GroupByNode = std::map<int, std::vector<int>>;
GroupByNode group_by_node(const std::vector<int>& ranks, int gpus_per_node);

// NCCL's protocols: LL (8-byte lines, half data), LL128 (128-byte lines, 120 of data) and Simple.
enum class Protocol { LL, LL128, SIMPLE };

// Per-rank bytes a ring of n ranks sends for a buffer of `bytes`: 2(n-1)/n (all-reduce) or (n-1)/n.
double ring_bytes_per_rank(CollectiveKind kind, int n, double bytes);

// The rows of NCCL's tuning tables (tuning.cc's compCapIndex), picked by the communicator's smallest CUDA compute
// capability: 10.0 and up Blackwell, 9.x Hopper, 8.x Ampere, the rest Volta (parts that are not NVIDIA's too).
enum class NcclGeneration { VOLTA, AMPERE, HOPPER, BLACKWELL };
NcclGeneration nccl_generation(double compute_capability);

// How the whole collective a ring belongs to meets the network, as NCCL sees its communicator: its GPUs per node,
// whether NCCL runs LL128 across the network for it (rings inside one node never cross it), its GPUs' row of NCCL's
// tuning tables, and whether its trees take NCCL's one-GPU pattern (each node's tree traffic in and out through one
// GPU and its NIC).
struct NetworkUse {
  double ppn = 1;
  bool ll128 = false;
  NcclGeneration generation = NcclGeneration::VOLTA;
  bool one_gpu_tree = false;
};
NetworkUse network_use(GpuPaths& paths, const GroupByNode& by_node);

// The tree across nodes is considered from three nodes on: on two, NCCL's tree sends each node's share across the
// network once (NVIDIA/nccl#946, sjeaugey: "2 nodes is a special case"), which is what the hierarchical ring already
// moves.
inline constexpr std::size_t tree_fewest_nodes = 3;

struct RingPlan {
  Protocol protocol = Protocol::LL; // NCCL's LL, LL128 or Simple
  double latency = 0;               // seconds, base and steps
  double time = 0;                  // seconds, latency and bytes, by NCCL's model
  double share = 1;                 // of the ring's bandwidth the protocol moves data at
};
RingPlan ring_plan(GpuPaths& paths, CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                   const NetworkUse& net);

// A direct reduce-scatter or all-gather on a full mesh (every rank sends its 1/n share to each other rank at once,
// one step), with the protocol NCCL's model finds fastest for it.
struct DirectPlan {
  Protocol protocol = Protocol::SIMPLE;
  double latency = 0; // seconds, the base and one NVLink step
  double share = 1;   // of the links' bandwidth the protocol moves data at
};
DirectPlan direct_plan(GpuPaths& paths, const std::vector<int>& ranks, double bytes);
// Whether every pair of `ranks`, all in one node, has an NVLink-class link of its own (AMD's Infinity Fabric).
bool full_mesh(GpuPaths& paths, const std::vector<int>& ranks);

struct TreePlan {
  Protocol protocol = Protocol::LL; // NCCL's LL, LL128 or Simple
  double latency = 0;               // seconds, across nodes
  double share = 1; // of the network bandwidth the tree moves data at, for the whole collective's buffer
};
struct AcrossNodes {
  double ring_time = 0; // seconds, by NCCL's model, the fastest protocol
  double tree_time = 0;
  double ring_simple_latency = 0; // seconds, the Simple protocol's
  double tree_simple_latency = 0;
  double tree_simple_share = 1; // the tree's share of the network bandwidth with the Simple protocol
  TreePlan tree;
};
double rail_bandwidth(GpuPaths& paths, const GroupByNode& by_node);
AcrossNodes across_nodes(GpuPaths& paths, const GroupByNode& by_node, const NetworkUse& net, double bytes, double bus);
struct TreeOptions {
  bool forced = false; // the tree whatever the model says (the plan asks for it)
};
std::optional<TreePlan> tree_plan(GpuPaths& paths, const GroupByNode& by_node, const NetworkUse& net, double bytes,
                                  const TreeOptions& options);

// NVLink SHARP inside one NVSwitch node: its latency, and whether NCCL's model finds it faster than the ring.
double nvls_latency_s();
bool nvls_pays(GpuPaths& paths, const std::vector<int>& ranks, double bytes);
// NCCL's NVLS-Tree across NVSwitch nodes, where its model finds it faster than the ring and the tree.
struct NvlsTreePlan {
  double latency = 0;       // seconds, NVLS inside the node and the tree's network hops
  double network_bytes = 0; // each GPU sends across the network: its share once on two nodes, twice on more
};
std::optional<NvlsTreePlan> nvls_tree_plan(GpuPaths& paths, const GroupByNode& by_node, const NetworkUse& net,
                                           double bytes);
// NCCL's CollNet Direct (SHARP) latency for nodes of `per_node` GPUs.
double collnet_latency_s(std::size_t per_node);
// A point-to-point send's latency: the Simple protocol's base and one step over the path's hop.
double send_latency_s(Hop hop);

} // namespace sim::workload
