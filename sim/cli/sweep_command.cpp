// `simtrain sweep` and `simtrain merge`: layout search over a scenario, and shards of one search joined again.
#include "cli/commands.hpp"
#include "core/diagnostics.hpp"

#include "core/input_error.hpp"
#include "core/units.hpp"
#include "engine/replay.hpp"
#include "study/sweep.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <iostream>
#include <unistd.h>

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

// 42s, 3m05s, 1h02m
std::string clock(double seconds)
{
  const auto s = static_cast<long>(seconds + 0.5);
  if (s < 60)
    return fmt::format("{}s", s);
  if (s < 3600)
    return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}h{:02d}m", s / 3600, s % 3600 / 60);
}

// done / total, elapsed, ETA on stderr: redrawn in place on a terminal, a line every 10 s otherwise.
class ProgressBar {
 public:
  ProgressBar() : tty_(isatty(STDERR_FILENO) != 0 && core::diagnostic_format() == core::DiagnosticFormat::TEXT) {}

  void operator()(const study::SweepProgress& p)
  {
    const int settled = p.simulated + p.pruned;
    const bool finished = p.candidates > 0 && settled == p.candidates && p.running == 0;
    if (done_ || (!tty_ && !finished && p.elapsed_s - last_s_ < 10.0))
      return;
    done_ = finished;
    last_s_ = p.elapsed_s;
    std::string text;
    if (p.candidates == 0 && !finished) {
      text = fmt::format("screening layouts: {} checked, {}", p.screened, clock(p.elapsed_s));
    } else {
      const int total = std::max(1, p.candidates);
      const int width = 24;
      const int filled = width * settled / total;
      std::string eta = "-";
      if (p.simulated > 0 && settled < total)
        eta = clock(p.elapsed_s / settled * (total - settled));
      text = fmt::format("[{}{}] {}/{} layouts ({} simulated, {} not needed), {} elapsed, ETA {}",
                         std::string(static_cast<std::size_t>(filled), '#'),
                         std::string(static_cast<std::size_t>(width - filled), '.'), settled, total, p.simulated,
                         p.pruned, clock(p.elapsed_s), eta);
    }
    if (tty_)
      std::cerr << "\r\033[K" << text << (finished ? "\n" : "") << std::flush;
    else
      core::diagnose("progress", text, text);
  }

 private:
  bool tty_;
  bool done_ = false;
  double last_s_ = -1e9;
};

void write_file(const fs::path& path, const std::string& text)
{
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out)
    throw core::InputError({path.string(), "", ""}, "cannot be written");
}

void write_results(const study::SweepResult& r, const std::string& out_dir)
{
  if (out_dir.empty())
    return;
  write_file(fs::path(out_dir) / "sweep.csv", study::sweep_csv(r));
  write_file(fs::path(out_dir) / "sweep.json", study::sweep_json(r).dump(2) + "\n");
}

void print_result(const study::SweepResult& r, int top, const std::string& format, bool given_order = false)
{
  if (format == "json")
    std::cout << study::sweep_json(r).dump(2) << "\n";
  else if (format == "csv")
    std::cout << study::sweep_csv(r);
  else
    std::cout << study::sweep_text(r, top, given_order);
}

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
  s.top = std::max(1, a.top);
  s.simulate_all = a.all;
  s.fold_only = a.fold_only;
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
  if (!a.out_dir.empty())
    prepare_output_dir(a.out_dir);
  ProgressBar bar;
  if (!a.quiet)
    s.on_progress = [&bar](const study::SweepProgress& p) { bar(p); };
  const auto result = study::run_sweep(s);
  write_results(result, a.out_dir);
  print_result(result, s.top, o.format, a.given_order);
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
