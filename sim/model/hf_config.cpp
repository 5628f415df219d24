#include "model/hf_config.hpp"

#include "core/spelling.hpp"
#include "model/model_spec.hpp"

#include <fmt/format.h>
#include <initializer_list>
#include <optional>

namespace sim::model {
namespace {

enum class Family { LLAMA, QWEN2, GPT2, GPT_NEOX, BLOOM, FALCON };

constexpr std::array<core::Choice<Family>, 9> family_choices{{{"llama", Family::LLAMA},
                                                              {"mistral", Family::LLAMA},
                                                              {"qwen2", Family::QWEN2},
                                                              {"gpt2", Family::GPT2},
                                                              {"gpt_neox", Family::GPT_NEOX},
                                                              {"bloom", Family::BLOOM},
                                                              {"falcon", Family::FALCON},
                                                              {"RefinedWeb", Family::FALCON},
                                                              {"RefinedWebModel", Family::FALCON}}};

// Keys whose presence means an architecture simtrain cannot express yet; never ignored silently.
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

} // namespace

bool looks_like_hf_config(const core::Json& json)
{
  return json.is_object() && !json.contains("schema") &&
         (json.contains("model_type") || json.contains("architectures"));
}

HfConversion convert_hf_config(const core::Node& config, const std::string& name)
{
  Converter c(config);
  for (auto key : moe_keys) {
    if (auto n = c.find({key}); n && !(n->json().is_number() && n->json().get<double>() == 0.0))
      n->fail("mixture-of-experts models are not supported yet", "a dense model");
  }
  const core::Node type_node = c.require({"model_type"}, "one of llama, mistral, qwen2, gpt2, gpt_neox, bloom, falcon");
  const Family family = type_node.as_choice<Family>(family_choices);

  std::string model_name = name;
  if (auto n = c.find({"_name_or_path"}); n && n->json().is_string() && !n->json().get<std::string>().empty())
    model_name = n->json().get<std::string>();
  c.set("schema", "model/v1");
  c.set("name", model_name);
  c.set("description", fmt::format("read from a HuggingFace config.json (model_type {})", type_node.as_string()));
  c.set("source", config.location().file);

  switch (family) {
    case Family::LLAMA:
    case Family::QWEN2: {
      c.integer("num_layers", {"num_hidden_layers"});
      c.integer("hidden_size", {"hidden_size"});
      c.integer("num_attention_heads", {"num_attention_heads"});
      c.optional_integer("num_kv_heads", {"num_key_value_heads"});
      c.optional_integer("head_dim", {"head_dim"});
      c.integer("ffn_hidden_size", {"intermediate_size"});
      c.integer("vocab_size", {"vocab_size"});
      pretraining_length(c);
      c.set("ffn_kind", core::choice_name(activation(c, "silu", true), ffn_kind_choices));
      c.set("norm", "rmsnorm");
      c.set("position_embedding", "rope");
      c.set("tie_embeddings", c.flag({"tie_word_embeddings"}, false));
      const bool attention_bias = c.flag({"attention_bias"}, false);
      c.set("qkv_bias", family == Family::QWEN2 || attention_bias);
      c.set("linear_bias", c.flag({"mlp_bias"}, false));
      c.set("dropout", c.any_dropout({"attention_dropout", "hidden_dropout"}));
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
