#include "study/child_run.hpp"

#include <fmt/format.h>

namespace sim::study {

std::vector<std::string> child_argv(const ChildRun& run)
{
  std::vector<std::string> argv{run.simtrain.empty() ? core::self_path().string() : run.simtrain.string()};
  if (!run.log_level.empty())
    argv.insert(argv.end(), {"--log-level", run.log_level});
  argv.insert(argv.end(), {run.command == ChildCommand::RUN ? "run" : "memory", run.scenario.string(), "--format",
                           run.format, "--data-dir", run.data_dir.string()});
  if (run.allow_oom)
    argv.emplace_back("--allow-oom");
  if (!run.passes.empty())
    argv.insert(argv.end(), {"--passes", run.passes.string()});
  for (const auto& s : run.overrides)
    argv.insert(argv.end(), {"--set", s});
  if (run.memory_bytes)
    argv.insert(argv.end(), {"--memory", fmt::format("{:.0f}B", *run.memory_bytes)});
  if (!run.out_dir.empty())
    argv.insert(argv.end(), {"--out", run.out_dir.string()});
  if (run.quiet)
    argv.emplace_back("--quiet");
  return argv;
}

core::Command child_command(const ChildRun& run)
{
  return {child_argv(run), run.stdout_file, run.stderr_file, run.simtrain.empty() || run.simtrain == core::self_path()};
}

ChildResult read_child_result(const ChildRun& run, int status)
{
  ChildResult r;
  r.status = status;
  if (status < 0) {
    r.reason = "could not start simtrain";
  } else if (status != 0) {
    r.reason = core::first_line(core::read_text(run.stderr_file));
  } else {
    r.report = core::Json::parse(core::read_text(run.stdout_file));
    if (!run.passes.empty())
      r.passes = core::Json::parse(core::read_text(run.passes));
  }
  return r;
}

std::vector<int> run_children(const std::vector<ChildRun>& runs, int jobs, const core::InProcess& in_process)
{
  std::vector<core::Command> commands;
  commands.reserve(runs.size());
  for (const auto& run : runs)
    commands.push_back(child_command(run));
  return core::run_commands(commands, jobs, in_process);
}

} // namespace sim::study
