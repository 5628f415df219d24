// Internal to the task-graph builder: its rooms, each adding one part of a step's tasks to the state they share
// (workload/builder_state.hpp): the data-parallel gradient buckets and parameter gathers (workload/data_parallel.cpp),
// the optimizer step and the passes over parameters beside it (workload/optimizer_step.cpp), and the pipeline's passes
// and sends (workload/pipeline_passes.cpp). workload/builder.cpp runs them in the step's order.
#pragma once

#include "plan/schedule.hpp"
#include "workload/builder_state.hpp"

#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sim::workload {

struct BucketOptions {
  bool experts = false; // the routed experts' parameters (items without experts are left out)
};

class DataParallel {
 public:
  explicit DataParallel(BuildState& state) : b_(state), m_(state.m), p_(state.p) {}

  // ZeRO-3: all-gather an item's parameters before it runs, its dense ones over the shard group (the data-parallel
  // group unless sharding is hybrid) and its routed
  // experts' over the expert-data-parallel group; per simulated GPU, the syncs that end its gathers.
  using Gathered = std::unordered_map<int, std::vector<TaskId>>;
  Gathered gather_parameters(int s, int item, const Where& w);
  // Megatron-LM's --overlap-param-gather: the previous step's updated parameters arrive bucket by bucket, in forward
  // order, while the first forward pass runs; each item's first forward waits for its bucket.
  bool gathers_before_forward() const;
  void gather_updated_parameters(int s);
  // Folded, a fold that breaks a data-parallel group's collectives would show only at the first gradient reduction,
  // late in the step: every stage's reductions are lowered (and checked) before anything is built.
  void check_gradient_reductions();
  // Gradients in buckets of dp_bucket_size, in the order the backward pass produces them; each bucket is reduced
  // (all-reduce, or reduce-scatter when the optimizer is sharded; hybrid sharding then all-reduces each shard across
  // the shard groups) as soon as its items are done, one after the other on the data-parallel stream. `mb` < 0: once,
  // after the last micro-batch; else after micro-batch mb.
  void reduce_gradients(int s, int mb);
  // DualPipe's two copies of the model: GPU s and its mirror pp - 1 - s hold the same layers, so each pair sums its
  // gradients (an all-reduce of the pair, as deepseek-ai/DualPipe's example does) once the last micro-batch's are
  // done, before the data-parallel reduction.
  void reduce_copies();
  // Tied embeddings across the pipeline: the first and last stages all-reduce the embedding's gradient (DualPipe and
  // DualPipeV keep the output layer beside an embedding).
  void reduce_tied_embedding();

 private:
  using Dim = plan::GroupDim;
  std::vector<double> tensor_shares(int item) const;
  std::vector<int> gradient_order(int s) const;
  CollectiveKind gradient_reduction() const;
  Dim reduction_dim() const;
  std::vector<TaskId> reduce_tails(const std::vector<int>& gpus) const;
  // ZeRO-Offload: each simulated GPU of stage s copies the offloaded share of its `shard` of a bucket's gradients to
  // host memory once they are reduced (or done, without data parallelism), one copy after another.
  void offload_gradients(int s, const std::vector<int>& items, double shard, const std::string& label, const Where& w);
  std::vector<std::pair<std::vector<int>, double>> buckets(const std::vector<int>& order, int s,
                                                           const BucketOptions& options = {}) const;

  BuildState& b_;
  const model::ModelSpec& m_;
  const plan::ParallelPlan& p_;
};

struct AccumulateOptions {
  bool first = false; // the first micro-batch's gradients (autograd's accumulation starts with the second)
};

class OptimizerStep {
 public:
  OptimizerStep(BuildState& state, const DataParallel& dp) : b_(state), p_(state.p), dp_(dp) {}

