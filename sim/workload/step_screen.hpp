// A layout's step screened without simulating it, from the layer programs, kernel timings and collective lowerings the
// simulation uses, in two numbers:
// - a lower bound: the busiest GPU's kernels, and where its passes run one at a time (1F1B, GPipe, interleaved) each
//   collective a pass stops for and what one beside its compute takes beyond it, each at least its flows' latency
//   and their bytes over the capacity of the link they load most; plus what the GPU must wait for the pipeline to
//   fill and drain (the stages before it, one micro-batch each way, and the sends between them). It never exceeds the
//   simulated step: a sweep skips layouts whose bound cannot beat what it has.
// - an estimate: the bound, DeepEP's exchanges priced too, DualPipe's bubble, each stage's kernels at its slowest
//   GPU's speed (a straggler's); ZeRO-3's parameter gathers beyond the pass they prefetch for; the gradient buckets'
//   reduction beyond the last micro-batch's backward pass (at least the last bucket; all when not overlapped), the
//   sharded optimizer's parameter gather, the optimizer and an offloaded optimizer's CPU update. What it leaves out
//   (flows of other groups on the same links, a GPU's kernels slowed by its own traffic, the host, offload's copies)
//   makes it read short; sweep rows show it beside the simulated step.
#pragma once

#include "hardware/gpu_spec.hpp"
#include "memory/memory_model.hpp"
#include "model/model_spec.hpp"
#include "plan/parallel_plan.hpp"
#include "topology/cluster_graph.hpp"
#include "topology/cluster_spec.hpp"

#include <memory>

namespace sim::workload {

struct StepScreen {
  double bound_s = 0;
  double estimate_s = 0;
};

// What screening learns of one cluster graph (routes, collectives priced), kept for the layouts screened on it. It
// refers to the graph and the cluster it was built from (whose hosts update an offloaded optimizer), which must
// outlive it.
class ScreenCache {
 public:
  ScreenCache(const topology::ClusterGraph& graph, const topology::ClusterSpec& cluster);
  ScreenCache(const ScreenCache&) = delete;
  ScreenCache& operator=(const ScreenCache&) = delete;
  ~ScreenCache();
  struct State;

 private:
  friend StepScreen screen_step(const model::ModelSpec&, const plan::ParallelPlan&, const hardware::GpuSpec&,
                                ScreenCache&, const memory::MemoryEstimate*);
  std::unique_ptr<State> state_;
};

// `memory`: the plan's memory estimate where the caller has it (its parameters per stage are what counts), else
// estimated here.
StepScreen screen_step(const model::ModelSpec& model, const plan::ParallelPlan& plan, const hardware::GpuSpec& gpu,
                       ScreenCache& cache, const memory::MemoryEstimate* memory = nullptr);
StepScreen screen_step(const model::ModelSpec& model, const plan::ParallelPlan& plan, const hardware::GpuSpec& gpu,
                       const topology::ClusterGraph& graph, const topology::ClusterSpec& cluster);

} // namespace sim::workload
