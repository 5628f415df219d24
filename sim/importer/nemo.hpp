// `simtrain import nemo`: a NeMo 1.x training configuration (YAML, as NeMo-Framework-Launcher's conf/training files
// and megatron_gpt_config.yaml write it) into a scenario/v1, read as the Megatron-LM arguments its keys set.
#pragma once

#include "core/json_reader.hpp"
#include "importer/imported.hpp"
#include "importer/megatron.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sim::importer {

// The YAML file as a JSON document of strings (scalars as written), so that its values are reported by pointer.
// A syntax error names the line and column; a file whose aliases expand past a million values is refused.
core::Json read_yaml_file(const std::filesystem::path& file);

// The configuration's model.* and trainer.* values as NeMo command-line overrides ("model.num_layers=96"), with
// OmegaConf's interpolations resolved where they can be (${.key}, ${model.key} and ${training.model.key}, the
// launcher's multiply / divide_ceil / divide_floor); the others stay as written. More than 64 MiB of resolved text is
// refused (an InputError naming `file`).
std::vector<std::string> nemo_overrides(const core::Json& config, const std::string& file = {});

// `extra`: more overrides or Megatron-LM arguments from the command line, read after the file's (they win).
// `model`: the model a fine-tuning configuration restores from a checkpoint (it must then not describe one); without
// it the configuration must describe its model.
Imported import_nemo(const core::Json& config, const std::string& file, const Target& target,
                     const std::vector<std::string>& extra, const std::optional<GivenModel>& model = std::nullopt);

} // namespace sim::importer
