// From a model, a plan and a cluster to the task graph of one training step, GPU by GPU: the schedule's
// passes expanded into per-layer compute and tensor-parallel collectives, pipeline sends between stages,
// data-parallel gradient buckets overlapped with the backward pass, ZeRO gathers, and the optimizer step.
#pragma once

#include "model/model_spec.hpp"
#include "plan/parallel_plan.hpp"
#include "topology/cluster_graph.hpp"
#include "workload/task_graph.hpp"

#include <string>

namespace sim::workload {

struct BuildOptions {
  // Simulate one GPU of each class of GPUs that the cluster's and the plan's symmetries exchange (workload/fold):
  // exact, and far fewer tasks.
  bool fold = true;
};

TaskGraph build_task_graph(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                           const topology::ClusterSpec& cluster, const topology::ClusterGraph& graph,
                           const BuildOptions& options = {});

// Why this plan's graph does not fold (empty when it does), from folded graphs alone: no symmetry of the cluster, or a
// collective whose groups are not symmetric (a group spread unevenly over nodes). Never builds the unfolded graph.
std::string fold_blocker(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                         const topology::ClusterSpec& cluster, const topology::ClusterGraph& graph);

} // namespace sim::workload
