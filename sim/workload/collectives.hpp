// Collectives lowered into point-to-point flows, as NCCL runs them. A ring is pipelined: every edge is busy at
// once, so one flow per edge carrying the whole per-rank volume, plus the ring's step latencies, times it exactly
// in the bandwidth regime with n flows instead of 2n(n-1). Groups that span nodes with several GPUs per node
// run hierarchically: reduce-scatter inside each node, a ring per local rank across nodes, all-gather inside
// each node. The protocol (LL, LL128, Simple) is the one NCCL's own cost model would pick. On a full mesh (AMD's
// Infinity Fabric: every pair of GPUs on a link of its own) reduce-scatters and all-gathers are direct, as RCCL
// runs them there: every rank sends its 1/n share to each other rank at once, over all its links. Inside one
// NVSwitch node whose GPU has NVLink SHARP, an all-reduce runs on the switch (NVLS) where NCCL's model prefers it,
// and across such nodes on NCCL's NVLS-Tree (NVLS inside the nodes, a tree between them) where it prefers that.
// Across three nodes or more an all-reduce takes NCCL's double binary tree where NCCL's model prefers it to the ring;
// on a network whose switches reduce (SHARP), every all-reduce across nodes runs on them (NCCL's CollNet).
#pragma once

#include "topology/cluster_graph.hpp"
#include "workload/layer_program.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

namespace sim::workload {

using plan::CollectiveAlgorithm;

struct Flow {
  int src = 0;
  int dst = 0;
  double bytes = 0;     // on the wire (protocol overhead included)
  double latency_s = 0; // the phase's latency: every flow of a phase starts after it
};

// Flows of one phase run together; a phase starts when the previous one has ended on every rank.
using CollectivePhase = std::vector<Flow>;

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

// Lowers collectives and sends on one cluster, remembering what it learnt about each GPU pair's path.
class Lowering {
 public:
  explicit Lowering(const topology::ClusterGraph& g) : g_(g) {}

  // `ranks` in ring order (GPU indices); `bytes` is the whole buffer.
  std::vector<CollectivePhase> collective(CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                          CollectiveAlgorithm algorithm);
  // A point-to-point send as NCCL's send/recv runs it (Simple protocol latency).
  Flow send(int src, int dst, double bytes);
  // An all-to-all as NCCL runs it (grouped sends and receives, all at once): each of `ranks` sends bytes / n to
  // every other; only the flows of `senders` (all ranks when empty) are made.
  CollectivePhase all_to_all(const std::vector<int>& ranks, double bytes, const std::vector<int>& senders);
  // A MoE token dispatch as DeepEP runs it, each token sent once per node and GPU it routes to (`copy_bytes`: one
  // copy of a sender's tokens): to every other node of the group, the token's share for that node (one copy per
  // token that needs it) to the GPU of the sender's local position there; to every other GPU of its own node, what
  // that GPU needs from the node's tokens and those forwarded from the other nodes, all at once (DeepEP pipelines
  // the forwarding with the sends). Only the flows of `senders` (all ranks when empty) are made.
  CollectivePhase deduplicated_all_to_all(const std::vector<int>& ranks, double copy_bytes,
                                          const model::MoeSpec& routing, const std::vector<int>& senders);

  enum class Hop { NVLINK, PCIE, NETWORK };
  struct PathInfo {
    Hop hop = Hop::NETWORK;
    double bandwidth = 0;     // achievable, of the narrowest link
    bool direct = false;      // one NVLink-class link of its own (a mesh), no switch between
    bool through_cpu = false; // crosses a CPU (NCCL's PHB/SYS): its GPU and NIC are not under one PCIe switch
  };
  const PathInfo& path(int a, int b);

 private:
  struct RingPlan {
    int protocol = 0;   // NCCL's LL, LL128 or Simple
    double latency = 0; // seconds, base and steps
    double time = 0;    // seconds, latency and bytes, by NCCL's model
    double share = 1;   // of the ring's bandwidth the protocol moves data at
  };
  NetworkUse network_use(const std::map<int, std::vector<int>>& by_node);
  RingPlan ring_plan(CollectiveKind kind, const std::vector<int>& ranks, double bytes, const NetworkUse& net);
  struct TreePlan {
    int protocol = 0;   // NCCL's LL, LL128 or Simple
    double latency = 0; // seconds, across nodes
    double share = 1;   // of the network bandwidth the tree moves data at, for the whole collective's buffer
  };
  struct AcrossNodes {
    double ring_time = 0; // seconds, by NCCL's model, the fastest protocol
    double tree_time = 0;
    double ring_simple_latency = 0; // seconds, the Simple protocol's
    double tree_simple_latency = 0;
    double tree_simple_share = 1; // the tree's share of the network bandwidth with the Simple protocol
    TreePlan tree;
  };
  double rail_bandwidth(const std::map<int, std::vector<int>>& by_node);
  void add_rail_flows(const std::map<int, std::vector<int>>& by_node, double bytes, double latency,
                      CollectivePhase& phase);
  AcrossNodes across_nodes(const std::map<int, std::vector<int>>& by_node, const NetworkUse& net, double bytes,
                           double bus);
  std::optional<TreePlan> tree_plan(const std::map<int, std::vector<int>>& by_node, const NetworkUse& net, double bytes,
                                    bool forced);
  std::optional<CollectivePhase> nvls_tree_all_reduce(const std::map<int, std::vector<int>>& by_node,
                                                      const NetworkUse& net, double bytes);
  void add_nvls_flows(const std::vector<int>& members, double bytes, double latency, CollectivePhase& phase);
  CollectivePhase tree_phase(const std::vector<int>& rail, double shard, const TreePlan& plan);
  CollectivePhase sharp_all_reduce(const std::map<int, std::vector<int>>& by_node, double bytes);
  std::optional<CollectivePhase> nvls_all_reduce(const std::vector<int>& ranks, double bytes);
  CollectivePhase ring(CollectiveKind kind, const std::vector<int>& ranks, double bytes, const NetworkUse& net = {});
  bool full_mesh(const std::vector<int>& ranks);
  CollectivePhase direct(const std::vector<int>& ranks, double bytes);
  CollectivePhase ring_or_direct(CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                 const NetworkUse& net = {})
  {
    return kind != CollectiveKind::ALL_REDUCE && full_mesh(ranks) ? direct(ranks, bytes)
                                                                  : ring(kind, ranks, bytes, net);
  }

  const topology::ClusterGraph& g_;
  std::unordered_map<std::uint64_t, PathInfo> paths_;
};

// Convenience for one-off use (tests, tools).
std::vector<CollectivePhase> lower_collective(CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                              const topology::ClusterGraph& g, CollectiveAlgorithm algorithm);

} // namespace sim::workload
