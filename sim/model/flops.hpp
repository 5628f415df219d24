// Matrix-multiply FLOPs of one training step, counted per operation from the architecture.
// Model FLOPs follow the convention of Narayanan et al. (2021): GEMMs and the two attention batched matmuls
// (full s x s, whatever the causal mask), forward 1x, backward 2x; element-wise work is not counted. A MoE layer
// counts the experts a token goes through (active parameters), its shared expert and its router; a sliding-window
// layer counts the keys a query sees (min(window, s)).
#pragma once

#include "model/model_spec.hpp"

#include <array>
#include <string>
#include <vector>

namespace sim::model {

// What the backward pass recomputes: nothing, the attention core (Korthikanti et al.'s selective
// recomputation), or the whole layer from its stored input.
enum class Recompute { NONE, SELECTIVE, FULL };

inline constexpr std::array<core::Choice<Recompute>, 3> recompute_choices{
    {{"none", Recompute::NONE}, {"selective", Recompute::SELECTIVE}, {"full", Recompute::FULL}}};

// What selective recomputation redoes, by module (Megatron-core's --recompute-modules): the attention core, the
// norms that are kernels of their own, a dense layer's MLP, a MoE layer whole, its experts' activation function,
// its shared expert.
enum class RecomputeModule : unsigned { CORE_ATTN, LAYERNORM, MLP, MOE, MOE_ACT, SHARED_EXPERTS };

inline constexpr std::array<core::Choice<RecomputeModule>, 6> recompute_module_choices{
    {{"core_attn", RecomputeModule::CORE_ATTN},
     {"layernorm", RecomputeModule::LAYERNORM},
     {"mlp", RecomputeModule::MLP},
     {"moe", RecomputeModule::MOE},
     {"moe_act", RecomputeModule::MOE_ACT},
     {"shared_experts", RecomputeModule::SHARED_EXPERTS}}};

// A set of modules; Megatron-core's default (and Korthikanti et al.'s selective recomputation) is the attention core.
struct RecomputeModules {
  unsigned bits = 1U << static_cast<unsigned>(RecomputeModule::CORE_ATTN);
  [[nodiscard]] bool has(RecomputeModule m) const { return ((bits >> static_cast<unsigned>(m)) & 1U) != 0; }
  void add(RecomputeModule m) { bits |= 1U << static_cast<unsigned>(m); }
  bool operator==(const RecomputeModules&) const = default;
};

// The modules' names, in recompute_module_choices' order.
std::vector<std::string> recompute_module_names(RecomputeModules modules);

// Forward FLOPs of one transformer layer over `sequences` sequences of `seq` tokens (not sharded).
struct LayerFlops {
  double qkv = 0;
  double attention_scores = 0;  // Q K^T
  double attention_context = 0; // softmax(.) V
  double projection = 0;
  double ffn = 0;           // dense FFN, or shared expert + routed experts a token goes to + router
  double shared_expert = 0; // the shared expert's part of ffn
  bool moe = false;
  double attention_core() const { return attention_scores + attention_context; }
  // What the backward pass redoes of it under selective recomputation of `modules`.
  double recomputed(RecomputeModules modules) const;
  double total() const { return qkv + attention_core() + projection + ffn; }
};

// Transformer layer `layer` (dense or MoE, full or sliding-window attention as the model says).
LayerFlops layer_forward_flops(const ModelSpec& m, double seq, double sequences, std::int64_t layer = 0);

// Forward FLOPs of the output projection to the vocabulary (the logits).
double logits_forward_flops(const ModelSpec& m, double seq, double sequences);

struct StepFlops {
  double forward = 0;   // all layers and the logits
  double backward = 0;  // 2x forward (frozen weights: 1x, the attention core 2x)
  double recompute = 0; // forward work redone in the backward pass
  double model() const { return forward + backward; }
  double hardware() const { return model() + recompute; }
};

// Forward FLOPs of one multi-token-prediction module: its projection (2h -> h), its layer and its logits.
double mtp_forward_flops(const ModelSpec& m, double seq, double sequences);

// One step over `sequences` sequences (the global batch) of `seq` tokens. With `frozen_weights` (a LoRA fine-tune)
// no weight gradient is counted; the adapters' own FLOPs (rank r against widths of thousands) are not counted.
StepFlops step_flops(const ModelSpec& m, double seq, double sequences, Recompute recompute,
                     RecomputeModules modules = {}, bool frozen_weights = false);

} // namespace sim::model
