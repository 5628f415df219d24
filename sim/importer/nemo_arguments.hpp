// NeMo 1.x's Hydra overrides on the command line (model.X=V, trainer.X=V) read as the Megatron-LM arguments they
// stand for.
#pragma once

#include "importer/megatron_arguments.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace sim::importer {

// Whether `token` is a NeMo override (model.*, trainer.*, exp_manager.*, run.* with a value; '+' prefixes allowed).
bool is_nemo(std::string_view token);

// One NeMo override as the Megatron-LM arguments it means.
std::vector<Given> nemo_override(const std::string& token);

} // namespace sim::importer
