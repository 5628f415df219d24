// The architecture of a decoder-only transformer, dense or mixture-of-experts, as read from model/v1 or a HuggingFace
// config.json.
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

enum class Router { SOFTMAX, SIGMOID };
enum class LoadBalancing { AUX_LOSS, AUX_FREE };

inline constexpr std::array<core::Choice<Router>, 2> router_choices{
    {{"softmax", Router::SOFTMAX}, {"sigmoid", Router::SIGMOID}}};
inline constexpr std::array<core::Choice<LoadBalancing>, 2> load_balancing_choices{
    {{"aux_loss", LoadBalancing::AUX_LOSS}, {"aux_free", LoadBalancing::AUX_FREE}}};

// Mixture-of-experts FFNs (Mixtral, Qwen-MoE, DeepSeek-V2/V3, GPT-OSS): a router sends each token to
// `experts_per_token` of `num_experts` routed experts (gated like the dense FFN), beside an optional shared expert
// every token goes through.
struct MoeSpec {
  std::int64_t num_experts = 0;
  std::int64_t experts_per_token = 0;
  std::int64_t expert_ffn_hidden_size = 0;
  std::int64_t shared_expert_ffn_hidden_size = 0; // all shared experts together; 0: none
  bool shared_expert_gate = false;                // a sigmoid gate on the shared expert's output (Qwen2-MoE)
  std::int64_t first_dense_layers = 0;            // dense FFN layers before the first MoE layer (DeepSeek)
  std::int64_t layer_frequency = 1;               // then every n-th layer is MoE (Megatron-core moe_layer_freq)
  Router router = Router::SOFTMAX;
  LoadBalancing load_balancing = LoadBalancing::AUX_LOSS;
  std::optional<double> capacity_factor; // tokens an expert takes, relative to an even share; none: dropless
  // Group-limited routing (DeepSeek-V2/V3's n_group, topk_group): the experts in `expert_groups` equal groups of
  // consecutive experts, each token choosing `groups_per_token` groups first, then its experts among theirs. With
  // the groups laid on nodes it is node-limited routing.
  std::int64_t expert_groups = 1;
  std::int64_t groups_per_token = 1;
  bool operator==(const MoeSpec&) const = default;
};

// Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values through low-rank latents; a query or key
// head is a non-rotary part and a rotary part (the rotary key shared by all heads), values have their own size.
struct MlaSpec {
  std::int64_t q_lora_rank = 0; // 0: queries projected directly
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  bool operator==(const MlaSpec&) const = default;
};

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
  bool qk_norm = false;        // RMSNorm on each query and key head (Qwen3, Gemma 3)
  bool post_norms = false;     // norms after attention and after the FFN too (Gemma 2/3): four per layer
  // Sliding-window attention: layers attend to the last `sliding_window` tokens (0: every layer attends to all),
  // except every `global_attention_every`-th layer (1-based; 0: none), which attends to all.
  std::int64_t sliding_window = 0;
  std::int64_t global_attention_every = 0;
  std::optional<MoeSpec> moe;
  std::optional<MlaSpec> mla;
  // Multi-token prediction (DeepSeek-V3 Sec. 2.2; Megatron-core's --mtp-num-layers): after the last layer, each of
  // `mtp_layers` modules in turn norms the hidden state and the next token's embedding, projects the two (2h -> h),
  // runs one transformer layer of the last layer's kind, and predicts one more token with a final norm and the shared
  // output layer. They train with the model (their FLOPs count, as Megatron-LM counts them) and sit with its output
  // layer.
  std::int64_t mtp_layers = 0;
  std::optional<double> published_params;
  std::optional<double> published_active_params;

  // Widths over all heads of the queries, of the keys (and values, but with MLA), and of the attention's output.
  std::int64_t q_width() const { return num_attention_heads * head_dim; }
  std::int64_t kv_width() const { return num_kv_heads * head_dim; }
  std::int64_t o_width() const { return mla ? num_attention_heads * mla->v_head_dim : q_width(); }
  bool is_moe_layer(std::int64_t layer) const
  {
    return moe && layer >= moe->first_dense_layers && (layer - moe->first_dense_layers) % moe->layer_frequency == 0;
  }
  bool is_local_attention(std::int64_t layer) const
  {
    return sliding_window > 0 && !(global_attention_every > 0 && (layer + 1) % global_attention_every == 0);
  }
  std::int64_t moe_layers() const;
  std::int64_t mtp_layer_kind_of() const { return num_layers - 1; } // an MTP module's layer is built like this one
  bool operator==(const ModelSpec&) const = default;
};

// Reads a model/v1 object. Validates ranges and internal consistency (kv heads divide heads, ...).
ModelSpec read_model(const core::Node& node);

} // namespace sim::model
