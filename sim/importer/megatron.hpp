// `simtrain import megatron`: Megatron-LM / Megatron-core pretrain_gpt.py arguments into a scenario/v1.
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
