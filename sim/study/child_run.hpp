// One door for child runs: a `simtrain run` (or `memory`) in a child process described as data, its command line
// built in one place and its result (exit status, report, the first line of its log) read back in one place.
// SimGrid allows one simulation per process, so compare, sweep and validate run simtrain itself side by side.
#pragma once

#include "core/document.hpp"
#include "core/process_pool.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sim::study {

enum class ChildCommand { RUN, MEMORY };

struct ChildRun {
  ChildCommand command = ChildCommand::RUN;
  std::filesystem::path scenario;
  std::vector<std::string> overrides; // --set PATH=VALUE, in order
  std::filesystem::path data_dir;
  std::string log_level;              // --log-level (empty: the child's default)
  std::string format = "json";        // --format: the report on standard output
  bool allow_oom = false;             // --allow-oom
  std::filesystem::path passes;       // --passes FILE: the step's pipeline passes (empty: not written)
  std::optional<double> memory_bytes; // --memory: the most the child's task graph may take
  std::filesystem::path out_dir;      // --out DIR: report, trace and timeline (empty: none)
  bool quiet = false;                 // --quiet
  std::filesystem::path stdout_file;  // where its report goes
  std::filesystem::path stderr_file;  // where its log goes
  std::filesystem::path simtrain;     // the binary (empty: the one running)
};

// SIMTRAIN [--log-level L] COMMAND SCENARIO --format F --data-dir D [--allow-oom] [--passes FILE] [--set S]...
// [--memory NB] [--out DIR] [--quiet]
std::vector<std::string> child_argv(const ChildRun& run);
core::Command child_command(const ChildRun& run);

struct ChildResult {
  int status = -1;    // exit status: -1 when it could not start, 128 + signal when killed
  std::string reason; // when it failed: the first line of its log ("could not start simtrain" when it did not)
  core::Json report;  // when it succeeded: its standard output, parsed
  core::Json passes;  // ditto, the --passes file
  bool ok() const { return status == 0; }
};

// What a child that ended with `status` left behind. Throws core::Json::exception when one that succeeded left a
// report (or passes file) that is not JSON.
ChildResult read_child_result(const ChildRun& run, int status);

// Runs the children, at most `jobs` at a time: their exit statuses in order (read each with read_child_result). With
// `in_process`, children of the running binary are forks of this process (core::InProcess).
std::vector<int> run_children(const std::vector<ChildRun>& runs, int jobs, const core::InProcess& in_process = {});

} // namespace sim::study
