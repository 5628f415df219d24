// Internal to the task-graph builder (workload/builder.cpp and its rooms, workload/builder_rooms.hpp): the step being
// built (its inputs, the graph so far, each GPU's bookkeeping) and the primitives every room adds tasks with: compute
// steps, transfers, and collectives lowered into transfers (folded: as the simulated GPUs send them).
#pragma once

#include "memory/memory_model.hpp"
#include "model/model_spec.hpp"
#include "model/param_count.hpp"
#include "plan/parallel_plan.hpp"
#include "plan/schedule.hpp"
#include "topology/cluster_graph.hpp"
#include "topology/cluster_spec.hpp"
#include "workload/collectives.hpp"
#include "workload/fold.hpp"
#include "workload/layer_program.hpp"
#include "workload/task_graph.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace sim::workload {

// Where a task sits in the step, for reports.
struct Where {
  Category category = Category::FORWARD;
  int stage = -1;
  int chunk = -1;
  int microbatch = -1;
  int layer = -1;
};

// Thrown while building a folded graph that turns out not to be symmetric; the builder starts over unfolded.
struct NotFoldable {};

// Gradients are reduced per item: a transformer layer, or the embedding or output layer of a stage, or a
// multi-token-prediction module (beside the output layer).
inline constexpr int embedding_item = -1;
inline constexpr int head_item = -2;
constexpr int mtp_item(int module)
{
  return -3 - module;
}
constexpr bool is_mtp(int item)
{
  return item <= mtp_item(0);
}

struct CollectiveOptions {
  // A MoE all-to-all as DeepEP runs it: `bytes` is one copy of a rank's tokens.
  bool deduplicated = false;
};

class BuildState {
 public:
  using Dim = plan::GroupDim;

  BuildState(const model::ModelSpec& model_spec, const plan::ParallelPlan& parallel_plan,
             const topology::ClusterSpec& cluster_spec, const topology::ClusterGraph& cluster_graph, const Fold* fold);

  // --- the step's inputs ----------------------------------------------------------------------------------------
  const model::ModelSpec& m;
  const plan::ParallelPlan& p;
  const topology::ClusterSpec& cluster;
  const topology::ClusterGraph& graph;
  Lowering lowering;
  const std::vector<LayerPrograms> programs; // per kind of GPU (topology::gpu_kind)
  const model::ParamCount counts;
  const bool folding; // one GPU simulated per class of interchangeable GPUs (workload/fold)
  const CoordinateFold tp_fold;
  const CoordinateFold dp_fold;

  // --- the graph so far, and each GPU's bookkeeping -------------------------------------------------------------
  TaskGraph g;
  std::vector<int> kind_of_gpu;          // per GPU (topology::gpu_kind)
  std::vector<std::vector<TaskId>> tail; // per GPU: what its next compute waits for
  std::vector<TaskId> reduce_tail;       // per GPU: the last gradient reduction on its data-parallel stream
  std::vector<TaskId> gather_tail;       // per GPU: the last ZeRO-3 parameter gather
  std::vector<TaskId> offload_tail;      // per GPU: the last copy to host memory (a copy engine each way)
  std::vector<TaskId> fetch_tail;        // per GPU: the last copy from host memory
  std::vector<std::unordered_map<int, TaskId>> grad_ready;   // per GPU: item -> its gradient is complete
  std::vector<std::unordered_map<int, TaskId>> params_ready; // per GPU: item -> its parameters are gathered
  double act_bytes = 0;                                      // a micro-batch's activations between stages, on one GPU
  double grad_bytes = 0;                                     // bytes per gradient element

  // --- ranks and groups -----------------------------------------------------------------------------------------
  int rank(int t, int d, int s) const { return plan::rank_of(p, plan::RankCoords{t, d, s}); }
  std::vector<int> tp_group(int d, int s) const { return plan::group_of(p, plan::GroupDim::TP, rank(0, d, s)); }
  // Every GPU of stage s, simulated or not.
  std::vector<int> stage_group(int s) const;
  // The simulated GPUs of stage s.
  std::vector<int> stage_gpus(int s) const;
  // The tensor- and data-parallel coordinates simulated.
  const std::vector<int>& dp_simulated() const { return dp_simulated_; }
  const std::vector<int>& tp_simulated() const { return tp_simulated_; }
  std::vector<int> simulated_of(const std::vector<int>& group) const;
  // The groups along `dim` of stage s that have simulated GPUs, in the order of their first simulated member: built
  // once per stage (collectives ask for them at every step).
  const std::vector<std::vector<int>>& groups(Dim dim, int s);

  // --- items: the transformer layers of a virtual stage, and its embedding and output layers --------------------
  // In the order a pass takes them: forward, or backward (reversed).
  std::vector<int> pass_items(int vs, plan::Pass pass) const;
  // Parameters of an item on one GPU (its tensor-parallel shard) that every data-parallel replica holds.
  double item_params(int item, int s) const;
  // Routed-expert parameters of an item on one GPU (reduced over its expert-data-parallel group).
  double item_expert_params(int item) const;
  // Of an item's parameters, those that train: all of them, or under LoRA a layer's adapters (none elsewhere).
  double item_trainable_params(int item, int s) const;
  // The bytes a ZeRO-3 gather of the item moves, its weights at `weight_bytes` each (16 bits, or FP8's one byte):
  // under LoRA a layer's frozen linear weights at the base's bytes (NF4 under QLoRA) and its adapters beside them.
  double item_gather_bytes(int item, int s, double weight_bytes) const;

