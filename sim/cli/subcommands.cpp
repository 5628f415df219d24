#include "cli/subcommands.hpp"

#include "cli/commands.hpp"
#include "cli/help.hpp"
#include "core/document.hpp"
#include "core/input_error.hpp"
#include "core/units.hpp"

#include <CLI/CLI.hpp>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <memory>

namespace sim::cli {
namespace {

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
        const auto bytes = core::parse_quantity(text, core::Dimension::BYTES);
        if (!bytes)
          return fmt::format("not a memory size (found \"{}\"; expected a number and a unit, such as 8GiB)",
                             core::clip(text, 40));
        if (*bytes < 1048576.0 || *bytes > 1125899906842624.0)
          return fmt::format("out of range (found {}; expected 1MiB to 1PiB)", core::clip(text, 40));
        return {};
      },
      "SIZE");
}

// --memory-headroom SIZE: HBM each GPU keeps free beside what the memory model counts, as --set
// plan.memory_headroom=SIZE (so a sweep's layouts, a comparison's two sides and check all honour it).
void add_headroom(CLI::App* app, CommonOptions& o)
{
  app->add_option_function<std::string>(
         "--memory-headroom", [&o](const std::string& size) { o.overrides.push_back("plan.memory_headroom=" + size); },
         "HBM to keep free on every GPU beyond the CUDA context (NCCL's buffers, the allocator's fragmentation), "
         "e.g. 4GiB: plans that leave less are out of memory")
      ->check(memory_size());
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
          return fmt::format("not a number (found \"{}\")", core::clip(text, 40));
        }
        if (!std::isfinite(v) || v < lo || v > hi)
          return fmt::format("out of range (found {}; expected {} to {})", core::clip(text, 40), limit(lo), limit(hi));
        return {};
      },
      fmt::format("NUMBER in [{}, {}]", limit(lo), limit(hi)));
}

constexpr double max_tokens = 1e18;
constexpr double max_count = 1 << 20;

// A command's own options and the common ones, held for as long as the app parses and runs it.
template <class Args>
struct Held {
  Args args;
  CommonOptions common;
};

template <class Args>
std::shared_ptr<Held<Args>> hold()
{
  return std::make_shared<Held<Args>>();
}

Subcommand add_run(CLI::App& app)
{
  auto o = hold<RunArgs>();
  auto* sub = app.add_subcommand("run", "Simulate one training step of a scenario (default: scenarios/default.json)");
  sub->add_option("scenario", o->args.scenario, "Scenario file");
  sub->add_option("--out", o->args.out_dir, "Write report.json, trace.json and timeline.svg into this folder");
  sub->add_option("--view", o->args.view, "Also print a text picture of the pipeline")
      ->check(CLI::IsMember({"pipeline"}));
  sub->add_option("--width", o->args.width, "Columns of the --view pipeline timeline")
      ->check(number_in(40, 1000))
      ->capture_default_str();
  sub->add_option("--tokens", o->common.tokens, "A training budget in tokens: also print the time and cost to train it")
      ->check(number_in(1, max_tokens));
  sub->add_flag("--allow-oom", o->common.allow_oom,
                "Simulate a plan even when it does not fit in GPU memory (by default refused, exit 1)");
  sub->add_flag("--no-fold", o->args.no_fold,
                "Simulate every GPU even where interchangeable GPUs fold into one per class (slower, same result)");
  sub->add_flag("--no-lone-flows", o->args.no_lone_flows,
                "Put every flow through SimGrid's max-min sharing, even one alone on its links (by default timed in "
                "closed form until another flow joins it; slower, same result)");
  sub->add_flag("--quiet,-q", o->args.quiet, "No progress line on stderr (shown when a run takes over 3 s)");
  sub->add_option("--passes", o->args.passes,
                  "Also write the step's pipeline passes as JSON to this file (what compare --out draws)");
  sub->add_option("--memory", o->args.memory,
                  "The most memory the step's task graph may take (default: what the machine has free), e.g. 8GiB")
      ->check(memory_size());
  add_headroom(sub, o->common);
  add_common(sub, o->common, {"text", "json"});
  return {sub, [o] { return simulate(o->args, o->common); }};
}

