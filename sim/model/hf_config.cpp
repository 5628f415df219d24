#include "model/hf_config.hpp"

#include "core/spelling.hpp"
#include "model/model_spec.hpp"

#include <fmt/format.h>
#include <initializer_list>
#include <optional>

namespace sim::model {
namespace {

enum class Family {
  LLAMA,
  QWEN2,
  QWEN3,
  MIXTRAL,
  QWEN_MOE,
  DEEPSEEK,
  GPT_OSS,
  GEMMA2,
  GEMMA3,
  GPT2,
  GPT_NEOX,
  BLOOM,
  FALCON
};

constexpr std::array<core::Choice<Family>, 18> family_choices{{{"llama", Family::LLAMA},
                                                               {"mistral", Family::LLAMA},
                                                               {"qwen2", Family::QWEN2},
                                                               {"qwen3", Family::QWEN3},
                                                               {"mixtral", Family::MIXTRAL},
                                                               {"qwen2_moe", Family::QWEN_MOE},
                                                               {"qwen3_moe", Family::QWEN_MOE},
                                                               {"deepseek_v2", Family::DEEPSEEK},
                                                               {"deepseek_v3", Family::DEEPSEEK},
                                                               {"gpt_oss", Family::GPT_OSS},
                                                               {"gemma2", Family::GEMMA2},
                                                               {"gemma3_text", Family::GEMMA3},
                                                               {"gpt2", Family::GPT2},
                                                               {"gpt_neox", Family::GPT_NEOX},
                                                               {"bloom", Family::BLOOM},
                                                               {"falcon", Family::FALCON},
                                                               {"RefinedWeb", Family::FALCON},
                                                               {"RefinedWebModel", Family::FALCON}}};

bool is_moe_family(Family f)
{
  return f == Family::MIXTRAL || f == Family::QWEN_MOE || f == Family::DEEPSEEK || f == Family::GPT_OSS;
}

// Keys that mean experts: in a family read as dense they are refused, never ignored.
constexpr std::array<std::string_view, 6> moe_keys{"num_local_experts",     "num_experts",         "n_routed_experts",
                                                   "moe_intermediate_size", "num_experts_per_tok", "moe_layer_freq"};

class Converter {
 public:
  explicit Converter(const core::Node& config) : config_(config) {}

  // The first of `keys` present in the config (HF families spell the same field differently).
  std::optional<core::Node> find(std::initializer_list<std::string_view> keys) const
  {
    for (auto key : keys) {
      const auto it = config_.json().find(key);
      if (it != config_.json().end() && !it->is_null())
        return core::Node(*it, core::pointer_append(config_.pointer(), key), config_.provenance());
    }
    return std::nullopt;
  }

  core::Node require(std::initializer_list<std::string_view> keys, const std::string& expected) const
  {
    if (auto n = find(keys))
      return *n;
    const auto where = config_.provenance().locate(core::pointer_append(config_.pointer(), *keys.begin()));
    throw core::InputError(where, "missing key in HuggingFace config", "nothing", expected);
  }

  // Copies an integer field into the model/v1 object and remembers where it came from.
  std::int64_t integer(const std::string& field, std::initializer_list<std::string_view> keys)
  {
    const core::Node n = require(keys, "an integer >= 1");
    const std::int64_t v = n.as_integer(1);
    set(field, v, n);
    return v;
  }

  std::optional<std::int64_t> optional_integer(const std::string& field, std::initializer_list<std::string_view> keys)
  {
    auto n = find(keys);
    if (!n)
      return std::nullopt;
    const std::int64_t v = n->as_integer(1);
    set(field, v, *n);
    return v;
  }

  bool flag(std::initializer_list<std::string_view> keys, bool fallback) const
  {
    auto n = find(keys);
    return n ? n->as_bool() : fallback;
  }

  // True when any dropout probability among `keys` is above zero.
  bool any_dropout(std::initializer_list<std::string_view> keys) const
  {
    for (auto key : keys) {
      auto n = find({key});
      if (n && n->json().is_number() && n->json().get<double>() > 0.0)
        return true;
    }
    return false;
  }

