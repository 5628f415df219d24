// `simtrain import hf`: Hugging Face Trainer's TrainingArguments (the JSON Trainer saves, training_args.json, or the
// script's --key value arguments) and a model into a scenario/v1. A DeepSpeed config named by `deepspeed` is imported
// as `simtrain import deepspeed` would, with Trainer's values in its "auto" fields.
#pragma once

#include "core/json_reader.hpp"
#include "importer/imported.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sim::importer {

struct HfTrainerOptions {
  std::string model;                      // a model preset name or a path, as the scenario's "model"
  std::optional<std::int64_t> seq_length; // else max_seq_length / max_length / model_max_length, else the model's
  std::filesystem::path base_dir;         // where a relative `deepspeed` path is found (the arguments file's folder)
};

// `--key value` arguments (a flag without a value is true; True/False, numbers and JSON objects as such) as the JSON
// object TrainingArguments saves.
core::Json hf_arguments_json(const std::vector<std::string>& arguments);

// A YAML document's scalars (all read as text) as the values they spell: booleans, numbers, null.
core::Json typed_scalars(const core::Json& j);

// `args`: the TrainingArguments object. A GPU count (Target::gpus) is required.
Imported import_hf_trainer(const core::Node& args, const Target& target, const HfTrainerOptions& options);

} // namespace sim::importer
