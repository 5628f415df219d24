// Validation of the replay against closed forms. Each TEST_CASE is one process, one simulation.
#include "engine/platform.hpp"
#include "engine/replay.hpp"
#include "report/metrics.hpp"
#include "scenario/scenario.hpp"
#include "workload/builder.hpp"
#include "workload/collectives.hpp"

#include "../unit/support.hpp"
#include "flow_task.hpp"

#include <numeric>

namespace {

struct Run {
  sim::scenario::Scenario scenario;
  sim::report::Metrics metrics;
};

// A GPT whose stages are exactly balanced once memory-bound kernels cost nothing: a tiny vocabulary (so the
// embedding and output layers are negligible), rotary positions, GEMMs only.
nlohmann::json balanced_model(int layers)
{
  return {{"schema", "model/v1"},       {"name", "balanced"}, {"num_layers", layers}, {"hidden_size", 16384},
          {"num_attention_heads", 128}, {"vocab_size", 8},    {"seq_length", 4096},   {"position_embedding", "rope"}};
}

// Free communication and free memory traffic: only the GEMMs take time. Far beyond any plausible bandwidth, so set
// on the loaded scenario rather than through `--set` (whose values are held to physical ranges).
void make_communication_free(sim::scenario::Scenario& s)
{
  constexpr double free_bandwidth = 1e21;
  s.cluster.gpu.memory_bandwidth = free_bandwidth;
  s.cluster.gpu.nvlink_bandwidth = free_bandwidth;
  if (s.cluster.node.nvlink)
    std::get<sim::topology::NvSwitchFabric>(*s.cluster.node.nvlink).bandwidth = free_bandwidth;
  s.cluster.node.nics.bandwidth = free_bandwidth;
}

Run simulate(nlohmann::json model, nlohmann::json plan, std::vector<std::string> overrides, bool free = false,
             const std::string& topology = "dgx-h100")
{
  auto doc = test::scenario_json("x", std::move(plan), topology);
  doc["model"] = std::move(model);
  const auto file = test::write_json(test::scratch_dir() / "s.json", doc);
  auto s = sim::scenario::load_scenario(file, test::options(std::move(overrides)));
  if (free)
    make_communication_free(s);
  const auto graph = sim::topology::build_graph(s.cluster, s.nodes);
  const auto tasks = sim::workload::build_task_graph(s.model, s.plan, s.cluster, graph);
  const auto timeline = sim::engine::replay(tasks, graph);
  auto metrics = sim::report::compute_metrics(s, tasks, graph, timeline);
  return {std::move(s), std::move(metrics)};
}

void check_bubble(int p, int m, const std::string& schedule, int v = 1)
{
  nlohmann::json plan{{"pp", p}, {"global_batch", m}, {"schedule", schedule}, {"attention", "unfused"}};
  if (v > 1)
    plan["virtual_stages"] = v;
  const auto run = simulate(balanced_model(2 * p * v), plan, {}, true);
  const double textbook = (p - 1.0) / (static_cast<double>(m) * v + p - 1.0);
  CHECK(run.metrics.bubble_theory == Approx(textbook));
  for (const auto& st : run.metrics.per_stage) {
    INFO("stage " << st.stage);
    CHECK(st.bubble == Approx(textbook).epsilon(0.01));
  }
}

// Replays `tasks`, all ready at once, alone on a cluster; task i of the list is task i + 1 of the graph.
sim::engine::Timeline replay_together(const sim::topology::ClusterGraph& graph,
                                      const std::vector<sim::workload::Task>& tasks)
{
  sim::workload::TaskGraph g;
  g.gpus = graph.gpus();
  g.cluster_gpus = graph.gpus();
  g.stage_leaders = {0};
  const auto begin = g.add(sim::workload::Task{});
  std::vector<sim::workload::TaskId> ids;
  for (const auto& t : tasks) {
    ids.push_back(g.add(t));
    g.depend(ids.back(), begin);
  }
  g.step_end = g.add(sim::workload::Task{});
  for (auto id : ids)
    g.depend(g.step_end, id);
  g.finalize();
  return sim::engine::replay(g, graph);
}

// An empty task graph for one DGX A100 (8 GPUs, GPU 0 the measured stage leader).
sim::workload::TaskGraph one_node_task_graph()
{
  sim::workload::TaskGraph g;
  g.gpus = 8;
  g.cluster_gpus = 8;
  g.stage_leaders = {0};
  return g;
}

// The time one phase of flows takes when replayed alone on a cluster.
double replay_phase(const sim::topology::ClusterGraph& graph, const sim::workload::CollectivePhase& phase)
{
  std::vector<sim::workload::Task> flows;
  for (const auto& f : phase)
    flows.push_back(test::transfer_of(f));
  return replay_together(graph, flows).step_time_s;
}

} // namespace

