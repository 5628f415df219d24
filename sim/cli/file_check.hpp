// `simtrain check`: any file simtrain reads, recognised by its schema and validated with the checks that apply to it.
#pragma once

#include "scenario/scenario.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sim::cli {

enum class FileKind { SCENARIO, MODEL, HF_CONFIG, TOPOLOGY, GPU, KERNELS, VALIDATION_SUMMARY };

struct CheckedFile {
  FileKind kind = FileKind::SCENARIO;
  std::string name;
  std::vector<core::Warning> warnings;
  std::optional<scenario::Scenario> scenario; // a scenario file's, loaded
};

// Validates one file of any kind, with the checks that apply to it (a scenario gets the cross-file checks).
CheckedFile check_file(const std::filesystem::path& file, const scenario::LoadOptions& options);

std::string_view describe(FileKind kind);

} // namespace sim::cli
