#include "workload/algorithm_choice.hpp"

#include <utility>

namespace sim::workload {

using plan::CollectiveAlgorithm;

// In NCCL's order of preference, each where it applies: across nodes under AUTO, an all-reduce on the switches
// (SHARP), else on NVLS-Tree where the model prefers it; the double binary tree across three nodes or more where the
// model prefers it to the ring (or the plan asks for it), alone with one GPU per node; then, for a group that does not
// run hierarchically, NVLS inside one node, the direct exchange on a full mesh, the ring.
AlgorithmChoice choose_algorithm(GpuPaths& paths, CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                 CollectiveAlgorithm setting)
{
  AlgorithmChoice choice;
  if (kind == CollectiveKind::ALL_TO_ALL) {
    choice.algorithm = Algorithm::ALL_TO_ALL;
    return choice;
  }
  choice.by_node = group_by_node(ranks, paths.graph().gpus_per_node);
  const GroupByNode& by_node = choice.by_node;
  const std::size_t per_node = by_node.begin()->second.size();
  bool uniform = true;
  for (const auto& [node, members] : by_node)
    uniform = uniform && members.size() == per_node;
  const bool spans_nodes = by_node.size() > 1 && per_node > 1;
  const bool may_tree = setting == CollectiveAlgorithm::AUTO || setting == CollectiveAlgorithm::TREE;
  const bool hierarchical = uniform && spans_nodes && (may_tree || setting == CollectiveAlgorithm::HIERARCHICAL);
  choice.net = network_use(paths, by_node);
  auto chosen = [&choice](Algorithm algorithm) {
    choice.algorithm = algorithm;
    return std::move(choice);
  };
  if (kind == CollectiveKind::ALL_REDUCE && uniform && by_node.size() > 1 && setting == CollectiveAlgorithm::AUTO) {
    if (paths.graph().sharp)
      return chosen(Algorithm::COLLNET);
    if (auto nvls_tree = nvls_tree_plan(paths, by_node, choice.net, bytes)) {
      choice.nvls_tree = *nvls_tree;
      return chosen(Algorithm::NVLS_TREE);
    }
  }
  std::optional<TreePlan> tree;
  if (kind == CollectiveKind::ALL_REDUCE && uniform && by_node.size() >= tree_fewest_nodes && may_tree)
    tree = tree_plan(paths, by_node, choice.net, bytes, TreeOptions{.forced = setting == CollectiveAlgorithm::TREE});
  if (tree)
    choice.tree = *tree;
  if (tree && per_node == 1)
    return chosen(Algorithm::TREE);
  if (!hierarchical) {
    if (kind == CollectiveKind::ALL_REDUCE && setting != CollectiveAlgorithm::RING && nvls_pays(paths, ranks, bytes))
      return chosen(Algorithm::NVLS);
    if (full_mesh(paths, ranks))
      return chosen(Algorithm::DIRECT);
    return chosen(Algorithm::RING);
  }
  return chosen(tree ? Algorithm::HIERARCHICAL_TREE : Algorithm::HIERARCHICAL_RING);
}

} // namespace sim::workload
