// Two simulated steps side by side: each headline metric of their reports with its delta, and where the
// difference comes from (which part of the step grew, on which links). Pure: two report JSONs in, values out.
#pragma once

#include "core/document.hpp"

#include <optional>
#include <string>
#include <vector>

namespace sim::study {

enum class Unit { TIME, DURATION, RATE, FLOP_RATE, FRACTION, BYTES, COUNT, USD };

struct CompareRow {
  std::string label;
  double a = 0;
  double b = 0;
  Unit unit = Unit::TIME;
  int indent = 0;
};

struct Contribution {
  std::string part; // "exposed TP communication"
  double delta_s = 0;
  double share = 0; // of the step-time difference
};

struct Comparison {
  std::string a_name;
  std::string b_name;
  std::string a_setup; // GPUs, GPU kind, model and plan of each side, one line
  std::string b_setup;
  std::vector<std::string> warnings; // the two sides differ in what a like-for-like comparison keeps
  std::vector<CompareRow> rows;
  std::vector<Contribution> contributions; // the parts of the step that moved, largest first
  std::string explanation;                 // one paragraph
  core::Json validation_a;                 // each report's `validation` (null when it has none)
  core::Json validation_b;
};

Comparison compare_reports(const core::Json& a, const core::Json& b, std::string a_name, std::string b_name);

std::string comparison_text(const Comparison& c);
core::Json comparison_json(const Comparison& c, const core::Json& a, const core::Json& b);

// `--set` expressions of one scenario compared with itself: a PATH given twice sets A's value (first) and B's
// (second); the others apply to both. Throws core::InputError when no path is given twice.
struct SplitOverrides {
  std::vector<std::string> a;
  std::vector<std::string> b;
};
SplitOverrides split_overrides(const std::vector<std::string>& overrides);

// A side that changes plan.tp or plan.pp of a scenario of `gpus` GPUs, and says nothing of plan.dp or gpus, keeps
// the GPU count: the `--set plan.dp=N` that does so (nothing when the side needs none). Throws core::InputError when
// tp*pp does not divide the GPU count.
std::optional<std::string> keep_gpu_count(const std::vector<std::string>& side, int tp, int pp, int gpus);

} // namespace sim::study
