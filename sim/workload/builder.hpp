// From a model, a plan and a cluster to the task graph of one training step, GPU by GPU: the schedule's
// passes expanded into per-layer compute and tensor-parallel collectives, pipeline sends between stages,
// data-parallel gradient buckets overlapped with the backward pass, ZeRO gathers, and the optimizer step.
#pragma once

#include "model/model_spec.hpp"
#include "plan/parallel_plan.hpp"
#include "topology/cluster_graph.hpp"
#include "workload/task_graph.hpp"

namespace sim::workload {

TaskGraph build_task_graph(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                           const topology::ClusterSpec& cluster, const topology::ClusterGraph& graph);

} // namespace sim::workload
