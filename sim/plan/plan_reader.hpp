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

} // namespace sim::plan
