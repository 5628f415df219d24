// `simtrain sweep` and `simtrain merge`: layout search over a scenario, and shards of one search joined again.
#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "core/diagnostics.hpp"
#include "report/html_report.hpp"

#include "core/input_error.hpp"
#include "core/units.hpp"
#include "engine/replay.hpp"
#include "study/sweep.hpp"

#include <algorithm>
#include <array>
#include <csignal>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <iostream>

namespace sim::cli {
namespace fs = std::filesystem;
namespace {

std::pair<int, int> parse_shard(const std::string& text)
{
  const auto slash = text.find('/');
  int index = 0;
  int count = 0;
  try {
    std::size_t used_i = 0;
    std::size_t used_n = 0;
    if (slash != std::string::npos) {
      index = std::stoi(text.substr(0, slash), &used_i);
      count = std::stoi(text.substr(slash + 1), &used_n);
    }
    if (slash == std::string::npos || used_i != slash || used_n != text.size() - slash - 1)
      count = 0;
  } catch (const std::exception&) {
    count = 0;
  }
  if (count < 1 || index < 1 || index > count)
    throw core::InputError({"--shard", "", ""}, "not a shard", text, "I/N with 1 <= I <= N, such as 3/8");
  return {index, count};
}

// A sweep's progress line: layouts settled of the candidates, elapsed time and an estimate of the rest.
class ProgressBar {
 public:
  void operator()(const study::SweepProgress& p)
  {
    const int settled = p.simulated + p.pruned;
    const bool finished = p.candidates > 0 && settled == p.candidates && p.running == 0;
    if (p.candidates == 0 && !finished) {
      line_.show(fmt::format("screening layouts: {} checked, {}", p.screened, clock(p.elapsed_s)), p.elapsed_s, false);
      return;
    }
    const int total = std::max(1, p.candidates);
    // The simulations' own pace (screening left out) over those that may still run (the rest will be pruned), as
    // many at a time as now: it falls as the top K fills (layouts with lower bounds, simulated later, may take longer
    // each).
    std::string eta = "-";
    if (p.simulated > 0 && settled < total)
      eta = "about " + clock((p.elapsed_s - p.screening_s) / p.simulated * (p.may_run + p.running));
    line_.show(fmt::format("{} {}/{} layouts ({} simulated, {} not needed), {} elapsed, ETA {}", bar(settled, total),
                           settled, total, p.simulated, p.pruned, clock(p.elapsed_s), eta),
               p.elapsed_s, finished);
  }

