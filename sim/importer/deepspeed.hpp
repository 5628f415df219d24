// `simtrain import deepspeed`: a DeepSpeed config (ds_config.json) and a model into a scenario/v1.
#pragma once

#include "core/json_reader.hpp"
#include "importer/imported.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace sim::importer {

// What a DeepSpeed config leaves to the training script (or to HuggingFace Trainer's "auto" values).
struct DeepSpeedOptions {
  std::string model;                        // a model preset name or a path, as the scenario's "model"
  std::optional<std::int64_t> seq_length;   // the model's own when not given
  std::optional<std::int64_t> micro_batch;  // for "train_micro_batch_size_per_gpu": "auto"
  std::optional<std::int64_t> global_batch; // for "train_batch_size": "auto"
};

// `config`: the ds_config.json document. A GPU count (Target::gpus) is required.
Imported import_deepspeed(const core::Node& config, const Target& target, const DeepSpeedOptions& options);

} // namespace sim::importer