TEST_CASE("1F1B bubble with balanced stages and free communication: p = 2, m = 4")
{
  check_bubble(2, 4, "1f1b");
}
TEST_CASE("1F1B bubble with balanced stages and free communication: p = 4, m = 8")
{
  check_bubble(4, 8, "1f1b");
}
TEST_CASE("1F1B bubble with balanced stages and free communication: p = 8, m = 32")
{
  check_bubble(8, 32, "1f1b");
}
TEST_CASE("GPipe bubble equals 1F1B's: p = 4, m = 8")
{
  check_bubble(4, 8, "gpipe");
}
TEST_CASE("interleaving with v = 2 divides the bubble by 2: p = 4, m = 8")
{
  check_bubble(4, 8, "interleaved", 2);
}
TEST_CASE("interleaving with v = 4 divides the bubble by 4: p = 2, m = 8")
{
  check_bubble(2, 8, "interleaved", 4);
}

TEST_CASE("a compute-only step takes its FLOPs divided by the GPU's rate")
{
  const std::vector<std::string> overrides{
      "topology.node.gpu.gemm_efficiency=1", "topology.node.gpu.sms=null", "topology.node.gpu.kernel_overhead=null",
      "topology.node.gpu.kernel_tables=null", "topology.node.gpu.sustained_compute_ratio=1"};
  // The host's launches cost nothing either (with them, the GPU waits 16 us for the step's first launches).
  const auto run = simulate(balanced_model(4), {{"global_batch", 2}, {"attention", "unfused"}, {"host_launch", false}},
                            overrides, true);
  const double peak = 989.4e12;
  // What is left besides GEMMs (memory traffic at 1e21 B/s) is below a part in 1e5.
  CHECK(run.metrics.step_time_s == Approx(run.metrics.model_flops / peak).epsilon(1e-5));
  CHECK(run.metrics.mfu == Approx(1.0).epsilon(1e-5));
}

TEST_CASE("one ring all-reduce over NVSwitch takes NCCL's latency plus 2(n-1)/n S over the achievable bandwidth")
{
  const auto graph = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 1);
  const double bytes = 1e9;
  const std::vector<int> ring{0, 1, 2, 3, 4, 5, 6, 7};
  const auto phases = sim::workload::lower_collective(sim::workload::CollectiveKind::ALL_REDUCE, ring, bytes, graph,
                                                      sim::plan::CollectiveAlgorithm::RING);
  const int n = 8;
  const double alpha = 3.4e-6; // NCCL's per-step latency on NVLink (Simple protocol), plus its 8.4 us base
  const double beta = 300e9 * 0.767;
  CHECK(replay_phase(graph, phases.at(0)) ==
        Approx(8.4e-6 + 2 * (n - 1) * alpha + 2.0 * (n - 1) / n * bytes / beta).epsilon(0.01));
}

TEST_CASE("a data-parallel ring across nodes runs at the NICs' achievable bandwidth")
{
  const auto graph = sim::topology::build_graph(sim::scenario::load_cluster("dgx-h100", test::options()), 4);
  const double bytes = 4e9;
  const auto phases = sim::workload::lower_collective(sim::workload::CollectiveKind::ALL_REDUCE, {0, 8, 16, 24}, bytes,
                                                      graph, sim::plan::CollectiveAlgorithm::AUTO);
  const double beta = 50e9 * 0.94;
  CHECK(replay_phase(graph, phases.at(0)) == Approx(8.4e-6 + 6 * 9.6e-6 + 2.0 * 3 / 4 * bytes / beta).epsilon(0.01));
}

