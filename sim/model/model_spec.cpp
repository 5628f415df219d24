#include "model/model_spec.hpp"

#include <fmt/format.h>

namespace sim::model {

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
  if (auto p = r.find("published_params"))
    m.published_params = p->as_number(1.0, 1e16);
  r.finish();

  if (m.num_attention_heads % m.num_kv_heads != 0)
    r.at("num_kv_heads", "")
        .fail("does not divide num_attention_heads=" + std::to_string(m.num_attention_heads),
              "a divisor of num_attention_heads");
  if (!head_dim_given && m.hidden_size % m.num_attention_heads != 0)
    r.at("hidden_size", "")
        .fail(fmt::format("is not divisible by num_attention_heads={}", m.num_attention_heads),
              "a multiple of num_attention_heads, or an explicit head_dim");
  return m;
}

} // namespace sim::model