  // --- what the plan's software does ----------------------------------------------------------------------------
  bool sharded_optimizer() const { return p.zero_stage >= 1 || p.distributed_optimizer; }
  bool deepspeed_engine() const { return p.software.pipeline_engine == plan::PipelineEngine::DEEPSPEED; }
  // The micro-batches that pass through each virtual stage: DualPipe's two paths carry half of them each.
  std::int64_t microbatches_through() const;

  // --- tasks ----------------------------------------------------------------------------------------------------
  TaskId add(Task t, const std::vector<TaskId>& deps);
  TaskId sync(Category category, const std::vector<TaskId>& deps, std::uint32_t collective = no_task);
  TaskId compute(int gpu, const Step& step, const Where& w);
  // A compute step on every GPU of stage s, made for its kind of part (its programs' rates and its kernel overhead).
  template <class Make>
  void on_stage(int s, const Where& w, Make make)
  {
    for (int r : stage_gpus(s)) {
      const int k = kind_of_gpu[static_cast<std::size_t>(r)];
      tail[static_cast<std::size_t>(r)] = {
          compute(r, make(programs[static_cast<std::size_t>(k)], topology::gpu_of_kind(cluster, k)), w)};
    }
  }
  TaskId transfer(const Flow& f, Category category, std::uint32_t collective, std::uint32_t label, const Where& w,
                  const std::vector<TaskId>& deps);
  // A copy of `bytes` (on the PCIe wire) between a GPU and its socket's memory (workload::copy_to_host or
  // copy_from_host), and work on the CPU of a GPU's process.
  TaskId host_copy(int gpu, double bytes, std::int32_t direction, const std::string& label, const Where& w,
                   const std::vector<TaskId>& deps);
  TaskId host_compute(int gpu, double seconds, const std::string& label, const Where& w,
                      const std::vector<TaskId>& deps);
  // A swap of `bytes` between a GPU's socket memory and its node's NVMe drives, striped over all of them (DeepSpeed's
  // asynchronous I/O over a RAID-0 array); returns the task that ends when every drive's part has.
  TaskId nvme_copy(int gpu, double bytes, bool read, const std::string& label, const Where& w,
                   const std::vector<TaskId>& deps);
  // A collective over `ranks` once every task in `deps` is done; returns the sync that marks its end.
  TaskId collective(CollectiveKind kind, const std::vector<int>& ranks, double bytes, Category category,
                    const std::string& label, const Where& w, const std::vector<TaskId>& deps,
                    const CollectiveOptions& options = {});
  // A collective's phases as lowered and, folded, as the simulated GPUs send them: the same collective over the same
  // group recurs every layer and micro-batch, so each is lowered and checked once.
  const std::vector<CollectivePhase>& phases(CollectiveKind kind, const std::vector<int>& ranks, double bytes);
  // What the next compute of each of `gpus` waits for.
  std::vector<TaskId> tails_of(const std::vector<int>& gpus) const;
  // One task standing for everything a GPU's next compute would wait for.
  TaskId join(int gpu);

 private:
  // Folded, one GPU stands for each class (workload/fold).
  int representative(int r) const { return representative_[static_cast<std::size_t>(r)]; }
  int shifted(int x, int y) const;
  double graph_latency_to_host(int gpu) const;
  bool simulated(int r) const { return representative(r) == r; }
  static std::vector<int> all(int n);
  TaskId lower(std::span<const CollectivePhase> phases, Category category, std::uint32_t id, std::uint32_t text,
               const Where& w, const std::vector<TaskId>& deps);
  const CollectivePhase& all_to_all(const std::vector<int>& ranks, double bytes, const CollectiveOptions& options);
  std::vector<Flow> folded(const std::vector<Flow>& phase);
  int route_class(int a, int b);
  std::int32_t endpoint(int sender, int target);

  const std::vector<int> tp_simulated_;
  const std::vector<int> dp_simulated_;
  std::vector<plan::RankCoords> coords_; // per GPU
  std::vector<int> representative_;      // per GPU: the simulated GPU of its class
  // Per collective (kind, or -1 and -2 for deduplicated and plain all-to-alls; group; bytes): its phases.
  std::map<std::tuple<int, std::vector<int>, double>, std::vector<CollectivePhase>> phases_;
  std::unordered_map<std::uint64_t, std::int32_t> endpoints_;
  bool private_links_ = false; // folded with every link weight 1
  std::unordered_map<std::uint64_t, int> route_classes_;
  std::map<std::vector<std::uint32_t>, int> route_ids_;
  std::vector<memory::RankParams> layer_params_;                     // per layer, on one GPU
  std::array<std::vector<std::vector<std::vector<int>>>, 8> groups_; // per Dim, per stage: groups()
  std::vector<int> first_layer_;                                     // per virtual stage
};

} // namespace sim::workload