TEST_CASE("an all-to-all over NVSwitch moves (n-1)/n of each GPU's buffer through its NVLink port")
{
  // Every GPU sends S/n to each of the n-1 others at once: its port carries (n-1)/n S out and as much in.
  const auto graph = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 1);
  const double bytes = 1e9;
  const auto phases =
      sim::workload::lower_collective(sim::workload::CollectiveKind::ALL_TO_ALL, {0, 1, 2, 3, 4, 5, 6, 7}, bytes, graph,
                                      sim::plan::CollectiveAlgorithm::AUTO);
  REQUIRE(phases.size() == 1);
  CHECK(phases[0].size() == 56);
  const double beta = 300e9 * 0.767;
  CHECK(replay_phase(graph, phases[0]) == Approx(8.4e-6 + 3.4e-6 + 7.0 / 8.0 * bytes / beta).epsilon(0.01));
}

TEST_CASE("an all-to-all across two nodes is bound by each GPU's NIC carrying half its buffer")
{
  // 16 GPUs on two DGX H100s: each sends 8/16 of its buffer to the other node through its own 400 Gb/s NIC (and 7/16
  // over NVLink, four times faster), so the NICs set the time.
  const auto graph = sim::topology::build_graph(sim::scenario::load_cluster("dgx-h100", test::options()), 2);
  const double bytes = 1e9;
  std::vector<int> ranks(16);
  std::iota(ranks.begin(), ranks.end(), 0);
  const auto phases = sim::workload::lower_collective(sim::workload::CollectiveKind::ALL_TO_ALL, ranks, bytes, graph,
                                                      sim::plan::CollectiveAlgorithm::AUTO);
  const double beta = 50e9 * 0.94;
  CHECK(replay_phase(graph, phases.at(0)) == Approx(8.4e-6 + 9.6e-6 + 8.0 / 16.0 * bytes / beta).epsilon(0.01));
}

TEST_CASE("a DeepEP dispatch across four nodes is bound by each GPU's NIC carrying one copy per token and node")
{
  // 32 GPUs on four DGX H100s, 64 experts in 4 groups (one per node), 2 groups then 8 experts per token. Each GPU
  // sends to the same local rank of the 3 other nodes the tokens that need that node, through its 400 Gb/s NIC; the
  // copies to the GPUs of its own node (its tokens' and those it forwards, 7 x 4 x 22% of a copy) go over NVLink,
  // nine times faster, beside them.
  const auto graph = sim::topology::build_graph(sim::scenario::load_cluster("dgx-h100", test::options()), 4);
  sim::model::MoeSpec moe;
  moe.num_experts = 64;
  moe.experts_per_token = 8;
  moe.expert_groups = 4;
  moe.groups_per_token = 2;
  const double copy = 1e9;
  std::vector<int> ranks(32);
  std::iota(ranks.begin(), ranks.end(), 0);
  sim::workload::Lowering lowering(graph);
  const auto phase = lowering.deduplicated_all_to_all(ranks, copy, moe, {});
  CHECK(phase.size() == 32 * (3 + 7));
  double miss = 1; // none of the 8 draws from the 2 groups' 32 experts lands in the node's 16
  for (int i = 0; i < 8; ++i)
    miss *= (16.0 - i) / (32.0 - i);
  const double per_node = copy * 0.5 * (1.0 - miss);
  const double beta = 50e9 * 0.94;
  CHECK(replay_phase(graph, phase) == Approx(8.4e-6 + 9.6e-6 + 3.0 * per_node / beta).epsilon(0.01));
}

