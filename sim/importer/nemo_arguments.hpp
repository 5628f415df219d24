// NeMo 1.x's Hydra overrides on the command line (model.X=V, trainer.X=V) read as the Megatron-LM arguments they
// stand for.
#pragma once

#include "importer/megatron_arguments.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace sim::importer {

// `token` without Hydra's '+' / '++' and the launcher's stage ("peft.model.x=v", "training.trainer.y=w"): the
// override as the stage's own configuration reads it.
std::string_view nemo_unstaged(std::string_view token);

// Whether `token` is a NeMo override (model.*, trainer.*, exp_manager.*, run.* with a value; '+' prefixes and the
// launcher's stage names allowed).
bool is_nemo(std::string_view token);

// One NeMo override as the Megatron-LM arguments it means.
std::vector<Given> nemo_override(const std::string& token);

} // namespace sim::importer
