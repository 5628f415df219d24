// The architecture of a dense decoder-only transformer, as read from model/v1 or a HuggingFace config.json.
#pragma once

#include "core/json_reader.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace sim::model {

enum class FfnKind { GELU, RELU, SWIGLU, GEGLU };
enum class NormKind { LAYERNORM, RMSNORM };
enum class PositionEmbedding { LEARNED, ROPE, ALIBI };

inline constexpr std::array<core::Choice<FfnKind>, 4> ffn_kind_choices{
    {{"gelu", FfnKind::GELU}, {"relu", FfnKind::RELU}, {"swiglu", FfnKind::SWIGLU}, {"geglu", FfnKind::GEGLU}}};
inline constexpr std::array<core::Choice<NormKind>, 2> norm_choices{
    {{"layernorm", NormKind::LAYERNORM}, {"rmsnorm", NormKind::RMSNORM}}};
inline constexpr std::array<core::Choice<PositionEmbedding>, 3> position_choices{
    {{"learned", PositionEmbedding::LEARNED}, {"rope", PositionEmbedding::ROPE}, {"alibi", PositionEmbedding::ALIBI}}};

// Gated FFNs (SwiGLU, GeGLU) have three weight matrices instead of two.
inline bool is_gated(FfnKind kind)
{
  return kind == FfnKind::SWIGLU || kind == FfnKind::GEGLU;
}

struct ModelSpec {
  std::string name;
  std::string description;
  std::string source;
  std::int64_t num_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_kv_heads = 0; // == num_attention_heads without GQA/MQA
  std::int64_t head_dim = 0;     // usually hidden_size / num_attention_heads
  std::int64_t ffn_hidden_size = 0;
  std::int64_t vocab_size = 0;
  std::int64_t seq_length = 0; // trained at; 0 when unknown (a long-context config), then the plan must say
  FfnKind ffn_kind = FfnKind::GELU;
  NormKind norm = NormKind::LAYERNORM;
  PositionEmbedding position_embedding = PositionEmbedding::LEARNED;
  bool tie_embeddings = true;  // output layer shares the word embedding (Megatron-LM and HuggingFace default)
  bool qkv_bias = true;        // bias on the Q, K, V projections
  bool linear_bias = true;     // bias on the attention output and FFN projections
  bool dropout = true;         // dropout layers present in training (their masks take activation memory)
  bool embedding_norm = false; // a norm right after the word embedding (BLOOM)
  std::optional<double> published_params;

  std::int64_t q_width() const { return num_attention_heads * head_dim; }
  std::int64_t kv_width() const { return num_kv_heads * head_dim; }
};

// Reads a model/v1 object. Validates ranges and internal consistency (kv heads divide heads, ...).
ModelSpec read_model(const core::Node& node);

} // namespace sim::model
