#include "cli/commands.hpp"
#include "core/diagnostics.hpp"

#include "core/input_error.hpp"
#include "core/process_pool.hpp"
#include "engine/replay.hpp"
#include "report/html_report.hpp"
#include "scenario/feasibility.hpp"
#include "study/child_run.hpp"
#include "study/compare.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <iostream>
#include <optional>

namespace sim::cli {
namespace fs = std::filesystem;
namespace {

// Each side's `simtrain run FILE --format json` with its --set values in a child process: its report and, with
// `with_passes`, its pipeline passes; a child's error is rethrown with its exit code's meaning.
struct ChildRuns {
  std::vector<core::Json> reports;
  std::vector<core::Json> passes; // each step's pipeline passes (report::passes_json), when asked for
};

ChildRuns run_sides(const std::vector<std::pair<std::string, std::vector<std::string>>>& sides, const CommonOptions& o,
                    bool with_passes)
{
  const core::WorkDir work({}, "simtrain-compare");
  std::vector<study::ChildRun> runs;
  for (std::size_t i = 0; i < sides.size(); ++i) {
    study::ChildRun run;
    run.scenario = sides[i].first;
    run.overrides = sides[i].second;
    run.data_dir = o.data_dir;
    run.allow_oom = o.allow_oom;
    if (with_passes)
      run.passes = work.path() / fmt::format("{}.passes.json", i);
    run.stdout_file = work.path() / fmt::format("{}.json", i);
    run.stderr_file = work.path() / fmt::format("{}.log", i);
    runs.push_back(run);
  }
  const auto status = study::run_children(runs, 2, child_in_process());
  ChildRuns out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto result = study::read_child_result(runs[i], status[i]);
    std::string message = result.reason;
    for (const char* prefix : {"error: ", "simulation failed: "})
      if (message.starts_with(prefix))
        message = message.substr(std::string(prefix).size());
    if (result.status == 1)
      throw core::InputError({sides[i].first, "", ""}, message.empty() ? "could not be loaded" : message);
    if (!result.ok())
      throw engine::SimulationError(fmt::format("{}: {}", sides[i].first, message));
    out.reports.push_back(result.report);
    if (with_passes)
      out.passes.push_back(result.passes);
  }
  return out;
}

// The --set values of one side that the other does not share, in order.
std::vector<std::string> own_values(const std::vector<std::string>& mine, const std::vector<std::string>& theirs)
{
  std::vector<std::string> own;
  for (const auto& s : mine)
    if (std::find(theirs.begin(), theirs.end(), s) == theirs.end())
      own.push_back(s);
  return own;
}

// A side's name: its file, and the --set values that differ from the other side's.
std::string side_name(const std::string& file, const std::vector<std::string>& mine,
                      const std::vector<std::string>& theirs)
{
  const auto own = own_values(mine, theirs);
  return own.empty() ? file : fmt::format("{} --set {}", file, fmt::join(own, " --set "));
}

} // namespace

namespace {

// A report written by `simtrain run --out` or `--format json` (compared as it is), or nothing for a scenario.
std::optional<core::Json> saved_report(const std::string& file)
{
  try {
    auto j = core::Json::parse(core::read_text(file));
    if (j.is_object() && j.value("kind", "") == "simulation" && j.contains("step_time_s"))
      return j;
  } catch (const std::exception&) {
    // Not JSON, or unreadable: the scenario loader says what is wrong with it.
  }
  return std::nullopt;
}

// A report saved before reports said how accurate simtrain is gets its GPU's accuracy from the current summary.
core::Json with_validation(core::Json report, const report::SummaryFile& summary)
{
  if (!report.contains("validation"))
    report["validation"] =
        report::gpu_validation(summary, report.value(core::Json::json_pointer("/cluster/gpu"), std::string("?")));
  return report;
}

// Prints the comparison; with --out, also writes compare.json and compare.html (each side's timeline from `passes`,
// null for a saved report).
void print_comparison(const core::Json& a, const core::Json& b, const std::string& name_a, const std::string& name_b,
                      const CommonOptions& o, const CompareArgs& args, const std::array<core::Json, 2>& passes = {})
{
  const auto summary = load_validation_summary(o);
  const auto c = study::compare_reports(with_validation(a, summary), with_validation(b, summary), name_a, name_b);
  const auto json = study::comparison_json(c, a, b);
  if (o.format == "json")
    std::cout << json.dump(2) << "\n";
  else
    std::cout << study::comparison_text(c);
  if (args.out_dir.empty())
    return;
  const fs::path dir = args.out_dir;
  std::ofstream(dir / "compare.json") << json.dump(2) << "\n";
  std::ofstream(dir / "compare.html") << report::compare_html(json, passes[0], passes[1]);
  if (o.format != "json")
    std::cout << "wrote " << (dir / "compare.json").string() << ", compare.html (open in a browser)\n";
}

} // namespace

