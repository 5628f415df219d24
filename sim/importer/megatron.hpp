// `simtrain import megatron`: Megatron-LM / Megatron-core pretrain_gpt.py arguments into a scenario/v1. Its parts:
// megatron_arguments (the command line; NeMo's overrides in nemo_arguments), megatron_launcher (torchrun before the
// script), megatron_model, megatron_plan, and megatron_no_effect (the arguments that change nothing in a step).
#pragma once

#include "importer/imported.hpp"

#include <string>
#include <vector>

namespace sim::importer {

// `arguments`: what follows `--` on simtrain's command line, pretrain_gpt.py's arguments. They may start with the
// launcher and the script (torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py ...), whose GPU count then stands
// for Target::gpus when that is not given.
Imported import_megatron(const std::vector<std::string>& arguments, const Target& target);

} // namespace sim::importer
