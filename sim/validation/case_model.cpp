#include "validation/case_model.hpp"

#include "model/hf_config.hpp"
#include "model/param_count.hpp"
#include "scenario/document_tree.hpp"
#include "validation/case_architecture.hpp"

#include <cctype>
#include <cmath>
#include <fmt/format.h>

namespace sim::validation {
namespace {

using core::Json;

// A case that names a published model without its architecture (Megatron-LM's "LLAMA3-70B", a source's MoE model
// with `moe: true`): the model preset of that name, trained at the case's sequence length; the fields the case does
// give must agree with it.
std::optional<Json> published_model(Conversion& conv, const Json& model,
                                    const std::optional<PublishedConfig>& published, std::int64_t seq)
{
  if (!published || !published->exact)
    return std::nullopt;
  Json m = published->model;
  if (const auto vocab = integer(model, "vocab"); vocab && *vocab != m.value("vocab_size", std::int64_t{0}))
    return std::nullopt;
  m["seq_length"] = seq;
  conv.assume(fmt::format("architecture not given: the published {} (model preset {})", text(model, "name"),
                          published->preset));
  return m;
}

// An embedded HuggingFace config.json (case schema v2's model.hf_config), read as simtrain reads one.
std::optional<Json> embedded_hf_config(Conversion& conv, const Json& model, std::int64_t seq)
{
  try {
    core::Provenance provenance;
    provenance.add_source("", conv.id());
    auto converted = model::convert_hf_config(core::Node(model.at("hf_config"), "", provenance),
                                              text(model, "name").empty() ? conv.id() : text(model, "name"));
    converted.model["seq_length"] = seq;
    conv.assume("architecture from the case's embedded HuggingFace config");
    return std::move(converted.model);
  } catch (const core::InputError& e) {
    conv.refuse(fmt::format("model.hf_config is not a config simtrain can read: {}", e.what()));
    return std::nullopt;
  }
}

// The stated parameter count against the architecture as read: a gap means the case holds something simtrain did
// not read (GQA, a gated FFN, an untied head...), and its time would be off by as much.
bool check_parameters(Conversion& conv, const Json& model, const Json& m)
{
  const auto stated_number = [&model](std::string_view key) {
    const auto v = number(model, key);
    return v && *v > 0 ? v : std::nullopt;
  };
  const auto stated = stated_number("params_b");
  const auto stated_active = stated_number("active_params_b");
  if (!stated && !stated_active)
    return true;
  double counted = 0;
  double active = 0;
  try {
    core::Provenance provenance;
    provenance.add_source("", conv.id());
    const auto count = model::count_params(model::read_model(core::Node(m, "", provenance)));
    counted = count.total / 1e9;
    active = count.active / 1e9;
  } catch (const core::InputError& e) {
    conv.refuse(fmt::format("the model does not describe a transformer simtrain can build: {}", e.what()));
    return false;
  }
  const double gap = stated ? counted / *stated - 1.0 : 0.0;
  if (std::abs(gap) > 0.15) {
    conv.refuse(fmt::format("the architecture as given has {:.2f}B parameters, the case states {}B ({:+.0f}%): "
                            "it holds architecture details the case does not state",
                            counted, text(model, "params_b"), 100.0 * gap));
    return false;
  }
  if (std::abs(gap) > 0.03)
    conv.assume(fmt::format("the architecture as given has {:.2f}B parameters against {}B stated ({:+.1f}%)", counted,
                            text(model, "params_b"), 100.0 * gap));
  if (stated_active) {
    const double active_gap = active / *stated_active - 1.0;
    if (std::abs(active_gap) > 0.15) {
      conv.refuse(fmt::format("the architecture as given has {:.2f}B active parameters, the case states {}B "
                              "({:+.0f}%): its experts or routing are not as stated",
                              active, text(model, "active_params_b"), 100.0 * active_gap));
      return false;
    }
  }
  return true;
}

} // namespace

const std::set<std::string>& model_fields()
{
  static const std::set<std::string> fields{
      "name", "params_b", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "seq_len",
      "activation", "norm", "position_embedding", "tie_embeddings", "bias", "dropout",
      // case schema v2
      "experts", "top_k", "expert_ffn_hidden", "shared_experts", "shared_expert_ffn_hidden", "dense_layers",
      "moe_layer_freq", "mla", "sliding_window", "full_attention_every", "attention_sinks", "chunked_attention",
      "nope_every", "mtp_depth", "active_params_b", "model_flops_per_seq", "hf_config", "moe"};
  return fields;
}

namespace {

// Multi-token prediction trained with the model: its modules, whichever way the architecture came.
std::optional<Json> with_mtp(const Json& model, std::optional<Json> m)
{
  if (const auto depth = integer(model, "mtp_depth"); m && depth && *depth > 0)
    (*m)["mtp_layers"] = *depth;
  return m;
}

std::optional<Json> convert_architecture(Conversion& conv);

} // namespace

std::optional<Json> convert_model(Conversion& conv)
{
  return with_mtp(section(conv.case_json(), "model"), convert_architecture(conv));
}

namespace {

std::optional<Json> convert_architecture(Conversion& conv)
{
  const Json& model = section(conv.case_json(), "model");
  const auto layers = integer(model, "layers");
  const auto hidden = integer(model, "hidden");
  const auto heads = integer(model, "heads");
  const auto vocab = integer(model, "vocab");
  const auto seq = integer(model, "seq_len");
  const auto published = published_config(conv.data_dir(), text(model, "name")); // once per case
  if (member(model, "hf_config") && seq) {
    auto m = embedded_hf_config(conv, model, *seq);
    if (!m || !add_attention(conv, model, *seq, *m) || !check_parameters(conv, model, *m))
      return std::nullopt;
    return m;
  }
  if (!layers && !hidden && !heads && seq)
    if (auto named = published_model(conv, model, published, *seq))
      return named;
  if (flag(model, "moe").value_or(false) && !member(model, "experts")) {
    conv.refuse(fmt::format("an MoE model without its shape, and no model preset named \"{}\"", text(model, "name")));
    return std::nullopt;
  }
  if (!layers || !hidden || !heads || !vocab || !seq) {
    conv.refuse("the model's architecture is not given (layers, hidden, heads, vocab, seq_len)");
    return std::nullopt;
  }
  Json m{{"schema", "model/v1"},
         {"name", text(model, "name").empty() ? conv.id() : text(model, "name")},
         {"num_layers", *layers},
         {"hidden_size", *hidden},
         {"num_attention_heads", *heads},
         {"vocab_size", *vocab},
         {"seq_length", *seq}};
  if (member(model, "kv_heads")) {
    const auto kv = integer(model, "kv_heads");
    if (!kv || *kv == 0 || *heads % *kv != 0) {
      conv.refuse(fmt::format("kv_heads {} does not divide the {} heads", text(model, "kv_heads"), *heads));
      return std::nullopt;
    }
    m["num_kv_heads"] = *kv;
  }
  if (const auto d = integer(model, "head_dim"))
    m["head_dim"] = *d;
  if (member(model, "activation")) {
    const auto ffn =
        conv.choice(model, "activation",
                    {{"swiglu", "swiglu"}, {"silu", "swiglu"}, {"geglu", "geglu"}, {"gelu", "gelu"}, {"relu", "relu"}});
    if (!ffn)
      return std::nullopt;
    m["ffn_kind"] = *ffn;
  }
  if (member(model, "norm")) {
    const auto norm = conv.choice(model, "norm", {{"rms", "rmsnorm"}, {"layer", "layernorm"}});
    if (!norm)
      return std::nullopt;
    m["norm"] = *norm;
  }
  if (member(model, "position_embedding")) {
    const auto pos = conv.choice(model, "position_embedding",
                                 {{"rope", "rope"}, {"rotary", "rope"}, {"alibi", "alibi"}, {"learned", "learned"}});
    if (!pos)
      return std::nullopt;
    m["position_embedding"] = *pos;
  }
  // "bias": "qkv" — biases on the query, key and value projections alone (Qwen, Qwen2).
  const bool qkv_bias_only = lower(text(model, "bias")) == "qkv";
  if (qkv_bias_only) {
    m["qkv_bias"] = true;
    m["linear_bias"] = false;
  }
  for (const auto& [field, key] :
       {std::pair{"tie_embeddings", "tie_embeddings"}, {"bias", "linear_bias"}, {"dropout", "dropout"}})
    if (member(model, field) && !(qkv_bias_only && std::string_view(field) == "bias")) {
      const auto b = flag(model, field);
      if (!b) {
        conv.refuse(fmt::format("model.{} \"{}\" is not a true/false value", field, text(model, field)));
        return std::nullopt;
      }
      m[key] = *b;
      if (std::string_view(key) == "linear_bias")
        m["qkv_bias"] = *b;
    }
  fill_from_published(conv, model, published, m);
  const bool every_layer_moe = member(model, "experts") && integer(model, "dense_layers").value_or(0) == 0 &&
                               integer(model, "moe_layer_freq").value_or(1) <= 1;
  if (const auto ffn = integer(model, "ffn_hidden"))
    m["ffn_hidden_size"] = *ffn;
  else if (every_layer_moe) // no dense FFN: the width is never used
    m["ffn_hidden_size"] = integer(model, "expert_ffn_hidden").value_or(1);
  else
    conv.assume(m.contains("ffn_kind") && m["ffn_kind"] == "swiglu" ? "FFN size not given: 8/3 x hidden (SwiGLU)"
                                                                    : "FFN size not given: 4 x hidden");
  if (m.contains("ffn_kind") && m["ffn_kind"] == "swiglu" && !m.contains("ffn_hidden_size"))
    m["ffn_hidden_size"] = (8 * *hidden / 3 + 127) / 128 * 128;
  if (mentions(text(model, "name"), "mpt") ||
      mentions(text(section(conv.case_json(), "plan"), "framework"), "llm-foundry")) {
    // llm-foundry's benchmark models (scripts/train/yamls/pretrain/mpt-*.yaml): learned positions, biases, no
    // dropout; their published parameter counts reproduce exactly with biases on.
    if (!member(model, "dropout"))
      m["dropout"] = false;
    conv.assume("MPT architecture: learned positions, biases, no dropout, tied embeddings (llm-foundry yamls)");
  }
  if (!add_experts(conv, model, published, m) || !add_attention(conv, model, *seq, m) ||
      !check_parameters(conv, model, m))
    return std::nullopt;
  return m;
}

} // namespace

} // namespace sim::validation
