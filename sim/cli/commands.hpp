// The commands of simtrain's command line, each a function from parsed options to an exit code that prints its
// results; main.cpp only parses arguments and maps errors to exit codes.
#pragma once

#include "core/process_pool.hpp"
#include "report/validation_summary.hpp"
#include "scenario/scenario.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace sim::cli {

// Where models/, topologies/ and scenarios/ live: $SIMTRAIN_DATA_DIR, else this repository.
std::filesystem::path default_data_dir();

// simtrain's command line as `main` runs it (the arguments after the program's name): its exit status.
int command_line(std::vector<std::string> args);
// What runs a child simtrain (a sweep's, a validation's, a comparison's) in a fork of this process: command_line.
// Empty where SIMTRAIN_CHILD_EXEC is set (not to 0): each child then starts the simtrain binary afresh.
core::InProcess child_in_process();

struct CommonOptions {
  std::string data_dir = default_data_dir().string();
  std::vector<std::string> overrides;
  std::string format = "text";
  std::optional<double> tokens; // --tokens N: the scenario's training_tokens
  bool allow_oom = false;       // simulate a plan that does not fit in GPU memory
};

scenario::LoadOptions load_options(const CommonOptions& o);
void print_warnings(const std::vector<core::Warning>& warnings);
// Creates `dir` if need be and checks a file can be written in it, before any long work; throws core::InputError
// naming `option` (--out) and why not.
void prepare_output_dir(const std::filesystem::path& dir, const std::string& option = "--out");
// The data folder's validation summary; a malformed one is a warning on stderr, never an error.
report::SummaryFile load_validation_summary(const CommonOptions& o);

inline int default_jobs()
{
  return static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
}

struct RunArgs {
  std::string scenario; // default: the data folder's scenarios/default.json
  std::string out_dir;
  std::string view;
  int width = 100; // columns of the --view pipeline timeline
  bool no_fold = false;
  bool no_lone_flows = false; // every flow through SimGrid's max-min solver (engine::ReplayOptions)
  std::string memory;         // --memory: a cap on the task graph's memory, below the machine's
  bool quiet = false;         // --quiet: no progress line
  std::string passes;         // --passes FILE: the step's pipeline passes as JSON (what compare.html draws)
};

int simulate(const RunArgs& a, const CommonOptions& o);

struct MemoryArgs {
  std::string scenario;
};

int print_analysis(const MemoryArgs& a, const CommonOptions& o);

struct CheckArgs {
  std::vector<std::string> files;
};

int check(const CheckArgs& a, const CommonOptions& o);

struct InspectArgs {
  std::string topology; // a file or preset name
  int gpus = 0;         // 0: the pinned nodes, or one node
};

int inspect(const InspectArgs& a, const CommonOptions& o);

struct KernelsArgs {
  std::string scenario;
};

int kernels(const KernelsArgs& a, const CommonOptions& o);

struct TasksArgs {
  std::string scenario;
  std::optional<int> rank; // only this rank's tasks
  bool no_fold = false;    // every GPU's own tasks
  std::string out;         // with --format chakra: the folder for the traces
};

int tasks(const TasksArgs& a, const CommonOptions& o);

struct ValidateArgs {
  std::vector<std::string> cases; // one or more cases files
  int jobs = default_jobs();
  std::string only;
  std::string keep;
  std::string markdown;
  std::string readme;
  std::string brief_readme; // the per-kind and per-GPU tables only (README.md's front page)
  std::string summary;      // validation-summary/v1 (full runs only)
  bool check = false;
  bool ablation = false; // once with every effect, once without each
};

int validate(const ValidateArgs& a, const CommonOptions& o);

struct ImportArgs {
  std::string framework; // megatron, nemo, deepspeed, hf, llamafactory or torchtitan
  std::string topology;
  std::optional<int> gpus;
  std::string out;    // the scenario file; standard output when empty
  std::string name;   // the scenario's name (default: the file's stem)
  std::string config; // nemo: the YAML; deepspeed: ds_config.json; hf: TrainingArguments JSON; torchtitan: TOML
  std::string model;  // deepspeed (required), torchtitan (instead of its [model] preset)
  std::optional<std::int64_t> seq_length;
  std::optional<std::int64_t> micro_batch;
  std::optional<std::int64_t> global_batch;
  std::vector<std::string> arguments; // megatron: pretrain_gpt.py's; nemo: overrides on top; hf: Trainer's (after --)
  bool strict = false;                // refuse when any setting did not carry over
};

int import_config(const ImportArgs& a, const CommonOptions& o);

struct CompareArgs {
  std::vector<std::string> scenarios; // one (compared with itself under two --set values) or two
  std::string out_dir;                // --out: compare.json and compare.html
};

int compare(const CompareArgs& a, const CommonOptions& o);

struct SweepArgs {
  std::string scenario;
  std::vector<std::string> vary; // PATH=V1,V2,...
  bool automatic = false;        // --auto: every valid layout
  int jobs = default_jobs();
  int top = 10;
  bool all = false; // simulate every candidate, no pruning
  bool fold_only = false;
  std::string memory; // --memory: what the simulations may take together
  std::string rank_by = "tokens_per_s";
  std::string shard; // "I/N"
  std::string out_dir;
  std::string resume; // --resume: an earlier sweep.json (or the folder holding it) of the same scenario
  bool save_runs = false;
  bool quiet = false;       // no progress on stderr
  bool given_order = false; // the table lists every layout in the order given, not the top ranked
};

int sweep(const SweepArgs& a, const CommonOptions& o);

struct MergeArgs {
  std::vector<std::string> parts; // sweep.json files
  std::string out_dir;
  int top = 10;
};

int merge(const MergeArgs& a, const CommonOptions& o);

} // namespace sim::cli
