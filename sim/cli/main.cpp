// simtrain's command line: a thin layer over the library that parses arguments, prints, and maps errors to exit
// codes (0 ok, 1 bad input, 2 simulation failed, 3 internal error, 4 validation targets missed with --check).
#include "core/input_error.hpp"
#include "core/log.hpp"
#include "engine/replay.hpp"
#include "report/analysis.hpp"
#include "report/metrics.hpp"
#include "report/pipeline_view.hpp"
#include "report/run_report.hpp"
#include "report/task_report.hpp"
#include "report/topology_report.hpp"
#include "scenario/scenario.hpp"
#include "topology/cluster_graph.hpp"
#include "validation/runner.hpp"
#include "workload/builder.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <sys/resource.h>
#include <thread>

namespace {

namespace fs = std::filesystem;
using sim::scenario::LoadOptions;

fs::path default_data_dir()
{
  if (const char* env = std::getenv("SIMTRAIN_DATA_DIR"); env && *env)
    return env;
  return SIMTRAIN_SOURCE_DIR;
}

struct CommonOptions {
  std::string data_dir = default_data_dir().string();
  std::vector<std::string> overrides;
  std::string format = "text";
  std::optional<double> tokens; // --tokens N: the scenario's training_tokens
};

LoadOptions load_options(const CommonOptions& o)
{
  auto overrides = o.overrides;
  if (o.tokens)
    overrides.push_back(fmt::format("training_tokens={}", *o.tokens));
  return LoadOptions{o.data_dir, overrides};
}

void print_warnings(const std::vector<sim::core::Warning>& warnings)
{
  for (const auto& w : warnings)
    std::cerr << sim::core::format_warning(w) << "\n";
}

int print_analysis(const fs::path& file, const CommonOptions& o)
{
  const auto s = sim::scenario::load_scenario(file, load_options(o));
  const auto a = sim::report::analyse(s);
  if (o.format == "json") {
    print_warnings(s.warnings);
    std::cout << sim::report::analysis_json(s, a).dump(2) << "\n";
  } else {
    std::cout << sim::report::analysis_text(s, a);
  }
  return 0;
}

double peak_rss_bytes()
{
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;
}

struct RunOptions {
  std::string out_dir;
  std::string view;
  bool no_fold = false;
};

int simulate(const fs::path& file, const CommonOptions& o, const RunOptions& r)
{
  const auto started = std::chrono::steady_clock::now();
  const auto s = sim::scenario::load_scenario(file, load_options(o));
  const auto graph = sim::topology::build_graph(s.cluster, s.nodes);
  sim::topology::check_graph(graph, s.cluster.name);
  const auto tasks = sim::workload::build_task_graph(s.model, s.plan, s.cluster, graph, {!r.no_fold});
  const auto timeline = sim::engine::replay(tasks, graph);
  const auto metrics = sim::report::compute_metrics(s, tasks, graph, timeline);
  sim::report::RunCost cost;
  cost.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  cost.peak_rss_bytes = peak_rss_bytes();
  cost.tasks = tasks.size();
  cost.folded = tasks.folded;
  const auto json = sim::report::run_json(s, metrics, cost);
  const auto boxes = sim::report::pass_boxes(s, tasks, timeline);
  if (o.format == "json") {
    print_warnings(s.warnings);
    std::cout << json.dump(2) << "\n";
  } else {
    std::cout << sim::report::run_text(s, metrics, cost);
    if (r.view == "pipeline")
      std::cout << "\n" << sim::report::pipeline_text(s, metrics, boxes);
  }
  if (!r.out_dir.empty()) {
    const fs::path dir = r.out_dir;
    fs::create_directories(dir);
    std::ofstream(dir / "report.json") << json.dump(2) << "\n";
    std::ofstream trace(dir / "trace.json");
    sim::report::write_trace(trace, s, tasks, graph, timeline);
    std::ofstream(dir / "timeline.svg") << sim::report::pipeline_svg(s, metrics, boxes);
    if (o.format != "json")
      std::cout << "wrote " << (dir / "report.json").string()
                << ", trace.json (open in ui.perfetto.dev), timeline.svg\n";
  }
  return 0;
}

int check(const std::vector<std::string>& files, const CommonOptions& o)
{
  int failed = 0;
  for (const auto& file : files) {
    try {
      const auto checked = sim::scenario::check_file(file, load_options(o));
      std::cout << fmt::format("ok    {} ({} '{}')\n", file, sim::scenario::describe(checked.kind), checked.name);
      for (const auto& w : checked.warnings)
        std::cout << "      " << sim::core::format_warning(w) << "\n";
    } catch (const sim::core::InputError& e) {
      std::cout << "error " << e.what() << "\n";
      ++failed;
    }
  }
  if (files.size() > 1)
    std::cout << fmt::format("{} of {} files valid\n", files.size() - static_cast<std::size_t>(failed), files.size());
  return failed == 0 ? 0 : 1;
}

int inspect(const std::string& reference, int gpus, const CommonOptions& o)
{
  const auto spec = sim::scenario::load_cluster(reference, load_options(o));
  const int nodes = sim::scenario::nodes_for(spec, gpus, "--gpus " + std::to_string(gpus));
  const auto graph = sim::topology::build_graph(spec, nodes);
  sim::topology::check_graph(graph, spec.name);
  if (o.format == "dot") {
    std::cout << sim::topology::to_dot(graph, spec.name);
    return 0;
  }
  const auto summary = sim::topology::summarize(graph);
  if (o.format == "json")
    std::cout << sim::report::topology_json(spec, summary).dump(2) << "\n";
  else
    std::cout << sim::report::topology_text(spec, summary);
  return 0;
}

int tasks(const fs::path& file, std::optional<int> rank, const CommonOptions& o)
{
  const auto s = sim::scenario::load_scenario(file, load_options(o));
  print_warnings(s.warnings);
  const auto graph = sim::topology::build_graph(s.cluster, s.nodes);
  const auto g = sim::workload::build_task_graph(s.model, s.plan, s.cluster, graph);
  if (rank && (*rank < 0 || *rank >= g.gpus))
    throw sim::core::InputError({"--rank", "", ""}, "no such rank", std::to_string(*rank),
                                fmt::format("0 to {}", g.gpus - 1));
  if (o.format == "json")
    sim::report::write_tasks_json(std::cout, g, rank);
  else
    std::cout << sim::report::task_summary_text(g, rank);
  return 0;
}

struct ValidateArgs {
  std::string cases;
  int jobs = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  std::string only;
  std::string keep;
  std::string markdown;
  std::string readme;
  bool check = false;
};

// Replaces what lies between README's validation markers by `table`.
void update_readme(const fs::path& readme, const std::string& table)
{
  const std::string begin = "<!-- validation:begin -->\n";
  const std::string end = "<!-- validation:end -->";
  std::ifstream in(readme);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  const auto from = s.find(begin);
  const auto to = s.find(end);
  if (!in || from == std::string::npos || to == std::string::npos || to < from)
    throw sim::core::InputError({sim::core::display_path(readme), "", ""}, "no validation section to update", "",
                                "the lines <!-- validation:begin --> and <!-- validation:end -->");
  s.replace(from + begin.size(), to - from - begin.size(), table);
  std::ofstream(readme) << s;
}

int validate(const ValidateArgs& a, const CommonOptions& o)
{
  const auto started = std::chrono::steady_clock::now();
  sim::validation::ValidateOptions v;
  v.cases_file = a.cases;
  v.data_dir = o.data_dir;
  v.simtrain = fs::read_symlink("/proc/self/exe");
  v.jobs = a.jobs;
  v.only = a.only;
  v.keep_dir = a.keep;
  const auto result = sim::validation::run_validation(v);
  if (o.format == "json") {
    std::cout << sim::validation::render_json(result).dump(2) << "\n";
  } else {
    std::cout << sim::validation::render_text(result);
    std::cout << fmt::format("\n{} cases, {} comparisons, {} not simulated, {} failed runs; {:.1f} s with {} jobs\n",
                             result.cases, result.comparisons.size(), result.unsupported.size(), result.failed.size(),
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), a.jobs);
  }
  if (!a.markdown.empty())
    std::ofstream(a.markdown) << sim::validation::render_markdown(result, true);
  if (!a.readme.empty())
    update_readme(a.readme, sim::validation::render_markdown(result, false));
  return a.check && !result.targets_met() ? 4 : 0;
}

