// Memory per GPU for a plan: weights, gradients and optimizer state under TP/PP/DP/ZeRO, activations by
// recompute mode and sequence parallelism (Korthikanti et al. 2022, generalised to GQA, gated FFNs and fused
// attention) times what the pipeline schedule keeps in flight, and communication buffers; against HBM.
#pragma once

#include "hardware/gpu_spec.hpp"
#include "model/model_spec.hpp"
#include "plan/parallel_plan.hpp"
#include "topology/cluster_spec.hpp"

#include <vector>

namespace sim::memory {

// Parameters of one transformer layer on one GPU: those every data-parallel replica holds (split matrices / tp,
// norms, routers and row-parallel biases replicated), and its share of a MoE layer's routed experts (/ (ep x tp),
// replicated over the expert-data-parallel ranks).
struct RankParams {
  double dense = 0;
  double experts = 0;
  double total() const { return dense + experts; }
};
RankParams layer_params_per_rank(const model::ModelSpec& m, const plan::ParallelPlan& p, std::int64_t layer);
// One multi-token-prediction module on one GPU: its layer's (built like the last one), its norms, and its 2h x h
// projection split by TP.
RankParams mtp_params_per_rank(const model::ModelSpec& m, const plan::ParallelPlan& p);

// Activations transformer layer `layer` keeps for its backward pass: one micro-batch, one GPU.
double layer_activation_bytes(const model::ModelSpec& m, const plan::ParallelPlan& p, std::int64_t layer = 0);

// Token-expert pairs one GPU's experts work on per micro-batch in a MoE layer: the tokens of its expert-tensor-
// parallel group (each GPU holding 1/tp of its micro-batch's under sequence parallelism, etp of them gathered) times
// experts per token, times the load imbalance (the busiest rank) or the capacity factor when tokens are dropped.
double expert_tokens_per_rank(const model::ModelSpec& m, const plan::ParallelPlan& p);

// The largest number of forward passes of each model chunk whose activations stage `stage` holds at once.
struct InFlight {
  std::vector<int> per_chunk;    // micro-batches held, per model chunk of this stage
  double layer_microbatches = 0; // sum over held (chunk, micro-batch) of the chunk's layers
};
InFlight in_flight(const plan::ParallelPlan& p, int stage);

// The CUDA context each training process holds on its GPU beside the tensors PyTorch allocates: about 400 MB since
// CUDA 11.7 loads kernels lazily (PyTorch's default), over 1,000 MB before, when every kernel of every library was
// loaded with it (NVIDIA's ptrblck, pytorch/pytorch#109888 and #107667, 2023). Taken from the software generation:
// the frameworks of 2021-22 ran CUDA 11.x before 11.7.
double cuda_context_bytes(const plan::ParallelPlan& p);

struct StageMemory {
  int stage = 0;
  int layers = 0;
  double params = 0;           // parameters on one GPU of this stage (its tensor- and expert-parallel shard)
  double layer_params = 0;     // of which in transformer layers
  double expert_params = 0;    // of which routed experts
  double trainable_params = 0; // of which trained (all but under LoRA, whose adapters are on top of `params`)
  double weights_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double layer_state_bytes = 0; // weights + gradients + optimizer state of the transformer layers alone
  double activations_bytes = 0;
  double layer_activations_bytes = 0; // of which in transformer layers
  InFlight in_flight;
  double buffers_bytes = 0;
  double working_bytes = 0; // held only at the busiest moment: the loss's logit copies, or a layer being recomputed
  double host_bytes = 0;    // what one GPU of this stage keeps in its host's memory (offloaded optimizer state)
  double nvme_bytes = 0;    // what it keeps on its node's NVMe drives (ZeRO-Infinity)
  double peak_bytes = 0;
  // What the plan may use of the HBM of the stage's part with the least (every stage's is the same on one part): the
  // HBM less the CUDA context and the plan's headroom (MemoryEstimate).
  double capacity_bytes = 0;
  bool oom = false;
};

struct MemoryEstimate {
  double params = 0;         // whole model
  double active_params = 0;  // what one token uses (MoE: its experts only)
  double capacity_bytes = 0; // the least of the stages'
  // Taken from each GPU's HBM before the plan's tensors: the CUDA context (cuda_context_bytes) and the plan's
  // memory_headroom.
  double cuda_context_bytes = 0;
  double headroom_bytes = 0;
  double layer_activation_bytes = 0; // the largest layer's
  std::vector<StageMemory> per_stage;
  int peak_stage = 0; // the stage with the least room left (the first of equals): on one part, the highest peak
  bool oom = false;
  // Host memory: what the node holding the most keeps for its GPUs, against the node's DRAM (0: not described).
  double host_node_bytes = 0;
  double host_capacity_bytes = 0;
  bool host_oom = false;
  // NVMe: the same for the node's drives (their capacities summed).
  double nvme_node_bytes = 0;
  double nvme_capacity_bytes = 0;
  bool nvme_oom = false;
};

MemoryEstimate estimate_memory(const model::ModelSpec& m, const plan::ParallelPlan& p, const hardware::GpuSpec& gpu);
// Each stage judged against the part with the least HBM among its GPUs (a cluster with other GPU kinds on some
// nodes: the GPU that runs a rank is the rank itself).
MemoryEstimate estimate_memory(const model::ModelSpec& m, const plan::ParallelPlan& p,
                               const topology::ClusterSpec& cluster);

} // namespace sim::memory