  // Adam on each GPU's parameters (its shard of them with a sharded optimizer), after every gradient is reduced;
  // then the updated shards are all-gathered (distributed optimizer, ZeRO-1/2).
  void step(int s);
  // FP8: the first micro-batch's forward pass casts a transformer layer's weights, which later ones reuse.
  void cast_weights(int s, int item, const Where& w);
  // A micro-batch's weight gradients added to the accumulated ones, unless the GEMM accumulated them (fused) or this
  // is the first micro-batch of autograd's accumulation.
  void accumulate_gradients(int s, int item, const Where& w, const AccumulateOptions& options);

 private:
  using Dim = plan::GroupDim;
  void parameter_pass(int s, int item, const Where& w, const char* label, double ParameterPassTimes::*s_per_param);
  // GPU r's process updating `params` of its shard whose state ZeRO-Infinity keeps on NVMe; returns its end.
  TaskId swapped_update(int r, double params, const Where& w, const std::vector<TaskId>& deps);

  BuildState& b_;
  const plan::ParallelPlan& p_;
  const DataParallel& dp_;
};

struct PassOptions {
  bool send_output = true; // false: the output is not sent to the next stage (DualPipe posts its sends itself)
};

class PipelinePasses {
 public:
  PipelinePasses(BuildState& state, DataParallel& dp, OptimizerStep& optimizer);

  // Stage s's passes in its schedule's order, with their sends and receives.
  void run_stage(int s);

 private:
  using Dim = plan::GroupDim;
  using Posted = std::vector<std::pair<int, TaskId>>; // a GPU, and a task it waits for
  template <class Select>
  void run(Select select, int s, const Where& w);
  std::uint64_t input_key(plan::Pass pass, int d, int vs, int mb) const;
  TaskId input(plan::Pass pass, int d, int vs, int mb);
  void wait_input(int s, plan::Pass pass, int vs, const Where& w);
  void send(int s, plan::Pass pass, int vs, const Where& w, Posted* posted = nullptr);
  bool scatter_gather() const;
  bool p2p_sync() const { return p_.software.p2p_sync || b_.deepspeed_engine(); }
  std::vector<Flow> point_to_point(int src, int dst, double bytes);
  const Program& program_of(const LayerPrograms& programs, int item, plan::Pass pass) const;
  const Program& split_program_of(const LayerPrograms& programs, int item, plan::Pass pass) const;
  void pass(int s, const plan::PassRef& ref, const PassOptions& options = {});
  void reduce_amaxes(int s, const std::vector<int>& items, plan::Pass pass, const Where& w);
  double fp8_gemms(int layer) const;
  void weight_pass(int s, int vs, const Where& base);
  void pass_on(int s, plan::Pass pass, int vs, const Where& w, const PassOptions& options);
  void dualpipe_loop(int s);
  void host_syncs(int s, const Where& w);
  static bool pairable(const plan::PassRef& a, const plan::PassRef& b)
  {
    return a.pass != b.pass && a.microbatch != b.microbatch;
  }
  void side_by_side(int s, const plan::PassRef& a, const plan::PassRef& b, const PassOptions& options = {});
  // Activation offloading: a layer's saved activations copied to host memory after its forward pass, and the copy
  // back, issued one layer ahead of its backward pass (returns it; issued once per GPU, layer and micro-batch).
  void offload_activations(int s, int vs, int item, const Where& w);
  TaskId fetch_activations(int r, int vs, int item, const Where& w);

  BuildState& b_;
  const model::ModelSpec& m_;
  const plan::ParallelPlan& p_;
  DataParallel& dp_;
  OptimizerStep& optimizer_;
  std::unordered_map<std::uint64_t, TaskId> inputs_;
  // Per (GPU, virtual stage, micro-batch, layer): its activations' copy to the host, and the copy back.
  std::map<std::tuple<int, int, int, int>, TaskId> offloaded_, fetched_;
  std::vector<int> forwards_, gradients_; // per virtual stage: forward passes, and weight gradients, built so far
  const Program no_program_;
};

} // namespace sim::workload