int compare(const CompareArgs& a, const CommonOptions& o)
{
  if (a.scenarios.size() == 2) {
    auto ra = saved_report(a.scenarios[0]);
    auto rb = saved_report(a.scenarios[1]);
    if (ra && rb) {
      if (!o.overrides.empty() || o.tokens)
        throw core::InputError({"compare", "", ""}, "reports are compared as they are", "--set or --tokens",
                               "two scenarios to simulate under --set, or two reports without it");
      if (!a.out_dir.empty())
        prepare_output_dir(a.out_dir);
      print_comparison(*ra, *rb, a.scenarios[0], a.scenarios[1], o, a);
      return 0;
    }
    if (ra || rb)
      throw core::InputError({ra ? a.scenarios[0] : a.scenarios[1], "", ""}, "a report beside a scenario",
                             "one report.json", "two scenarios, or two reports");
  }
  auto overrides = o.overrides;
  if (o.tokens)
    overrides.push_back(fmt::format("training_tokens={}", *o.tokens));
  std::vector<std::pair<std::string, std::vector<std::string>>> runs;
  if (a.scenarios.size() == 2) {
    runs = {{a.scenarios[0], overrides}, {a.scenarios[1], overrides}};
  } else {
    const auto split = study::split_overrides(overrides);
    runs = {{a.scenarios.at(0), split.a}, {a.scenarios.at(0), split.b}};
    // A side that changes tp or pp keeps the scenario's GPU count (that of the values both sides share): its dp is
    // derived again.
    const auto base = scenario::load_scenario(
        a.scenarios.at(0), scenario::LoadOptions{o.data_dir, own_values(split.a, own_values(split.a, split.b))});
    const std::array own{own_values(split.a, split.b), own_values(split.b, split.a)};
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (const auto dp = study::keep_gpu_count(own[i], base.plan.tp, base.plan.pp, base.gpus)) {
        const auto note =
            fmt::format("{} keeps the scenario's {} GPUs with --set {}", fmt::join(own[i], " "), base.gpus, *dp);
        core::diagnose("note", "note: " + note, note);
        runs[i].second.push_back(*dp);
      }
  }
  // Bad input (and a plan that does not fit, unless --allow-oom) is reported before anything runs.
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& [file, sets] = runs[i];
    const auto s = scenario::load_scenario(file, scenario::LoadOptions{o.data_dir, sets});
    if (!o.allow_oom) {
      const auto own = own_values(sets, runs[1 - i].second); // what makes this side differ from the other
      scenario::refuse_out_of_memory(
          s, own.empty() ? std::string() : fmt::format("{} (side {})", fmt::join(own, " --set "), i == 0 ? 'A' : 'B'));
    }
  }
  if (!a.out_dir.empty())
    prepare_output_dir(a.out_dir);
  const auto children = run_sides(runs, o, !a.out_dir.empty());
  std::array<core::Json, 2> passes{};
  if (!a.out_dir.empty())
    passes = {children.passes[0], children.passes[1]};
  print_comparison(children.reports[0], children.reports[1], side_name(runs[0].first, runs[0].second, runs[1].second),
                   side_name(runs[1].first, runs[1].second, runs[0].second), o, a, passes);
  return 0;
}

} // namespace sim::cli
