// The lowering of each of NCCL's algorithms into flows, once NCCL's model has picked it (Lowering::collective): the
// model's numbers in, the flows of one phase out.
#pragma once

#include "workload/collectives.hpp"
#include "workload/nccl_model.hpp"

#include <optional>
#include <vector>

namespace sim::workload {

// ring_lowering.cpp: one ring over `ranks` at the protocol NCCL's model picks for it (`net`: how the whole collective
// meets the network), the direct exchange on a full mesh, and the one or the other for a part inside one node.
CollectivePhase lower_ring(GpuPaths& paths, CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                           const NetworkUse& net = {});
CollectivePhase lower_direct(GpuPaths& paths, const std::vector<int>& ranks, double bytes);
CollectivePhase lower_ring_or_direct(GpuPaths& paths, CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                     const NetworkUse& net = {});

// hierarchical_lowering.cpp: phases run as one pipeline, flows on the rails' ring edges between nodes, and the
// hierarchical collective: inside each node, across the nodes per local rank (on rings, or on the tree `tree`),
// inside each node.
CollectivePhase pipelined(const std::vector<CollectivePhase>& phases);
void add_rail_flows(const GroupByNode& by_node, double bytes, double latency, CollectivePhase& phase);
CollectivePhase lower_hierarchical(GpuPaths& paths, CollectiveKind kind, const GroupByNode& by_node, double bytes,
                                   const NetworkUse& net, const std::optional<TreePlan>& tree);

// tree_lowering.cpp: the double binary tree across the nodes of one rail, and across nodes of one GPU each.
CollectivePhase tree_phase(const std::vector<int>& rail, double shard, const TreePlan& plan);
CollectivePhase lower_tree(const GroupByNode& by_node, double bytes, const TreePlan& plan);

// nvls_lowering.cpp: NVLink SHARP inside one node, and NVLS-Tree across nodes.
CollectivePhase lower_nvls(GpuPaths& paths, const std::vector<int>& ranks, double bytes);
CollectivePhase lower_nvls_tree(GpuPaths& paths, const GroupByNode& by_node, double bytes, const NvlsTreePlan& plan);

// collnet_lowering.cpp: the all-reduce on the switches (SHARP).
CollectivePhase lower_collnet(GpuPaths& paths, const GroupByNode& by_node, double bytes);

} // namespace sim::workload
