// Runs the validation: converts every case of a cases file, simulates each run in a child process (SimGrid allows
// one simulation per process, and children run side by side), and compares the reports with the measurements.
#pragma once

#include "core/process_pool.hpp"
#include "validation/comparison.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace sim::validation {

struct ValidateOptions {
  std::vector<std::filesystem::path> cases_files; // their cases are run together
  std::filesystem::path data_dir;                 // presets
  std::filesystem::path simtrain;                 // the binary that runs each scenario
  int jobs = 1;                                   // child processes at a time
  std::string only;                               // only cases whose id contains this
  std::filesystem::path keep_dir; // keep the scenarios and reports here (default: a temporary folder, removed)
  std::vector<Target> targets = default_targets();
  std::vector<std::string> overrides; // --set PATH=VALUE for every converted scenario (an ablation)
  core::InProcess in_process;         // children of the running binary as forks of this process (core::InProcess)
};

// Throws core::InputError when the cases file cannot be read or is not an array of cases.
ValidationResult run_validation(const ValidateOptions& options);

} // namespace sim::validation