TEST_CASE("a dependency cycle stops the replay with an error naming the stuck tasks, not a hang")
{
  const auto graph = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 1);
  auto g = one_node_task_graph();
  sim::workload::Task compute;
  compute.kind = sim::workload::TaskKind::COMPUTE;
  compute.rank = 0;
  compute.duration_s = 1e-3;
  compute.label = g.label("attention");
  const auto first = g.add(compute);
  const auto a = g.add(compute);
  const auto b = g.add(compute);
  g.depend(a, first);
  g.depend(a, b);
  g.depend(b, a);
  g.step_end = g.add(sim::workload::Task{});
  g.depend(g.step_end, b);
  g.finalize();
  try {
    sim::engine::replay(g, graph);
    FAIL("the replay finished");
  } catch (const sim::engine::SimulationError& e) {
    CHECK_THAT(std::string(e.what()), Catch::StartsWith("the simulation stalled: 3 of 4 tasks never finished"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("waiting: task 1 (compute on rank 0"));
  }
}

namespace {

// A kernel on GPU 0, `memory_share` of its time streaming memory, beside a 1 GB transfer to GPU 1 over NVLink
// (1e9 / (300 GB/s x 0.767) = 4.35 ms): (kernel end, transfer end).
std::pair<double, double> kernel_beside_transfer(double memory_share, double duration_s = 100e-3)
{
  const auto spec = sim::scenario::load_cluster("dgx-a100", test::options());
  const auto graph = sim::topology::build_graph(spec, 1);
  sim::workload::Task kernel;
  kernel.kind = sim::workload::TaskKind::COMPUTE;
  kernel.rank = 0;
  kernel.duration_s = duration_s;
  kernel.memory_share = static_cast<std::uint16_t>(std::lround(65535.0 * memory_share));
  sim::workload::Task send;
  send.kind = sim::workload::TaskKind::TRANSFER;
  send.rank = 0;
  send.peer = 1;
  send.bytes = 1e9;
  const auto tl = replay_together(graph, {kernel, send});
  const sim::workload::TaskId compute = 1, transfer = 2;
  return {tl.tasks[compute].end_s, tl.tasks[transfer].end_s};
}

// NVLink at 300 GB/s x 0.767 moves 2.5 x 230 GB/s through HBM: a streaming kernel runs on what is left of
// 2039 GB/s x 0.85 while the transfer lasts.
constexpr double hbm = 2039e9 * 0.85;
constexpr double hbm_slowdown = hbm / (hbm - 2.5 * 300e9 * 0.767);

// Slowed by `factor` for `overlap` seconds, a kernel loses overlap x (1 - 1/factor) of progress.
double slowed_end(double duration, double overlap, double factor)
{
  return duration + overlap * (1.0 - 1.0 / factor);
}

} // namespace

TEST_CASE("a kernel beside its GPU's own transfer runs on the SMs NCCL leaves it, and at full speed after")
{
  const auto [end, transfer_s] = kernel_beside_transfer(0.0, 10e-3);
  CHECK(transfer_s == Approx(1e9 / (300e9 * 0.767)).epsilon(1e-6));
  // While the transfer runs, 16 of 108 SMs are NCCL's: the kernel loses 16/108 of that time (its speed is quantised
  // to 1/speed_levels of the GPU's).
  CHECK(end == Approx(10e-3 + 16.0 / 108.0 * transfer_s).margin(transfer_s / sim::engine::speed_levels));
}

TEST_CASE("a memory-bound kernel beside its GPU's collective loses the HBM bandwidth NCCL moves")
{
  const auto [end, transfer_s] = kernel_beside_transfer(1.0);
  CHECK(end == Approx(slowed_end(100e-3, transfer_s, hbm_slowdown)).margin(transfer_s / sim::engine::speed_levels));
}

TEST_CASE("a half memory-bound kernel beside a collective loses SMs for half its time and HBM for the other half")
{
  const auto [end, transfer_s] = kernel_beside_transfer(0.5);
  const double factor = 0.5 / (1.0 - 16.0 / 108.0) + 0.5 * hbm_slowdown;
  CHECK(end == Approx(slowed_end(100e-3, transfer_s, factor)).margin(transfer_s / sim::engine::speed_levels));
}

