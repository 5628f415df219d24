#include "model/flops.hpp"

namespace sim::model {

LayerFlops layer_forward_flops(const ModelSpec& m, double seq, double sequences)
{
  const double tokens = seq * sequences;
  const auto h = static_cast<double>(m.hidden_size);
  const auto q = static_cast<double>(m.q_width());
  const auto kv = static_cast<double>(m.kv_width());
  const auto f = static_cast<double>(m.ffn_hidden_size);
  const double ffn_matrices = is_gated(m.ffn_kind) ? 3.0 : 2.0;

  LayerFlops l;
  l.qkv = 2.0 * tokens * h * (q + 2.0 * kv);
  l.attention_scores = 2.0 * sequences * seq * seq * q;
  l.attention_context = 2.0 * sequences * seq * seq * q;
  l.projection = 2.0 * tokens * q * h;
  l.ffn = ffn_matrices * 2.0 * tokens * h * f;
  return l;
}

double logits_forward_flops(const ModelSpec& m, double seq, double sequences)
{
  return 2.0 * seq * sequences * static_cast<double>(m.hidden_size) * static_cast<double>(m.vocab_size);
}

StepFlops step_flops(const ModelSpec& m, double seq, double sequences, Recompute recompute)
{
  const LayerFlops layer = layer_forward_flops(m, seq, sequences);
  const auto layers = static_cast<double>(m.num_layers);
  StepFlops s;
  s.forward = layers * layer.total() + logits_forward_flops(m, seq, sequences);
  s.backward = 2.0 * s.forward;
  switch (recompute) {
    case Recompute::NONE:
      break;
    case Recompute::SELECTIVE:
      s.recompute = layers * layer.attention_core();
      break;
    case Recompute::FULL:
      s.recompute = layers * layer.total();
      break;
  }
  return s;
}

} // namespace sim::model
