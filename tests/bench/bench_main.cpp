// simtrain_bench: measurements of simtrain's own speed and memory (run by tools/bench, not by the test suite).
#include "engine/platform.hpp"
#include "engine/replay.hpp"
#include "report/metrics.hpp"
#include "scenario/scenario.hpp"
#include "study/sweep.hpp"
#include "topology/cluster_graph.hpp"
#include "workload/builder.hpp"
#include "workload/step_screen.hpp"

#include <CLI/CLI.hpp>
#include <chrono>
#include <fmt/format.h>
#include <limits>
#include <sys/resource.h>
#include <xbt/log.h>

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0)
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double peak_rss_bytes()
{
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;
}

int bench_platform(const std::string& topology, int gpus)
{
  const sim::scenario::LoadOptions options{SIMTRAIN_SOURCE_DIR, {}};
  const auto spec = sim::scenario::load_cluster(topology, options);
  const int nodes = sim::scenario::nodes_for(spec, gpus, "--gpus");
  auto t0 = std::chrono::steady_clock::now();
  const auto graph = sim::topology::build_graph(spec, nodes);
  const double graph_s = seconds_since(t0);
  xbt_log_control_set("root.thresh:critical");
  simgrid::s4u::Engine engine("bench");
  sim::engine::configure_network_model();
  t0 = std::chrono::steady_clock::now();
  const auto platform = sim::engine::build_platform(graph);
  const double platform_s = seconds_since(t0);
  // Route resolution, as each transfer's start pays it: GPU 0 to every node's GPU 0.
  t0 = std::chrono::steady_clock::now();
  std::vector<simgrid::s4u::Link*> links;
  double latency = 0;
  int routes = 0;
  for (int n = 0; n < nodes; ++n, ++routes) {
    links.clear();
    platform.gpu[0]->route_to(platform.gpu[static_cast<std::size_t>(n * spec.node.gpus + spec.node.gpus - 1)], links,
                              &latency);
  }
  const double route_us = seconds_since(t0) / routes * 1e6;
  fmt::print(
      "{{\"topology\": \"{}\", \"gpus\": {}, \"nodes\": {}, \"graph_build_s\": {:.4f}, \"platform_build_s\": {:.4f}, "
      "\"route_us\": {:.3f}, \"peak_rss_bytes\": {:.0f}}}\n",
      topology, gpus, nodes, graph_s, platform_s, route_us, peak_rss_bytes());
  return 0;
}

// One simulated step: where the time and memory go (graph, tasks, replay, metrics).
int bench_run(const std::string& file, const std::vector<std::string>& overrides, bool fold, bool lone_flows)
{
  const sim::scenario::LoadOptions options{SIMTRAIN_SOURCE_DIR, overrides};
  auto t0 = std::chrono::steady_clock::now();
  const auto s = sim::scenario::load_scenario(file, options);
  const auto graph = sim::topology::build_graph(s.cluster, s.nodes);
  const auto tasks = sim::workload::build_task_graph(s.model, s.plan, s.cluster, graph, {fold});
  const double build_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const auto timeline = sim::engine::replay(tasks, graph, {}, {.lone_flows = lone_flows});
  const double replay_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const auto metrics = sim::report::compute_metrics(s, tasks, graph, timeline);
  const double metrics_s = seconds_since(t0);
  fmt::print(
      "{{\"scenario\": \"{}\", \"gpus\": {}, \"tasks\": {}, \"folded\": {}, \"build_s\": {:.3f}, \"replay_s\": {:.3f}, "
      "\"metrics_s\": {:.3f}, \"peak_rss_bytes\": {:.0f}, \"step_time_s\": {:.6f}}}\n",
      file, s.gpus, tasks.size(), tasks.folded, build_s, replay_s, metrics_s, peak_rss_bytes(), metrics.step_time_s);
  return 0;
}

