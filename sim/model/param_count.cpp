#include "model/param_count.hpp"

namespace sim::model {
namespace {

double norm_params(const ModelSpec& m, double width)
{
  return m.norm == NormKind::LAYERNORM ? 2.0 * width : width; // LayerNorm has a bias, RMSNorm only a gain
}

double ffn_params(const ModelSpec& m, double f)
{
  const auto h = static_cast<double>(m.hidden_size);
  const double up_matrices = is_gated(m.ffn_kind) ? 2.0 : 1.0;
  double p = (up_matrices + 1.0) * h * f;
  if (m.linear_bias && f > 0)
    p += up_matrices * f + h;
  return p;
}

double attention_params(const ModelSpec& m)
{
  const auto h = static_cast<double>(m.hidden_size);
  double p = qkv_weights(m) + static_cast<double>(m.o_width()) * h;
  if (m.mla) // the latents' norms
    p += (m.mla->q_lora_rank > 0 ? norm_params(m, static_cast<double>(m.mla->q_lora_rank)) : 0.0) +
         norm_params(m, static_cast<double>(m.mla->kv_lora_rank));
  else if (m.qkv_bias)
    p += static_cast<double>(m.q_width() + 2 * m.kv_width());
  if (m.linear_bias)
    p += h;
  return p;
}

} // namespace

double qkv_weights(const ModelSpec& m)
{
  const auto h = static_cast<double>(m.hidden_size);
  const auto q = static_cast<double>(m.q_width());
  if (!m.mla)
    return h * (q + 2.0 * static_cast<double>(m.kv_width()));
  const auto& a = *m.mla;
  const auto q_lora = static_cast<double>(a.q_lora_rank);
  const auto kv_lora = static_cast<double>(a.kv_lora_rank);
  const double queries = q_lora > 0 ? h * q_lora + q_lora * q : h * q;
  const double keys_values = h * (kv_lora + static_cast<double>(a.qk_rope_head_dim)) +
                             kv_lora * static_cast<double>(m.num_attention_heads * (a.qk_nope_head_dim + a.v_head_dim));
  return queries + keys_values;
}

double expert_params(const ModelSpec& m)
{
  return m.moe ? ffn_params(m, static_cast<double>(m.moe->expert_ffn_hidden_size)) : 0.0;
}

LayerParams layer_params(const ModelSpec& m, FfnPart ffn)
{
  const auto h = static_cast<double>(m.hidden_size);
  LayerParams l;
  l.attention = attention_params(m);
  l.norms = (m.post_norms ? 4.0 : 2.0) * norm_params(m, h);
  if (m.qk_norm)
    l.norms += 2.0 * static_cast<double>(m.head_dim);
  if (ffn == FfnPart::DENSE || !m.moe) {
    l.ffn = ffn_params(m, static_cast<double>(m.ffn_hidden_size));
    return l;
  }
  const MoeSpec& e = *m.moe;
  l.ffn = ffn_params(m, static_cast<double>(e.shared_expert_ffn_hidden_size)) + (e.shared_expert_gate ? h : 0.0);
  l.experts = static_cast<double>(e.num_experts) * expert_params(m);
  l.active_experts = static_cast<double>(e.experts_per_token) * expert_params(m);
  // The router's matrix, with a bias when the model has linear biases (GPT-OSS) or an aux-free balancing bias.
  l.router = h * static_cast<double>(e.num_experts);
  if (m.linear_bias || e.load_balancing == LoadBalancing::AUX_FREE)
    l.router += static_cast<double>(e.num_experts);
  return l;
}

ParamCount count_params(const ModelSpec& m)
{
  const auto h = static_cast<double>(m.hidden_size);
  const auto v = static_cast<double>(m.vocab_size);

  ParamCount p;
  p.layer = layer_params(m, FfnPart::DENSE);
  if (m.moe)
    p.moe_layer = layer_params(m, FfnPart::MOE);
  const auto moe_layers = static_cast<double>(m.moe_layers());
  const double dense_layers = static_cast<double>(m.num_layers) - moe_layers;
  p.layers = dense_layers * p.layer.total() + moe_layers * p.moe_layer.total();

  p.word_embedding = v * h;
  p.position_embedding =
      m.position_embedding == PositionEmbedding::LEARNED ? static_cast<double>(m.seq_length) * h : 0.0;
  p.embedding_norm = m.embedding_norm ? norm_params(m, h) : 0.0;
  p.final_norm = norm_params(m, h);
  p.lm_head = m.tie_embeddings ? 0.0 : v * h;
  const double outside = p.word_embedding + p.position_embedding + p.embedding_norm + p.final_norm + p.lm_head;
  const auto mtp = static_cast<double>(m.mtp_layers);
  if (m.mtp_layers > 0) {
    p.mtp_layer = m.is_moe_layer(m.mtp_layer_kind_of()) ? p.moe_layer : p.layer;
    p.mtp_extra = 3.0 * norm_params(m, h) + 2.0 * h * h;
    p.mtp = mtp * (p.mtp_layer.total() + p.mtp_extra);
  }
  p.total = p.layers + outside + p.mtp;
  p.active = dense_layers * p.layer.active() + moe_layers * p.moe_layer.active() + outside +
             mtp * (p.mtp_layer.active() + p.mtp_extra);
  return p;
}

} // namespace sim::model
