// `simtrain import torchtitan`: a torchtitan job file (TOML) into a scenario/v1.
#pragma once

#include "core/json_reader.hpp"
#include "importer/imported.hpp"

#include <filesystem>
#include <string>

namespace sim::importer {

// The TOML file as a JSON document (tables as objects), so that its values are read and reported like every other
// input: `file:/parallelism/tensor_parallel_degree: ...`. A syntax error names the line and column.
core::Json read_toml_file(const std::filesystem::path& file);

// `job`: the job file as read_toml_file gives it. `model`: a model preset name or path to use instead of the one
// torchtitan's [model] name and flavor stand for (required when simtrain has no preset for them).
Imported import_torchtitan(const core::Node& job, const Target& target, const std::string& model);

} // namespace sim::importer