// A scenario's screened bound and estimate beside its simulated step: the estimate's error, measured.
int bench_estimate(const std::string& file, const std::vector<std::string>& overrides)
{
  const auto s = sim::scenario::load_scenario(file, {SIMTRAIN_SOURCE_DIR, overrides});
  const auto graph = sim::topology::build_graph(s.cluster, s.nodes);
  auto t0 = std::chrono::steady_clock::now();
  sim::workload::StepScreen screen{std::numeric_limits<double>::infinity(), 0.0};
  for (const auto* gpu : sim::topology::gpu_kinds(s.cluster)) {
    const auto one = sim::workload::screen_step(s.model, s.plan, *gpu, graph, s.cluster);
    screen.bound_s = std::min(screen.bound_s, one.bound_s);
    screen.estimate_s = std::max(screen.estimate_s, one.estimate_s);
  }
  const double screen_s = seconds_since(t0);
  const auto tasks = sim::workload::build_task_graph(s.model, s.plan, s.cluster, graph, {true});
  const auto timeline = sim::engine::replay(tasks, graph);
  const auto metrics = sim::report::compute_metrics(s, tasks, graph, timeline);
  fmt::print("{{\"bench\": \"estimate\", \"scenario\": \"{}\", \"gpus\": {}, \"step_time_s\": {:.6f}, "
             "\"bound_s\": {:.6f}, \"estimate_s\": {:.6f}, \"estimate_error\": {:.4f}, \"screen_s\": {:.6f}}}\n",
             file, s.gpus, metrics.step_time_s, screen.bound_s, screen.estimate_s,
             screen.estimate_s / metrics.step_time_s - 1.0, screen_s);
  return 0;
}

// Screening every layout `sweep --auto` enumerates (a valid plan? does it fit? its bound and estimate), simulating
// none: one core's rate.
int bench_screen(const std::string& file, const std::vector<std::string>& overrides)
{
  const auto base = sim::scenario::load_scenario(file, {SIMTRAIN_SOURCE_DIR, overrides});
  sim::study::SweepOptions o;
  o.scenario = file;
  o.data_dir = SIMTRAIN_SOURCE_DIR;
  o.base_overrides = overrides;
  o.layouts = sim::study::auto_layouts(base);
  o.screen_only = true;
  double screening_s = 0;
  o.on_progress = [&screening_s](const sim::study::SweepProgress& p) { screening_s = p.screening_s; };
  const auto r = sim::study::run_sweep(o);
  int candidates = 0;
  for (const auto& row : r.rows)
    candidates += row.outcome == sim::study::Outcome::PRUNED ? 1 : 0;
  fmt::print(
      "{{\"bench\": \"screen\", \"scenario\": \"{}\", \"gpus\": {}, \"layouts\": {}, \"candidates\": {}, "
      "\"screening_s\": {:.3f}, \"layouts_per_s_per_core\": {:.0f}, \"target\": 3000, \"peak_rss_bytes\": {:.0f}}}\n",
      file, base.gpus, r.rows.size(), candidates, screening_s, static_cast<double>(r.rows.size()) / screening_s,
      peak_rss_bytes());
  return 0;
}

} // namespace

int main(int argc, char** argv)
{
  CLI::App app{"simtrain_bench: speed and memory measurements", "simtrain_bench"};
  app.require_subcommand(1);
  std::string topology = "dgx-h100";
  int gpus = 1024;
  auto* platform = app.add_subcommand("platform", "Build the cluster graph and the SimGrid platform");
  platform->add_option("--topology", topology)->capture_default_str();
  platform->add_option("--gpus", gpus)->capture_default_str();
  std::string scenario;
  bool no_fold = false;
  auto* run = app.add_subcommand("run", "Simulate one step of a scenario, timing each stage");
  run->add_option("scenario", scenario)->required();
  run->add_flag("--no-fold", no_fold);
  bool no_lone_flows = false;
  run->add_flag("--no-lone-flows", no_lone_flows);
  std::vector<std::string> overrides;
  run->add_option("--set", overrides, "PATH=VALUE, as simtrain's");
  auto* screen = app.add_subcommand("screen", "Screen every layout sweep --auto enumerates, simulating none");
  screen->add_option("scenario", scenario)->required();
  screen->add_option("--set", overrides, "PATH=VALUE, as simtrain's");
  auto* estimate = app.add_subcommand("estimate", "A scenario's screened bound and estimate beside its simulated step");
  estimate->add_option("scenario", scenario)->required();
  estimate->add_option("--set", overrides, "PATH=VALUE, as simtrain's");
  CLI11_PARSE(app, argc, argv);
  try {
    if (*platform)
      return bench_platform(topology, gpus);
    if (*run)
      return bench_run(scenario, overrides, !no_fold, !no_lone_flows);
    if (*screen)
      return bench_screen(scenario, overrides);
    if (*estimate)
      return bench_estimate(scenario, overrides);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
