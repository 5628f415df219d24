// How large a step's task graph will be, estimated from the plan before any of it is built: the builder's loops
// counted, not run. Lets the command line refuse a plan whose graph would not fit in memory, with the numbers.
#pragma once

#include "model/model_spec.hpp"
#include "plan/parallel_plan.hpp"
#include "topology/cluster_spec.hpp"
#include "workload/builder.hpp"

namespace sim::workload {

struct Fold;
struct LayerPrograms;

struct GraphSize {
  double tasks = 0;
  double bytes = 0; // the graph, its dependencies and the replay's state per task
  bool folded = false;
  int simulated_gpus = 0; // the GPUs that have tasks
};

// An estimate within a factor of about two (collectives are counted as hierarchical rings over their simulated
// members); for the graph build_task_graph makes with the same options.
GraphSize estimate_graph_size(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                              const topology::ClusterSpec& cluster, const BuildOptions& options);
// The same for a given fold (nullptr: unfolded) and the plan's layer programs, as the builder has them.
GraphSize estimate_graph_size(const model::ModelSpec& model, const plan::ParallelPlan& plan,
                              const topology::ClusterSpec& cluster, const Fold* fold, const LayerPrograms& programs);

} // namespace sim::workload
