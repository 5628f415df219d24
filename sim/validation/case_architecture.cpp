#include "validation/case_architecture.hpp"

#include "scenario/document_tree.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <regex>
#include <vector>

namespace sim::validation {
namespace {

using core::Json;

// A model name as lower-case words of letters and digits: "Llama-3.1 405B" -> llama, 3, 1, 405b.
std::vector<std::string> words(const std::string& name)
{
  std::vector<std::string> out;
  std::string word;
  for (const char ch : name + " ") {
    if (std::isalnum(static_cast<unsigned char>(ch)) != 0) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    } else if (!word.empty()) {
      out.push_back(word);
      word.clear();
    }
  }
  return out;
}

bool all_digits(const std::string& w)
{
  return !w.empty() && std::all_of(w.begin(), w.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// A size word: 8b, 405b, 760m, 8x22b, 1t.
bool size_word(const std::string& w)
{
  static const std::regex size(R"([0-9]+(x[0-9]+)?[bmt])");
  return std::regex_match(w, size);
}

struct NameKey {
  std::string full;   // every word but a point release
  std::string family; // the words before the first size
};

NameKey name_key(const std::string& name)
{
  NameKey key;
  bool sized = false;
  std::string previous;
  for (const std::string& w : words(name)) {
    const bool point_release = all_digits(w) && all_digits(previous); // the "1" of "3.1"
    previous = w;
    if (point_release)
      continue;
    sized = sized || size_word(w);
    key.full += w;
    if (!sized)
      key.family += w;
  }
  return key;
}

// The architecture keys a published config settles that a case may leave unstated, with the case field for each.
struct Settled {
  const char* field;
  const char* key;
};
constexpr Settled settled[] = {{"activation", "ffn_kind"},
                               {"norm", "norm"},
                               {"position_embedding", "position_embedding"},
                               {"tie_embeddings", "tie_embeddings"},
                               {"bias", "qkv_bias"},
                               {"bias", "linear_bias"},
                               {"dropout", "dropout"}};

bool positive(const Json& j, std::string_view key, std::int64_t& out)
{
  const auto v = integer(j, key);
  if (!v || *v == 0)
    return false;
  out = *v;
  return true;
}

} // namespace

std::optional<PublishedConfig> published_config(const std::filesystem::path& data_dir, const std::string& name)
{
  const NameKey wanted = name_key(name);
  if (wanted.family.empty())
    return std::nullopt;
  std::optional<PublishedConfig> family;
  for (const std::string& preset : scenario::presets(data_dir, scenario::ReferenceKind::MODEL)) {
    const NameKey key = name_key(preset);
    if (key.full != wanted.full && (family || key.family != wanted.family))
      continue;
    PublishedConfig found{preset,
                          core::read_json_file(scenario::preset_path(data_dir, scenario::ReferenceKind::MODEL, preset)),
                          key.full == wanted.full};
    if (found.exact)
      return found;
    family = std::move(found);
  }
  return family;
}

void fill_from_published(Conversion& conv, const Json& model, const std::optional<PublishedConfig>& published, Json& m)
{
  if (!published)
    return;
  std::string filled;
  for (const auto& [field, key] : settled) {
    if (member(model, field) || m.contains(key) || !published->model.contains(key))
      continue;
    m[key] = published->model[key];
    filled += fmt::format("{}{} {}", filled.empty() ? "" : ", ", key, published->model[key].dump());
  }
  if (!filled.empty())
    conv.assume(fmt::format("not stated, from the published config of {} (model preset {}{}): {}", text(model, "name"),
                            published->preset, published->exact ? "" : ", same family", filled));
}

bool add_experts(Conversion& conv, const Json& model, const std::optional<PublishedConfig>& published, Json& m)
{
  static const char* const moe_fields[] = {
      "top_k", "expert_ffn_hidden", "shared_experts", "shared_expert_ffn_hidden", "dense_layers", "moe_layer_freq"};
  if (!member(model, "experts")) {
    for (const char* field : moe_fields)
      if (member(model, field)) {
        conv.refuse(fmt::format("model.{} without model.experts", field));
        return false;
      }
    return true;
  }
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  std::int64_t width = 0;
  if (!positive(model, "experts", experts) || !positive(model, "top_k", top_k) ||
      !positive(model, "expert_ffn_hidden", width) || top_k > experts) {
    conv.refuse(fmt::format("a mixture of experts needs experts, top_k (at most experts) and expert_ffn_hidden as "
                            "positive whole numbers (found {}, {}, {})",
                            text(model, "experts"), text(model, "top_k"), text(model, "expert_ffn_hidden")));
    return false;
  }
  Json moe{{"num_experts", experts}, {"experts_per_token", top_k}, {"expert_ffn_hidden_size", width}};
  const std::int64_t shared = integer(model, "shared_experts").value_or(0);
  if (shared > 0)
    moe["shared_expert_ffn_hidden_size"] = shared * integer(model, "shared_expert_ffn_hidden").value_or(width);
  if (const auto dense = integer(model, "dense_layers"); dense && *dense > 0)
    moe["first_dense_layers"] = *dense;
  if (const auto every = integer(model, "moe_layer_freq"); every && *every > 1)
    moe["layer_frequency"] = *every;
  // The router and its balancing are the published model's (DeepSeek-V3: sigmoid, auxiliary-loss-free, node-limited
  // groups) where the preset of that model has as many experts.
  if (published && published->model.contains("moe") &&
      published->model["moe"].value("num_experts", std::int64_t{0}) == experts) {
    std::string taken;
    for (const char* key : {"router", "load_balancing", "expert_groups", "groups_per_token", "shared_expert_gate"})
      if (published->model["moe"].contains(key)) {
        moe[key] = published->model["moe"][key];
        taken += fmt::format("{}{} {}", taken.empty() ? "" : ", ", key, moe[key].dump());
      }
    if (!taken.empty())
      conv.assume(fmt::format("routing from the published config (model preset {}): {}", published->preset, taken));
  }
  conv.assume("experts' load not given: balanced (plan.expert_load_imbalance 1)");
  m["moe"] = moe;
  return true;
}

bool add_attention(Conversion& conv, const Json& model, std::int64_t seq, Json& m)
{
  if (const Json* mla = member(model, "mla")) {
    Json out = Json::object();
    for (const char* key : {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}) {
      const auto v = integer(*mla, key);
      if (!v) {
        conv.refuse(fmt::format("model.mla.{} is not a whole number (found {})", key, text(*mla, key)));
        return false;
      }
      out[key] = *v;
    }
    m["mla"] = out;
  }
  if (const auto window = integer(model, "sliding_window"); window && *window > 0) {
    m["sliding_window"] = *window;
    if (const auto every = integer(model, "full_attention_every"); every && *every > 0)
      m["global_attention_every"] = *every;
  } else if (member(model, "full_attention_every")) {
    conv.refuse("model.full_attention_every without model.sliding_window");
    return false;
  }
  if (flag(model, "attention_sinks").value_or(false))
    conv.assume("attention sinks (a learned logit per head, one more term in each softmax) not modelled: no GEMM, a "
                "fraction of the softmax's work");
  if (const auto chunk = integer(model, "chunked_attention"); chunk && *chunk > 0) {
    if (*chunk < seq) {
      conv.refuse(fmt::format("chunked attention of {} tokens within sequences of {} is not modelled", *chunk, seq));
      return false;
    }
    conv.assume(fmt::format("chunked attention of {} tokens on sequences of {}: one chunk, every layer attends to the "
                            "whole sequence",
                            *chunk, seq));
  }
  if (integer(model, "nope_every").value_or(0) > 0)
    conv.assume("layers without RoPE (nope_every): the same GEMMs and attention, rotary embedding's few element-wise "
                "passes counted on every layer");
  return true;
}

} // namespace sim::validation
