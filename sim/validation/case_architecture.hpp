// The parts of a validation case's architecture beyond a dense GPT (case schema v2): mixture of experts, multi-head
// latent attention, attention windows and chunks, multi-token prediction; and what a case that names a published
// model leaves unstated, taken from that model's published config (a model preset of its family).
#pragma once

#include "validation/case_reading.hpp"

#include <optional>
#include <string>

namespace sim::validation {

// The model preset a case's model name stands for: the same name (letters and digits compared, a Llama point release
// read as its family: "Llama-3.1-8B" is llama3-8b), or, failing that, the first preset of the same family and version
// ("Llama 3.2 3B" takes llama3-8b's). `exact` is false for a family match.
struct PublishedConfig {
  std::string preset;
  core::Json model; // the preset's model/v1 document
  bool exact = false;
};
std::optional<PublishedConfig> published_config(const std::filesystem::path& data_dir, const std::string& name);

// Keys of model/v1 that a case leaves unstated (activation, norm, positions, tied embeddings, biases, dropout), set
// from the published config (published_config of the case's model name, looked up once per case), each listed as an
// assumption. `m` is the model/v1 document built from the case.
void fill_from_published(Conversion& conv, const core::Json& model, const std::optional<PublishedConfig>& published,
                         core::Json& m);

// model.experts, top_k, expert_ffn_hidden, shared_experts, shared_expert_ffn_hidden, dense_layers and moe_layer_freq as
// model/v1's "moe" object, the router from the published config where it has as many experts. False when the case is
// refused.
bool add_experts(Conversion& conv, const core::Json& model, const std::optional<PublishedConfig>& published,
                 core::Json& m);

// model.mla, sliding_window, full_attention_every, attention_sinks, chunked_attention, nope_every and mtp_depth, for
// sequences of `seq` tokens. False when the case is refused.
bool add_attention(Conversion& conv, const core::Json& model, std::int64_t seq, core::Json& m);

} // namespace sim::validation
