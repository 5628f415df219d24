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
// NCCL's model is in nccl_model.hpp, its choice of algorithm in algorithm_choice.hpp, each algorithm's lowering in
// algorithm_lowerings.hpp.
#pragma once

#include "topology/cluster_graph.hpp"
#include "workload/gpu_paths.hpp"
#include "workload/layer_program.hpp"
#include "workload/nccl_model.hpp"

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

// Lowers collectives and sends on one cluster, remembering what it learnt about each GPU pair's path.
class Lowering {
 public:
  explicit Lowering(const topology::ClusterGraph& g) : paths_(g) {}

  // `ranks` in ring order (GPU indices); `bytes` is the whole buffer. NCCL's model picks the algorithm
  // (choose_algorithm), whose lowering makes the flows.
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

  using Hop = workload::Hop;
  using PathInfo = workload::PathInfo;
  const PathInfo& path(int a, int b) { return paths_.path(a, b); }

 private:
  GpuPaths paths_;
};

// Convenience for one-off use (tests, tools).
std::vector<CollectivePhase> lower_collective(CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                              const topology::ClusterGraph& g, CollectiveAlgorithm algorithm);

} // namespace sim::workload
