// Holds simtrain's predictions against published measurements: the error of every comparison, and their median,
// 90th percentile and worst per source and per GPU, as text, Markdown and JSON.
#pragma once

#include "validation/case_conversion.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sim::validation {

// What one simulation run produced: its report (`simtrain run` or `simtrain memory`, as JSON), or why it failed.
struct RunOutcome {
  bool ok = false;
  core::Json report;
  std::string failure;
};

struct Comparison {
  std::string case_id;
  std::string run;
  std::string source;
  std::string gpu;
  std::string key; // the measured value's pointer in the case
  Quantity quantity = Quantity::STEP_TIME;
  double measured = 0;
  double predicted = 0;
  double error = 0; // (predicted - measured) / measured
  bool primary = true;
  std::vector<std::string> kinds{}; // what kind of run it is: "dense" or "MoE", and "FP8", "CP" where they apply
};

// Accuracy a source's cases should reach: thresholds on |error|.
struct Target {
  std::string source; // short source name
  double median = 1.0;
  double worst = 1.0;
};

struct ErrorStats {
  std::string group;    // a source or a GPU
  std::string quantity; // what was compared
  int count = 0;
  double bias = 0;   // median of the signed error: > 0 when simtrain predicts too much of the quantity
  double median = 0; // of |error|
  double p90 = 0;
  double worst = 0;
  std::optional<Target> target;
  bool met = true;
};

struct Listed {
  std::string name;
  std::string why;
};

struct ValidationResult {
  int cases = 0;
  std::vector<Comparison> comparisons;
  std::vector<Listed> unsupported; // cases simtrain cannot express
  std::vector<Listed> failed;      // runs that did not produce a report
  std::vector<ErrorStats> by_source;
  std::vector<ErrorStats> by_gpu;
  std::vector<ErrorStats> by_kind; // dense, MoE, FP8, CP: a run counts in each kind it is
  bool targets_met() const;
};

// The kinds of run a scenario is, for the statistics per kind: "dense" or "MoE", and "FP8" and "CP" (context
// parallelism) where they apply.
std::vector<std::string> run_kinds(const core::Json& scenario);

// A comparison of time's error as an error of the step time: a throughput predicted (1 + e) times the measured one
// is a step predicted 1 / (1 + e) times as long, so that a negative error always means a step predicted too short.
double step_time_error(const Comparison& c);

// Count, bias, median, 90th percentile and worst of a group's signed errors.
ErrorStats error_stats(std::vector<double> errors);

// The prediction for `e` in a run's report; `baseline` is the baseline run's report for relative quantities.
double predicted_value(const Expectation& e, const core::Json& report, const core::Json* baseline);

// The targets of simtrain's validation issue: per source, median absolute error 5 % and worst 12 % (SC21 Table 1,
// Korthikanti's per-layer times, Megatron-LM H100, MosaicML A100), MT-NLG within 10 %, memory median 1 % and worst 2 %.
const std::vector<Target>& default_targets();

ValidationResult compare(const std::vector<CaseConversion>& cases, const std::map<std::string, RunOutcome>& outcomes,
                         const std::vector<Target>& targets);

std::string render_text(const ValidationResult& result);
struct MarkdownOptions {
  // Every primary comparison too, one row each (sim/validation/README.md has the summary tables only).
  bool per_case = false;
  // Only the tables per kind of run and per GPU, with the cases counted (README.md's front page).
  bool brief = false;
};
// The summary tables as Markdown, for sim/validation/README.md and `simtrain validate --markdown`.
std::string render_markdown(const ValidationResult& result, const MarkdownOptions& options = {});
core::Json render_json(const ValidationResult& result);

} // namespace sim::validation