Subcommand add_memory(CLI::App& app)
{
  auto o = hold<MemoryArgs>();
  auto* sub = app.add_subcommand("memory", "Memory per GPU and FLOPs per step of a scenario, with an OOM verdict");
  sub->add_option("scenario", o->args.scenario, "Scenario file")->required();
  add_headroom(sub, o->common);
  add_common(sub, o->common, {"text", "json"});
  return {sub, [o] { return print_analysis(o->args, o->common); }};
}

Subcommand add_check(CLI::App& app)
{
  auto o = hold<CheckArgs>();
  auto* sub = app.add_subcommand("check", "Validate scenario, model, topology and GPU files");
  sub->add_option("files", o->args.files, "Files to check")->required();
  sub->add_flag("--allow-oom", o->common.allow_oom, "Accept a scenario whose plan does not fit in GPU memory");
  add_headroom(sub, o->common);
  add_common(sub, o->common, {});
  return {sub, [o] { return check(o->args, o->common); }};
}

Subcommand add_inspect(CLI::App& app)
{
  auto o = hold<InspectArgs>();
  auto* sub = app.add_subcommand("inspect", "Show a topology: devices, links per class, bandwidths, graph");
  sub->add_option("topology", o->args.topology, "Topology file or preset name")->required();
  sub->add_option("--gpus", o->args.gpus, "GPUs in the cluster (default: the pinned nodes, or one node)")
      ->check(number_in(0, 1 << 24));
  add_common(sub, o->common, {"text", "json", "dot"});
  return {sub, [o] { return inspect(o->args, o->common); }};
}

Subcommand add_kernels(CLI::App& app)
{
  auto o = hold<KernelsArgs>();
  auto* sub = app.add_subcommand(
      "kernels", "Every kernel of one micro-batch's layer, embedding and output layer: class, shape, rate, time");
  sub->add_option("scenario", o->args.scenario, "Scenario file")->required();
  add_common(sub, o->common, {"text", "json"});
  return {sub, [o] { return kernels(o->args, o->common); }};
}

Subcommand add_tasks(CLI::App& app)
{
  auto o = hold<TasksArgs>();
  auto* sub =
      app.add_subcommand("tasks", "The task graph of one training step: counts per rank, or every task as JSON");
  sub->add_option("scenario", o->args.scenario, "Scenario file")->required();
  sub->add_option("--rank", o->args.rank, "Only the tasks of this rank");
  sub->add_flag("--no-fold", o->args.no_fold,
                "Every GPU's tasks (by default interchangeable GPUs fold into one simulated GPU per class)");
  sub->add_option("--out", o->args.out,
                  "With --format chakra: the folder for the Chakra traces (PREFIX.RANK.et) and comm_group.json");
  add_common(sub, o->common, {"text", "json", "chakra"});
  return {sub, [o] { return tasks(o->args, o->common); }};
}

Subcommand add_validate(CLI::App& app)
{
  auto o = hold<ValidateArgs>();
  auto* sub = app.add_subcommand(
      "validate", "Simulate published training runs (validation cases files) and report the error of each");
  sub->add_option("cases", o->args.cases, "Cases files (JSON arrays of published runs), run together")->required();
  sub->add_option("--jobs,-j", o->args.jobs, "Simulations at a time")
      ->check(number_in(1, max_count))
      ->capture_default_str();
  sub->add_option("--only", o->args.only, "Only the cases whose id contains this text");
  sub->add_option("--keep", o->args.keep, "Keep the generated scenarios and their reports here");
  sub->add_option("--markdown", o->args.markdown, "Also write the tables, every case, as Markdown");
  sub->add_option("--readme", o->args.readme, "Replace the summary between this file's validation markers");
  sub->add_option("--brief-readme", o->args.brief_readme,
                  "Replace the tables per kind of run and per GPU between this file's validation-brief markers");
  sub->add_option("--summary", o->args.summary,
                  "Write each GPU's accuracy (validation-summary/v1), which reports read; full runs only");
  sub->add_flag("--ablation", o->args.ablation,
                "Run once with every modelled effect and once without each; print (and with --readme write) "
                "the table of what each is worth per source");
  sub->add_flag("--check", o->args.check, "Exit with 4 when a source misses its accuracy target or a run fails");
  add_common(sub, o->common, {"text", "json"});
  return {sub, [o] { return validate(o->args, o->common); }};
}

