// simtrain's command line: a thin layer over the commands (cli/commands.hpp) that parses arguments and maps errors
// to exit codes (0 ok, 1 bad input, 2 simulation failed, 3 internal error, 4 validation targets missed with --check).
#include "cli/commands.hpp"
#include "cli/help.hpp"
#include "core/diagnostics.hpp"
#include "core/document.hpp"
#include "core/input_error.hpp"
#include "core/log.hpp"
#include "engine/replay.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <limits>

namespace {

namespace fs = std::filesystem;
using namespace sim::cli;

void add_common(CLI::App* app, CommonOptions& o, const std::vector<std::string>& formats)
{
  app->add_option("--set", o.overrides,
                  "Override a value by dotted path (repeatable), e.g. --set plan.tp=4 "
                  "--set topology.node.nvlink.bandwidth=200GBps")
      ->type_name("PATH=VALUE")
      ->allow_extra_args(false);
  app->add_option("--data-dir", o.data_dir, "Folder holding models/, topologies/ and scenarios/ (presets)")
      ->capture_default_str();
  if (!formats.empty())
    app->add_option("--format", o.format, "Output format")->check(CLI::IsMember(formats))->capture_default_str();
}

// 1048576, not 1.04858e+06; 1e+18 as that.
std::string limit(double v)
{
  return v < 1e9 ? fmt::format("{:.0f}", v) : fmt::format("{:g}", v);
}

// A memory size with its unit ("8GiB", "500MB"), from 1 MiB to 1 PiB.
CLI::Validator memory_size()
{
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const auto bytes = sim::core::parse_quantity(text, sim::core::Dimension::BYTES);
        if (!bytes)
          return fmt::format("not a memory size (found \"{}\"; expected a number and a unit, such as 8GiB)",
                             sim::core::clip(text, 40));
        if (*bytes < 1048576.0 || *bytes > 1125899906842624.0)
          return fmt::format("out of range (found {}; expected 1MiB to 1PiB)", sim::core::clip(text, 40));
        return {};
      },
      "SIZE");
}

// A number from `lo` to `hi` (finite), with the range written as people write it in the message.
CLI::Validator number_in(double lo, double hi)
{
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        try {
          std::size_t used = 0;
          v = std::stod(text, &used);
          if (used != text.size())
            throw std::invalid_argument(text);
        } catch (const std::out_of_range&) {
          v = std::numeric_limits<double>::infinity();
        } catch (const std::exception&) {
          return fmt::format("not a number (found \"{}\")", sim::core::clip(text, 40));
        }
        if (!std::isfinite(v) || v < lo || v > hi)
          return fmt::format("out of range (found {}; expected {} to {})", sim::core::clip(text, 40), limit(lo),
                             limit(hi));
        return {};
      },
      fmt::format("NUMBER in [{}, {}]", limit(lo), limit(hi)));
}

constexpr double max_tokens = 1e18;
constexpr double max_count = 1 << 20;

} // namespace