void add_common(CLI::App* app, CommonOptions& o, std::vector<std::string> formats)
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

} // namespace

int main(int argc, char** argv)
{
  CLI::App app{"simtrain: a discrete-event simulator of large-model training clusters", "simtrain"};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "Diagnostics on stderr: trace, debug, info, warn, error, off")
      ->capture_default_str();

  CommonOptions run_opts;
  std::string run_file;
  RunOptions run_extra;
  auto* run = app.add_subcommand("run", "Simulate one training step of a scenario (default: scenarios/default.json)");
  run->add_option("scenario", run_file, "Scenario file");
  run->add_option("--out", run_extra.out_dir, "Write report.json, trace.json and timeline.svg into this folder");
  run->add_option("--view", run_extra.view, "Also print a text picture of the pipeline")
      ->check(CLI::IsMember({"pipeline"}));
  run->add_option("--tokens", run_opts.tokens, "A training budget in tokens: also print the time and cost to train it")
      ->check(CLI::PositiveNumber);
  run->add_flag("--no-fold", run_extra.no_fold,
                "Simulate every GPU even where identical GPUs fold into one per stage (slower, same result)");
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
  add_common(check_cmd, check_opts, {});

  CommonOptions inspect_opts;
  std::string inspect_ref;
  int inspect_gpus = 0;
  auto* inspect_cmd = app.add_subcommand("inspect", "Show a topology: devices, links per class, bandwidths, graph");
  inspect_cmd->add_option("topology", inspect_ref, "Topology file or preset name")->required();
  inspect_cmd->add_option("--gpus", inspect_gpus, "GPUs in the cluster (default: the pinned nodes, or one node)")
      ->check(CLI::NonNegativeNumber);
  add_common(inspect_cmd, inspect_opts, {"text", "json", "dot"});

  CommonOptions tasks_opts;
  std::string tasks_file;
  std::optional<int> tasks_rank;
  auto* tasks_cmd =
      app.add_subcommand("tasks", "The task graph of one training step: counts per rank, or every task as JSON");
  tasks_cmd->add_option("scenario", tasks_file, "Scenario file")->required();
  tasks_cmd->add_option("--rank", tasks_rank, "Only the tasks of this rank");
  add_common(tasks_cmd, tasks_opts, {"text", "json"});

  CommonOptions validate_opts;
  ValidateArgs validate_args;
  auto* validate_cmd = app.add_subcommand(
      "validate", "Simulate published training runs (a validation cases file) and report the error of each");
  validate_cmd->add_option("cases", validate_args.cases, "Cases file (a JSON array of published runs)")->required();
  validate_cmd->add_option("--jobs,-j", validate_args.jobs, "Simulations at a time")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  validate_cmd->add_option("--only", validate_args.only, "Only the cases whose id contains this text");
  validate_cmd->add_option("--keep", validate_args.keep, "Keep the generated scenarios and their reports here");
  validate_cmd->add_option("--markdown", validate_args.markdown, "Also write the tables, every case, as Markdown");
  validate_cmd->add_option("--readme", validate_args.readme,
                           "Replace the summary between this file's validation markers");
  validate_cmd->add_flag("--check", validate_args.check,
                         "Exit with 4 when a source misses its accuracy target or a run fails");
  add_common(validate_cmd, validate_opts, {"text", "json"});

  // `simtrain` alone, or `simtrain SCENARIO.json`, runs the main job.
  std::vector<std::string> args(argv + 1, argv + argc);
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
    while (at != args.end() && *at == "--log-level")
      at = std::next(at, std::min<std::ptrdiff_t>(2, std::distance(at, args.end())));
    args.insert(at, "run");
  }
  std::reverse(args.begin(), args.end());

  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }

  try {
    sim::core::set_log_level(log_level);
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
      return tasks(tasks_file, tasks_rank, tasks_opts);
    if (*validate_cmd)
      return validate(validate_args, validate_opts);
  } catch (const sim::core::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const sim::engine::SimulationError& e) {
    std::cerr << "simulation failed: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