Subcommand add_compare(CLI::App& app)
{
  auto o = hold<CompareArgs>();
  auto* sub = app.add_subcommand(
      "compare", "Two scenarios side by side (or one under two values of a --set path), with the deltas and why");
  sub->add_option("scenarios", o->args.scenarios, "One or two scenario files, or two saved reports (report.json)")
      ->required()
      ->expected(1, 2);
  sub->add_option("--tokens", o->common.tokens, "A training budget in tokens: compare time and cost to train")
      ->check(number_in(1, max_tokens));
  sub->add_option("--out", o->args.out_dir,
                  "Write compare.json and compare.html (both timelines on one time scale) into this folder");
  sub->add_flag("--allow-oom", o->common.allow_oom, "Simulate a side even when its plan does not fit in GPU memory");
  add_headroom(sub, o->common);
  add_common(sub, o->common, {"text", "json"});
  return {sub, [o] { return compare(o->args, o->common); }};
}

Subcommand add_sweep(CLI::App& app)
{
  auto o = hold<SweepArgs>();
  auto* sub = app.add_subcommand(
      "sweep",
      "Simulate many layouts of one scenario (--vary values, or every valid layout with --auto) and rank them");
  sub->add_option("scenario", o->args.scenario, "Scenario file")->required();
  sub->add_option("--vary", o->args.vary,
                  "A path and its values, comma-separated (repeatable: the cross product), e.g. --vary plan.tp=2,4,8")
      ->type_name("PATH=V1,V2,...")
      ->allow_extra_args(false);
  sub->add_flag("--auto", o->args.automatic,
                "Every valid layout of the model on the scenario's GPUs: tp, pp, dp, micro-batch, schedule, "
                "ZeRO stage, recomputation, sequence parallelism, context parallelism for long sequences and, "
                "for MoE models, expert parallelism (whole or split experts)");
  sub->add_option("--jobs,-j", o->args.jobs, "Simulations at a time")
      ->check(number_in(1, max_count))
      ->capture_default_str();
  sub->add_option("--top", o->args.top, "Layouts shown, and the ranking that must be exact")
      ->check(number_in(1, max_count))
      ->capture_default_str();
  sub->add_flag("--all", o->args.all,
                "Simulate every layout that fits (default: skip those whose lower bound cannot make the top)");
  sub->add_option("--memory", o->args.memory,
                  "The memory the sweep's simulations may take together (default: what the machine has free "
                  "when the sweep starts), e.g. 16GiB")
      ->check(memory_size());
  sub->add_flag("--allow-oom", o->common.allow_oom,
                "Simulate the layouts that do not fit in memory too (ranked, with by how much in their reason)");
  sub->add_flag("--fold-only", o->args.fold_only,
                "Leave out layouts whose GPUs do not fold at all (simulated GPU by GPU, "
                "they can take hours at thousands of GPUs)");
  sub->add_option("--rank-by", o->args.rank_by, "Ranking metric")
      ->check(CLI::IsMember({"tokens_per_s", "tokens_per_usd"}))
      ->capture_default_str();
  sub->add_option("--shard", o->args.shard, "Take only every N-th layout from the I-th (1-based); see merge")
      ->type_name("I/N");
  sub->add_option("--out", o->args.out_dir,
                  "Write sweep.csv and sweep.json into this folder (sweep.json also while the sweep runs, every few "
                  "seconds: what a killed sweep resumes from)");
  sub->add_option("--resume", o->args.resume,
                  "Take the layouts an earlier sweep of the same scenario ranked (its sweep.json, or its --out "
                  "folder) instead of simulating them again")
      ->type_name("FILE");
  sub->add_flag("--save-runs", o->args.save_runs,
                "Keep each simulated layout's report, trace and timeline under OUT/runs/");
  sub->add_flag("--quiet,-q", o->args.quiet, "No progress bar on stderr");
  sub->add_flag("--in-order", o->args.given_order,
                "List every layout in the order of the --vary values (with their ranks) instead of the top");
  sub->add_option("--tokens", o->common.tokens, "A training budget in tokens: time and cost to train it per layout")
      ->check(number_in(1, max_tokens));
  add_headroom(sub, o->common);
  add_common(sub, o->common, {"text", "json", "csv"});
  return {sub, [o] { return sweep(o->args, o->common); }};
}

