// The one door for child runs: the command line a child `simtrain` gets, and what is read back from it.
#include "study/child_run.hpp"
#include "support.hpp"

#include <sys/stat.h>

namespace {

using sim::study::ChildCommand;
using sim::study::ChildRun;

// A stand-in for simtrain: a scenario named ok.json gets a report (and passes), bad.json exits 1 with a log.
std::filesystem::path fake_simtrain(const std::filesystem::path& dir)
{
  const auto path = test::write_text(dir / "fake-simtrain", R"(#!/bin/sh
case "$2" in
  *ok.json) echo '{"step_time_s": 1.5}'; echo '[{"stage": 0}]' > "$8"; exit 0 ;;
  *bad.json) echo "error: bad.json: no such file" >&2; echo "second line" >&2; exit 1 ;;
  *) exit 2 ;;
esac
)");
  chmod(path.c_str(), 0755);
  return path;
}

} // namespace

TEST_CASE("a child run's command line keeps its options in one order")
{
  ChildRun run;
  run.simtrain = "/bin/simtrain";
  run.log_level = "off";
  run.scenario = "s.json";
  run.data_dir = "data";
  run.allow_oom = true;
  run.passes = "p.json";
  run.overrides = {"plan.tp=2", "plan.pp=4"};
  run.memory_bytes = 8589934592.0;
  run.out_dir = "out";
  run.quiet = true;
  CHECK(sim::study::child_argv(run) ==
        std::vector<std::string>{"/bin/simtrain", "--log-level", "off",    "run",         "s.json",   "--format",
                                 "json",          "--data-dir",  "data",   "--allow-oom", "--passes", "p.json",
                                 "--set",         "plan.tp=2",   "--set",  "plan.pp=4",   "--memory", "8589934592B",
                                 "--out",         "out",         "--quiet"});
}

TEST_CASE("a child run asks only for what it is given: a memory analysis is the command and its scenario")
{
  ChildRun run;
  run.simtrain = "/bin/simtrain";
  run.command = ChildCommand::MEMORY;
  run.scenario = "s.json";
  run.data_dir = "data";
  run.stdout_file = "s.report.json";
  run.stderr_file = "s.log";
  const auto command = sim::study::child_command(run);
  CHECK(command.argv ==
        std::vector<std::string>{"/bin/simtrain", "memory", "s.json", "--format", "json", "--data-dir", "data"});
  CHECK(command.stdout_file == "s.report.json");
  CHECK(command.stderr_file == "s.log");
}

TEST_CASE("a child's result is its report when it succeeds, the first line of its log when it fails")
{
  const auto dir = test::scratch_dir();
  const auto simtrain = fake_simtrain(dir);
  std::vector<ChildRun> runs;
  for (const char* name : {"ok", "bad"}) {
    ChildRun run;
    run.simtrain = simtrain;
    run.scenario = dir / (std::string(name) + ".json");
    run.passes = dir / (std::string(name) + ".passes.json");
    run.stdout_file = dir / (std::string(name) + ".out");
    run.stderr_file = dir / (std::string(name) + ".log");
    runs.push_back(run);
  }
  const auto status = sim::study::run_children(runs, 2);
  REQUIRE(status == std::vector<int>{0, 1});
  const auto ok = sim::study::read_child_result(runs[0], status[0]);
  CHECK(ok.ok());
  CHECK(ok.report.at("step_time_s") == 1.5);
  CHECK(ok.passes.at(0).at("stage") == 0);
  CHECK(ok.reason.empty());
  const auto bad = sim::study::read_child_result(runs[1], status[1]);
  CHECK_FALSE(bad.ok());
  CHECK(bad.status == 1);
  CHECK(bad.reason == "error: bad.json: no such file");
  CHECK(bad.report.is_null());
}

TEST_CASE("a child that could not start says so")
{
  ChildRun run;
  run.simtrain = "/no/such/simtrain";
  run.scenario = "s.json";
  const auto dir = test::scratch_dir();
  run.stdout_file = dir / "out";
  run.stderr_file = dir / "log";
  const auto status = sim::study::run_children({run}, 1);
  REQUIRE(status.size() == 1);
  const auto result = sim::study::read_child_result(run, status[0]);
  CHECK_FALSE(result.ok());
  CHECK(sim::study::read_child_result(run, -1).reason == "could not start simtrain");
}
