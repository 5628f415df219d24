#include "model/param_count.hpp"

namespace sim::model {
namespace {

double norm_params(const ModelSpec& m)
{
  const auto h = static_cast<double>(m.hidden_size);
  return m.norm == NormKind::LAYERNORM ? 2.0 * h : h; // LayerNorm has a bias, RMSNorm only a gain
}

} // namespace

ParamCount count_params(const ModelSpec& m)
{
  const auto h = static_cast<double>(m.hidden_size);
  const auto q = static_cast<double>(m.q_width());
  const auto kv = static_cast<double>(m.kv_width());
  const auto f = static_cast<double>(m.ffn_hidden_size);
  const auto v = static_cast<double>(m.vocab_size);

  ParamCount p;
  p.layer.attention = h * (q + 2.0 * kv) + q * h;
  if (m.qkv_bias)
    p.layer.attention += q + 2.0 * kv;
  if (m.linear_bias)
    p.layer.attention += h;

  const double up_matrices = is_gated(m.ffn_kind) ? 2.0 : 1.0;
  p.layer.ffn = (up_matrices + 1.0) * h * f;
  if (m.linear_bias)
    p.layer.ffn += up_matrices * f + h;

  p.layer.norms = 2.0 * norm_params(m);
  p.layers = static_cast<double>(m.num_layers) * p.layer.total();

  p.word_embedding = v * h;
  p.position_embedding =
      m.position_embedding == PositionEmbedding::LEARNED ? static_cast<double>(m.seq_length) * h : 0.0;
  p.embedding_norm = m.embedding_norm ? norm_params(m) : 0.0;
  p.final_norm = norm_params(m);
  p.lm_head = m.tie_embeddings ? 0.0 : v * h;
  p.total = p.layers + p.word_embedding + p.position_embedding + p.embedding_norm + p.final_norm + p.lm_head;
  return p;
}

} // namespace sim::model