Subcommand add_merge(CLI::App& app)
{
  auto o = hold<MergeArgs>();
  auto* sub =
      app.add_subcommand("merge", "Join the sweep.json files of a sweep's shards (--shard I/N) into one ranking");
  sub->add_option("parts", o->args.parts, "sweep.json files")->required();
  sub->add_option("--out", o->args.out_dir, "Write the merged sweep.csv and sweep.json into this folder");
  sub->add_option("--top", o->args.top, "Layouts shown")->check(number_in(1, max_count))->capture_default_str();
  sub->add_option("--format", o->common.format, "Output format")
      ->check(CLI::IsMember({"text", "json", "csv"}))
      ->capture_default_str();
  return {sub, [o] { return merge(o->args, o->common); }};
}

// `import FRAMEWORK`: one nested subcommand per framework, all filling one ImportArgs.
Subcommand add_import(CLI::App& app, const std::vector<std::string>& passthrough)
{
  auto o = hold<ImportArgs>();
  o->args.arguments = passthrough;
  auto* sub = app.add_subcommand(
      "import", "Write a scenario from a framework's configuration: Megatron-LM arguments, a NeMo YAML, a DeepSpeed "
                "config, Hugging Face TrainingArguments, an Accelerate config, a LLaMA-Factory YAML or a torchtitan "
                "job file; every setting "
                "that does not carry over is listed");
  sub->require_subcommand(1);
  const auto add_target = [&o](CLI::App* framework) {
    framework->add_option("--topology", o->args.topology, "Topology preset name or file")->required();
    framework->add_option("--gpus", o->args.gpus, "GPUs in the cluster")->check(number_in(1, 1 << 24));
    framework->add_option("--out", o->args.out, "Write the scenario to this file (default: standard output)");
    framework->add_option("--name", o->args.name, "The scenario's name (default: the --out file's stem)");
    framework->add_flag("--strict", o->args.strict, "Refuse (exit 1) when any setting does not carry over");
    framework->add_flag("--allow-oom", o->common.allow_oom,
                        "Write the scenario even when it does not fit in GPU memory");
    framework->add_option("--data-dir", o->common.data_dir, "Folder holding models/, topologies/ and scenarios/")
        ->capture_default_str();
  };
  // The model a configuration trains (which it names only as a path or a hub name) and its sequence length.
  const auto add_model = [&o](CLI::App* framework, const std::string& default_length) {
    framework->add_option("--model", o->args.model, "Model preset name, model/v1 or HuggingFace config.json")
        ->required();
    framework->add_option("--seq-length", o->args.seq_length, "Tokens per sequence (default: " + default_length + ")")
        ->check(number_in(1, 1 << 24));
  };
  auto* megatron = sub->add_subcommand(
      "megatron", "Megatron-LM / Megatron-core pretrain_gpt.py arguments, after --, optionally with the launcher "
                  "(torchrun ... pretrain_gpt.py ...), whose --nproc_per_node x --nnodes is the default --gpus");
  add_target(megatron);
  megatron->footer("Everything after -- is pretrain_gpt.py's: simtrain import megatron --topology dgx-h100 "
                   "--gpus 64 -- --num-layers 32 --hidden-size 4096 ...");
  auto* nemo = sub->add_subcommand(
      "nemo", "A NeMo 1.x training or fine-tuning configuration (YAML, as NeMo-Framework-Launcher's conf/training and "
              "conf/peft files), and after -- any NeMo overrides (model.x=y, as the launcher's scripts write them) or "
              "Megatron-LM arguments to apply on top");
  add_target(nemo);
  nemo->add_option("config", o->args.config, "The configuration's .yaml")->required();
  nemo->add_option("--model", o->args.model,
                   "Model preset name, model/v1 or HuggingFace config.json, for a fine-tuning configuration that "
                   "restores its model from a checkpoint (model.restore_from_path)");
  auto* deepspeed = sub->add_subcommand("deepspeed", "A DeepSpeed config (ds_config.json)");
  add_target(deepspeed);
  deepspeed->add_option("config", o->args.config, "ds_config.json")->required();
  add_model(deepspeed, "the model's");
  deepspeed
      ->add_option("--micro-batch", o->args.micro_batch,
                   "Sequences per GPU per micro-batch, where the config says \"auto\"")
      ->check(number_in(1, 1 << 16));
  deepspeed->add_option("--global-batch", o->args.global_batch, "Sequences per step, where the config says \"auto\"")
      ->check(number_in(1, max_tokens));
  auto* hf = sub->add_subcommand(
      "hf", "Hugging Face Trainer's TrainingArguments: the JSON Trainer saves (training_args.json), or after -- the "
            "script's --key value arguments; a DeepSpeed config they name is imported with them");
  add_target(hf);
  hf->add_option("config", o->args.config, "TrainingArguments as JSON (else the arguments after --)");
  add_model(hf, "max_seq_length / max_length / model_max_length, else the model's");
  hf->footer("simtrain import hf --model llama2-7b --topology dgx-a100 --gpus 4 -- --bf16 True "
             "--per_device_train_batch_size 4 --gradient_accumulation_steps 8 --fsdp \"full_shard auto_wrap\"");
  auto* accelerate = sub->add_subcommand(
      "accelerate", "An Accelerate config (accelerate launch --config_file FILE.yaml: processes, mixed precision, "
                    "DDP, FSDP or DeepSpeed plugin), and after -- the script's Trainer arguments");
  add_target(accelerate);
  accelerate->add_option("config", o->args.config, "The config's .yaml")->required();
  add_model(accelerate, "max_seq_length / max_length / model_max_length, else the model's");
  accelerate->footer("--gpus defaults to the config's num_processes: simtrain import accelerate fsdp.yaml --model "
                     "llama3-8b --topology dgx-h100 -- --per_device_train_batch_size 2 --gradient_checkpointing");
  auto* llamafactory = sub->add_subcommand(
      "llamafactory", "A LLaMA-Factory training YAML (llamafactory-cli train FILE.yaml): full, LoRA or QLoRA "
                      "fine-tuning over the Hugging Face Trainer arguments it holds");
  add_target(llamafactory);
  llamafactory->add_option("config", o->args.config, "The training .yaml")->required();
  add_model(llamafactory, "cutoff_len");
  auto* torchtitan = sub->add_subcommand("torchtitan", "A torchtitan job file (TOML)");
  add_target(torchtitan);
  torchtitan->add_option("config", o->args.config, "The job's .toml")->required();
  torchtitan->add_option("--model", o->args.model,
                         "Model preset name or file, instead of the preset for [model] name and flavor");
  return {sub, [o, megatron, nemo, deepspeed, hf, accelerate, llamafactory] {
            o->args.framework = *megatron       ? "megatron"
                                : *nemo         ? "nemo"
                                : *deepspeed    ? "deepspeed"
                                : *hf           ? "hf"
                                : *accelerate   ? "accelerate"
                                : *llamafactory ? "llamafactory"
                                                : "torchtitan";
            if (*hf && o->args.config.empty() && o->args.arguments.empty())
              throw core::InputError(core::Location{"import hf", "", ""}, "no TrainingArguments",
                                     "neither a JSON file nor arguments after --",
                                     "training_args.json, or -- followed by the script's --key value arguments");
            if (*megatron && o->args.arguments.empty())
              throw core::InputError(core::Location{"import megatron", "", ""}, "no Megatron-LM arguments",
                                     "nothing after --", "-- followed by pretrain_gpt.py's arguments");
            return import_config(o->args, o->common);
          }};
}

Subcommand add_help(CLI::App& app)
{
  auto topic = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("help", "The documentation: the list of topics, or one topic as text");
  sub->add_option("topic", *topic, "A topic (simtrain help lists them)");
  return {sub, [topic] { return help(*topic); }};
}

} // namespace

std::vector<Subcommand> add_subcommands(CLI::App& app, const std::vector<std::string>& passthrough)
{
  return {add_run(app),
          add_memory(app),
          add_check(app),
          add_inspect(app),
          add_kernels(app),
          add_tasks(app),
          add_validate(app),
          add_compare(app),
          add_sweep(app),
          add_merge(app),
          add_import(app, passthrough),
          add_help(app)};
}

} // namespace sim::cli
