// Reading the `plan` of a scenario and checking it against its model and cluster.
#pragma once

#include "model/model_spec.hpp"
#include "plan/parallel_plan.hpp"
#include "topology/cluster_spec.hpp"

#include <optional>
#include <vector>

namespace sim::plan {

// Reads the plan object. `gpus`, when known (topology pins its nodes, or the scenario says how many GPUs), lets
// `dp` default to gpus / (tp * pp); otherwise dp defaults to 1.
ParallelPlan read_plan(const core::Node& node, const model::ModelSpec& model, std::optional<int> gpus);

// Cross-file checks: GPU count, divisibility of layers / heads / FFN / batch by the plan, schedule constraints,
// precision supported by the GPU. Throws core::InfeasiblePlan naming the plan key; returns warnings (e.g. a TP
// group spanning nodes).
std::vector<core::Warning> check_plan(const ParallelPlan& plan, const core::Node& node, const model::ModelSpec& model,
                                      const topology::ClusterSpec& cluster, int gpus);

// The GPU that runs each rank is the rank itself; the rank's coordinate along each dimension follows rank_order.
struct RankCoords {
  int tp = 0;
  int dp = 0;
  int pp = 0;
};
RankCoords coords_of(const ParallelPlan& plan, int rank);
int rank_of(const ParallelPlan& plan, RankCoords c);

// The parallel groups a GPU belongs to. TP, DP (CP inside it) and CP follow rank_order. The experts lay a stage's
// GPUs, taken in the attention's tp-then-dp order, out again as etp x ep x edp, innermost first (Megatron-core's
// expert rank order).
enum class GroupDim { TP, DP, CP, EP, ETP, EDP };
// The GPUs that differ from `gpu` in `dim`'s coordinate only, in that coordinate's order (`gpu` among them).
std::vector<int> group_of(const ParallelPlan& plan, GroupDim dim, int gpu);

} // namespace sim::plan
