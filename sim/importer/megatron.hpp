// `simtrain import megatron`: Megatron-LM / Megatron-core pretrain_gpt.py arguments into a scenario/v1. Its parts:
// megatron_arguments (the command line; NeMo's overrides in nemo_arguments), megatron_launcher (torchrun before the
// script), megatron_model, megatron_plan, and megatron_no_effect (the arguments that change nothing in a step).
#pragma once

#include "importer/imported.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sim::importer {

// A model given apart from the arguments (`--model`: a preset or a file, as the scenario names it) and its layer count,
// for a configuration that restores its model from a checkpoint instead of describing it.
struct GivenModel {
  std::string reference;
  std::int64_t layers = 0;
};

// `arguments`: what follows `--` on simtrain's command line, pretrain_gpt.py's arguments. They may start with the
// launcher and the script (torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py ...), whose GPU count then stands
// for Target::gpus when that is not given. With `model`, the arguments must not describe one.
Imported import_megatron(const std::vector<std::string>& arguments, const Target& target,
                         const std::optional<GivenModel>& model = std::nullopt);

} // namespace sim::importer
