#include "cli/commands.hpp"
#include "cli/file_check.hpp"
#include "cli/progress.hpp"
#include "core/diagnostics.hpp"

#include "core/input_error.hpp"
#include "core/log.hpp"
#include "engine/replay.hpp"
#include "report/analysis.hpp"
#include "report/chakra_export.hpp"
#include "report/html_report.hpp"
#include "report/kernel_report.hpp"
#include "report/metrics.hpp"
#include "report/pipeline_view.hpp"
#include "report/run_report.hpp"
#include "report/task_report.hpp"
#include "report/topology_report.hpp"
#include "report/validation_summary.hpp"
#include "scenario/feasibility.hpp"
#include "topology/cluster_graph.hpp"
#include "workload/builder.hpp"
#include "workload/graph_size.hpp"
#include "workload/layer_program.hpp"

#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <iostream>
#include <sys/resource.h>

namespace sim::cli {
namespace fs = std::filesystem;
namespace {

double peak_rss_bytes()
{
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;
}

} // namespace

fs::path default_data_dir()
{
  if (const char* env = std::getenv("SIMTRAIN_DATA_DIR"); env && *env)
    return env;
  // A clone's own presets where the command runs in one (a model added there is found, and errors point into it),
  // else those of the tree the binary was built from.
  std::error_code ec;
  fs::path here = fs::current_path(ec);
  if (!ec && fs::is_directory(here / "models", ec) && fs::is_directory(here / "topologies" / "gpus", ec))
    return here;
  return SIMTRAIN_SOURCE_DIR;
}

scenario::LoadOptions load_options(const CommonOptions& o)
{
  core::logger("cli")->debug("presets from {}", o.data_dir);
  auto overrides = o.overrides;
  if (o.tokens)
    overrides.push_back(fmt::format("training_tokens={}", *o.tokens));
  return scenario::LoadOptions{o.data_dir, overrides};
}

void print_warnings(const std::vector<sim::core::Warning>& warnings)
{
  for (const auto& w : warnings)
    sim::core::diagnose_warning(w);
}

void prepare_output_dir(const fs::path& dir, const std::string& option)
{
  const std::string shown = core::clip(dir.string());
  std::error_code error;
  fs::create_directories(dir, error);
  if (error)
    throw core::InputError({option, "", ""}, "the output folder cannot be created",
                           fmt::format("{} ({})", shown, error.message()), "a folder that exists or can be made");
  if (!fs::is_directory(dir))
    throw core::InputError({option, "", ""}, "the output folder is a file", shown, "a folder");
  const fs::path probe = dir / ".simtrain-write-test";
  if (!std::ofstream(probe))
    throw core::InputError({option, "", ""}, "the output folder cannot be written", shown, "a writable folder");
  fs::remove(probe, error);
}

report::SummaryFile load_validation_summary(const CommonOptions& o)
{
  auto file = report::load_summary(o.data_dir);
  if (!file.warning.empty())
    sim::core::diagnose("warning", "warning: " + file.warning + "; reports leave out simtrain's accuracy",
                        file.warning + "; reports leave out simtrain's accuracy");
  return file;
}

int print_analysis(const MemoryArgs& a, const CommonOptions& o)
{
  const auto s = sim::scenario::load_scenario(a.scenario, load_options(o));
  const auto analysis = sim::report::analyse(s);
  if (o.format == "json") {
    print_warnings(s.warnings);
    std::cout << sim::report::analysis_json(s, analysis).dump(2) << "\n";
  } else {
    std::cout << sim::report::analysis_text(s, analysis);
  }
  return 0;
}

int simulate(const RunArgs& r, const CommonOptions& o)
{
  const auto started = std::chrono::steady_clock::now();
  const fs::path file = r.scenario.empty() ? fs::path(o.data_dir) / "scenarios" / "default.json" : fs::path(r.scenario);
  const auto s = sim::scenario::load_scenario(file, load_options(o));
  if (!o.allow_oom)
    sim::scenario::refuse_out_of_memory(s);
  auto memory = sim::scenario::machine_memory();
  if (!r.memory.empty())
    memory =
        sim::scenario::capped(memory, *sim::core::parse_quantity(r.memory, sim::core::Dimension::BYTES), "--memory");
  sim::scenario::refuse_oversized_graph(s, {.fold = !r.no_fold}, memory);
  if (!r.out_dir.empty())
    prepare_output_dir(r.out_dir);
  const auto graph = sim::topology::build_graph(s.cluster, s.nodes);
  sim::topology::check_graph(graph, s.cluster.name);
  const auto tasks = sim::workload::build_task_graph(s.model, s.plan, s.cluster, graph, {!r.no_fold});
  // A run longer than a few seconds shows how much of its graph it has replayed.
  ProgressLine line(r.quiet, progress_delay_s());
  const auto elapsed = [&started] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  const auto progress = [&](const sim::engine::ReplayProgress& p) {
    const double t = elapsed();
    const double share = static_cast<double>(p.done) / static_cast<double>(std::max<std::size_t>(p.total, 1));
    line.show(fmt::format("{} {:.0f}% of {} tasks replayed ({} of the step simulated), {} elapsed", bar(share, 1.0),
                          100.0 * share, sim::core::format_count(static_cast<double>(p.total)),
                          sim::core::format_time(p.clock_s), clock(t)),
              t, false);
  };
  const auto timeline = sim::engine::replay(tasks, graph, progress, {.lone_flows = !r.no_lone_flows});
  line.show(fmt::format("{} {} tasks replayed, {} elapsed", bar(1.0, 1.0),
                        sim::core::format_count(static_cast<double>(tasks.size())), clock(elapsed())),
            elapsed(), true);
  const auto metrics = sim::report::compute_metrics(s, tasks, graph, timeline);
  sim::report::RunCost cost;
  cost.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  cost.peak_rss_bytes = peak_rss_bytes();
  cost.tasks = tasks.size();
  cost.folded = tasks.folded;
  cost.simulated_gpus = static_cast<int>(tasks.simulated.size());
  cost.multiplicity = tasks.multiplicity;
  const auto summary = load_validation_summary(o);
  std::vector<sim::core::Json> validation;
  for (const auto* gpu : sim::topology::gpu_kinds(s.cluster))
    validation.push_back(report::gpu_validation(
        summary, gpu->name,
        report::run_kinds(s.model.moe.has_value(), s.plan.precision == sim::hardware::Precision::FP8, s.plan.cp > 1)));
  const auto json = sim::report::run_json(s, metrics, cost, validation);
  const auto boxes = sim::report::pass_boxes(s, tasks, timeline);
  if (o.format == "json") {
    print_warnings(s.warnings);
    std::cout << json.dump(2) << "\n";
  } else {
    std::cout << sim::report::run_text(s, metrics, cost, validation);
    if (r.view == "pipeline")
      std::cout << "\n" << sim::report::pipeline_text(s, metrics, boxes, r.width);
  }
  if (!r.passes.empty())
    std::ofstream(r.passes) << sim::report::passes_json(boxes).dump() << "\n";
  if (!r.out_dir.empty()) {
    const fs::path dir = r.out_dir;
    std::ofstream(dir / "report.json") << json.dump(2) << "\n";
    std::ofstream trace(dir / "trace.json");
    sim::report::write_trace(trace, s, tasks, graph, timeline);
    std::ofstream(dir / "timeline.svg") << sim::report::pipeline_svg(s, metrics, boxes);
    std::ofstream(dir / "report.html") << sim::report::run_html(json, boxes, sim::core::read_json_file(file));
    if (o.format != "json")
      std::cout << "wrote " << (dir / "report.json").string()
                << ", trace.json (open in ui.perfetto.dev), timeline.svg, report.html (open in a browser)\n";
  }
  return 0;
}

int check(const CheckArgs& a, const CommonOptions& o)
{
  int failed = 0;
  for (const auto& file : a.files) {
    try {
      const auto checked = sim::cli::check_file(file, load_options(o));
      if (checked.scenario && !o.allow_oom)
        sim::scenario::refuse_out_of_memory(*checked.scenario);
      std::cout << fmt::format("ok    {} ({} '{}')\n", file, sim::cli::describe(checked.kind), checked.name);
      for (const auto& w : checked.warnings)
        std::cout << "      " << sim::core::format_warning(w) << "\n";
    } catch (const sim::core::InputError& e) {
      std::cout << "error " << e.what() << "\n";
      ++failed;
    }
  }
  if (a.files.size() > 1)
    std::cout << fmt::format("{} of {} files valid\n", a.files.size() - static_cast<std::size_t>(failed),
                             a.files.size());
  return failed == 0 ? 0 : 1;
}

int inspect(const InspectArgs& a, const CommonOptions& o)
{
  const auto spec = sim::scenario::load_cluster(a.topology, load_options(o));
  const int nodes = sim::scenario::nodes_for(spec, a.gpus, "--gpus " + std::to_string(a.gpus));
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

int kernels(const KernelsArgs& a, const CommonOptions& o)
{
  const auto s = sim::scenario::load_scenario(a.scenario, load_options(o));
  print_warnings(s.warnings);
  const auto costs = sim::workload::kernel_costs(s.model, s.plan, s.cluster.gpu);
  // With nodes of another GPU kind, their part's kernels follow the topology part's.
  if (o.format == "json") {
    auto j = sim::report::kernels_json(costs);
    for (const auto& k : s.cluster.node_gpus) {
      auto theirs = sim::report::kernels_json(sim::workload::kernel_costs(s.model, s.plan, k.gpu));
      j["node_gpus"].push_back({{"nodes", {k.first, k.last}}, {"gpu", k.gpu.name}, {"kernels", theirs["kernels"]}});
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (!s.cluster.node_gpus.empty())
    std::cout << s.cluster.gpu.name << " (the topology's nodes)\n\n";
  std::cout << sim::report::kernels_text(costs);
  for (const auto& k : s.cluster.node_gpus)
    std::cout << fmt::format("\n{} (nodes {}-{})\n\n", k.gpu.name, k.first, k.last)
              << sim::report::kernels_text(sim::workload::kernel_costs(s.model, s.plan, k.gpu));
  return 0;
}

int tasks(const TasksArgs& a, const CommonOptions& o)
{
  const auto s = sim::scenario::load_scenario(a.scenario, load_options(o));
  print_warnings(s.warnings);
  if (o.format == "chakra") { // every rank's own trace: the unfolded graph
    if (a.out.empty())
      throw sim::core::InputError({"--out", "", ""}, "Chakra traces are files, one per rank", "no --out", "--out DIR");
    if (a.rank)
      throw sim::core::InputError({"--rank", "", ""}, "Chakra traces cover every rank", std::to_string(*a.rank),
                                  "no --rank");
    // The export keeps every rank's nodes (as indices) beside the unfolded graph.
    auto memory = sim::scenario::machine_memory();
    const auto size = sim::workload::estimate_graph_size(s.model, s.plan, s.cluster, {.fold = false});
    memory.available_bytes = std::max(0.0, memory.available_bytes - size.tasks * sim::report::chakra_bytes_per_task);
    memory.source += fmt::format(", less the export's {:.0f} bytes per task", sim::report::chakra_bytes_per_task);
    sim::scenario::refuse_oversized_graph(s, {.fold = false}, memory);
    prepare_output_dir(a.out);
    const auto graph = sim::topology::build_graph(s.cluster, s.nodes);
    const auto g = sim::workload::build_task_graph(s.model, s.plan, s.cluster, graph, {false});
    const auto written = sim::report::write_chakra(g, a.out, s.name);
    std::cout << fmt::format(
        "wrote {} Chakra traces ({}/{}.RANK.et, {} nodes; {} collectives as COLL nodes{}) and "
        "{}/comm_group.json ({} process groups)\n",
        written.ranks, a.out, s.name, written.nodes, written.collectives,
        written.split_collectives > 0 ? fmt::format(", {} as their send/receive pairs", written.split_collectives) : "",
        a.out, written.groups);
    return 0;
  }
  if (a.rank && (*a.rank < 0 || *a.rank >= s.gpus))
    throw sim::core::InputError({"--rank", "", ""}, "no such rank", std::to_string(*a.rank),
                                fmt::format("0 to {}", s.gpus - 1));
  sim::scenario::refuse_oversized_graph(s, {.fold = !a.no_fold}, sim::scenario::machine_memory());
  const auto graph = sim::topology::build_graph(s.cluster, s.nodes);
  const auto g = sim::workload::build_task_graph(s.model, s.plan, s.cluster, graph, {!a.no_fold});
  if (a.rank && g.folded && std::find(g.simulated.begin(), g.simulated.end(), *a.rank) == g.simulated.end())
    throw sim::core::InputError({"--rank", "", ""}, "this rank is folded into the simulated GPU of its class",
                                std::to_string(*a.rank),
                                fmt::format("a simulated rank ({}), or --no-fold to list every rank's own tasks",
                                            fmt::join(g.simulated, ", ")));
  if (o.format == "json")
    sim::report::write_tasks_json(std::cout, g, a.rank);
  else
    std::cout << sim::report::task_summary_text(g, a.rank);
  return 0;
}

} // namespace sim::cli
