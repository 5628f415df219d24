// How close simtrain came to the published runs of each GPU (validation-summary/v1): a full `simtrain validate`
// writes it into the repository (validation/summary.hpp summarizes), and every report reads it to say how far its
// numbers can be trusted.
#pragma once

#include "core/json_reader.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sim::report {

// The primary comparisons of one group: a GPU's step times or its memory, or one source's share of them. Errors of
// the time group are errors of the step time: a throughput predicted (1 + e) times the measured one counts as a step
// predicted 1 / (1 + e) times as long, so that a negative bias always means steps predicted too short.
struct Accuracy {
  int runs = 0; // published runs (cases)
  int comparisons = 0;
  double median_abs_error = 0;
  double worst_abs_error = 0;
  double bias = 0; // median signed error
};

struct SourceAccuracy {
  std::string source;   // short name: "SC21 Table 1"
  std::string quantity; // what it measured: "MFU"
  Accuracy accuracy;
};

struct GroupAccuracy {
  Accuracy overall;
  std::vector<SourceAccuracy> sources; // by source, then quantity
};

struct GpuAccuracy {
  std::string preset; // "a100-sxm4-80gb"
  int runs = 0;
  int comparisons = 0;
  std::optional<GroupAccuracy> time; // step times and throughputs
  std::optional<GroupAccuracy> memory;
  std::map<std::string, Accuracy> kinds; // step times by kind of run (run_kinds); a run counts in each kind it is
};

// The kinds of run validation tells apart, in this order: "dense" or "MoE", then "FP8" and "CP" (context
// parallelism) where they apply.
std::vector<std::string> run_kinds(bool moe, bool fp8, bool context_parallel);

struct Summary {
  std::string cases_file; // its file name, without folders
  int cases = 0;
  int comparisons = 0; // primary ones
  int unsupported = 0;
  int failed = 0;
  std::map<std::string, GpuAccuracy> gpus; // by the GPU catalogue entry's name: "A100-SXM4-80GB"
};

core::Json summary_json(const Summary& summary);
// Strict: unknown keys, wrong types and values out of range are core::InputError.
Summary read_summary(const core::Node& root);

// Where the summary lives under a data folder: topologies/gpus/validation/summary.json.
std::filesystem::path summary_path(const std::filesystem::path& data_dir);

// The summary as reports find it: read, or why it cannot be used.
struct SummaryFile {
  std::optional<Summary> summary;
  std::string problem; // without a summary: a short reason for the report
  std::string warning; // a summary that is there but unreadable: the one-line error, for the user
};

// Never throws: a missing or malformed file is a SummaryFile without a summary.
SummaryFile load_summary(const std::filesystem::path& data_dir);

// A report's `validation` object for `gpu` (its catalogue name): its step-time accuracy, or why there is none, and
// its memory accuracy (null when none). With the run's `kinds` (run_kinds) and a summary that tells kinds apart, also
// the step-time accuracy of each kind other than dense on this GPU, or that no published run of it was validated.
core::Json gpu_validation(const SummaryFile& file, const std::string& gpu, const std::vector<std::string>& kinds = {});

// "accuracy: A100-SXM4-80GB step times 17.5% off median, ..." from a `validation` object; `label` follows
// "accuracy" (" (A)").
std::string accuracy_line(const core::Json& validation, const std::string& label = "");

} // namespace sim::report
