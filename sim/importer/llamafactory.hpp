// `simtrain import llamafactory`: a LLaMA-Factory training YAML (llamafactory-cli train FILE.yaml) and a model into a
// scenario/v1: its fine-tuning method (full, LoRA, QLoRA), sequence length and kernels over the Hugging Face Trainer
// arguments it carries (importer/hf_trainer).
#pragma once

#include "core/json_reader.hpp"
#include "importer/hf_trainer.hpp"
#include "importer/imported.hpp"

namespace sim::importer {

// `config`: the YAML as read (typed_scalars applied). A GPU count (Target::gpus) is required.
Imported import_llamafactory(const core::Node& config, const Target& target, const HfTrainerOptions& options);

} // namespace sim::importer
