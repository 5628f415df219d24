// ZeRO-Offload in the replay against closed forms: copies between GPUs and their socket's memory share the PCIe tree
// like any flow, and the CPU's update runs beside the GPUs. Each TEST_CASE is one process, one simulation.
#include "engine/replay.hpp"
#include "model/param_count.hpp"
#include "scenario/scenario.hpp"
#include "workload/builder.hpp"
#include "workload/optimizer_step.hpp"

#include "../unit/support.hpp"

#include <algorithm>
#include <limits>

namespace {

using sim::workload::Task;
using sim::workload::TaskKind;

// The rate one flow alone gets on each link of `path` (bandwidth x efficiency), the slowest: `sharing` flows on the
// links that do not belong to one GPU.
double bottleneck(const sim::topology::ClusterGraph& g, const std::vector<sim::topology::EdgeId>& path, int sharing)
{
  double rate = std::numeric_limits<double>::infinity();
  for (auto e : path) {
    const auto& link = g.graph[e];
    const bool own = g.graph[link.from].kind == sim::topology::DeviceKind::GPU ||
                     g.graph[link.to].kind == sim::topology::DeviceKind::GPU;
    rate = std::min(rate, link.bandwidth * link.efficiency / (own ? 1 : sharing));
  }
  return rate;
}

} // namespace

TEST_CASE("four GPUs under one PCIe switch copying to host memory share the switch's uplink")
{
  const auto cluster = sim::scenario::load_cluster("pcie-4090", test::options());
  const auto graph = sim::topology::build_graph(cluster, 1);
  sim::workload::TaskGraph g;
  g.gpus = g.cluster_gpus = graph.gpus();
  g.stage_leaders = {0};
  const auto start = g.add(Task{});
  constexpr double bytes = 4e9;
  std::vector<sim::workload::TaskId> copies;
  for (int gpu = 0; gpu < 4; ++gpu) { // the GPUs of the first switch
    Task t;
    t.kind = TaskKind::HOST_COPY;
    t.rank = gpu;
    t.peer = gpu % 2 == 0 ? sim::workload::copy_to_host : sim::workload::copy_from_host;
    t.bytes = bytes;
    copies.push_back(g.add(t));
    g.depend(copies.back(), start);
  }
  Task cpu;
  cpu.kind = TaskKind::HOST_COMPUTE;
  cpu.rank = 0;
  cpu.duration_s = 0.25;
  const auto update = g.add(cpu);
  g.depend(update, start);
  g.step_end = g.add(Task{});
  for (auto c : copies)
    g.depend(g.step_end, c);
  g.depend(g.step_end, update);
  g.finalize();
  const auto timeline = sim::engine::replay(g, graph);
  // Two copies each way: the uplink carries two flows per direction, the socket's memory link as many.
  const auto path = sim::topology::route_to_host_memory(graph, 0);
  const double expected = bytes / bottleneck(graph, path, 2);
  for (auto c : copies)
    CHECK(timeline.tasks[c].end_s == Approx(expected).epsilon(1e-9));
  CHECK(timeline.tasks[update].end_s == Approx(0.25)); // beside the copies, on the host's CPU
  // The copies crossed the GPU's own link, the switch's uplink and the socket's memory link.
  const auto& up = graph.graph[path[1]];
  CHECK(timeline.link_bytes_forward[up.id] + timeline.link_bytes_backward[up.id] == Approx(4 * bytes));
}

