// The work of one pass through a transformer layer (and through the embedding and the output layer) on one
// tensor-parallel rank: compute steps made of kernels costed by the compute model, and the tensor-parallel
// collectives between them, blocking or overlapped as Megatron-LM runs them.
#pragma once

#include "hardware/compute_model.hpp"
#include "model/model_spec.hpp"
#include "plan/parallel_plan.hpp"
#include "workload/lora_kernels.hpp" // AdapterCollective
#include "workload/optimizer_step.hpp"
#include "workload/task_graph.hpp" // CollectiveKind

#include <string>
#include <vector>

namespace sim::workload {

// The group a layer's collective runs over: its tensor-parallel group, its expert-parallel group (a MoE layer's
// token dispatch and combine), its expert-tensor-parallel group (the routed tokens gathered for split experts), or
// its context-parallel group (attention over a sequence split across GPUs).
enum class Group { TP, EP, ETP, CP };

struct Step {
  enum class Kind { COMPUTE, COLLECTIVE, OVERLAP };
  Kind kind = Kind::COMPUTE;
  std::string label;
  // COMPUTE, and the compute half of OVERLAP (which runs beside the collective).
  double duration_s = 0;
  double memory_s = 0; // the part of duration_s its memory-bound kernels take (what HBM contention slows)
  double flops = 0;    // as executed
  bool recompute = false;
  double host_s = 0;       // the host's time to launch its kernels (hardware/host_launch)
  bool host_waits = false; // the host waits for the GPU's work so far before launching it (a device-to-host copy)
  // COLLECTIVE and OVERLAP: over `group`, of a `bytes` buffer (the whole, not a shard; an all-to-all's: what each
  // rank sends, spread evenly over the group).
  CollectiveKind collective = CollectiveKind::ALL_REDUCE;
  Group group = Group::TP;
  double bytes = 0;
  // A MoE dispatch or combine deduplicated per node and GPU (DeepEP): `bytes` is then one copy of the rank's tokens,
  // sent once to each node and GPU that needs it (workload/collectives).
  bool deduplicated = false;
  // COMPUTE and OVERLAP: the tensor-parallel collectives its LoRA adapters add, run after it (`append` makes each a
  // step of its own).
  std::vector<AdapterCollective> adapter_collectives;
};

using Program = std::vector<Step>;

// A transformer layer's kind: dense or MoE, with full or sliding-window attention. Programs are built per kind.
enum class LayerKind : std::uint8_t { DENSE, MOE, WINDOWED, WINDOWED_MOE };

constexpr bool is_moe(LayerKind kind)
{
  return kind == LayerKind::MOE || kind == LayerKind::WINDOWED_MOE;
}
constexpr bool is_windowed(LayerKind kind)
{
  return kind == LayerKind::WINDOWED || kind == LayerKind::WINDOWED_MOE;
}

inline LayerKind layer_kind(const model::ModelSpec& m, std::int64_t layer)
{
  const bool moe = m.is_moe_layer(layer);
  if (m.is_local_attention(layer))
    return moe ? LayerKind::WINDOWED_MOE : LayerKind::WINDOWED;
  return moe ? LayerKind::MOE : LayerKind::DENSE;
}

// A program per kind of layer.
struct ProgramPerKind {
  std::array<Program, 4> programs;
  Program& operator[](LayerKind kind) { return programs[static_cast<std::size_t>(kind)]; }
  const Program& operator[](LayerKind kind) const { return programs[static_cast<std::size_t>(kind)]; }
};

struct LayerPrograms {
  // A transformer layer's passes, per kind of layer: built for the kinds the model has.
  ProgramPerKind layer_forward;
  ProgramPerKind layer_backward; // includes the recomputation the plan asks for
  const Program& forward_of(const model::ModelSpec& m, std::int64_t layer) const
  {
    return layer_forward[layer_kind(m, layer)];
  }
  const Program& backward_of(const model::ModelSpec& m, std::int64_t layer) const
  {
    return layer_backward[layer_kind(m, layer)];
  }
  Program embedding_forward;
  Program embedding_backward;
  Program head_forward; // final norm, logits, cross entropy
  Program head_backward;
  // A multi-token-prediction module: the next tokens' embedding, two norms and the projection, a layer of the last
  // layer's kind, its own output layer; and back.
  Program mtp_forward;
  Program mtp_backward;
  // Zero-bubble schedules (DualPipe): the backward passes without their weight gradients, and the weight gradients
  // alone, per kind of layer and for the output layer (the embedding's gradient stays in its backward pass). Built
  // only for those schedules.
  ProgramPerKind layer_backward_input;
  ProgramPerKind layer_weight;
  Program head_backward_input;
  Program head_weight;
  Program mtp_backward_input;
  Program mtp_weight;
  // The optimizer step, gradient accumulation and FP8 weight casts, per parameter (workload/optimizer_step).
  ParameterPassTimes per_param;
};

LayerPrograms build_programs(const model::ModelSpec& m, const plan::ParallelPlan& p, const hardware::GpuSpec& gpu);
// Whether two parts' programs are the same steps (the same compute and collective steps in the same order, the
// collectives alike), costed apart: what lets GPUs of both kinds run one plan side by side.
bool same_steps(const LayerPrograms& a, const LayerPrograms& b);

// Every kernel of the programs above with its cost: what a step is made of, for people checking the compute model.
struct KernelCost {
  std::string program; // "layer forward", "layer backward", ...
  std::string step;    // the compute step it belongs to
  hardware::Kernel kernel;
  double time_s = 0;
  bool recompute = false;
  double launch_s = 0; // the host's time to launch it (0 with plan.host_launch false)
};

std::vector<KernelCost> kernel_costs(const model::ModelSpec& m, const plan::ParallelPlan& p,
                                     const hardware::GpuSpec& gpu);

// Appends `tail` to `head`, merging a trailing and a leading compute step into one.
void append(Program& head, const Program& tail);

} // namespace sim::workload
