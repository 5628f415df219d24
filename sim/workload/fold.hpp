// Folding: simulating one GPU of each class of GPUs that the cluster's and the plan's symmetries exchange. Along the
// tensor- and the data-parallel coordinate each fold has two symmetries, both extending to automorphisms of the cluster
// (topology/symmetry): a rotation by `stride` inside blocks of `block` consecutive coordinates (the members of a
// collective that share a node, which hierarchical collectives treat alike; a stride above 1 keeps groups of `stride`
// consecutive coordinates inside them together, as context-parallel pairs inside a node's data-parallel ring) and a
// shift by `step` (a multiple of `block`). The coordinates j x block + i, j < step / block, i < stride, stand for their
// classes, each of `multiplicity` GPUs. A simulated flow stands for its class of flows: it crosses one link of each
// class of links its route crosses, weighted by how many flows of its class share that very link, so that max-min
// sharing gives it exactly the rate every flow of its class gets.
#pragma once

#include "plan/parallel_plan.hpp"
#include "topology/cluster_graph.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace sim::workload {

// The symmetries of one coordinate of `size` values.
struct CoordinateFold {
  int size = 1;
  int block = 1;  // rotated inside blocks of this many
  int step = 1;   // shifted by this many (size: not shifted)
  int stride = 1; // rotated by this many (divides block)
  // The coordinates simulated, and the one standing for coordinate c.
  std::vector<int> simulated() const;
  int representative(int c) const { return c % step / block * block + c % block % stride; }
  // Coordinate c as the one standing for x's class sees it (moved as x is to reach it).
  int relative(int x, int c) const;
  int classes() const { return step / block * stride; }
  // The symmetries themselves: `order()` of them, element e rotating by e % turns() strides inside the blocks, then
  // shifting by e / turns() steps.
  int turns() const { return block / stride; }
  int order() const { return turns() * (size / step); }
  int moved(int c, int e) const
  {
    return (c / block * block + (c % block + e % turns() * stride) % block + e / turns() * step) % size;
  }
};

struct Fold {
  CoordinateFold tp;
  CoordinateFold dp;
  int multiplicity = 1; // GPUs per class
  // Per link direction (topology::directed): the direction that stands for its class, and the flows of one simulated
  // flow's class that cross it (0: not simulated, a link between the switches of a non-blocking network).
  std::vector<std::uint32_t> link_class;
  std::vector<std::uint32_t> link_weight;
};

// A flow's crossing of one link direction (topology::directed) of its route, as its class of flows makes it: the
// direction standing for that link's class, and the fold's weight there (0: not simulated).
struct Crossing {
  std::uint32_t link = 0;
  std::uint32_t cls = 0;
  std::uint32_t weight = 0;
};
std::vector<Crossing> crossings(const topology::ClusterGraph& g, const std::vector<std::uint32_t>& link_class,
                                const std::vector<std::uint32_t>& link_weight, int from_gpu, int to_gpu);

// Per flow (sender, target), the link directions between switches that the flows of its class cross where the fold
// does not simulate them (those of a non-blocking network: link_weight 0), each with how many of the class's flows
// cross it. The report's link traffic counts them; no flow's rate depends on them.
using SwitchCrossings = std::vector<std::pair<std::uint32_t, std::uint32_t>>;
std::vector<SwitchCrossings> unsimulated_crossings(const CoordinateFold& tp, const CoordinateFold& dp,
                                                   const plan::ParallelPlan& plan, const topology::ClusterGraph& g,
                                                   const std::vector<std::uint32_t>& link_weight,
                                                   const std::vector<std::pair<int, int>>& flows);

// The folds this plan's GPUs admit on this cluster, most GPUs per class first; each one's symmetries are
// automorphisms of the cluster (the builder still checks that every collective is symmetric under them).
class FoldSearch {
 public:
  FoldSearch(const plan::ParallelPlan& plan, const topology::ClusterSpec& spec, const topology::ClusterGraph& graph);
  // The next admissible fold, or nothing when none is left.
  std::optional<Fold> next();
  // Why no fold with more than one GPU per class applies, when next() found none.
  std::string why_not() const;

 private:
  // The link permutation of a rotation by `stride` inside blocks of `by` (block) or a shift by `by` (!block) of one
  // coordinate, if it is an automorphism of the cluster (cached).
  const std::optional<std::vector<std::uint32_t>>& symmetry(bool tp, bool block, int by, int stride = 1);
  Fold fold(const CoordinateFold& tp, const CoordinateFold& dp);

  const plan::ParallelPlan& plan_;
  const topology::ClusterSpec& spec_;
  const topology::ClusterGraph& graph_;
  std::vector<std::pair<CoordinateFold, CoordinateFold>> candidates_; // fewest classes first
  std::size_t at_ = 0;
  std::map<std::tuple<bool, bool, int, int>, std::optional<std::vector<std::uint32_t>>> cache_;
};

} // namespace sim::workload
