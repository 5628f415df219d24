// The launcher before Megatron-LM's script on a command line (torchrun, python -m torch.distributed.run, deepspeed):
// its arguments, and the GPU count they start.
#pragma once

#include "importer/megatron_arguments.hpp"

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace sim::importer {

struct Launch {
  std::optional<int> gpus;     // --nproc_per_node (--num_gpus) x --nnodes (--num_nodes); nullopt without them
  std::string script;          // pretrain_gpt.py, as given
  std::vector<Given> launcher; // the launcher's own arguments, reported as having no effect
};

// `tokens`: what comes before `script` (torchrun and its arguments).
Launch read_launcher(std::span<const std::string> tokens, const std::string& script);

} // namespace sim::importer