 private:
  ProgressLine line_;
};

void write_file(const fs::path& path, const std::string& text)
{
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out)
    throw core::InputError({path.string(), "", ""}, "cannot be written");
}

// sweep.json as the sweep stands, written beside and then moved over the last one: a sweep killed while writing
// leaves the previous file whole.
void write_checkpoint(const study::SweepResult& r, const std::string& out_dir)
{
  const fs::path file = fs::path(out_dir) / "sweep.json";
  const fs::path partial = fs::path(out_dir) / "sweep.json.partial";
  write_file(partial, study::sweep_json(r).dump(2) + "\n");
  fs::rename(partial, file);
}

// The sweep.json a --resume names: the file, or the sweep.json in the folder.
fs::path resumed_file(const std::string& given)
{
  std::error_code error;
  return fs::is_directory(given, error) ? fs::path(given) / "sweep.json" : fs::path(given);
}

void write_results(const study::SweepResult& r, const std::string& out_dir)
{
  if (out_dir.empty())
    return;
  write_file(fs::path(out_dir) / "sweep.csv", study::sweep_csv(r));
  const auto json = study::sweep_json(r);
  write_file(fs::path(out_dir) / "sweep.json", json.dump(2) + "\n");
  write_file(fs::path(out_dir) / "sweep.html", report::sweep_html(json));
}

void print_result(const study::SweepResult& r, int top, const std::string& format, bool given_order = false)
{
  if (format == "json")
    std::cout << study::sweep_json(r).dump(2) << "\n";
  else if (format == "csv")
    std::cout << study::sweep_csv(r);
  else
    std::cout << study::sweep_text(r, {.top = top, .given_order = given_order});
}

// The signal that stops a sweep (Ctrl-C's SIGINT, a batch system's SIGTERM): the sweep ends its simulations and
// writes what it has.
volatile std::sig_atomic_t stop_signal = 0;

extern "C" void on_stop_signal(int signal)
{
  stop_signal = signal;
}

// Installs the handler (no SA_RESTART: a wait for a simulation returns to look at it) while the sweep runs.
class StopOnSignal {
 public:
  StopOnSignal()
  {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    for (const int s : {SIGINT, SIGTERM})
      sigaction(s, &action, &previous_[s == SIGINT ? 0 : 1]);
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
  ~StopOnSignal()
  {
    sigaction(SIGINT, &previous_[0], nullptr);
    sigaction(SIGTERM, &previous_[1], nullptr);
  }

 private:
  std::array<struct sigaction, 2> previous_{};
};

} // namespace

int sweep(const SweepArgs& a, const CommonOptions& o)
{
  study::SweepOptions s;
  s.scenario = a.scenario;
  s.data_dir = o.data_dir;
  s.base_overrides = o.overrides;
  if (o.tokens)
    s.base_overrides.push_back(fmt::format("training_tokens={}", *o.tokens));
  // The base scenario must load: bad input is reported before anything is enumerated.
  const auto base = scenario::load_scenario(s.scenario, scenario::LoadOptions{o.data_dir, s.base_overrides});
  if (a.vary.empty() && !a.automatic)
    throw core::InputError({"sweep", "", ""}, "nothing to vary", "",
                           "--vary PATH=V1,V2,... (repeatable), --auto, or both");
  s.layouts = study::combine(study::vary_layouts(a.vary),
                             a.automatic ? study::auto_layouts(base) : std::vector<study::Layout>{});
  if (s.layouts.empty() && a.automatic && !a.vary.empty())
    throw core::InputError({"--vary", "", ""}, "no valid layout has the values asked for",
                           fmt::format("{} (with --auto)", fmt::join(a.vary, " ")),
                           "values that --auto's layouts take (sweep --auto alone lists them)");
  s.jobs = std::max(1, a.jobs);
  s.in_process = child_in_process();
  s.top = std::max(1, a.top);
  s.simulate_all = a.all;
  s.fold_only = a.fold_only;
  s.allow_oom = o.allow_oom;
  s.memory = scenario::machine_memory();
  if (!a.memory.empty())
    s.memory = scenario::capped(s.memory, *core::parse_quantity(a.memory, core::Dimension::BYTES), "--memory");
  s.summary = load_validation_summary(o);
  s.rank_by = a.rank_by == "tokens_per_usd" ? study::RankBy::TOKENS_PER_USD : study::RankBy::TOKENS_PER_S;
  if (!a.shard.empty())
    std::tie(s.shard_index, s.shard_count) = parse_shard(a.shard);
  if (a.save_runs) {
    if (a.out_dir.empty())
      throw core::InputError({"--save-runs", "", ""}, "needs a folder", "", "--out DIR as well");
    s.runs_dir = fs::path(a.out_dir) / "runs";
  }
  if (!a.resume.empty()) { // read before --out (which may be the same folder) is written
    const fs::path file = resumed_file(a.resume);
    s.resume_file = core::display_path(file);
    s.resume = study::sweep_from_json(core::read_json_file(file), s.resume_file);
  }
  if (!a.out_dir.empty()) {
    prepare_output_dir(a.out_dir);
    s.on_checkpoint = [&a](const study::SweepResult& r) { write_checkpoint(r, a.out_dir); };
  }
  ProgressBar bar;
  if (!a.quiet)
    s.on_progress = [&bar](const study::SweepProgress& p) { bar(p); };
  const StopOnSignal stop_on_signal;
  s.stop_requested = [] { return stop_signal != 0; };
  const auto result = study::run_sweep(s);
  write_results(result, a.out_dir);
  print_result(result, s.top, o.format, a.given_order);
  if (stop_signal != 0) {
    const auto message = fmt::format("interrupted by {}: the layouts simulated before it are ranked{}",
                                     stop_signal == SIGINT ? "SIGINT" : "SIGTERM",
                                     a.out_dir.empty() ? "" : fmt::format(" and written to {}", a.out_dir));
    core::diagnose("warning", "warning: " + message, message);
    return 128 + stop_signal;
  }
  const bool ranked = std::any_of(result.rows.begin(), result.rows.end(),
                                  [](const study::SweepRow& r) { return r.outcome == study::Outcome::RANKED; });
  const bool failed = std::any_of(result.rows.begin(), result.rows.end(),
                                  [](const study::SweepRow& r) { return r.outcome == study::Outcome::FAILED; });
  const bool all_invalid = !result.rows.empty() &&
                           std::all_of(result.rows.begin(), result.rows.end(),
                                       [](const study::SweepRow& r) { return r.outcome == study::Outcome::INVALID; });
  if (all_invalid) { // a mistyped --vary path or value: bad input, not an empty result
    const auto message = fmt::format("none of the {} layouts is a valid plan (first: {}: {})", result.rows.size(),
                                     study::layout_label(result.rows.front().layout), result.rows.front().reason);
    const core::Location where{core::display_path(a.scenario), "", ""};
    core::diagnose("error", fmt::format("error: {}: {}", where.file, message), message, &where);
    return 1;
  }
  return failed && !ranked ? 2 : 0;
}

int merge(const MergeArgs& a, const CommonOptions& o)
{
  std::vector<study::SweepResult> parts;
  for (const auto& file : a.parts)
    parts.push_back(study::sweep_from_json(core::read_json_file(file), core::display_path(file)));
  const auto merged = study::merge_sweeps(parts);
  if (!a.out_dir.empty())
    prepare_output_dir(a.out_dir);
  if (static_cast<int>(merged.rows.size()) < merged.layouts_total) {
    const auto message = fmt::format("{} of the sweep's {} layouts are in these files: a shard is missing",
                                     merged.rows.size(), merged.layouts_total);
    core::diagnose("warning", "warning: " + message, message);
  }
  write_results(merged, a.out_dir);
  print_result(merged, std::max(1, a.top), o.format);
  return 0;
}

} // namespace sim::cli
