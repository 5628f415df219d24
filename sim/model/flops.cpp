#include "model/flops.hpp"

#include "model/param_count.hpp"

#include <algorithm>

namespace sim::model {

LayerFlops layer_forward_flops(const ModelSpec& m, double seq, double sequences, std::int64_t layer)
{
  const double tokens = seq * sequences;
  const auto h = static_cast<double>(m.hidden_size);
  const auto q = static_cast<double>(m.q_width());
  const auto o = static_cast<double>(m.o_width());
  const double keys = m.is_local_attention(layer) ? std::min(seq, static_cast<double>(m.sliding_window)) : seq;

  LayerFlops l;
  l.qkv = 2.0 * tokens * qkv_weights(m);
  l.projection = 2.0 * tokens * o * h;
  l.attention_scores = 2.0 * sequences * seq * keys * q;
  l.attention_context = 2.0 * sequences * seq * keys * o;
  const double ffn_matrices = is_gated(m.ffn_kind) ? 3.0 : 2.0;
  const double ffn_width = m.is_moe_layer(layer)
                               ? static_cast<double>(m.moe->shared_expert_ffn_hidden_size +
                                                     m.moe->experts_per_token * m.moe->expert_ffn_hidden_size)
                               : static_cast<double>(m.ffn_hidden_size);
  l.ffn = ffn_matrices * 2.0 * tokens * h * ffn_width;
  l.moe = m.is_moe_layer(layer);
  if (l.moe) {
    l.ffn += 2.0 * tokens * h * static_cast<double>(m.moe->num_experts);
    l.shared_expert = ffn_matrices * 2.0 * tokens * h * static_cast<double>(m.moe->shared_expert_ffn_hidden_size);
  }
  return l;
}

std::vector<std::string> recompute_module_names(RecomputeModules modules)
{
  std::vector<std::string> names;
  for (const auto& c : recompute_module_choices)
    if (modules.has(c.value))
      names.emplace_back(c.name);
  return names;
}

double LayerFlops::recomputed(RecomputeModules modules) const
{
  double r = modules.has(RecomputeModule::CORE_ATTN) ? attention_core() : 0.0;
  if (moe ? modules.has(RecomputeModule::MOE) : modules.has(RecomputeModule::MLP))
    r += ffn;
  else if (moe && modules.has(RecomputeModule::SHARED_EXPERTS))
    r += shared_expert;
  return r;
}

double logits_forward_flops(const ModelSpec& m, double seq, double sequences)
{
  return 2.0 * seq * sequences * static_cast<double>(m.hidden_size) * static_cast<double>(m.vocab_size);
}

double mtp_forward_flops(const ModelSpec& m, double seq, double sequences)
{
  const auto h = static_cast<double>(m.hidden_size);
  return 2.0 * seq * sequences * 2.0 * h * h + layer_forward_flops(m, seq, sequences, m.mtp_layer_kind_of()).total() +
         logits_forward_flops(m, seq, sequences);
}

StepFlops step_flops(const ModelSpec& m, double seq, double sequences, Recompute recompute, RecomputeModules modules,
                     bool frozen_weights)
{
  StepFlops s;
  s.forward = logits_forward_flops(m, seq, sequences);
  double core = 0; // the attention cores' forward FLOPs: their backward is twice, weights or not
  auto layer_with_recompute = [&](const LayerFlops& layer) {
    s.forward += layer.total();
    core += layer.attention_core();
    if (recompute == Recompute::SELECTIVE)
      s.recompute += layer.recomputed(modules);
    else if (recompute == Recompute::FULL)
      s.recompute += layer.total();
  };
  for (std::int64_t l = 0; l < m.num_layers; ++l)
    layer_with_recompute(layer_forward_flops(m, seq, sequences, l));
  if (m.mtp_layers > 0) { // each module: its layer (recomputed like the others), projection and logits
    const LayerFlops last = layer_forward_flops(m, seq, sequences, m.mtp_layer_kind_of());
    const double rest = mtp_forward_flops(m, seq, sequences) - last.total();
    for (std::int64_t k = 0; k < m.mtp_layers; ++k) {
      layer_with_recompute(last);
      s.forward += rest;
    }
  }
  // Frozen weights have no weight gradients: the backward pass is the data gradients alone, one forward's worth of
  // every GEMM, and the attention core's two.
  s.backward = frozen_weights ? s.forward + core : 2.0 * s.forward;
  return s;
}

} // namespace sim::model