TEST_CASE("ZeRO-Offload on one GPU: gradients out, the CPU's update, the parameters back, at their closed forms")
{
  nlohmann::json plan{{"micro_batch", 1},    {"global_batch", 1},          {"seq_length", 512},      {"zero_stage", 1},
                      {"recompute", "full"}, {"offload_optimizer", "cpu"}, {"dp_bucket_size", "2GB"}};
  auto doc = test::scenario_json("llama2-7b", plan, "workstation-rtx3090");
  doc["gpus"] = 1;
  const auto file = test::write_json(test::scratch_dir() / "offload.json", doc);
  const auto s = sim::scenario::load_scenario(file, test::options());
  const auto graph = sim::topology::build_graph(s.cluster, s.nodes);
  const auto g = sim::workload::build_task_graph(s.model, s.plan, s.cluster, graph);
  const auto timeline = sim::engine::replay(g, graph);
  double last_kernel = 0;
  double to_host_end = 0;
  sim::workload::TaskId update = sim::workload::no_task;
  sim::workload::TaskId back = sim::workload::no_task;
  double copied_out = 0;
  for (sim::workload::TaskId t = 0; t < g.size(); ++t) {
    const auto& task = g[t];
    if (task.kind == TaskKind::COMPUTE)
      last_kernel = std::max(last_kernel, timeline.tasks[t].end_s);
    if (task.kind == TaskKind::HOST_COMPUTE)
      update = t;
    if (task.kind == TaskKind::HOST_COPY && task.peer == sim::workload::copy_to_host) {
      copied_out += task.bytes;
      to_host_end = std::max(to_host_end, timeline.tasks[t].end_s);
    }
    if (task.kind == TaskKind::HOST_COPY && task.peer == sim::workload::copy_from_host)
      back = t;
  }
  REQUIRE(update != sim::workload::no_task);
  REQUIRE(back != sim::workload::no_task);
  const double params = sim::model::count_params(s.model).total;
  // Every gradient leaves once, in fp32 at the pinned copies' efficiency; the update's shard is the whole model.
  CHECK(copied_out == Approx(params * sim::workload::offload_copy_bytes_per_param));
  CHECK(g[back].bytes == Approx(params * sim::workload::offload_copy_bytes_per_param));
  // The update starts once the last gradient is on the host and the GPU is done; it streams 28 bytes per parameter
  // through one socket's DRAM at CPU Adam's measured share.
  CHECK(timeline.tasks[update].start_s == Approx(std::max(to_host_end, last_kernel)));
  const double cpu_s =
      params * 28.0 / (sim::workload::cpu_optimizer_memory_efficiency * s.cluster.node.host.memory_bandwidth);
  CHECK(timeline.tasks[update].end_s - timeline.tasks[update].start_s == Approx(cpu_s).epsilon(1e-9));
  // The parameters come back alone on the GPU's link, and end the step.
  const auto path = sim::topology::route_to_host_memory(graph, 0);
  const double back_s = g[back].bytes / bottleneck(graph, path, 1) + sim::topology::route_latency(graph, path);
  CHECK(timeline.tasks[back].end_s - timeline.tasks[update].end_s == Approx(back_s).epsilon(1e-9));
  CHECK(timeline.step_time_s == Approx(timeline.tasks[back].end_s));
}

