// What one simulated step measured: step time, throughput, MFU/HFU, the pipeline bubble per stage, a time
// breakdown per GPU, per-link-class traffic and utilisation, and memory. Computed from the task graph and its
// replayed timeline; no SimGrid here.
#pragma once

#include "engine/timeline.hpp"
#include "memory/memory_model.hpp"
#include "report/critical_path.hpp"
#include "scenario/scenario.hpp"
#include "workload/task_graph.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sim::report {

// Where a GPU's step went. Sums to the step time.
struct Breakdown {
  double compute = 0;    // forward, backward and recomputation kernels
  double tp_exposed = 0; // waiting for tensor-parallel collectives
  double pp_exposed = 0; // waiting while pipeline transfers were in flight
  double dp_exposed = 0; // waiting for data-parallel / ZeRO collectives
  double ep_exposed = 0; // waiting for a MoE layer's token dispatch and combine (expert-parallel all-to-all)
  double cp_exposed = 0; // waiting for context-parallel attention exchanges (ring KV passing or all-to-all)
  double bubble = 0;     // waiting for other stages, nothing in flight for this GPU
  double optimizer = 0;
  double host = 0; // waiting for the host to launch kernels (ready, the GPU free)
  // Waiting, after its last kernel, for what its host does with the offloaded optimizer: the CPU update and the
  // copy of the updated parameters back.
  double offload_exposed = 0;
};

// How long a GPU's communication of each kind was in flight (overlapped or not): the union of its collectives'
// and sends' intervals.
struct CommTime {
  double tp = 0;
  double pp = 0;
  double dp = 0;
  double ep = 0;
  double cp = 0;
};

struct StageMetrics {
  int stage = 0;
  int rank = 0;               // the GPU measured: tp 0, dp 0 of the stage
  double bubble = 0;          // idle fraction of the pipeline phase
  double pipeline_busy_s = 0; // its forward/backward compute and tensor-parallel time in that phase
  Breakdown breakdown;
};

struct BusyLink {
  std::string name;
  double bytes = 0;
  double avg_util = 0;
};

struct LinkClassMetrics {
  int links = 0;
  double bytes = 0;
  double avg_util = 0; // bytes / (both directions' capacity x step time), over the class's links
  // Busiest instant of the busiest tracked link, from each transfer's mean rate; none when no link of the class was
  // tracked (the replay follows the links of each stage's first GPU).
  std::optional<double> peak_util;
  std::vector<BusyLink> busiest;
  // Utilisation over the step in `utilization_bins` equal slices: the mean over the class's tracked links (both
  // directions) of the bandwidth SimGrid gave them; empty when none was tracked.
  std::vector<double> utilization;
};

inline constexpr int utilization_bins = 100;

struct Metrics {
  double step_time_s = 0;
  double pipeline_time_s = 0; // until the last backward pass ends
  double tokens_per_s = 0;
  double model_flops = 0;    // per step, without recomputation (MoE: the experts each token goes to)
  double hardware_flops = 0; // with recomputation
  double tflops_per_gpu = 0; // model FLOPs
  double mfu = 0;
  double hfu = 0;
  std::vector<StageMetrics> per_stage;
  // One transformer layer on stage 0's first GPU, its tensor-parallel collectives included: the median time from
  // one layer's start to the next's within a pass (a lone layer: its own span). Backward includes recomputation.
  double layer_forward_s = 0;
  double layer_backward_s = 0;
  double bubble_mean = 0;
  double bubble_theory = 0;   // (p-1)/(m+p-1), divided by v when interleaved; DualPipe's from its README
  std::string bubble_formula; // bubble_theory's formula, as the report prints it
  Breakdown breakdown;        // mean over GPUs
  CommTime comm;              // mean over GPUs
  std::map<std::string, LinkClassMetrics> links;
  memory::MemoryEstimate memory;
  CriticalPath critical_path;
  std::vector<double> straggler_path_s; // per straggler of the cluster: its time on the critical path
};

Metrics compute_metrics(const scenario::Scenario& s, const workload::TaskGraph& g,
                        const topology::ClusterGraph& cluster, const engine::Timeline& timeline);

} // namespace sim::report