TEST_CASE("a GPU runs one compute task at a time: two ready at once run one after the other, in the order they "
          "became ready")
{
  const auto graph = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 1);
  sim::workload::Task kernel;
  kernel.kind = sim::workload::TaskKind::COMPUTE;
  kernel.rank = 0;
  kernel.duration_s = 1e-3;
  auto longer = kernel;
  longer.duration_s = 2e-3;
  const auto tl = replay_together(graph, {kernel, longer});
  const sim::workload::TaskId first = 1, second = 2;
  CHECK(tl.tasks[first].end_s == Approx(1e-3));
  CHECK(tl.tasks[second].start_s == Approx(1e-3));
  CHECK(tl.step_time_s == Approx(3e-3));
}

namespace {

struct Launched {
  double duration_s;
  double host_s;
  bool host_waits = false;
};

// A chain of compute tasks on GPU 0 of one DGX A100, each with its kernels' time and its host's launch time; with
// `transfer`, task 1 also waits for a 1 GB NVLink transfer from GPU 1 (1e9 / (300 GB/s x 0.767) = 4.35 ms).
sim::engine::Timeline launched_chain(const std::vector<Launched>& chain, bool transfer = false)
{
  const auto graph = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 1);
  auto g = one_node_task_graph();
  sim::workload::Task send;
  send.kind = sim::workload::TaskKind::TRANSFER;
  send.rank = 1;
  send.peer = 0;
  send.bytes = 1e9;
  send.label = g.label("send");
  const auto sent = transfer ? g.add(send) : sim::workload::no_task;
  auto previous = sim::workload::no_task;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    sim::workload::Task k;
    k.kind = sim::workload::TaskKind::COMPUTE;
    k.rank = 0;
    k.label = g.label("kernels");
    k.duration_s = chain[i].duration_s;
    k.host_s = chain[i].host_s;
    k.host_waits = chain[i].host_waits ? 1 : 0;
    const auto id = g.add(k);
    if (previous != sim::workload::no_task)
      g.depend(id, previous);
    if (i == 1 && transfer)
      g.depend(id, sent);
    previous = id;
  }
  g.step_end = g.add(sim::workload::Task{});
  g.depend(g.step_end, previous);
  g.finalize();
  return sim::engine::replay(g, graph);
}

} // namespace

TEST_CASE("a GPU whose host launches kernels slower than they run waits for it: the chain takes the launches' time")
{
  const auto tl = launched_chain(std::vector<Launched>(10, {1e-3, 2e-3}));
  CHECK(tl.step_time_s == Approx(20e-3));
  // Task 0 (graph task 0): the GPU waits 1 ms for the rest of its launch (0 to 2 ms), then runs it.
  CHECK(tl.tasks[0].start_s == Approx(1e-3));
  CHECK(tl.tasks[0].end_s == Approx(2e-3));
  REQUIRE(tl.host_waits.size() == 10);
  CHECK(tl.host_waits.front().second == Approx(1e-3));
}

TEST_CASE("a host faster than the kernels stays ahead, also through a wait for a transfer: nothing waits for it")
{
  const auto tl = launched_chain(std::vector<Launched>(10, {2e-3, 1e-3}), true);
  const double transfer = 1e9 / (300e9 * 0.767);
  CHECK(tl.step_time_s == Approx(transfer + 9 * 2e-3).epsilon(0.01));
  CHECK(tl.host_waits.empty());
}

// Task 0 runs 10 ms, launched in 1 ms; task 1 runs 1 ms and takes 2 ms to launch.
TEST_CASE("a host ahead of the GPU launches the next task while the GPU runs a long one: nothing is exposed")
{
  const auto tl = launched_chain({{10e-3, 1e-3}, {1e-3, 2e-3}});
  CHECK(tl.step_time_s == Approx(11e-3)); // the host launched task 1 by 3 ms
  CHECK(tl.host_waits.empty());
}

