// Which of NCCL's algorithms runs a collective, as NCCL's model (or the plan's collective_algorithm) picks it: one
// value per lowering, with the numbers of the model's plan that the lowering needs.
#pragma once

#include "plan/parallel_plan.hpp"
#include "workload/nccl_model.hpp"

#include <vector>

namespace sim::workload {

enum class Algorithm {
  ALL_TO_ALL,        // NCCL's grouped sends and receives, all at once
  RING,              // one ring over the whole group
  DIRECT,            // on a full mesh, every rank to every other at once (RCCL); an all-reduce as a reduce-scatter,
                     // then an all-gather
  NVLS,              // all-reduce by NVLink SHARP inside one NVSwitch node
  TREE,              // all-reduce by NCCL's double binary tree across nodes, one GPU on each
  HIERARCHICAL_RING, // inside each node, a ring per local rank across the nodes, inside each node: one pipeline
  HIERARCHICAL_TREE, // all-reduce: the same with the double binary tree across the nodes
  NVLS_TREE,         // all-reduce by NCCL's NVLS-Tree: NVLS inside each NVSwitch node, a tree between them
  COLLNET,           // all-reduce by the switches (InfiniBand SHARP), as NCCL's CollNet Direct runs it
};

struct AlgorithmChoice {
  Algorithm algorithm = Algorithm::RING;
  GroupByNode by_node;    // the group's GPUs per node (empty for ALL_TO_ALL)
  NetworkUse net;         // how the collective meets the network (not for ALL_TO_ALL)
  TreePlan tree;          // TREE, HIERARCHICAL_TREE: the tree across the nodes
  NvlsTreePlan nvls_tree; // NVLS_TREE
};

// NCCL's choice for a collective of `kind` over `ranks` (GPU indices, in ring order) of a buffer of `bytes`, under the
// plan's `setting`: AUTO takes what NCCL's model prefers, the others force their family where it applies.
AlgorithmChoice choose_algorithm(GpuPaths& paths, CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                 plan::CollectiveAlgorithm setting);

} // namespace sim::workload
