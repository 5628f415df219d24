#include "model/model_spec.hpp"

#include <fmt/format.h>

namespace sim::model {
namespace {

MoeSpec read_moe(const core::Node& node, std::int64_t layers)
{
  core::ObjectReader r(node);
  MoeSpec moe;
  moe.num_experts = r.integer("num_experts", 1, 1 << 16);
  moe.experts_per_token = r.integer("experts_per_token", 1, 1 << 16);
  moe.expert_ffn_hidden_size = r.integer("expert_ffn_hidden_size", 1, 1 << 22);
  moe.shared_expert_ffn_hidden_size = r.integer_or("shared_expert_ffn_hidden_size", 0, 0, 1 << 22);
  moe.shared_expert_gate = r.flag_or("shared_expert_gate", false);
  moe.first_dense_layers = r.integer_or("first_dense_layers", 0, 0, layers - 1);
  moe.layer_frequency = r.integer_or("layer_frequency", 1, 1, layers);
  moe.router = r.choice_or<Router>("router", router_choices, Router::SOFTMAX);
  moe.load_balancing = r.choice_or<LoadBalancing>("load_balancing", load_balancing_choices, LoadBalancing::AUX_LOSS);
  if (r.has("capacity_factor"))
    moe.capacity_factor = r.number("capacity_factor", 0.01, 1000.0);
  moe.expert_groups = r.integer_or("expert_groups", 1, 1, moe.num_experts);
  moe.groups_per_token = r.integer_or("groups_per_token", moe.expert_groups, 1, moe.expert_groups);
  r.finish();
  if (moe.num_experts % moe.expert_groups != 0)
    r.at("expert_groups", "")
        .fail(fmt::format("does not divide num_experts={}", moe.num_experts), "a divisor of num_experts");
  if (moe.experts_per_token > moe.num_experts)
    r.at("experts_per_token", "")
        .fail(fmt::format("exceeds num_experts={}", moe.num_experts), "at most num_experts experts per token");
  if (moe.shared_expert_gate && moe.shared_expert_ffn_hidden_size == 0)
    r.at("shared_expert_gate", "")
        .fail("gates a shared expert the model does not have",
              "shared_expert_ffn_hidden_size > 0, or no shared_expert_gate");
  if (moe.experts_per_token > moe.groups_per_token * (moe.num_experts / moe.expert_groups))
    r.at("groups_per_token", "")
        .fail(fmt::format("leaves {} experts to choose {} from",
                          moe.groups_per_token * (moe.num_experts / moe.expert_groups), moe.experts_per_token),
              "groups holding at least experts_per_token experts");
  return moe;
}

MlaSpec read_mla(const core::Node& node)
{
  core::ObjectReader r(node);
  MlaSpec mla;
  mla.q_lora_rank = r.integer_or("q_lora_rank", 0, 0, 1 << 20);
  mla.kv_lora_rank = r.integer("kv_lora_rank", 1, 1 << 20);
  mla.qk_nope_head_dim = r.integer("qk_nope_head_dim", 1, 1 << 16);
  mla.qk_rope_head_dim = r.integer("qk_rope_head_dim", 1, 1 << 16);
  mla.v_head_dim = r.integer("v_head_dim", 1, 1 << 16);
  r.finish();
  return mla;
}

} // namespace

std::int64_t ModelSpec::moe_layers() const
{
  std::int64_t n = 0;
  for (std::int64_t l = 0; l < num_layers; ++l)
    n += is_moe_layer(l) ? 1 : 0;
  return n;
}

ModelSpec read_model(const core::Node& node)
{
  core::ObjectReader r(node);
  core::expect_schema(r, "model/v1");
  ModelSpec m;
  m.name = r.text("name");
  m.description = r.text_or("description", "");
  m.source = r.text_or("source", "");
  // Plausible ranges: beyond them a value is a typo, and the task graph it would need does not fit in memory.
  m.num_layers = r.integer("num_layers", 1, 10000);
  m.hidden_size = r.integer("hidden_size", 1, 1 << 20);
  m.num_attention_heads = r.integer("num_attention_heads", 1, 1 << 16);
  m.num_kv_heads = r.integer_or("num_kv_heads", m.num_attention_heads, 1, 1 << 16);
  const bool head_dim_given = r.has("head_dim");
  m.head_dim = r.integer_or("head_dim", m.hidden_size / m.num_attention_heads, 1, 1 << 16);
  m.ffn_kind = r.choice_or<FfnKind>("ffn_kind", ffn_kind_choices, FfnKind::GELU);
  m.ffn_hidden_size = r.integer_or("ffn_hidden_size", 4 * m.hidden_size, 1, 1 << 22);
  m.vocab_size = r.integer("vocab_size", 1, 1 << 24);
  m.norm = r.choice_or<NormKind>("norm", norm_choices, NormKind::LAYERNORM);
  m.position_embedding =
      r.choice_or<PositionEmbedding>("position_embedding", position_choices, PositionEmbedding::LEARNED);
  // The length the model was trained at: required with learned positions (their table is that long), else the
  // plan's default (0: unknown, the plan must say).
  m.seq_length = m.position_embedding == PositionEmbedding::LEARNED ? r.integer("seq_length", 1, 1 << 24)
                                                                    : r.integer_or("seq_length", 0, 1, 1 << 24);
  m.tie_embeddings = r.flag_or("tie_embeddings", true);
  m.qkv_bias = r.flag_or("qkv_bias", true);
  m.linear_bias = r.flag_or("linear_bias", m.qkv_bias);
  m.dropout = r.flag_or("dropout", true);
  m.embedding_norm = r.flag_or("embedding_norm", false);
  m.qk_norm = r.flag_or("qk_norm", false);
  m.post_norms = r.flag_or("post_norms", false);
  m.sliding_window = r.integer_or("sliding_window", 0, 0, 1 << 24);
  m.global_attention_every = r.integer_or("global_attention_every", 0, 0, m.num_layers);
  if (auto moe = r.find("moe"))
    m.moe = read_moe(*moe, m.num_layers);
  if (auto mla = r.find("mla")) {
    m.mla = read_mla(*mla);
    // Every head has its own key (decompressed from the latent); scores are over the non-rotary and rotary parts.
    for (const char* key : {"num_kv_heads", "head_dim"})
      if (r.has(key))
        r.at(key, "").fail("is set by the mla object with multi-head latent attention", "no " + std::string(key));
    m.num_kv_heads = m.num_attention_heads;
    m.head_dim = m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim;
  }
  m.mtp_layers = r.integer_or("mtp_layers", 0, 0, 16);
  if (auto p = r.find("published_params"))
    m.published_params = p->as_number(1.0, 1e16);
  if (auto p = r.find("published_active_params"))
    m.published_active_params = p->as_number(1.0, 1e16);
  r.finish();

  if (m.num_attention_heads % m.num_kv_heads != 0)
    r.at("num_kv_heads", "")
        .fail("does not divide num_attention_heads=" + std::to_string(m.num_attention_heads),
              "a divisor of num_attention_heads");
  if (m.global_attention_every > 0 && m.sliding_window == 0)
    r.at("global_attention_every", "")
        .fail("names the full-attention layers of a model without sliding_window", "a sliding_window too, or no key");
  if (!m.mla && !head_dim_given && m.hidden_size % m.num_attention_heads != 0)
    r.at("hidden_size", "")
        .fail(fmt::format("is not divisible by num_attention_heads={}", m.num_attention_heads),
              "a multiple of num_attention_heads, or an explicit head_dim");
  return m;
}

} // namespace sim::model
