#include "workload/collectives.hpp"

#include "model/routing.hpp"
#include "workload/algorithm_choice.hpp"
#include "workload/algorithm_lowerings.hpp"

#include <algorithm>
#include <optional>

namespace sim::workload {

std::vector<CollectivePhase> lower_collective(CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                              const topology::ClusterGraph& g, CollectiveAlgorithm algorithm)
{
  return Lowering(g).collective(kind, ranks, bytes, algorithm);
}

std::vector<CollectivePhase> Lowering::collective(CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                                  CollectiveAlgorithm algorithm)
{
  const AlgorithmChoice choice = choose_algorithm(paths_, kind, ranks, bytes, algorithm);
  switch (choice.algorithm) {
    case Algorithm::ALL_TO_ALL:
      return {all_to_all(ranks, bytes, {})};
    case Algorithm::RING:
      return {lower_ring(paths_, kind, ranks, bytes, choice.net)};
    case Algorithm::DIRECT:
      if (kind == CollectiveKind::ALL_REDUCE) // a reduce-scatter, then an all-gather
        return {lower_direct(paths_, ranks, bytes), lower_direct(paths_, ranks, bytes)};
      return {lower_direct(paths_, ranks, bytes)};
    case Algorithm::NVLS:
      return {lower_nvls(paths_, ranks, bytes)};
    case Algorithm::TREE:
      return {lower_tree(choice.by_node, bytes, choice.tree)};
    case Algorithm::HIERARCHICAL_RING:
      return {lower_hierarchical(paths_, kind, choice.by_node, bytes, choice.net, std::nullopt)};
    case Algorithm::HIERARCHICAL_TREE:
      return {lower_hierarchical(paths_, kind, choice.by_node, bytes, choice.net, choice.tree)};
    case Algorithm::NVLS_TREE:
      return {lower_nvls_tree(paths_, choice.by_node, bytes, choice.nvls_tree)};
    case Algorithm::COLLNET:
      return {lower_collnet(paths_, choice.by_node, bytes)};
  }
  return {};
}

CollectivePhase Lowering::all_to_all(const std::vector<int>& ranks, double bytes, const std::vector<int>& senders)
{
  CollectivePhase phase;
  const double share = bytes / static_cast<double>(ranks.size());
  for (int src : senders.empty() ? ranks : senders)
    for (int dst : ranks)
      if (dst != src)
        phase.push_back(send(src, dst, share));
  return phase;
}

CollectivePhase Lowering::deduplicated_all_to_all(const std::vector<int>& ranks, double copy_bytes,
                                                  const model::MoeSpec& routing, const std::vector<int>& senders)
{
  const int gpus_per_node = paths_.graph().gpus_per_node;
  const GroupByNode by_node = group_by_node(ranks, gpus_per_node);
  const auto nodes = static_cast<double>(by_node.size());
  const double held = static_cast<double>(routing.num_experts) / static_cast<double>(ranks.size());
  CollectivePhase phase;
  for (int src : senders.empty() ? ranks : senders) {
    const auto& own = by_node.at(src / gpus_per_node);
    const auto local = static_cast<std::size_t>(std::find(own.begin(), own.end(), src) - own.begin());
    const double to_node = copy_bytes * model::reach_probability(routing, held * static_cast<double>(own.size()));
    const double to_gpu = nodes * copy_bytes * model::reach_probability(routing, held);
    for (const auto& [node, members] : by_node) {
      if (&members == &own) {
        for (int dst : members)
          if (dst != src)
            phase.push_back(send(src, dst, to_gpu));
      } else {
        phase.push_back(send(src, members[local % members.size()], to_node));
      }
    }
  }
  return phase;
}

Flow Lowering::send(int src, int dst, double bytes)
{
  return Flow{src, dst, bytes, send_latency_s(paths_.path(src, dst).hop)};
}

} // namespace sim::workload
