// A sweep's result: a row per layout with its outcome and metrics, the ranking, shards of one sweep merged, and the
// result as text, CSV and JSON (sweep.json, which reads back).
#pragma once

#include "core/document.hpp"
#include "core/json_reader.hpp"
#include "study/layouts.hpp"

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace sim::study {

enum class Outcome { RANKED, OUT_OF_MEMORY, INVALID, PRUNED, FAILED, NOT_FOLDED, INTERRUPTED };
enum class RankBy { TOKENS_PER_S, TOKENS_PER_USD };

inline constexpr std::array<core::Choice<Outcome>, 7> outcome_choices{{{"ranked", Outcome::RANKED},
                                                                       {"out_of_memory", Outcome::OUT_OF_MEMORY},
                                                                       {"invalid", Outcome::INVALID},
                                                                       {"not_simulated", Outcome::PRUNED},
                                                                       {"failed", Outcome::FAILED},
                                                                       {"not_folded", Outcome::NOT_FOLDED},
                                                                       {"interrupted", Outcome::INTERRUPTED}}};
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
  bool resumed = false;   // ranked from the sweep.json a sweep resumed (--resume), not simulated again
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
  std::string cost_basis;       // what its price counts (report::CostMetrics::basis), empty without a price
  double time_to_train_s = 0;   // with a training budget (--tokens)
  double cost_to_train_usd = 0; // ditto, with a price
  double bound_s = 0;           // the step's lower bound (workload/step_screen)
  double estimate_s = 0;        // the step's closed-form estimate (workload/step_screen)
  double bound_metric = 0;      // the best the ranking metric could be, from bound_s
};

struct SweepResult {
  std::string scenario;
  RankBy rank_by = RankBy::TOKENS_PER_S;
  std::string shard;  // "I/N", empty without sharding
  std::string digest; // the scenario's, as resolved with the sweep's --set (scenario::Scenario::digest); may be empty
  int layouts_total = 0;
  int top = 10;
  std::vector<std::string> columns;            // the override paths, in order of first appearance
  std::vector<SweepRow> rows;                  // ranked rows by rank, then the others in enumeration order
  core::Json validation = core::Json::array(); // per GPU of the valid layouts, by name: report::gpu_validation
};

// The row's value of the ranking metric, and a value of it as text ("1234 tokens/s").
double metric(const SweepRow& row, RankBy by);
std::string metric_text(double value, RankBy by);
// 1st, 2nd, 3rd, 4th, 11th, 21st.
std::string ordinal(int n);

// Ranks the simulated rows by the chosen metric (ties: enumeration order) and orders the rows.
void rank_rows(SweepResult& result);

// Shards of one sweep (sweep.json files) as one result, re-ranked.
SweepResult merge_sweeps(const std::vector<SweepResult>& parts);

struct SweepTextOptions {
  int top = 10;             // the ranked layouts in the table
  bool given_order = false; // instead, every layout, in the order given (with its rank or why it has none)
};
// The summary and a table of the layouts.
std::string sweep_text(const SweepResult& result, const SweepTextOptions& options);
std::string sweep_csv(const SweepResult& result);
core::Json sweep_json(const SweepResult& result);
// A sweep.json read back (`where` names it in errors, with the JSON pointer of what is wrong).
SweepResult sweep_from_json(const core::Json& j, const std::string& where);

} // namespace sim::study
