// Reads a HuggingFace transformers config.json (Llama, Mistral, Qwen2, GPT-2, GPT-NeoX, BLOOM, Falcon families)
// into a model/v1 object, so that the rest of simtrain sees one format.
#pragma once

#include "core/json_reader.hpp"

#include <string>
#include <utility>
#include <vector>

namespace sim::model {

// True for a JSON object that looks like a HuggingFace config (has "model_type" or "architectures", no "schema").
bool looks_like_hf_config(const core::Json& json);

struct HfConversion {
  core::Json model; // a model/v1 object
  // For each model/v1 key that came from the config: the config's JSON pointer, for error messages.
  std::vector<std::pair<std::string, std::string>> origins;
};

// `name` is used when the config does not name the model (`_name_or_path`).
HfConversion convert_hf_config(const core::Node& config, const std::string& name);

} // namespace sim::model
