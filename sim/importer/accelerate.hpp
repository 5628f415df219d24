// `simtrain import accelerate`: an Accelerate config (`accelerate launch --config_file FILE.yaml`: its processes,
// mixed precision and DDP, FSDP or DeepSpeed plugin) with the script's Trainer arguments, into a scenario/v1 of
// Trainer running under that launcher (importer/hf_trainer).
#pragma once

#include "core/json_reader.hpp"
#include "importer/hf_trainer.hpp"
#include "importer/imported.hpp"

namespace sim::importer {

// `config`: the YAML as read (typed_scalars applied); `trainer`: the script's TrainingArguments (an empty object when
// none are given); the script's own settings win over the launcher's where both say something. The GPU count is
// Target::gpus, else the config's num_processes.
Imported import_accelerate(const core::Node& config, const core::Node& trainer, const Target& target,
                           const HfTrainerOptions& options);

} // namespace sim::importer
