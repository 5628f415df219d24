// A lower bound on a step's time without simulating it: the kernel time of the busiest GPU, as if it never waited
// for a pipeline transfer or a collective other than an all-to-all, plus what it must wait for the pipeline to fill
// and drain (the stages before it, one micro-batch each way). Where a pass stops for its all-to-alls (MoE tokens, CP
// heads) it counts the least time they can take on the cluster's links. A sweep skips layouts whose bound cannot
// beat what it has.
#pragma once

#include "hardware/gpu_spec.hpp"
#include "model/model_spec.hpp"
#include "plan/parallel_plan.hpp"
#include "topology/cluster_graph.hpp"

namespace sim::workload {

double compute_lower_bound_s(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                             const hardware::GpuSpec& gpu, const topology::ClusterGraph& graph);

} // namespace sim::workload