TEST_CASE("ZeRO-Offload's delayed update: the CPU updates from the step's start beside the passes, the step ends "
          "with the later of the two")
{
  nlohmann::json plan{{"micro_batch", 1},        {"global_batch", 1},     {"seq_length", 512},
                      {"zero_stage", 1},         {"recompute", "full"},   {"offload_optimizer", "cpu"},
                      {"dp_bucket_size", "2GB"}, {"delayed_update", true}};
  auto doc = test::scenario_json("llama2-7b", plan, "workstation-rtx3090");
  doc["gpus"] = 1;
  const auto file = test::write_json(test::scratch_dir() / "delayed.json", doc);
  const auto s = sim::scenario::load_scenario(file, test::options());
  const auto graph = sim::topology::build_graph(s.cluster, s.nodes);
  const auto g = sim::workload::build_task_graph(s.model, s.plan, s.cluster, graph);
  const auto timeline = sim::engine::replay(g, graph);
  double passes_end = 0; // the GPU's kernels and this step's gradients on the host
  sim::workload::TaskId update = sim::workload::no_task;
  sim::workload::TaskId back = sim::workload::no_task;
  for (sim::workload::TaskId t = 0; t < g.size(); ++t) {
    const auto& task = g[t];
    if (task.kind == TaskKind::COMPUTE ||
        (task.kind == TaskKind::HOST_COPY && task.peer == sim::workload::copy_to_host))
      passes_end = std::max(passes_end, timeline.tasks[t].end_s);
    if (task.kind == TaskKind::HOST_COMPUTE)
      update = t;
    if (task.kind == TaskKind::HOST_COPY && task.peer == sim::workload::copy_from_host)
      back = t;
  }
  REQUIRE(update != sim::workload::no_task);
  REQUIRE(back != sim::workload::no_task);
  const double params = sim::model::count_params(s.model).total;
  const double cpu_s =
      params * 28.0 / (sim::workload::cpu_optimizer_memory_efficiency * s.cluster.node.host.memory_bandwidth);
  CHECK(timeline.tasks[update].start_s == 0);
  CHECK(timeline.tasks[update].end_s == Approx(cpu_s).epsilon(1e-9));
  CHECK(timeline.tasks[back].start_s == Approx(cpu_s).epsilon(1e-9));
  CHECK(timeline.step_time_s == Approx(std::max(passes_end, timeline.tasks[back].end_s)).epsilon(1e-9));
  // One GPU's 7B update on a workstation's CPU outlasts its forward and backward at 512 tokens: the CPU sets the pace.
  CHECK(timeline.tasks[back].end_s > passes_end);
}

TEST_CASE("NVMe swaps: two GPUs' reads share the drives at their read rate, a write runs at the write rate")
{
  const auto cluster = sim::scenario::load_cluster("pcie-4090", test::options());
  const auto graph = sim::topology::build_graph(cluster, 1);
  const auto& nvme = cluster.node.host.nvme;
  REQUIRE(nvme.drives == 2);
  sim::workload::TaskGraph g;
  g.gpus = g.cluster_gpus = graph.gpus();
  g.stage_leaders = {0};
  const auto start = g.add(Task{});
  constexpr double bytes = 6.5e9; // per GPU per drive
  std::vector<sim::workload::TaskId> reads;
  for (int gpu : {0, 1}) // two GPUs of socket 0, each reading a stripe from both drives
    for (int d = 0; d < nvme.drives; ++d) {
      Task t;
      t.kind = TaskKind::HOST_COPY;
      t.rank = gpu;
      t.peer = sim::workload::nvme_read(d);
      t.bytes = bytes;
      reads.push_back(g.add(t));
      g.depend(reads.back(), start);
    }
  // Then GPU 4 (socket 1) writes to drive 1, its socket's: bytes scaled to the drive's link, rated at its read rate.
  Task w;
  w.kind = TaskKind::HOST_COPY;
  w.rank = 4;
  w.peer = sim::workload::nvme_write(1);
  w.bytes = 3.5e9 * nvme.read_bandwidth / nvme.write_bandwidth;
  const auto write = g.add(w);
  for (auto r : reads)
    g.depend(write, r);
  g.step_end = g.add(Task{});
  g.depend(g.step_end, write);
  g.finalize();
  const auto timeline = sim::engine::replay(g, graph);
  // Each drive serves two flows at its read rate: 6.5 GB each at 3.25 GB/s (drive 1 across the sockets' link, whose
  // 62.4 GB/s does not limit it).
  for (auto r : reads)
    CHECK(timeline.tasks[r].end_s == Approx(2.0 * bytes / nvme.read_bandwidth).epsilon(1e-9));
  // 3.5 GB at the write rate: one second more.
  CHECK(timeline.tasks[write].end_s - timeline.tasks[write].start_s == Approx(1.0).epsilon(1e-9));
  // The first drive's link carried both GPUs' stripes and nothing of the write.
  const auto to_drive0 = sim::topology::route_to_nvme(graph, 0, 0);
  const auto& link = graph.graph[to_drive0.back()];
  CHECK(timeline.link_bytes_forward[link.id] + timeline.link_bytes_backward[link.id] == Approx(2 * bytes));
}
