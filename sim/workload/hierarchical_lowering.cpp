#include "workload/algorithm_lowerings.hpp"

#include <algorithm>

namespace sim::workload {

// The phases of a hierarchical collective run as one pipeline, as NCCL's rings do: its chunks go on inside the node
// while earlier ones cross the network, so every link is busy at once and the narrowest one sets the pace. One phase
// of all their flows, each after the sum of the phases' latencies (the pipeline's fill).
CollectivePhase pipelined(const std::vector<CollectivePhase>& phases)
{
  double latency = 0;
  for (const auto& phase : phases) {
    double longest = 0;
    for (const Flow& f : phase)
      longest = std::max(longest, f.latency_s);
    latency += longest;
  }
  CollectivePhase merged;
  for (const auto& phase : phases)
    for (Flow f : phase) {
      f.latency_s = latency;
      merged.push_back(f);
    }
  return merged;
}

// A flow of `bytes` from each GPU of `by_node` to the same local GPU of the next node (the rails' ring edges).
void add_rail_flows(const GroupByNode& by_node, double bytes, double latency, CollectivePhase& phase)
{
  for (auto it = by_node.begin(); it != by_node.end(); ++it) {
    const auto next = std::next(it) == by_node.end() ? by_node.begin() : std::next(it);
    for (std::size_t i = 0; i < it->second.size(); ++i)
      phase.push_back(Flow{it->second[i], next->second[i], bytes, latency});
  }
}

// A group with as many GPUs on each of several nodes: inside each node over the node's share, across nodes per local
// rank over 1/per_node of the buffer, on NCCL's tree where it runs one (`tree`), else on rings.
CollectivePhase lower_hierarchical(GpuPaths& paths, CollectiveKind kind, const GroupByNode& by_node, double bytes,
                                   const NetworkUse& net, const std::optional<TreePlan>& tree)
{
  const std::size_t per_node = by_node.begin()->second.size();
  std::vector<CollectivePhase> phases;
  auto intra = [&](CollectiveKind k, double buffer) {
    CollectivePhase phase;
    for (const auto& [node, members] : by_node)
      for (const Flow& f : lower_ring_or_direct(paths, k, members, buffer))
        phase.push_back(f);
    return phase;
  };
  // NCCL's ring is flat: each of its channels crosses the network once per node, so a node's NICs carry what one GPU
  // of a ring of all n GPUs sends, (n-1)/n of the buffer per pass, not the (nodes-1)/nodes of a ring of nodes. Only an
  // all-reduce on two nodes sends less: NCCL runs its tree there, each node's share once across (NVIDIA/nccl#946).
  const int nodes = static_cast<int>(by_node.size());
  const std::size_t ranks = per_node * by_node.size();
  const double flat_share = static_cast<double>(ranks - 1) / static_cast<double>(ranks);
  const double rail_share = static_cast<double>(nodes - 1) / nodes;
  auto inter = [&](CollectiveKind k, double buffer) {
    CollectivePhase phase;
    for (std::size_t i = 0; i < per_node; ++i) {
      std::vector<int> rail;
      for (const auto& [node, members] : by_node)
        rail.push_back(members[i]);
      for (Flow f : tree ? tree_phase(rail, buffer, *tree) : lower_ring(paths, k, rail, buffer, net)) {
        if (!tree && !(k == CollectiveKind::ALL_REDUCE && nodes == 2))
          f.bytes *= flat_share / rail_share;
        phase.push_back(f);
      }
    }
    return phase;
  };
  const double shard = bytes / static_cast<double>(per_node);
  switch (kind) {
    case CollectiveKind::ALL_REDUCE:
      phases = {intra(CollectiveKind::REDUCE_SCATTER, bytes), inter(CollectiveKind::ALL_REDUCE, shard),
                intra(CollectiveKind::ALL_GATHER, bytes)};
      break;
    case CollectiveKind::REDUCE_SCATTER:
      phases = {intra(CollectiveKind::REDUCE_SCATTER, bytes), inter(CollectiveKind::REDUCE_SCATTER, shard)};
      break;
    case CollectiveKind::ALL_GATHER:
      phases = {inter(CollectiveKind::ALL_GATHER, shard), intra(CollectiveKind::ALL_GATHER, bytes)};
      break;
    case CollectiveKind::ALL_TO_ALL:
      break;
  }
  return pipelined(phases);
}

} // namespace sim::workload