TEST_CASE("a host that waits for the GPU's work so far (a device-to-host copy) exposes the launch after it")
{
  const auto tl = launched_chain({{10e-3, 1e-3}, {1e-3, 2e-3, true}});
  CHECK(tl.step_time_s == Approx(12e-3)); // the host waits for task 0 (10 ms), then launches task 1 until 12 ms
  REQUIRE(tl.host_waits.size() == 1);
  CHECK(tl.host_waits.front().second == Approx(1e-3));
}

namespace {

// A DGX A100's NVLink port as a flow gets it: nominal times NCCL's efficiency there.
double nvlink_rate(const sim::topology::ClusterGraph& graph)
{
  const auto& link = graph.graph[*boost::out_edges(graph.gpu[0], graph.graph).first];
  return link.bandwidth * link.efficiency;
}

// Flow A (GPU 0 to 1, `a_bytes`) from the start, flow B (GPU 0 to 2, 1e9 bytes) after a 5 ms kernel on GPU 3: they
// share GPU 0's NVLink port from then on. Returns the two flows' ends.
std::pair<double, double> joined_flows(double a_bytes, const sim::engine::ReplayOptions& options)
{
  const auto graph = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 1);
  auto g = one_node_task_graph();
  sim::workload::Task a;
  a.kind = sim::workload::TaskKind::TRANSFER;
  a.rank = 0;
  a.peer = 1;
  a.bytes = a_bytes;
  auto b = a;
  b.peer = 2;
  b.bytes = 1e9;
  sim::workload::Task kernel;
  kernel.kind = sim::workload::TaskKind::COMPUTE;
  kernel.rank = 3;
  kernel.duration_s = 5e-3;
  const auto first = g.add(a);
  const auto wait = g.add(kernel);
  const auto second = g.add(b);
  g.depend(second, wait);
  g.step_end = g.add(sim::workload::Task{});
  g.depend(g.step_end, first);
  g.depend(g.step_end, second);
  g.finalize();
  const auto tl = sim::engine::replay(g, graph, {}, options);
  return {tl.tasks[first].end_s, tl.tasks[second].end_s};
}

// The closed form: A alone for 5 ms, then both at half the port, then B alone.
std::pair<double, double> joined_flows_expected(double a_bytes)
{
  const auto graph = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 1);
  const double beta = nvlink_rate(graph);
  const double joined = 5e-3;
  const double a_left = a_bytes - beta * joined;
  const double a_end = joined + a_left / (beta / 2);
  return {a_end, a_end + (1e9 - a_left) / beta};
}

} // namespace

TEST_CASE("a flow alone on its links takes its bytes over its bottleneck's bandwidth, timed without SimGrid")
{
  const auto graph = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 1);
  sim::workload::Task flow;
  flow.kind = sim::workload::TaskKind::TRANSFER;
  flow.rank = 0;
  flow.peer = 1;
  flow.bytes = 1e9;
  flow.latency_s = 2e-6;
  const auto tl = replay_together(graph, {flow});
  CHECK(tl.tasks[1].end_s == Approx(2e-6 + 1e9 / nvlink_rate(graph)).epsilon(1e-12));
  CHECK(tl.link_bytes_forward[graph.graph[*boost::out_edges(graph.gpu[0], graph.graph).first].id] +
            tl.link_bytes_backward[graph.graph[*boost::out_edges(graph.gpu[0], graph.graph).first].id] ==
        1e9);
}

TEST_CASE("a lone flow that another joins shares the link from then on with the bytes it has left")
{
  const auto [a_end, b_end] = joined_flows(2e9, {});
  const auto [a_expected, b_expected] = joined_flows_expected(2e9);
  CHECK(a_end == Approx(a_expected).epsilon(1e-9));
  CHECK(b_end == Approx(b_expected).epsilon(1e-9));
}

TEST_CASE("every flow through SimGrid (lone_flows off) gives the same times as the lone-flow shortcut")
{
  const auto [a_end, b_end] = joined_flows(2e9, {.lone_flows = false});
  const auto [a_expected, b_expected] = joined_flows_expected(2e9);
  CHECK(a_end == Approx(a_expected).epsilon(1e-9));
  CHECK(b_end == Approx(b_expected).epsilon(1e-9));
}