  void set(const std::string& field, core::Json value, const core::Node& from)
  {
    out_.model[field] = std::move(value);
    out_.origins.emplace_back("/" + field, from.location().pointer);
  }
  void set(const std::string& field, core::Json value) { out_.model[field] = std::move(value); }

  HfConversion take() { return std::move(out_); }
  const core::Node& config() const { return config_; }

 private:
  const core::Node& config_;
  HfConversion out_;
};

// The config's integer at `key` (or nothing), for values that go into a nested model/v1 object.
std::optional<std::int64_t> integer_at(const Converter& c, std::string_view key, std::int64_t min = 1)
{
  auto n = c.find({key});
  return n ? std::optional<std::int64_t>(n->as_integer(min)) : std::nullopt;
}

std::int64_t required_at(const Converter& c, std::string_view key, std::int64_t min = 1)
{
  return c.require({key}, fmt::format("an integer >= {}", min)).as_integer(min);
}

// A rotary model's max_position_embeddings is how far it can attend (131,072 for Llama 3.1, pre-trained at 8,192):
// the pre-training length only where the config states it, as the context extension's original length.
void pretraining_length(Converter& c)
{
  const auto scaling = c.find({"rope_scaling"});
  if (!scaling || !scaling->json().is_object())
    return;
  const auto it = scaling->json().find("original_max_position_embeddings");
  if (it == scaling->json().end() || it->is_null())
    return;
  const core::Node original(*it, core::pointer_append(scaling->pointer(), "original_max_position_embeddings"),
                            c.config().provenance());
  c.set("seq_length", original.as_integer(1, 1 << 24), original);
}

// Llama-family attention and embeddings (Llama, Mistral, Qwen, Mixtral, DeepSeek, GPT-OSS, Gemma).
void llama_like(Converter& c, bool qkv_bias_default)
{
  c.integer("num_layers", {"num_hidden_layers"});
  c.integer("hidden_size", {"hidden_size"});
  c.integer("num_attention_heads", {"num_attention_heads"});
  c.integer("vocab_size", {"vocab_size"});
  pretraining_length(c);
  c.set("norm", "rmsnorm");
  c.set("position_embedding", "rope");
  c.set("tie_embeddings", c.flag({"tie_word_embeddings"}, false));
  c.set("qkv_bias", c.flag({"attention_bias"}, qkv_bias_default));
  c.set("linear_bias", c.flag({"mlp_bias"}, false));
  c.set("dropout", c.any_dropout({"attention_dropout", "hidden_dropout"}));
}

void grouped_query(Converter& c)
{
  c.optional_integer("num_kv_heads", {"num_key_value_heads"});
  c.optional_integer("head_dim", {"head_dim"});
}

// Which layers attend within a window: the config's `layer_types` (newer transformers) must be the pattern simtrain
// describes (every n-th layer full attention); `every` is the family's pattern when the config has no list.
void sliding_window(Converter& c, std::int64_t every)
{
  const auto window = c.find({"sliding_window"});
  if (!window)
    return;
  c.set("sliding_window", window->as_integer(1, 1 << 24), *window);
  if (const auto types = c.find({"layer_types"})) {
    const std::size_t n = types->array_size();
    std::int64_t first_full = 0;
    for (std::size_t i = 0; i < n && first_full == 0; ++i)
      if (types->element(i).as_string() == "full_attention")
        first_full = static_cast<std::int64_t>(i) + 1;
    for (std::size_t i = 0; i < n; ++i) {
      const bool full = first_full > 0 && (static_cast<std::int64_t>(i) + 1) % first_full == 0;
      const std::string expected = full ? "full_attention" : "sliding_attention";
      if (types->element(i).as_string() != expected)
        types->element(i).fail(
            "a layer pattern simtrain cannot express",
            first_full > 0
                ? fmt::format("\"{}\" (every {}-th layer full attention, the others sliding)", expected, first_full)
                : "sliding_attention");
    }
    every = first_full;
  }
  if (every > 0)
    c.set("global_attention_every", every);
}

// Mixture-of-experts fields into model/v1's `moe` object.
struct MoeKeys {
  std::string_view experts, per_token, expert_ffn;
};

core::Json moe_object(const Converter& c, const MoeKeys& keys)
{
  core::Json moe = core::Json::object();
  moe["num_experts"] = required_at(c, keys.experts);
  moe["experts_per_token"] = required_at(c, keys.per_token);
  moe["expert_ffn_hidden_size"] = required_at(c, keys.expert_ffn);
  return moe;
}

FfnKind activation(const Converter& c, const char* fallback, bool gated)
{
  std::string act = fallback;
  if (auto n = c.find({"hidden_act", "activation_function", "hidden_activation"}))
    act = n->as_string();
  if (act == "silu" || act == "swish")
    return gated ? FfnKind::SWIGLU : FfnKind::GELU;
  if (act.rfind("gelu", 0) == 0)
    return gated ? FfnKind::GEGLU : FfnKind::GELU;
  if (act == "relu")
    return FfnKind::RELU;
  c.require({"hidden_act", "activation_function"}, "")
      .fail("unsupported activation", "one of silu, gelu, gelu_new, gelu_pytorch_tanh, relu");
}

// Qwen's sliding window applies to layers above max_window_layers only: not a pattern simtrain describes.
void refuse_sliding_window(const Converter& c)
{
  if (auto use = c.find({"use_sliding_window"}); use && use->as_bool())
    use->fail("Qwen's sliding window on the layers above max_window_layers", "false");
}

} // namespace

bool looks_like_hf_config(const core::Json& json)
{
  return json.is_object() && !json.contains("schema") &&
         (json.contains("model_type") || json.contains("architectures"));
}

HfConversion convert_hf_config(const core::Node& config, const std::string& name)
{
  Converter c(config);
  const core::Node type_node =
      c.require({"model_type"}, "a model_type simtrain reads (llama, mixtral, deepseek_v3, ...)");
  const Family family = type_node.as_choice<Family>(family_choices);
  if (!is_moe_family(family))
    for (auto key : moe_keys)
      if (auto n = c.find({key}); n && !(n->json().is_number() && n->json().get<double>() == 0.0))
        n->fail(fmt::format("experts in a model_type simtrain reads as dense ({})", type_node.as_string()),
                "a mixture-of-experts model_type: mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, gpt_oss");

  std::string model_name = name;
  if (auto n = c.find({"_name_or_path"}); n && n->json().is_string() && !n->json().get<std::string>().empty())
    model_name = n->json().get<std::string>();
  c.set("schema", "model/v1");
  c.set("name", model_name);
  c.set("description", fmt::format("read from a HuggingFace config.json (model_type {})", type_node.as_string()));
  c.set("source", config.location().file);

  switch (family) {
    case Family::LLAMA:
    case Family::QWEN2:
    case Family::QWEN3: {
      llama_like(c, family == Family::QWEN2);
      if (family == Family::QWEN2) // Qwen2 always has Q, K, V biases (no attention_bias key)
        c.set("qkv_bias", true);
      grouped_query(c);
      c.integer("ffn_hidden_size", {"intermediate_size"});
      c.set("ffn_kind", core::choice_name(activation(c, "silu", true), ffn_kind_choices));
      c.set("qk_norm", family == Family::QWEN3);
      if (family == Family::LLAMA)
        sliding_window(c, 0); // Mistral 7B v0.1: every layer
      else
        refuse_sliding_window(c);
      break;
    }
    case Family::MIXTRAL: {
      llama_like(c, false);
      grouped_query(c);
      c.set("ffn_kind", core::choice_name(activation(c, "silu", true), ffn_kind_choices));
      sliding_window(c, 0);
      c.set("moe", moe_object(c, {"num_local_experts", "num_experts_per_tok", "intermediate_size"}));
      break;
    }
    case Family::QWEN_MOE: {
      const bool qwen3 = type_node.as_string() == "qwen3_moe";
      llama_like(c, !qwen3);
      if (!qwen3)
        c.set("qkv_bias", true);
      grouped_query(c);
      c.set("qk_norm", qwen3);
      c.set("ffn_kind", core::choice_name(activation(c, "silu", true), ffn_kind_choices));
      refuse_sliding_window(c);
      core::Json moe = moe_object(c, {"num_experts", "num_experts_per_tok", "moe_intermediate_size"});
      if (auto step = c.find({"decoder_sparse_step"}); step && step->as_integer(1) != 1)
        step->fail("MoE layers on every n-th layer counted from the n-th (Qwen's convention)", "1");
      if (auto dense = c.find({"mlp_only_layers"}); dense && dense->array_size() > 0)
        dense->fail("dense layers at arbitrary positions", "an empty list");
      if (auto shared = integer_at(c, "shared_expert_intermediate_size", 0); shared && *shared > 0) {
        moe["shared_expert_ffn_hidden_size"] = *shared;
        moe["shared_expert_gate"] = true;
      }
      c.integer("ffn_hidden_size", {"intermediate_size"});
      c.set("moe", std::move(moe));
      break;
    }
    case Family::DEEPSEEK: {
      llama_like(c, false);
      c.set("ffn_kind", core::choice_name(activation(c, "silu", true), ffn_kind_choices));
      c.integer("ffn_hidden_size", {"intermediate_size"});
      core::Json mla = core::Json::object();
      mla["q_lora_rank"] = integer_at(c, "q_lora_rank").value_or(0);
      mla["kv_lora_rank"] = required_at(c, "kv_lora_rank");
      mla["qk_nope_head_dim"] = required_at(c, "qk_nope_head_dim");
      mla["qk_rope_head_dim"] = required_at(c, "qk_rope_head_dim");
      mla["v_head_dim"] = required_at(c, "v_head_dim");
      c.set("mla", std::move(mla));
      core::Json moe = moe_object(c, {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"});
      if (auto shared = integer_at(c, "n_shared_experts", 0); shared && *shared > 0)
        moe["shared_expert_ffn_hidden_size"] = *shared * moe["expert_ffn_hidden_size"].get<std::int64_t>();
      moe["first_dense_layers"] = integer_at(c, "first_k_dense_replace", 0).value_or(0);
      moe["layer_frequency"] = integer_at(c, "moe_layer_freq").value_or(1);
      if (auto scoring = c.find({"scoring_func"}))
        moe["router"] = scoring->as_string() == "sigmoid" ? "sigmoid" : "softmax";
      if (auto method = c.find({"topk_method"}))
        moe["load_balancing"] = method->as_string() == "noaux_tc" ? "aux_free" : "aux_loss";
      if (auto groups = integer_at(c, "n_group", 1); groups && *groups > 1) {
        moe["expert_groups"] = *groups;
        moe["groups_per_token"] = integer_at(c, "topk_group", 1).value_or(*groups);
      }
      c.set("moe", std::move(moe));
      break;
    }
    case Family::GPT_OSS: {
      llama_like(c, true);
      grouped_query(c);
      c.set("ffn_kind", "swiglu"); // a clamped SwiGLU
      c.set("linear_bias", true);  // the experts' and the output projection's biases
      sliding_window(c, 2);
      const std::string_view per_token = c.find({"num_experts_per_tok"}) ? "num_experts_per_tok" : "experts_per_token";
      c.set("moe", moe_object(c, {"num_local_experts", per_token, "intermediate_size"}));
      break;
    }
    case Family::GEMMA2:
    case Family::GEMMA3: {
      llama_like(c, false);
      grouped_query(c);
      c.integer("ffn_hidden_size", {"intermediate_size"});
      c.set("ffn_kind", core::choice_name(activation(c, "gelu_pytorch_tanh", true), ffn_kind_choices));
      c.set("tie_embeddings", c.flag({"tie_word_embeddings"}, true));
      c.set("post_norms", true);
      c.set("qk_norm", family == Family::GEMMA3);
      sliding_window(c, family == Family::GEMMA2 ? 2 : integer_at(c, "sliding_window_pattern").value_or(6));
      break;
    }
    case Family::GPT2: {
      const std::int64_t h = c.integer("hidden_size", {"n_embd", "hidden_size"});
      c.integer("num_layers", {"n_layer", "num_hidden_layers"});
      c.integer("num_attention_heads", {"n_head", "num_attention_heads"});
      if (!c.optional_integer("ffn_hidden_size", {"n_inner"}))
        c.set("ffn_hidden_size", 4 * h);
      c.integer("vocab_size", {"vocab_size"});
      c.integer("seq_length", {"n_positions", "n_ctx"});
      c.set("ffn_kind", core::choice_name(activation(c, "gelu_new", false), ffn_kind_choices));
      c.set("norm", "layernorm");
      c.set("position_embedding", "learned");
      c.set("tie_embeddings", c.flag({"tie_word_embeddings"}, true));
      c.set("dropout", c.any_dropout({"resid_pdrop", "embd_pdrop", "attn_pdrop"}));
      break;
    }
    case Family::GPT_NEOX: {
      c.integer("num_layers", {"num_hidden_layers"});
      c.integer("hidden_size", {"hidden_size"});
      c.integer("num_attention_heads", {"num_attention_heads"});
      c.integer("ffn_hidden_size", {"intermediate_size"});
      c.integer("vocab_size", {"vocab_size"});
      pretraining_length(c);
      c.set("ffn_kind", core::choice_name(activation(c, "gelu", false), ffn_kind_choices));
      c.set("norm", "layernorm");
      c.set("position_embedding", "rope");
      c.set("tie_embeddings", c.flag({"tie_word_embeddings"}, false));
      c.set("dropout", c.any_dropout({"attention_dropout", "hidden_dropout"}));
      break;
    }
    case Family::BLOOM: {
      const std::int64_t h = c.integer("hidden_size", {"hidden_size", "n_embed"});
      c.integer("num_layers", {"n_layer", "num_hidden_layers"});
      c.integer("num_attention_heads", {"n_head", "num_attention_heads"});
      c.set("ffn_hidden_size", 4 * h);
      c.integer("vocab_size", {"vocab_size"});
      // ALiBi has no maximum length in the config; BLOOM was trained on 2048-token sequences.
      if (!c.optional_integer("seq_length", {"seq_length", "max_position_embeddings"}))
        c.set("seq_length", 2048);
      c.set("ffn_kind", "gelu");
      c.set("norm", "layernorm");
      c.set("position_embedding", "alibi");
      c.set("embedding_norm", true);
      c.set("tie_embeddings", c.flag({"tie_word_embeddings"}, true));
      c.set("dropout", c.any_dropout({"attention_dropout", "hidden_dropout"}));
      break;
    }
    case Family::FALCON: {
      const std::int64_t h = c.integer("hidden_size", {"hidden_size", "n_embed"});
      c.integer("num_layers", {"num_hidden_layers", "n_layer"});
      const std::int64_t heads = c.integer("num_attention_heads", {"num_attention_heads", "n_head"});
      if (c.flag({"new_decoder_architecture"}, false)) {
        if (!c.optional_integer("num_kv_heads", {"num_kv_heads", "n_head_kv"}))
          c.set("num_kv_heads", heads);
      } else if (c.flag({"multi_query"}, true)) {
        c.set("num_kv_heads", 1);
      }
      if (!c.optional_integer("ffn_hidden_size", {"ffn_hidden_size"}))
        c.set("ffn_hidden_size", 4 * h);
      c.integer("vocab_size", {"vocab_size"});
      if (!c.optional_integer("seq_length", {"max_position_embeddings"}))
        c.set("seq_length", 2048);
      c.set("ffn_kind", "gelu");
      c.set("norm", "layernorm");
      c.set("position_embedding", c.flag({"alibi"}, false) ? "alibi" : "rope");
      c.set("tie_embeddings", c.flag({"tie_word_embeddings"}, true));
      const bool bias = c.flag({"bias"}, false);
      c.set("qkv_bias", bias);
      c.set("linear_bias", bias);
      c.set("dropout", c.any_dropout({"attention_dropout", "hidden_dropout"}));
      break;
    }
  }
  return c.take();
}

} // namespace sim::model