int main(int argc, char** argv)
{
  CLI::App app{"simtrain: a discrete-event simulator of large-model training clusters", "simtrain"};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "Diagnostics on stderr")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  std::string log_format = "text";
  app.add_option("--log-format", log_format,
                 "Errors, warnings, notes and progress on stderr as lines, or one JSON object per line (for pipelines)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();

  CommonOptions run_opts;
  std::string run_file;
  RunOptions run_extra;
  auto* run = app.add_subcommand("run", "Simulate one training step of a scenario (default: scenarios/default.json)");
  run->add_option("scenario", run_file, "Scenario file");
  run->add_option("--out", run_extra.out_dir, "Write report.json, trace.json and timeline.svg into this folder");
  run->add_option("--view", run_extra.view, "Also print a text picture of the pipeline")
      ->check(CLI::IsMember({"pipeline"}));
  run->add_option("--width", run_extra.width, "Columns of the --view pipeline timeline")
      ->check(number_in(40, 1000))
      ->capture_default_str();
  run->add_option("--tokens", run_opts.tokens, "A training budget in tokens: also print the time and cost to train it")
      ->check(number_in(1, max_tokens));
  run->add_flag("--allow-oom", run_opts.allow_oom,
                "Simulate a plan even when it does not fit in GPU memory (by default refused, exit 1)");
  run->add_flag("--no-fold", run_extra.no_fold,
                "Simulate every GPU even where interchangeable GPUs fold into one per class (slower, same result)");
  run->add_flag("--quiet,-q", run_extra.quiet, "No progress line on stderr (shown when a run takes over 3 s)");
  run->add_option("--passes", run_extra.passes,
                  "Also write the step's pipeline passes as JSON to this file (what compare --out draws)");
  run->add_option("--memory", run_extra.memory,
                  "The most memory the step's task graph may take (default: what the machine has free), e.g. 8GiB")
      ->check(memory_size());
  add_common(run, run_opts, {"text", "json"});

  CommonOptions memory_opts;
  std::string memory_file;
  auto* memory = app.add_subcommand("memory", "Memory per GPU and FLOPs per step of a scenario, with an OOM verdict");
  memory->add_option("scenario", memory_file, "Scenario file")->required();
  add_common(memory, memory_opts, {"text", "json"});

  CommonOptions check_opts;
  std::vector<std::string> check_files;
  auto* check_cmd = app.add_subcommand("check", "Validate scenario, model, topology and GPU files");
  check_cmd->add_option("files", check_files, "Files to check")->required();
  check_cmd->add_flag("--allow-oom", check_opts.allow_oom, "Accept a scenario whose plan does not fit in GPU memory");
  add_common(check_cmd, check_opts, {});

  CommonOptions inspect_opts;
  std::string inspect_ref;
  int inspect_gpus = 0;
  auto* inspect_cmd = app.add_subcommand("inspect", "Show a topology: devices, links per class, bandwidths, graph");
  inspect_cmd->add_option("topology", inspect_ref, "Topology file or preset name")->required();
  inspect_cmd->add_option("--gpus", inspect_gpus, "GPUs in the cluster (default: the pinned nodes, or one node)")
      ->check(number_in(0, 1 << 24));
  add_common(inspect_cmd, inspect_opts, {"text", "json", "dot"});

  CommonOptions kernels_opts;
  std::string kernels_file;
  auto* kernels_cmd = app.add_subcommand(
      "kernels", "Every kernel of one micro-batch's layer, embedding and output layer: class, shape, rate, time");
  kernels_cmd->add_option("scenario", kernels_file, "Scenario file")->required();
  add_common(kernels_cmd, kernels_opts, {"text", "json"});

  CommonOptions tasks_opts;
  std::string tasks_file;
  std::optional<int> tasks_rank;
  auto* tasks_cmd =
      app.add_subcommand("tasks", "The task graph of one training step: counts per rank, or every task as JSON");
  tasks_cmd->add_option("scenario", tasks_file, "Scenario file")->required();
  tasks_cmd->add_option("--rank", tasks_rank, "Only the tasks of this rank");
  bool tasks_no_fold = false;
  tasks_cmd->add_flag("--no-fold", tasks_no_fold,
                      "Every GPU's tasks (by default interchangeable GPUs fold into one simulated GPU per class)");
  std::string tasks_out;
  tasks_cmd->add_option("--out", tasks_out,
                        "With --format chakra: the folder for the Chakra traces (PREFIX.RANK.et) and comm_group.json");
  add_common(tasks_cmd, tasks_opts, {"text", "json", "chakra"});

  CommonOptions validate_opts;
  ValidateArgs validate_args;
  auto* validate_cmd = app.add_subcommand(
      "validate", "Simulate published training runs (validation cases files) and report the error of each");
  validate_cmd->add_option("cases", validate_args.cases, "Cases files (JSON arrays of published runs), run together")
      ->required();
  validate_cmd->add_option("--jobs,-j", validate_args.jobs, "Simulations at a time")
      ->check(number_in(1, max_count))
      ->capture_default_str();
  validate_cmd->add_option("--only", validate_args.only, "Only the cases whose id contains this text");
  validate_cmd->add_option("--keep", validate_args.keep, "Keep the generated scenarios and their reports here");
  validate_cmd->add_option("--markdown", validate_args.markdown, "Also write the tables, every case, as Markdown");
  validate_cmd->add_option("--readme", validate_args.readme,
                           "Replace the summary between this file's validation markers");
  validate_cmd->add_option("--summary", validate_args.summary,
                           "Write each GPU's accuracy (validation-summary/v1), which reports read; full runs only");
  validate_cmd->add_flag("--ablation", validate_args.ablation,
                         "Run once with every modelled effect and once without each; print (and with --readme write) "
                         "the table of what each is worth per source");
  validate_cmd->add_flag("--check", validate_args.check,
                         "Exit with 4 when a source misses its accuracy target or a run fails");
  add_common(validate_cmd, validate_opts, {"text", "json"});

  CommonOptions compare_opts;
  CompareArgs compare_args;
  auto* compare_cmd = app.add_subcommand(
      "compare", "Two scenarios side by side (or one under two values of a --set path), with the deltas and why");
  compare_cmd
      ->add_option("scenarios", compare_args.scenarios, "One or two scenario files, or two saved reports (report.json)")
      ->required()
      ->expected(1, 2);
  compare_cmd
      ->add_option("--tokens", compare_opts.tokens, "A training budget in tokens: compare time and cost to train")
      ->check(number_in(1, max_tokens));
  compare_cmd->add_option("--out", compare_args.out_dir,
                          "Write compare.json and compare.html (both timelines on one time scale) into this folder");
  compare_cmd->add_flag("--allow-oom", compare_opts.allow_oom,
                        "Simulate a side even when its plan does not fit in GPU memory");
  add_common(compare_cmd, compare_opts, {"text", "json"});

  CommonOptions sweep_opts;
  SweepArgs sweep_args;
  auto* sweep_cmd = app.add_subcommand(
      "sweep",
      "Simulate many layouts of one scenario (--vary values, or every valid layout with --auto) and rank them");
  sweep_cmd->add_option("scenario", sweep_args.scenario, "Scenario file")->required();
  sweep_cmd
      ->add_option("--vary", sweep_args.vary,
                   "A path and its values, comma-separated (repeatable: the cross product), e.g. --vary plan.tp=2,4,8")
      ->type_name("PATH=V1,V2,...")
      ->allow_extra_args(false);
  sweep_cmd->add_flag("--auto", sweep_args.automatic,
                      "Every valid layout of the model on the scenario's GPUs: tp, pp, dp, micro-batch, schedule, "
                      "ZeRO stage, recomputation, sequence parallelism, context parallelism for long sequences and, "
                      "for MoE models, expert parallelism (whole or split experts)");
  sweep_cmd->add_option("--jobs,-j", sweep_args.jobs, "Simulations at a time")
      ->check(number_in(1, max_count))
      ->capture_default_str();
  sweep_cmd->add_option("--top", sweep_args.top, "Layouts shown, and the ranking that must be exact")
      ->check(number_in(1, max_count))
      ->capture_default_str();
  sweep_cmd->add_flag("--all", sweep_args.all,
                      "Simulate every layout that fits (default: skip those whose lower bound cannot make the top)");
  sweep_cmd
      ->add_option("--memory", sweep_args.memory,
                   "The memory the sweep's simulations may take together (default: what the machine has free "
                   "when the sweep starts), e.g. 16GiB")
      ->check(memory_size());
  sweep_cmd->add_flag("--fold-only", sweep_args.fold_only,
                      "Leave out layouts whose GPUs do not fold at all (simulated GPU by GPU, "
                      "they can take hours at thousands of GPUs)");
  sweep_cmd->add_option("--rank-by", sweep_args.rank_by, "Ranking metric")
      ->check(CLI::IsMember({"tokens_per_s", "tokens_per_usd"}))
      ->capture_default_str();
  sweep_cmd->add_option("--shard", sweep_args.shard, "Take only every N-th layout from the I-th (1-based); see merge")
      ->type_name("I/N");
  sweep_cmd->add_option("--out", sweep_args.out_dir, "Write sweep.csv and sweep.json into this folder");
  sweep_cmd->add_flag("--save-runs", sweep_args.save_runs,
                      "Keep each simulated layout's report, trace and timeline under OUT/runs/");
  sweep_cmd->add_flag("--quiet,-q", sweep_args.quiet, "No progress bar on stderr");
  sweep_cmd->add_flag("--in-order", sweep_args.given_order,
                      "List every layout in the order of the --vary values (with their ranks) instead of the top");
  sweep_cmd
      ->add_option("--tokens", sweep_opts.tokens, "A training budget in tokens: time and cost to train it per layout")
      ->check(number_in(1, max_tokens));
  add_common(sweep_cmd, sweep_opts, {"text", "json", "csv"});

  CommonOptions merge_opts;
  MergeArgs merge_args;
  auto* merge_cmd =
      app.add_subcommand("merge", "Join the sweep.json files of a sweep's shards (--shard I/N) into one ranking");
  merge_cmd->add_option("parts", merge_args.parts, "sweep.json files")->required();
  merge_cmd->add_option("--out", merge_args.out_dir, "Write the merged sweep.csv and sweep.json into this folder");
  merge_cmd->add_option("--top", merge_args.top, "Layouts shown")
      ->check(number_in(1, max_count))
      ->capture_default_str();
  merge_cmd->add_option("--format", merge_opts.format, "Output format")
      ->check(CLI::IsMember({"text", "json", "csv"}))
      ->capture_default_str();

  CommonOptions import_opts;
  ImportArgs import_args;
  auto* import_cmd = app.add_subcommand(
      "import", "Write a scenario from a framework's configuration: Megatron-LM arguments, a DeepSpeed config or a "
                "torchtitan job file; every setting that does not carry over is listed");
  import_cmd->require_subcommand(1);
  const auto add_target = [&](CLI::App* sub) {
    sub->add_option("--topology", import_args.topology, "Topology preset name or file")->required();
    sub->add_option("--gpus", import_args.gpus, "GPUs in the cluster")->check(number_in(1, 1 << 24));
    sub->add_option("--out", import_args.out, "Write the scenario to this file (default: standard output)");
    sub->add_option("--name", import_args.name, "The scenario's name (default: the --out file's stem)");
    sub->add_flag("--strict", import_args.strict, "Refuse (exit 1) when any setting does not carry over");
    sub->add_flag("--allow-oom", import_opts.allow_oom, "Write the scenario even when it does not fit in GPU memory");
    sub->add_option("--data-dir", import_opts.data_dir, "Folder holding models/, topologies/ and scenarios/")
        ->capture_default_str();
  };
  auto* import_megatron = import_cmd->add_subcommand(
      "megatron", "Megatron-LM / Megatron-core pretrain_gpt.py arguments, after --, optionally with the launcher "
                  "(torchrun ... pretrain_gpt.py ...), whose --nproc_per_node x --nnodes is the default --gpus");
  add_target(import_megatron);
  import_megatron->footer("Everything after -- is pretrain_gpt.py's: simtrain import megatron --topology dgx-h100 "
                          "--gpus 64 -- --num-layers 32 --hidden-size 4096 ...");
  auto* import_nemo = import_cmd->add_subcommand(
      "nemo", "A NeMo 1.x training configuration (YAML, as NeMo-Framework-Launcher's conf/training files), and after "
              "-- any NeMo overrides (model.x=y) or Megatron-LM arguments to apply on top");
  add_target(import_nemo);
  import_nemo->add_option("config", import_args.config, "The configuration's .yaml")->required();
  auto* import_deepspeed = import_cmd->add_subcommand("deepspeed", "A DeepSpeed config (ds_config.json)");
  add_target(import_deepspeed);
  import_deepspeed->add_option("config", import_args.config, "ds_config.json")->required();
  import_deepspeed->add_option("--model", import_args.model, "Model preset name, model/v1 or HuggingFace config.json")
      ->required();
  import_deepspeed->add_option("--seq-length", import_args.seq_length, "Tokens per sequence (default: the model's)")
      ->check(number_in(1, 1 << 24));
  import_deepspeed
      ->add_option("--micro-batch", import_args.micro_batch,
                   "Sequences per GPU per micro-batch, where the config says \"auto\"")
      ->check(number_in(1, 1 << 16));
  import_deepspeed
      ->add_option("--global-batch", import_args.global_batch, "Sequences per step, where the config says \"auto\"")
      ->check(number_in(1, max_tokens));
  auto* import_torchtitan = import_cmd->add_subcommand("torchtitan", "A torchtitan job file (TOML)");
  add_target(import_torchtitan);
  import_torchtitan->add_option("config", import_args.config, "The job's .toml")->required();
  import_torchtitan->add_option("--model", import_args.model,
                                "Model preset name or file, instead of the preset for [model] name and flavor");

  std::string help_topic;
  auto* help_cmd = app.add_subcommand("help", "The documentation: the list of topics, or one topic as text");
  help_cmd->add_option("topic", help_topic, "A topic (simtrain help lists them)");

  // `simtrain` alone, or `simtrain SCENARIO.json`, runs the main job.
  std::vector<std::string> args(argv + 1, argv + argc);
  // Arguments end up in JSON reports and messages, which are UTF-8.
  for (std::size_t i = 0; i < args.size(); ++i)
    if (!sim::core::is_valid_utf8(args[i])) {
      std::cerr << fmt::format("error: argument {}: not valid UTF-8 (expected text)\n", i + 1);
      return 1;
    }
  const auto is_subcommand = [&app](const std::string& word) {
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == word)
        return true;
    return false;
  };
  const bool has_subcommand = std::any_of(args.begin(), args.end(), is_subcommand);
  const bool wants_help =
      std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "-h" || a == "--help"; });
  if (!has_subcommand && !wants_help) {
    auto at = args.begin();
    while (at != args.end() && (*at == "--log-level" || *at == "--log-format"))
      at = std::next(at, std::min<std::ptrdiff_t>(2, std::distance(at, args.end())));
    args.insert(at, "run");
  }
  // `import megatron ... -- ARGS`: ARGS are Megatron-LM's, not simtrain's (CLI11 would read options among them).
  if (const auto verb = std::find(args.begin(), args.end(), "import");
      verb != args.end() && std::next(verb) != args.end() &&
      (*std::next(verb) == "megatron" || *std::next(verb) == "nemo")) {
    if (const auto dashes = std::find(verb, args.end(), "--"); dashes != args.end()) {
      import_args.arguments.assign(std::next(dashes), args.end());
      args.erase(dashes, args.end());
    }
  }
  // CLI11 parses argc/argv in order (its vector overload wants the arguments reversed, and lists leftovers so).
  std::vector<char*> argv_in_order{argv[0]};
  for (auto& a : args)
    argv_in_order.push_back(a.data());

  // Known before parsing, so that a command line CLI11 refuses is reported in the format asked for.
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--log-format" && args[i + 1] == "json")
      sim::core::set_diagnostic_format(sim::core::DiagnosticFormat::JSON);

  // Leftover arguments are collected, not thrown: CLI11 would list them in reverse.
  app.allow_extras();
  for (auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    sub->allow_extras();
    for (auto* nested : sub->get_subcommands([](const CLI::App*) { return true; }))
      nested->allow_extras();
  }
  try {
    app.parse(static_cast<int>(argv_in_order.size()), argv_in_order.data());
  } catch (const CLI::ParseError& e) {
    if (sim::core::diagnostic_format() == sim::core::DiagnosticFormat::JSON && e.get_exit_code() != 0) {
      sim::core::diagnose("error", e.what(), e.what());
      return 1;
    }
    return app.exit(e) == 0 ? 0 : 1;
  }
  if (auto extra = app.remaining(true); !extra.empty()) {
    std::vector<std::string> in_order;
    for (const auto& a : args)
      if (const auto it = std::find(extra.begin(), extra.end(), a); it != extra.end()) {
        in_order.push_back(sim::core::clip(a, 40));
        extra.erase(it);
      }
    const std::string message = fmt::format("The following argument{} not expected: {}",
                                            in_order.size() == 1 ? " was" : "s were", fmt::join(in_order, " "));
    sim::core::diagnose("error", message + "\nRun with --help for more information.", message);
    return 1;
  }

  try {
    sim::core::set_log_level(log_level);
    if (log_format == "json")
      sim::core::set_diagnostic_format(sim::core::DiagnosticFormat::JSON);
    if (*run) {
      const fs::path file =
          run_file.empty() ? fs::path(run_opts.data_dir) / "scenarios" / "default.json" : fs::path(run_file);
      return simulate(file, run_opts, run_extra);
    }
    if (*memory)
      return print_analysis(memory_file, memory_opts);
    if (*check_cmd)
      return check(check_files, check_opts);
    if (*inspect_cmd)
      return inspect(inspect_ref, inspect_gpus, inspect_opts);
    if (*tasks_cmd)
      return tasks(tasks_file, tasks_rank, tasks_no_fold, tasks_opts, tasks_out);
    if (*kernels_cmd)
      return kernels(kernels_file, kernels_opts);
    if (*validate_cmd)
      return validate(validate_args, validate_opts);
    if (*compare_cmd)
      return compare(compare_args, compare_opts);
    if (*sweep_cmd)
      return sweep(sweep_args, sweep_opts);
    if (*merge_cmd)
      return merge(merge_args, merge_opts);
    if (*help_cmd)
      return help(help_topic);
    if (*import_cmd) {
      import_args.framework = *import_megatron    ? "megatron"
                              : *import_nemo      ? "nemo"
                              : *import_deepspeed ? "deepspeed"
                                                  : "torchtitan";
      if (*import_megatron && import_args.arguments.empty())
        throw sim::core::InputError(sim::core::Location{"import megatron", "", ""}, "no Megatron-LM arguments",
                                    "nothing after --", "-- followed by pretrain_gpt.py's arguments");
      return import_config(import_args, import_opts);
    }
  } catch (const sim::core::InputError& e) {
    sim::core::diagnose_error(e);
    return 1;
  } catch (const sim::engine::SimulationError& e) {
    sim::core::diagnose("error", std::string("simulation failed: ") + e.what(), e.what());
    return 2;
  } catch (const std::exception& e) {
    sim::core::diagnose("error", std::string("internal error: ") + e.what(), e.what());
    return 3;
  }
  return 0;
}
