// Layout search: variants of one scenario (the cross product of --vary values, or every layout the model and GPU
// count allow), screened in this process (a valid plan? does it fit in memory? how fast could its kernels and
// the pipeline's fill and drain be?), simulated in child processes, best bound first, and ranked. A layout whose bound
// cannot beat the K-th best simulated step is not simulated (`top`), unless every layout is asked for.
#pragma once

#include "core/process_pool.hpp"
#include "report/validation_summary.hpp"
#include "scenario/feasibility.hpp"
#include "scenario/scenario.hpp"
#include "study/layouts.hpp"
#include "study/sweep_result.hpp"

#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace sim::study {

struct SweepProgress {
  int screened = 0;
  int candidates = 0; // valid and fitting
  int simulated = 0;
  int pruned = 0;
  int running = 0;
  // Candidates not yet started whose bound still beats the top K's last: the most that may still be simulated (the
  // rest will be pruned).
  int may_run = 0;
  double elapsed_s = 0;
  double screening_s = 0; // of it, checking the layouts and bounding them (before any simulation)
};

struct SweepOptions {
  std::filesystem::path scenario;
  std::string data_dir;
  std::vector<std::string> base_overrides; // --set for every layout
  std::vector<Layout> layouts;
  int jobs = 1;
  int top = 10;
  bool simulate_all = false;
  bool fold_only = false;   // leave out the layouts whose graph does not fold (checked before each one is simulated)
  bool allow_oom = false;   // simulate the layouts that do not fit in memory too (their reason says by how much)
  bool screen_only = false; // simulate nothing: every candidate is left not simulated with its bound and estimate
  // What the simulations may take together: a layout starts only when its task graph's estimate fits beside those
  // of the simulations running (or nothing runs), and each is refused above it.
  scenario::MachineMemory memory{std::numeric_limits<double>::infinity(), "no limit known"};
  RankBy rank_by = RankBy::TOKENS_PER_S;
  int shard_index = 1; // 1..shard_count: this process takes every shard_count-th layout
  int shard_count = 1;
  std::filesystem::path runs_dir; // each simulated layout's report, trace and timeline (empty: not kept)
  report::SummaryFile summary;    // how close simtrain came to published runs, per GPU
  std::function<void(const SweepProgress&)> on_progress;
  // Asked between simulations (a SIGINT or SIGTERM caught): true stops the sweep, the simulations running ended and
  // every layout not simulated marked interrupted, and the result returned as it stands.
  std::function<bool()> stop_requested;
  // The result as it stands, ranked, once screening is done and then at most every few seconds as simulations finish
  // (layouts not simulated yet marked interrupted): what `--out` keeps of a sweep that is killed.
  std::function<void(const SweepResult&)> on_checkpoint;
  // An earlier sweep of the same scenario (its digest must match): its ranked layouts are taken as they are, not
  // simulated again; `resume_file` names it in errors.
  std::optional<SweepResult> resume;
  std::string resume_file;
  // Runs simtrain's command line in a forked child (core::InProcess); empty: each simulation starts simtrain afresh.
  core::InProcess in_process;
};

SweepResult run_sweep(const SweepOptions& options);

} // namespace sim::study
