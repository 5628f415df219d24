// The optimizer step and the passes over a GPU's parameters beside it (gradient accumulation, FP8 weight casts): their
// bytes and time per parameter as the plan's software runs them. (Their tasks in the step: workload/builder_rooms.)
#pragma once

#include "hardware/compute_model.hpp"
#include "plan/parallel_plan.hpp"
#include "topology/cluster_spec.hpp"

namespace sim::workload {

// Seconds per parameter on one GPU.
struct ParameterPassTimes {
  double optimizer_s = 0;                   // the optimizer step's passes, per parameter updated
  double grad_accumulation_s = 0;           // a micro-batch's gradients added to the accumulated ones (0: fused)
  bool grad_accumulation_from_first = true; // false: autograd's accumulation starts with the second micro-batch
  double fp8_weight_cast_s = 0;             // FP8 copies of a transformer layer's weights, made once per step
};

// Bytes the optimizer step moves per parameter it updates, and the gradient accumulation per parameter per
// micro-batch, as the plan's software runs them.
double optimizer_bytes_per_param(const plan::ParallelPlan& p);
double grad_accumulation_bytes_per_param(const plan::ParallelPlan& p);
double fp8_weight_cast_bytes_per_param(const plan::ParallelPlan& p);

// Those passes' times on `gpu` (as the layer programs pace it: workload/layer_program).
ParameterPassTimes parameter_pass_times(const plan::ParallelPlan& p, const hardware::GpuSpec& gpu);

// ZeRO-Offload's copies (DeepSpeed runtime/zero/stage_1_and_2.py): each gradient element is cast to fp32 on the GPU
// before it is copied to the host (async_inplace_copy_grad_to_fp32_buffer_from_gpu), and the updated fp32 shard is
// copied back and cast to 16 bits there (bit16_partitions[...].copy_(fp32_partition.to(device))): 4 bytes each way.
// Pinned copies reach 0.762 of a PCIe link's rate (ZeRO-Infinity, Rajbhandari et al. 2021, Fig. 2b: 12.0 GB/s from
// CPU memory to one V100 over PCIe Gen3 x16, 15.75 GB/s): counted as bytes on the wire.
inline constexpr double pinned_copy_efficiency = 12.0 / 15.754;
inline constexpr double offload_copy_bytes_per_param = 4.0 / pinned_copy_efficiency;

// A CPU optimizer streams its state through host memory: the update's bytes per parameter (Adam: fp32 weight,
// gradient and moments read, written back but the gradient: 28), and under fp16 the unscale pass over the fp32
// gradient (read and write, unscale_and_clip_grads). ZeRO-Offload (Ren et al. 2021) Table 4 times Adam for 1-10B
// parameters on a DGX-2 (2 Xeon Platinum 8168, 6 channels of DDR4-2666 each, 256 GB/s): DeepSpeed's CPU-Adam at
// 0.22-2.57 s, a median 3.89G parameters/s (x 28 bytes: 0.426 of the DRAM bandwidth), PyTorch's CPU Adam of 2020 at
// 1.39-14.76 s, a median 0.70G parameters/s (0.077).
inline constexpr double dgx2_memory_bandwidth = 2.0 * 6.0 * 21.328e9;
inline constexpr double cpu_optimizer_memory_efficiency = 3.89e9 * 28.0 / dgx2_memory_bandwidth;
inline constexpr double pytorch_cpu_optimizer_memory_efficiency = 0.70e9 * 28.0 / dgx2_memory_bandwidth;
double cpu_optimizer_bytes_per_param(const plan::ParallelPlan& p);
// Whether the offloaded share's gradients leave at the optimizer step (Megatron-core's HybridDeviceOptimizer, under the
// distributed optimizer) rather than bucket by bucket as they are reduced (DeepSpeed's ZeRO-Offload).
bool offload_at_step(const plan::ParallelPlan& p);
// Seconds per parameter one GPU's process takes to update on its host, every GPU of the node updating at once.
double cpu_optimizer_seconds_per_param(const plan::ParallelPlan& p, const topology::ClusterSpec& cluster);

} // namespace sim::workload
