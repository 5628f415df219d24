#include "workload/algorithm_lowerings.hpp"

namespace sim::workload {

// The tree across the nodes of `rail` (one GPU per node) for an all-reduce of `shard` bytes on each. Each node's NIC
// sends and receives twice its shard at the tree's share of its bandwidth (NCCL's model, `plan`), the
// busiest node of a double binary tree: interior in one tree (its share up to its parent and down to two children),
// a leaf in the other. Those bytes travel on the ring's edges between the nodes: the same load on every NIC, so every
// GPU of the rail sends what the others send and a folded cluster stays folded; the switch links they cross are the
// ring's, not the tree's.
CollectivePhase tree_phase(const std::vector<int>& rail, double shard, const TreePlan& plan)
{
  CollectivePhase phase;
  const std::size_t n = rail.size();
  for (std::size_t i = 0; i < n; ++i)
    phase.push_back(Flow{rail[i], rail[(i + 1) % n], 2.0 * shard / plan.share, plan.latency});
  return phase;
}

// With one GPU on each node, the tree is the whole collective: the whole buffer on the rail of the nodes' GPUs.
CollectivePhase lower_tree(const GroupByNode& by_node, double bytes, const TreePlan& plan)
{
  std::vector<int> rail;
  for (const auto& [node, members] : by_node)
    rail.push_back(members.front());
  return tree_phase(rail, bytes, plan);
}

} // namespace sim::workload
