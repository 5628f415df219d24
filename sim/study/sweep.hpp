// Layout search: variants of one scenario (the cross product of --vary values, or every layout the model and GPU
// count allow), screened in this process (a valid plan? does it fit in memory? how fast could its kernels and
// the pipeline's fill and drain be?), simulated in child processes, best bound first, and ranked. A layout whose bound
// cannot beat the K-th best simulated step is not simulated (`top`), unless every layout is asked for.
#pragma once

#include "core/document.hpp"
#include "core/json_reader.hpp"
#include "report/validation_summary.hpp"
#include "scenario/feasibility.hpp"
#include "scenario/scenario.hpp"

#include <array>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace sim::study {

// One variant: --set expressions (PATH=VALUE) applied to the base scenario.
struct Layout {
  std::vector<std::string> overrides;
};

// "tp=8 pp=4 schedule=interleaved": each override's last path component and value.
std::string layout_label(const Layout& layout);

// --vary PATH=V1,V2,...: the cross product of every spec's values, the last spec varying fastest. Commas inside
// brackets or quotes do not split. Paths joined by ':' vary together: plan.schedule:plan.virtual_stages=1f1b:1,
// interleaved:2 is two layouts, not four. Throws core::InputError naming the malformed spec.
std::vector<Layout> vary_layouts(const std::vector<std::string>& specs);

// Every layout of the scenario's model on its GPU count: tensor-parallel sizes within a node that divide the
// heads, pipeline sizes up to the layer count, the data-parallel size they leave (it must divide the global
// batch), micro-batches 1-16, 1F1B and interleaved (2 and 4 chunks), ZeRO 0-1 (0-3 without a pipeline),
// recomputation none / selective / full, sequence parallelism with TP off and on. GPipe is left out: it has
// 1F1B's bubble and more memory.
std::vector<Layout> auto_layouts(const scenario::Scenario& base);

// Each of `a` combined with each of `b` (an empty side is neutral). A path both set keeps only the pairs that agree
// on its value: `--vary plan.pp=1,13 --auto` is the automatic layouts with 1 or 13 pipeline stages.
std::vector<Layout> combine(const std::vector<Layout>& a, const std::vector<Layout>& b);

enum class Outcome { RANKED, OUT_OF_MEMORY, INVALID, PRUNED, FAILED, NOT_FOLDED };
enum class RankBy { TOKENS_PER_S, TOKENS_PER_USD };

inline constexpr std::array<core::Choice<Outcome>, 6> outcome_choices{{{"ranked", Outcome::RANKED},
                                                                       {"out_of_memory", Outcome::OUT_OF_MEMORY},
                                                                       {"invalid", Outcome::INVALID},
                                                                       {"not_simulated", Outcome::PRUNED},
                                                                       {"failed", Outcome::FAILED},
                                                                       {"not_folded", Outcome::NOT_FOLDED}}};
inline constexpr std::array<core::Choice<RankBy>, 2> rank_by_choices{
    {{"tokens_per_s", RankBy::TOKENS_PER_S}, {"tokens_per_usd", RankBy::TOKENS_PER_USD}}};

std::string_view outcome_name(Outcome o);
std::string_view rank_by_name(RankBy r);

struct SweepRow {
  int index = 0; // in enumeration order, before sharding
  Layout layout;
  Outcome outcome = Outcome::INVALID;
  std::string reason;     // why it was not ranked
  int rank = 0;           // 1 = best; 0 when not ranked
  bool baseline = false;  // the scenario's own layout (never pruned)
  std::string schedule;   // from the simulated plan (ranked rows)
  int virtual_stages = 0; // ditto
  int microbatches = 0;   // per pipeline per step; ditto
  double step_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double bubble = 0;
  double bubble_theory = 0;
  double peak_memory_bytes = 0;
  double activation_bytes = 0; // the largest stage's activations
  double memory_over_bytes = 0;
  double tokens_per_usd = 0;
  double time_to_train_s = 0;   // with a training budget (--tokens)
  double cost_to_train_usd = 0; // ditto, with a price
  double bound_s = 0;           // the busiest GPU's kernel time
  double bound_metric = 0;      // the best the ranking metric could be, from bound_s
};

struct SweepProgress {
  int screened = 0;
  int candidates = 0; // valid and fitting
  int simulated = 0;
  int pruned = 0;
  int running = 0;
  double elapsed_s = 0;
};

struct SweepOptions {
  std::filesystem::path scenario;
  std::string data_dir;
  std::vector<std::string> base_overrides; // --set for every layout
  std::vector<Layout> layouts;
  int jobs = 1;
  int top = 10;
  bool simulate_all = false;
  bool fold_only = false; // leave out the layouts whose graph does not fold (checked before each one is simulated)
  // What the simulations may take together: a layout starts only when its task graph's estimate fits beside those
  // of the simulations running (or nothing runs), and each is refused above it.
  scenario::MachineMemory memory{std::numeric_limits<double>::infinity(), "no limit known"};
  RankBy rank_by = RankBy::TOKENS_PER_S;
  int shard_index = 1; // 1..shard_count: this process takes every shard_count-th layout
  int shard_count = 1;
  std::filesystem::path runs_dir; // each simulated layout's report, trace and timeline (empty: not kept)
  report::SummaryFile summary;    // how close simtrain came to published runs, per GPU
  std::function<void(const SweepProgress&)> on_progress;
};

struct SweepResult {
  std::string scenario;
  RankBy rank_by = RankBy::TOKENS_PER_S;
  std::string shard; // "I/N", empty without sharding
  int layouts_total = 0;
  int top = 10;
  std::vector<std::string> columns;            // the override paths, in order of first appearance
  std::vector<SweepRow> rows;                  // ranked rows by rank, then the others in enumeration order
  core::Json validation = core::Json::array(); // per GPU of the valid layouts, by name: report::gpu_validation
};

SweepResult run_sweep(const SweepOptions& options);

// Ranks the simulated rows by the chosen metric (ties: enumeration order) and orders the rows.
void rank_rows(SweepResult& result);

// Shards of one sweep (sweep.json files) as one result, re-ranked.
SweepResult merge_sweeps(const std::vector<SweepResult>& parts);

// The summary and a table of the `top` ranked layouts; with `given_order`, of every layout in the order given.
std::string sweep_text(const SweepResult& result, int top, bool given_order = false);
std::string sweep_csv(const SweepResult& result);
core::Json sweep_json(const SweepResult& result);
// A sweep.json read back (`where` names it in errors, with the JSON pointer of what is wrong).
SweepResult sweep_from_json(const core::Json& j, const std::string& where);

} // namespace sim::study
