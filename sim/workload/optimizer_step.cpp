#include "workload/optimizer_step.hpp"

#include "plan/optimizer_state.hpp"
#include "workload/builder_rooms.hpp"

namespace sim::workload {
namespace {

using hardware::memory_bound;
using hardware::MemoryKernel;
using plan::Pass;

} // namespace

double optimizer_bytes_per_param(const plan::ParallelPlan& p)
{
  // Each implementation's passes around the update, and the update itself (Adam's, 28 bytes, in the counts below):
  // another algorithm's update takes Adam's place inside the same passes.
  const double update = plan::optimizer_update_bytes(p.optimizer_algorithm);
  const double adam = plan::optimizer_update_bytes(plan::OptimizerAlgorithm::ADAM);
  // PyTorch's GradScaler under fp16: unscale_ reads and writes every gradient once, checking for inf and NaN
  // (torch._amp_foreach_non_finite_check_and_unscale_, torch/amp/grad_scaler.py).
  const double e = 2.0; // a 16-bit weight or gradient
  const double grad = p.fp32_grad_accumulation ? 4.0 : e;
  const double scaler = p.precision == hardware::Precision::FP16 ? 2.0 * grad : 0.0;
  const bool full = p.full_precision(); // fp32 weights: no 16-bit copy to write, no master copy to keep
  switch (p.software.optimizer) {
    case plan::OptimizerImpl::FUSED:
      // One pass: read the gradient and the fp32 weight, momentum and variance; write them and the 16-bit weight.
      return update - (4.0 - grad) + (full ? 0.0 : e) + scaler;
    case plan::OptimizerImpl::MEGATRON:
      // Float16OptimizerWithFloat16Params: cast to fp32 (fp16 only), unscale and inf check (fp16 only), grad norm,
      // FusedAdam, copy back to 16 bits (Megatron-LM optimizer/optimizer.py, 2021-24). In fp32, FP32Optimizer: the
      // gradient norm (an fp32 read) and FusedAdam.
      if (full)
        return 4.0 + update;
      return (p.precision == hardware::Precision::FP16 ? 52.0 : 38.0) - adam + update;
    case plan::OptimizerImpl::DEEPSPEED:
      // FP16_Optimizer: per-tensor overflow check, cast and flatten, norm, unscale, FusedAdam, copy back (v0.5). In
      // fp32 the engine steps the client's FusedAdam alone.
      if (full)
        return update;
      return 70.0 - adam + update;
    case plan::OptimizerImpl::COMPOSER:
      // DecoupledAdamW's per-tensor Python loop: about nine elementwise kernels (composer/optim, 2023).
      return 92.0 - adam + update + scaler;
  }
  return 30.0;
}

double grad_accumulation_bytes_per_param(const plan::ParallelPlan& p)
{
  if (p.zero_stage >= 2) // gradients are reduce-scattered every micro-batch: nothing accumulates in full
    return 0.0;
  switch (p.software.grad_accumulation) {
    case plan::GradAccumulation::FUSED:
      return 0.0;
    case plan::GradAccumulation::HOOK: // main_grad.add_(grad): read main_grad and grad, write main_grad
      return p.fp32_grad_accumulation ? 4.0 + p.value_bytes() + 4.0 : 3.0 * p.value_bytes();
    case plan::GradAccumulation::AUTOGRAD: // AccumulateGrad: grad += new, in the weights' precision
      return 3.0 * p.value_bytes();
  }
  return 0.0;
}

double fp8_weight_cast_bytes_per_param(const plan::ParallelPlan& p)
{
  if (!p.fp8())
    return 0.0;
  // Transformer Engine casts each 16-bit weight to FP8 and its transpose once per step (on the first micro-batch;
  // later ones reuse them). FP8 parameters (--fp8-param-gather) are written in FP8 by the optimizer: only the
  // transpose is made.
  // Under ZeRO-3 (FSDP2 with torchao's float8) each pass gathers the weights afresh and casts the one it needs: the
  // forward its FP8 copy, the backward the transpose; gathered in FP8 (enable_fsdp_float8_all_gather) the shard was
  // cast before the gather and the pass only lays the FP8 weight out (a one-byte read and write).
  if (p.zero_stage >= 3)
    return p.fp8_param_gather ? 2.0 : p.value_bytes() + 1.0;
  return p.fp8_param_gather ? 2.0 : p.value_bytes() + 2.0;
}

bool offload_at_step(const plan::ParallelPlan& p)
{
  return p.offload_optimizer != plan::OffloadDevice::NONE && p.distributed_optimizer;
}

double cpu_optimizer_bytes_per_param(const plan::ParallelPlan& p)
{
  return plan::optimizer_update_bytes(p.optimizer_algorithm) + (p.precision == hardware::Precision::FP16 ? 8.0 : 0.0);
}

double cpu_optimizer_seconds_per_param(const plan::ParallelPlan& p, const topology::ClusterSpec& cluster)
{
  const int sockets = cluster.node.pcie ? cluster.node.pcie->sockets : 1;
  const double efficiency = p.cpu_optimizer == plan::CpuOptimizer::DEEPSPEED ? cpu_optimizer_memory_efficiency
                                                                             : pytorch_cpu_optimizer_memory_efficiency;
  const double bandwidth = efficiency * sockets * cluster.node.host.memory_bandwidth;
  const int updating = std::min(cluster.node.gpus, p.gpus()); // the node's GPUs, every one updating at once
  return bandwidth > 0 ? cpu_optimizer_bytes_per_param(p) * updating / bandwidth : 0.0;
}

ParameterPassTimes parameter_pass_times(const plan::ParallelPlan& p, const hardware::GpuSpec& gpu)
{
  ParameterPassTimes out;
  out.optimizer_s = hardware::busy_time(memory_bound("adam", optimizer_bytes_per_param(p), MemoryKernel::ADAM), gpu,
                                        p.compute_precision());
  const double cast = fp8_weight_cast_bytes_per_param(p);
  out.fp8_weight_cast_s =
      cast > 0 ? hardware::busy_time(memory_bound("fp8 weight cast", cast), gpu, p.compute_precision()) : 0.0;
  const double accumulation = grad_accumulation_bytes_per_param(p);
  out.grad_accumulation_s = accumulation > 0 ? hardware::busy_time(memory_bound("gradient accumulation", accumulation,
                                                                                MemoryKernel::GRADIENT_ACCUMULATION),
                                                                   gpu, p.compute_precision())
                                             : 0.0;
  out.grad_accumulation_from_first = p.software.grad_accumulation != plan::GradAccumulation::AUTOGRAD;
  return out;
}

void OptimizerStep::cast_weights(int s, int item, const Where& w)
{
  if (b_.programs.front().per_param.fp8_weight_cast_s <= 0 || (item < 0 && !is_mtp(item)))
    return;
  parameter_pass(s, item, w, "fp8 weight cast", &ParameterPassTimes::fp8_weight_cast_s);
}

void OptimizerStep::accumulate_gradients(int s, int item, const Where& w, const AccumulateOptions& options)
{
  const ParameterPassTimes& base = b_.programs.front().per_param;
  if (base.grad_accumulation_s <= 0 || (options.first && !base.grad_accumulation_from_first))
    return;
  parameter_pass(s, item, w, "gradient accumulation", &ParameterPassTimes::grad_accumulation_s);
}

// A memory-bound kernel over an item's parameters on every GPU of stage s, at its kind's rate per parameter.
void OptimizerStep::parameter_pass(int s, int item, const Where& w, const char* label,
                                   double ParameterPassTimes::*s_per_param)
{
  const double params = b_.item_trainable_params(item, s) + b_.item_expert_params(item);
  b_.on_stage(s, w, [&](const LayerPrograms& programs, const hardware::GpuSpec& gpu) {
    Step step;
    step.label = label;
    step.memory_s = params * programs.per_param.*s_per_param;
    step.duration_s = gpu.kernel_overhead_s + step.memory_s;
    return step;
  });
}

TaskId OptimizerStep::swapped_update(int r, double params, const Where& w, const std::vector<TaskId>& deps)
{
  // ZeRO-Infinity's optimizer swapper (DeepSpeed runtime/swap_tensor): sub-group by sub-group, the fp32 state (master
  // weights and moments) read from the drives into pinned buffers, updated by the CPU, written back. Without
  // pipelining each waits for the one before; with it the next sub-group is read and the last written while the CPU
  // updates (pipeline_read, pipeline_write).
  const double state = plan::optimizer_state_bytes(p_.optimizer_algorithm, static_cast<double>(b_.m.hidden_size), true);
  const int groups = std::max(1, static_cast<int>(std::ceil(params / static_cast<double>(p_.nvme_sub_group))));
  const double group = params / groups;
  const double seconds = group * cpu_optimizer_seconds_per_param(p_, b_.cluster);
  TaskId read = no_task;
  TaskId update = no_task;
  TaskId write = no_task;
  for (int i = 0; i < groups; ++i) {
    std::vector<TaskId> before = deps;
    before.push_back(p_.nvme_pipeline ? read : write);
    read = b_.nvme_copy(r, state * group, true, "optimizer state from nvme", w, before);
    update = b_.host_compute(r, seconds, "cpu optimizer", w, {read, update});
    write = b_.nvme_copy(r, state * group, false, "optimizer state to nvme", w, {update, write});
  }
  // The next step swaps in what this one wrote: the step ends with the last write.
  return b_.sync(Category::OFFLOAD, {update, write});
}

void OptimizerStep::step(int s)
{
  double params = 0;
  double expert_params = 0;
  for (int c = 0; c < p_.virtual_stages; ++c)
    for (int item : b_.pass_items(virtual_stage(p_, s, c), Pass::FORWARD)) {
      params += b_.item_trainable_params(item, s);
      expert_params += b_.item_expert_params(item);
    }
  const double updated =
      b_.sharded_optimizer() ? params / p_.shards() + expert_params / p_.edp() : params + expert_params;
  const Where w{Category::OPTIMIZER, s, -1, -1, -1};
  for (int r : b_.stage_gpus(s))
    b_.tail[static_cast<std::size_t>(r)].push_back(b_.reduce_tail[static_cast<std::size_t>(r)]);
  const double offloaded = p_.offload_optimizer != plan::OffloadDevice::NONE ? p_.offload_fraction : 0.0;
  if (offloaded > 0) {
    // Offload: once its gradients are on the host, each GPU's process updates its share of the shard on the CPU and
    // copies it back (offloaded parameters stay on the host: the next gather fetches them). ZeRO-Offload's copies
    // left bucket by bucket during the backward pass (DataParallel); Megatron-core's HybridDeviceOptimizer copies them
    // at the step, after the last reduction.
    const double cpu_params = offloaded * updated;
    const double seconds = cpu_params * cpu_optimizer_seconds_per_param(p_, b_.cluster);
    for (int r : b_.stage_gpus(s)) {
      auto& tail = b_.tail[static_cast<std::size_t>(r)];
      auto& copies = b_.offload_tail[static_cast<std::size_t>(r)];
      if (offload_at_step(p_))
        copies = b_.host_copy(r, cpu_params * offload_copy_bytes_per_param, copy_to_host, "gradients to host", w,
                              {copies, b_.reduce_tail[static_cast<std::size_t>(r)]});
      tail.push_back(copies);
      if (p_.delayed_update) {
        // The update of the step before, with the gradients it left on the host, runs from the step's start beside
        // this step's passes, its parameters copied back for the next; the step ends with both and this step's copies.
        const TaskId update = b_.host_compute(r, seconds, "cpu optimizer (previous step's gradients)", w, {});
        auto& fetched = b_.fetch_tail[static_cast<std::size_t>(r)];
        fetched = b_.host_copy(r, cpu_params * offload_copy_bytes_per_param, copy_from_host,
                               "updated parameters from host", w, {update, fetched});
        tail.push_back(fetched);
        continue;
      }
      const TaskId update = p_.offload_optimizer == plan::OffloadDevice::NVME
                                ? swapped_update(r, cpu_params, w, tail)
                                : b_.host_compute(r, seconds, "cpu optimizer", w, tail);
      if (p_.offload_params == plan::OffloadDevice::NVME) { // the updated 16-bit shard written to the drives
        tail = {b_.nvme_copy(r, p_.value_bytes() * cpu_params, false, "updated parameters to nvme", w, {update})};
        continue;
      }
      if (p_.offload_params != plan::OffloadDevice::NONE) {
        tail = {update};
        continue;
      }
      auto& fetched = b_.fetch_tail[static_cast<std::size_t>(r)];
      fetched = b_.host_copy(r, cpu_params * offload_copy_bytes_per_param, copy_from_host,
                             "updated parameters from host", w, {update, fetched});
      tail = {fetched};
    }
  }
  if (offloaded < 1) {
    std::vector<std::vector<TaskId>> host_side; // the offloaded share's end, which the GPU's share runs beside
    for (int r : b_.stage_gpus(s))
      host_side.push_back(offloaded > 0 ? b_.tail[static_cast<std::size_t>(r)] : std::vector<TaskId>{});
    if (offloaded > 0) // the GPU's own share starts with the reductions, not after the host's
      for (int r : b_.stage_gpus(s))
        b_.tail[static_cast<std::size_t>(r)] = {b_.reduce_tail[static_cast<std::size_t>(r)]};
    b_.on_stage(s, w, [&](const LayerPrograms& programs, const hardware::GpuSpec&) {
      Step step;
      step.label = "optimizer";
      step.duration_s = (1.0 - offloaded) * updated * programs.per_param.optimizer_s;
      step.memory_s = step.duration_s;
      return step;
    });
    if (offloaded > 0) {
      std::size_t i = 0;
      for (int r : b_.stage_gpus(s)) {
        auto& tail = b_.tail[static_cast<std::size_t>(r)];
        tail.insert(tail.end(), host_side[i].begin(), host_side[i].end());
        ++i;
      }
    }
  }
  if (b_.sharded_optimizer() && p_.zero_stage < 3 && p_.shards() > 1 && !dp_.gathers_before_forward()) {
    auto gather = [&](const std::vector<std::vector<int>>& groups, double bytes, const char* label) {
      for (const auto& group : groups) {
        const auto members = b_.simulated_of(group);
        const TaskId end =
            b_.collective(CollectiveKind::ALL_GATHER, group, bytes, Category::DP, label, w, b_.tails_of(members));
        for (int r : members)
          b_.tail[static_cast<std::size_t>(r)] = {end};
      }
    };
    gather(b_.groups(Dim::SHARD, s), p_.value_bytes() * params, "parameter all-gather");
    if (expert_params > 0 && p_.edp() > 1)
      gather(b_.groups(Dim::EDP, s), p_.value_bytes() * expert_params, "expert parameter all-gather");
  }
}

} // namespace sim::workload
