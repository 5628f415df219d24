#include "plan/parallel_plan.hpp"
#include "plan/schedule.hpp"
#include "workload/builder.hpp"
#include "workload/collectives.hpp"
#include "workload/graph_size.hpp"
#include "workload/layer_program.hpp"
#include "workload/optimizer_step.hpp"

#include "build_support.hpp"

#include <deque>
#include <map>
#include <numeric>
#include <set>

using sim::plan::Pass;
using sim::plan::PassRef;
using sim::workload::Category;
using sim::workload::CollectiveKind;
using sim::workload::LayerKind;
using sim::workload::TaskKind;

namespace {

// "F0 B0 ..." or, with several chunks, "Fc00 Bc10 ..." (chunk, then micro-batch).
std::string order_text(const std::vector<PassRef>& order)
{
  const bool chunks = std::any_of(order.begin(), order.end(), [](const PassRef& p) { return p.chunk > 0; });
  std::string out;
  for (const auto& p : order) {
    if (!out.empty())
      out += ' ';
    out += (p.pass == Pass::FORWARD ? 'F' : 'B');
    if (chunks)
      out += "c" + std::to_string(p.chunk);
    out += std::to_string(p.microbatch);
  }
  return out;
}

sim::plan::ParallelPlan plan_of(int pp, int m, sim::plan::Schedule schedule, int v = 1)
{
  sim::plan::ParallelPlan p;
  p.pp = pp;
  p.global_batch = m;
  p.schedule = schedule;
  p.virtual_stages = v;
  return p;
}

nlohmann::json tiny_model(int layers = 4)
{
  return {{"schema", "model/v1"},      {"name", "tiny"},      {"num_layers", layers}, {"hidden_size", 1024},
          {"num_attention_heads", 16}, {"vocab_size", 32000}, {"seq_length", 1024}};
}

using Built = test::Built;

Built build(nlohmann::json plan, nlohmann::json model = tiny_model(), const std::string& topology = "dgx-a100",
            bool fold = false)
{
  return test::build(std::move(plan), std::move(model), topology, fold);
}

// Bytes each rank sends, per category, on the wire (protocol overheads included).
std::map<Category, std::map<int, double>> sent(const sim::workload::TaskGraph& g)
{
  std::map<Category, std::map<int, double>> out;
  for (const auto& t : g.tasks())
    if (t.kind == TaskKind::TRANSFER)
      out[t.category][t.rank] += t.bytes;
  return out;
}

// Payload bytes a rank sends in the collectives of a category: each collective's ring share of its buffer.
double collective_payload(const sim::workload::TaskGraph& g, Category category, int rank)
{
  std::set<std::uint32_t> seen;
  double bytes = 0;
  for (const auto& t : g.tasks()) {
    if (t.kind != TaskKind::TRANSFER || t.category != category || t.rank != rank ||
        t.collective == sim::workload::no_task)
      continue;
    if (!seen.insert(t.collective).second)
      continue;
    const auto& c = g.collectives()[t.collective];
    bytes += sim::workload::ring_bytes_per_rank(c.kind, static_cast<int>(c.ranks), c.bytes);
  }
  return bytes;
}

// How many tasks a topological walk from the tasks without dependencies reaches: all of them unless there is a cycle.
std::size_t tasks_in_dependency_order(const sim::workload::TaskGraph& g)
{
  std::vector<std::size_t> pending(g.size());
  std::deque<sim::workload::TaskId> ready;
  for (sim::workload::TaskId i = 0; i < g.size(); ++i)
    if ((pending[i] = g.dependencies(i).size()) == 0)
      ready.push_back(i);
  std::size_t done = 0;
  for (; !ready.empty(); ready.pop_front(), ++done)
    for (auto s : g.successors(ready.front()))
      if (--pending[s] == 0)
        ready.push_back(s);
  return done;
}

double compute_time(const sim::workload::TaskGraph& g, Category c, int rank)
{
  double s = 0;
  for (const auto& t : g.tasks())
    if (t.kind == TaskKind::COMPUTE && t.category == c && t.rank == rank)
      s += t.duration_s;
  return s;
}

} // namespace

TEST_CASE("1F1B: p - stage - 1 warm-up forwards, then one forward one backward, then the cool-down")
{
  const auto p = plan_of(4, 8, sim::plan::Schedule::ONE_F_ONE_B);
  CHECK(order_text(sim::plan::stage_order(p, 0)) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  CHECK(order_text(sim::plan::stage_order(p, 2)) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  CHECK(order_text(sim::plan::stage_order(p, 3)) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST_CASE("GPipe runs every forward before any backward")
{
  const auto p = plan_of(2, 3, sim::plan::Schedule::GPIPE);
  CHECK(order_text(sim::plan::stage_order(p, 0)) == "F0 F1 F2 B0 B1 B2");
}

TEST_CASE("interleaved 1F1B follows Megatron-LM's order of chunks and micro-batches")
{
  const auto p = plan_of(2, 4, sim::plan::Schedule::INTERLEAVED, 2);
  CHECK(order_text(sim::plan::stage_order(p, 0)) ==
        "Fc00 Fc01 Fc10 Fc11 Fc02 Bc10 Fc03 Bc11 Fc12 Bc00 Fc13 Bc01 Bc12 Bc13 Bc02 Bc03");
  CHECK(order_text(sim::plan::stage_order(p, 1)) ==
        "Fc00 Fc01 Fc10 Bc10 Fc11 Bc11 Fc02 Bc00 Fc03 Bc01 Fc12 Bc12 Fc13 Bc13 Bc02 Bc03");
}

TEST_CASE("the task graph is acyclic and every task is reachable from the step's start")
{
  const auto b = build({{"tp", 2}, {"pp", 2}, {"dp", 2}, {"global_batch", 8}});
  const auto& g = b.tasks;
  CHECK(tasks_in_dependency_order(g) == g.size());
  CHECK_FALSE(g.dependencies(g.step_end).empty());
}

TEST_CASE("every pipeline send goes to the same TP rank of the neighbouring stage and feeds a receive")
{
  const auto b = build({{"tp", 2}, {"pp", 4}, {"global_batch", 4}, {"p2p_sync", false}});
  std::size_t sends = 0;
  for (sim::workload::TaskId i = 0; i < b.tasks.size(); ++i) {
    const auto& t = b.tasks[i];
    if (t.kind != TaskKind::TRANSFER || t.category != Category::PP || t.collective != sim::workload::no_task)
      continue; // sends only (not the receivers' all-gathers)
    ++sends;
    const auto from = sim::plan::coords_of(b.scenario.plan, t.rank);
    const auto to = sim::plan::coords_of(b.scenario.plan, t.peer);
    CHECK(from.tp == to.tp);
    CHECK(std::abs(from.pp - to.pp) == 1);
    REQUIRE(b.tasks.successors(i).size() == 1); // the receiving stage's input
    CHECK(b.tasks[b.tasks.successors(i)[0]].kind == TaskKind::SYNC);
  }
  // 4 micro-batches x 3 stage boundaries x 2 directions x 2 TP ranks.
  CHECK(sends == 4 * 3 * 2 * 2);
}

TEST_CASE("with p2p_sync a stage's next kernel waits for its pipeline send, without it the send runs on its own")
{
  for (bool synced : {true, false}) {
    const auto b = build({{"pp", 2}, {"global_batch", 4}, {"p2p_sync", synced}});
    for (sim::workload::TaskId i = 0; i < b.tasks.size(); ++i) {
      const auto& t = b.tasks[i];
      if (t.kind != TaskKind::TRANSFER || t.category != Category::PP || t.microbatch != 0 || t.rank != 0)
        continue;
      bool feeds_sender = false;
      for (auto s : b.tasks.successors(i))
        feeds_sender = feeds_sender || (b.tasks[s].kind == TaskKind::COMPUTE && b.tasks[s].rank == t.rank);
      CHECK(feeds_sender == synced);
    }
  }
}

TEST_CASE("every GPU of a stage runs the same compute")
{
  const auto b = build({{"tp", 2}, {"pp", 2}, {"dp", 2}, {"global_batch", 8}});
  std::map<int, std::size_t> per_rank;
  for (const auto& t : b.tasks.tasks())
    if (t.kind == TaskKind::COMPUTE)
      ++per_rank[t.rank];
  REQUIRE(per_rank.size() == 8);
  for (int r = 0; r < 8; ++r)
    CHECK(per_rank[r] ==
          per_rank[sim::plan::rank_of(b.scenario.plan, {0, 0, sim::plan::coords_of(b.scenario.plan, r).pp})]);
}

TEST_CASE("a ring collective sends 2(n-1)/n of the buffer per rank for all-reduce and (n-1)/n otherwise")
{
  const auto spec = sim::scenario::load_cluster("dgx-a100", test::options());
  const auto g = sim::topology::build_graph(spec, 1);
  const std::vector<int> ranks{0, 1, 2, 3, 4, 5, 6, 7};
  for (auto kind : {sim::workload::CollectiveKind::ALL_REDUCE, sim::workload::CollectiveKind::ALL_GATHER}) {
    const auto phases = sim::workload::lower_collective(kind, ranks, 1e9, g, sim::plan::CollectiveAlgorithm::AUTO);
    REQUIRE(phases.size() == 1);
    REQUIRE(phases[0].size() == 8); // one flow per ring edge
    const double share = kind == sim::workload::CollectiveKind::ALL_REDUCE ? 2.0 * 7 / 8 : 7.0 / 8;
    for (const auto& f : phases[0]) {
      CHECK(f.bytes == Approx(share * 1e9)); // large: the Simple protocol, no overhead
      CHECK(f.dst == (f.src + 1) % 8);
    }
  }
}

TEST_CASE("small collectives pick a low-latency protocol, whose wire overhead shows in the flow")
{
  const auto g = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 1);
  const auto phases = sim::workload::lower_collective(sim::workload::CollectiveKind::ALL_REDUCE, {0, 1, 2, 3}, 4096, g,
                                                      sim::plan::CollectiveAlgorithm::AUTO);
  const double payload = 2.0 * 3 / 4 * 4096;
  CHECK(phases[0][0].bytes > payload);
  CHECK(phases[0][0].latency_s < (8.4 + 6 * 3.4) * 1e-6); // cheaper than Simple's
}

TEST_CASE("on a DGX H100 a large all-reduce runs on the NVSwitch (NVLS), moving the buffer once each way")
{
  const auto g = sim::topology::build_graph(sim::scenario::load_cluster("dgx-h100", test::options()), 1);
  const std::vector<int> ranks{0, 1, 2, 3, 4, 5, 6, 7};
  const auto nvls = sim::workload::lower_collective(sim::workload::CollectiveKind::ALL_REDUCE, ranks, 8e9, g,
                                                    sim::plan::CollectiveAlgorithm::AUTO);
  REQUIRE(nvls.size() == 1);
  REQUIRE(nvls[0].size() == 8);
  CHECK(nvls[0][0].latency_s == Approx(25e-6)); // NCCL's NVLS latency
  // The flow's bytes at the ring's link rate take the buffer's time at the NVLS rate (algbw 274 GB/s).
  const double link_rate = 450e9 * 0.822;
  CHECK(nvls[0][0].bytes / link_rate == Approx(8e9 / (450e9 * 0.610)));
  // Asked for a ring, or small (NVLS's 25 us do not pay), it is NCCL's ring.
  const auto ring = sim::workload::lower_collective(sim::workload::CollectiveKind::ALL_REDUCE, ranks, 8e9, g,
                                                    sim::plan::CollectiveAlgorithm::RING);
  CHECK(ring[0][0].bytes == Approx(2.0 * 7 / 8 * 8e9));
  const auto small = sim::workload::lower_collective(sim::workload::CollectiveKind::ALL_REDUCE, ranks, 65536, g,
                                                     sim::plan::CollectiveAlgorithm::AUTO);
  CHECK(small[0][0].latency_s < 25e-6);
  // Four GPUs, or an A100 (no NVLS): a ring.
  CHECK(sim::workload::lower_collective(sim::workload::CollectiveKind::ALL_REDUCE, {0, 1, 2, 3}, 8e9, g,
                                        sim::plan::CollectiveAlgorithm::AUTO)[0][0]
            .bytes == Approx(2.0 * 3 / 4 * 8e9));
  const auto a100 = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 1);
  CHECK(sim::workload::lower_collective(sim::workload::CollectiveKind::ALL_REDUCE, ranks, 8e9, a100,
                                        sim::plan::CollectiveAlgorithm::AUTO)[0][0]
            .bytes == Approx(2.0 * 7 / 8 * 8e9));
}

TEST_CASE("a data-parallel group with several GPUs on each node reduces hierarchically")
{
  const auto g = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 2);
  const std::vector<int> ranks{0, 1, 2, 3, 8, 9, 10, 11};
  const auto phases = sim::workload::lower_collective(sim::workload::CollectiveKind::ALL_REDUCE, ranks, 8e9, g,
                                                      sim::plan::CollectiveAlgorithm::AUTO);
  // Reduce-scatter inside both nodes, four rails of two nodes, all-gather inside both nodes: one pipeline, as NCCL's
  // chunks flow through all of it at once, every flow after the three parts' latencies (the pipeline's fill).
  REQUIRE(phases.size() == 1);
  REQUIRE(phases[0].size() == 24);
  CHECK(phases[0][8].bytes == Approx(2.0 / 2 * 2e9)); // a rail: all-reduce of a quarter of the buffer
  CHECK(phases[0][8].src / 8 != phases[0][8].dst / 8);
  const double simple_ring = (8.4 + 3 * 3.4) * 2 + 8.4 + 2 * 9.6; // NVLink rings of 4 and a network ring of 2, in us
  for (const auto& f : phases[0])
    CHECK(f.latency_s == Approx(simple_ring * 1e-6));
  // On three nodes the ring is NCCL's flat ring: a node's NICs carry (n-1)/n of the buffer per pass, n = 12 GPUs, not
  // the (3-1)/3 of a ring of nodes.
  const auto g3 = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 3);
  const auto rs = sim::workload::lower_collective(sim::workload::CollectiveKind::REDUCE_SCATTER,
                                                  {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19}, 12e9, g3,
                                                  sim::plan::CollectiveAlgorithm::AUTO);
  REQUIRE(rs.size() == 1);
  const auto across = std::find_if(rs[0].begin(), rs[0].end(), [](const auto& f) { return f.src / 8 != f.dst / 8; });
  REQUIRE(across != rs[0].end());
  CHECK(across->bytes == Approx(11.0 / 12 * 3e9));
  const auto flat = sim::workload::lower_collective(sim::workload::CollectiveKind::ALL_REDUCE, ranks, 8e9, g,
                                                    sim::plan::CollectiveAlgorithm::RING);
  CHECK(flat.size() == 1);
}

TEST_CASE("an all-reduce across many nodes takes NCCL's double binary tree where NCCL's model prefers it")
{
  using sim::plan::CollectiveAlgorithm;
  using sim::workload::CollectiveKind;
  const auto g = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 128);
  auto one_per_node = [](int nodes) {
    std::vector<int> r;
    for (int i = 0; i < nodes; ++i)
      r.push_back(8 * i);
    return r;
  };
  // 1 MB over 128 nodes: the ring's 256 network steps cost milliseconds, the tree's 2 log2(128) = 14 hops far less.
  // A DGX A100's NICs sit under its GPUs' PCIe switches: NCCL runs the tree in LL128, 4.4 us and 8.5 us per network
  // hop (NCCL 2.16).
  const auto tree = sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, one_per_node(128), 1 << 20, g,
                                                    CollectiveAlgorithm::AUTO);
  REQUIRE(tree.size() == 1);
  REQUIRE(tree[0].size() == 128); // on the ring's edges
  CHECK(tree[0][0].latency_s == Approx((4.4 + 2 * 7 * 8.5) * 1e-6));
  // Twice the buffer at the tree's LL128 share: 0.92 x 120/128 under Ampere's 20 GB/s per channel cap (0.85 of a
  // 23.5 GB/s HDR NIC), times the one-GPU pattern's 0.85 (one GPU per node), times NCCL's correction at 16K x 64 B
  // (0.6).
  const double ll128_tree = std::min(0.92 * 120.0 / 128.0, 20.0 / 23.5);
  CHECK(tree[0][0].bytes == Approx(2.0 * (1 << 20) / (ll128_tree * 0.85 * 0.6)));
  for (const auto& f : tree[0])
    CHECK(f.dst == (f.src + 8) % (8 * 128));
  // 64 MB over 16 nodes: bandwidth-bound, where the ring moves less: the ring.
  const auto ring =
      sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, one_per_node(16), 64e6, g, CollectiveAlgorithm::AUTO);
  CHECK(ring[0][0].bytes == Approx(2.0 * 15 / 16 * 64e6));
  // Asked for, the tree; asked for rings, never; two nodes: the hierarchical ring, which moves what the tree would.
  const auto forced =
      sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, one_per_node(16), 64e6, g, CollectiveAlgorithm::TREE);
  // 64e6 / 64 B is past 2^19: LL128's correction 0.9 against Simple's 0.7, so LL128 again.
  CHECK(forced[0][0].bytes == Approx(2.0 * 64e6 / (ll128_tree * 0.85 * 0.9)));
  for (auto algorithm : {CollectiveAlgorithm::RING, CollectiveAlgorithm::HIERARCHICAL})
    CHECK(sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, one_per_node(128), 1 << 20, g, algorithm)[0][0]
              .latency_s != Approx((4.4 + 2 * 7 * 8.5) * 1e-6));
  CHECK(sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, one_per_node(2), 1 << 20, g,
                                        CollectiveAlgorithm::TREE)[0][0]
            .bytes < 2.0 * (1 << 20));
  // Reduce-scatters and all-gathers have no tree.
  CHECK(sim::workload::lower_collective(CollectiveKind::REDUCE_SCATTER, one_per_node(128), 1 << 20, g,
                                        CollectiveAlgorithm::TREE)[0][0]
            .latency_s != Approx((4.4 + 2 * 7 * 8.5) * 1e-6));
  // Whole nodes (64 MB over 16 nodes of 8): the ring's 222 steps inside nodes tip NCCL's model to the tree, which
  // runs across the nodes between the hierarchical phases inside them; on Ampere it is the balanced tree (no 0.85).
  std::vector<int> whole;
  for (int r = 0; r < 128; ++r)
    whole.push_back(r);
  const auto nodes =
      sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, whole, 64e6, g, CollectiveAlgorithm::AUTO);
  REQUIRE(nodes.size() == 1); // one pipeline
  std::size_t across = 0;
  for (const auto& f : nodes[0])
    if (f.src / 8 != f.dst / 8) {
      ++across;
      CHECK(f.bytes == Approx(2.0 * 8e6 / (ll128_tree * 0.9)));
    }
  CHECK(across == 128);                                      // 8 rails of 16 nodes
  CHECK(nodes[0][0].latency_s > (4.4 + 2 * 4 * 8.5) * 1e-6); // the tree's hops and the rings inside the nodes
}

TEST_CASE("NCCL's one-GPU tree moves 0.85 of the tree's bandwidth: one GPU per node, or Hopper with a NIC per GPU")
{
  using sim::plan::CollectiveAlgorithm;
  using sim::workload::CollectiveKind;
  // 1 GB over 16 whole DGX H100 nodes, the tree asked for: Hopper falls back from the balanced tree to the one-GPU
  // pattern when each GPU has its own NIC. Bandwidth-bound, Simple (0.92, no correction at 2^24 x 64 B) beats LL128
  // (Hopper's 29 GB/s per channel from four nodes, 29 / 47 of the NIC). Each rail sends twice its 125 MB share.
  auto cluster = sim::scenario::load_cluster("dgx-h100", test::options());
  std::vector<int> whole;
  for (int r = 0; r < 128; ++r)
    whole.push_back(r);
  auto across_bytes = [&](const sim::topology::ClusterSpec& c) {
    const auto g = sim::topology::build_graph(c, 16);
    const auto phases =
        sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, whole, 1e9, g, CollectiveAlgorithm::TREE);
    for (const auto& f : phases.at(0))
      if (f.src / 8 != f.dst / 8)
        return f.bytes;
    return 0.0;
  };
  CHECK(across_bytes(cluster) == Approx(2.0 * 125e6 / (0.92 * 0.85)));
  // Two GPUs per NIC: the balanced tree splits a node's traffic over two GPUs, at the tree's whole share.
  cluster.node.nics.count = 4;
  cluster.node.nics.gpus = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  cluster.node.pcie.reset(); // its switches list eight NICs
  CHECK(across_bytes(cluster) == Approx(2.0 * 125e6 / 0.92));
  // No compute capability (not an NVIDIA part): NCCL's first row, the balanced tree.
  auto unknown = sim::scenario::load_cluster("dgx-h100", test::options());
  unknown.gpu.compute_capability = 0;
  CHECK(across_bytes(unknown) == Approx(2.0 * 125e6 / 0.92));
}

TEST_CASE("LL128 crosses the network where NCCL enables it, at its ring share and under its per-channel cap")
{
  using sim::plan::CollectiveAlgorithm;
  using sim::workload::CollectiveKind;
  auto one_per_node = [](int nodes, int per_node) {
    std::vector<int> r;
    for (int i = 0; i < nodes; ++i)
      r.push_back(per_node * i);
    return r;
  };
  // 1 MB gathered over a ring of 8 DGX A100 nodes, one GPU each: LL128's 7 network steps at 4 us beat Simple's at
  // 9.6 us, at 0.7 of the ring's bandwidth with one GPU per node (NCCL's ppn < 2).
  const auto a100 = sim::topology::build_graph(sim::scenario::load_cluster("dgx-a100", test::options()), 8);
  const auto ring = sim::workload::lower_collective(CollectiveKind::ALL_GATHER, one_per_node(8, 8), 1e6, a100,
                                                    CollectiveAlgorithm::RING);
  REQUIRE(ring.size() == 1);
  CHECK(ring[0][0].latency_s == Approx((10.0 + 7 * 4.0) * 1e-6));
  CHECK(ring[0][0].bytes == Approx(7.0 / 8 * 1e6 / 0.7));
  // Large, Simple: no overhead on the wire.
  const auto large = sim::workload::lower_collective(CollectiveKind::ALL_GATHER, one_per_node(8, 8), 4e9, a100,
                                                     CollectiveAlgorithm::RING);
  CHECK(large[0][0].bytes == Approx(7.0 / 8 * 4e9));
  // The per-channel cap is the GPUs' generation's: on 400 Gb/s NICs (47 GB/s) Hopper's 36.7 GB/s and Blackwell's 40
  // bind LL128 with two GPUs per node (0.92 of the NIC otherwise); with one GPU per node its 0.7 is below both. Large,
  // Simple again.
  const auto h100 = sim::topology::build_graph(sim::scenario::load_cluster("dgx-h100", test::options()), 8);
  const auto b200 = sim::topology::build_graph(sim::scenario::load_cluster("hgx-b200", test::options()), 8);
  const auto ll128_bytes = [&](const auto& g, const std::vector<int>& ranks, double bytes) {
    return sim::workload::lower_collective(CollectiveKind::ALL_GATHER, ranks, bytes, g, CollectiveAlgorithm::RING)[0]
        .back()
        .bytes;
  };
  std::vector<int> two_each;
  for (int node = 0; node < 8; ++node)
    for (int local : {0, 1})
      two_each.push_back(8 * node + local);
  CHECK(ll128_bytes(h100, two_each, 1e6) == Approx(15.0 / 16 * 1e6 / (36.7 / 47.0)));
  CHECK(ll128_bytes(b200, two_each, 1e6) == Approx(15.0 / 16 * 1e6 / (40.0 / 47.0)));
  CHECK(ll128_bytes(h100, one_per_node(8, 8), 1e6) == Approx(7.0 / 8 * 1e6 / 0.7));
  CHECK(ll128_bytes(h100, one_per_node(8, 8), 64e6) == Approx(7.0 / 8 * 64e6));
  // GPUs on PCIe only (no NVLink inside the node): never LL128 across the network, as NCCL's typeIntra check.
  const auto l40s = sim::topology::build_graph(sim::scenario::load_cluster("l40s-pcie", test::options()), 8);
  std::vector<int> two_per_node;
  for (int node = 0; node < 8; ++node)
    for (int local : {0, 1})
      two_per_node.push_back(8 * node + local);
  const auto pcie =
      sim::workload::lower_collective(CollectiveKind::ALL_GATHER, two_per_node, 1e6, l40s, CollectiveAlgorithm::RING);
  REQUIRE(pcie.size() == 1);
  for (const auto& f : pcie[0])
    CHECK(f.bytes == Approx(15.0 / 16 * 1e6)); // Simple, no wire overhead, on every edge
  // Nor when the same group reduces hierarchically, though its rails cross only the network: NCCL's check is of the
  // whole communicator. Each rail carries NCCL's flat ring's share of the node's half of the buffer, in Simple.
  const auto rails = sim::workload::lower_collective(CollectiveKind::ALL_GATHER, two_per_node, 1e6, l40s,
                                                     CollectiveAlgorithm::HIERARCHICAL);
  REQUIRE(rails.size() == 1);
  std::size_t across = 0;
  for (const auto& f : rails[0])
    if (f.src / 8 != f.dst / 8) {
      ++across;
      CHECK(f.bytes == Approx(15.0 / 16 * 0.5e6));
    }
  CHECK(across == 16);
}

TEST_CASE("across GB200 racks an all-reduce runs as NCCL's NVLS-Tree: NVLink SHARP inside, the shares across")
{
  using sim::plan::CollectiveAlgorithm;
  using sim::workload::CollectiveKind;
  const auto g = sim::topology::build_graph(sim::scenario::load_cluster("gb200-nvl72", test::options()), 4);
  auto racks = [](int count) {
    std::vector<int> r(static_cast<std::size_t>(72 * count));
    std::iota(r.begin(), r.end(), 0);
    return r;
  };
  const double bytes = 16.0 * (1 << 30);
  const double link_rate = 900e9 * 0.756; // the NVLink ring rate (catalogue)
  const double nvls_rate = 900e9 * 0.473;
  for (int count : {2, 4}) {
    const auto phases =
        sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, racks(count), bytes, g, CollectiveAlgorithm::AUTO);
    REQUIRE(phases.size() == 1); // one pipeline
    REQUIRE(phases[0].size() == static_cast<std::size_t>(2 * 72 * count));
    std::size_t across = 0;
    for (const auto& f : phases[0]) {
      // NCCL's NVLS-Tree latency: NVLS's 25 us and 20.9 us per network hop, two per level of the tree.
      CHECK(f.latency_s == Approx((25.0 + 2 * (count == 2 ? 1 : 2) * 20.9) * 1e-6));
      if (f.src / 72 != f.dst / 72) {
        ++across;
        CHECK(f.dst == (f.src + 72) % (72 * count));
        // Two racks: each GPU's share once; more: twice, the busiest node of a double binary tree.
        CHECK(f.bytes == Approx((count == 2 ? 1.0 : 2.0) * bytes / 72));
      } else {
        CHECK(f.bytes / link_rate == Approx(bytes / nvls_rate)); // the buffer at the NVLS rate
      }
    }
    CHECK(across == static_cast<std::size_t>(72 * count));
  }
  // Asked for the hierarchical ring or the tree, not NVLS-Tree. Small buffers still take NVLS-Tree on its own: over
  // 288 GPUs its latency is below the ring's and the tree's (tests/unit/test_collectives.cpp pins the choice).
  for (auto algorithm : {CollectiveAlgorithm::HIERARCHICAL, CollectiveAlgorithm::TREE})
    CHECK(sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, racks(4), bytes, g, algorithm)[0][0].latency_s !=
          Approx((25.0 + 4 * 20.9) * 1e-6));
  CHECK(
      sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, racks(4), 1 << 20, g, CollectiveAlgorithm::AUTO)[0][0]
          .latency_s == Approx((25.0 + 4 * 20.9) * 1e-6));
  // DGX H100 nodes, 8 GB: the NICs bind both, and NVLS-Tree's busiest node sends twice its share where the ring sends
  // 2(n-1)/n of it: the ring. Four GPUs per node: never (no multicast gain).
  const auto h100 = sim::topology::build_graph(sim::scenario::load_cluster("dgx-h100", test::options()), 4);
  std::vector<int> whole(32);
  std::iota(whole.begin(), whole.end(), 0);
  const auto ring =
      sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, whole, 8e9, h100, CollectiveAlgorithm::AUTO);
  const auto across =
      std::find_if(ring[0].begin(), ring[0].end(), [](const auto& f) { return f.src / 8 != f.dst / 8; });
  REQUIRE(across != ring[0].end());
  CHECK(across->bytes == Approx(2.0 * 31 / 32 * 1e9));
  const std::vector<int> halves{0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
  for (double size : {1e8, 1e9, 8e9})
    CHECK(
        sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, halves, size, h100, CollectiveAlgorithm::AUTO)[0][0]
            .latency_s != Approx((25.0 + 4 * 20.9) * 1e-6));
}

TEST_CASE("with SHARP an all-reduce across nodes runs on the switches: each GPU's share once each way over its NIC")
{
  using sim::workload::CollectiveKind;
  auto spec = sim::scenario::load_cluster("dgx-h100", test::options());
  spec.network.sharp = true;
  const auto g = sim::topology::build_graph(spec, 4);
  std::vector<int> whole(32);
  std::iota(whole.begin(), whole.end(), 0);
  const auto phases =
      sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, whole, 8e9, g, sim::plan::CollectiveAlgorithm::AUTO);
  REQUIRE(phases.size() == 1); // one pipeline
  std::size_t across = 0;
  for (const auto& f : phases[0]) {
    CHECK(f.latency_s == Approx((2 * (8.0 + 7 * 0.5) + 10.7) * 1e-6)); // NCCL's CollNet Direct latency
    if (f.src / 8 != f.dst / 8) {
      ++across;
      CHECK(f.bytes == Approx(1e9)); // the GPU's eighth, once
      CHECK(f.dst == (f.src + 8) % 32);
    }
  }
  CHECK(across == 32);
  // One GPU per node: the whole buffer once each way. Reduce-scatters and forced algorithms do not use the switches.
  const auto rail = sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, {0, 8, 16, 24}, 8e9, g,
                                                    sim::plan::CollectiveAlgorithm::AUTO);
  REQUIRE(rail[0].size() == 4);
  CHECK(rail[0][0].bytes == Approx(8e9));
  CHECK(sim::workload::lower_collective(CollectiveKind::REDUCE_SCATTER, {0, 8, 16, 24}, 8e9, g,
                                        sim::plan::CollectiveAlgorithm::AUTO)[0][0]
            .bytes == Approx(3.0 / 4 * 8e9));
  CHECK(sim::workload::lower_collective(CollectiveKind::ALL_REDUCE, {0, 8, 16, 24}, 8e9, g,
                                        sim::plan::CollectiveAlgorithm::HIERARCHICAL)[0][0]
            .bytes == Approx(2.0 * 3 / 4 * 8e9));
}

TEST_CASE("tensor-parallel traffic per layer is two all-reduces forward and two backward of b*s*h")
{
  const auto b = build({{"tp", 4}, {"global_batch", 1}});
  const double act = 1024.0 * 1024 * 2; // s * h * 2 bytes
  const double per_allreduce = 2.0 * 3 / 4 * act;
  // 4 layers x 4 all-reduces, plus the embedding's all-reduce, plus the cross-entropy's small one (3 x 4 B / token)
  // and the output layer's backward all-reduce.
  const double expected = 4 * 4 * per_allreduce + per_allreduce + 2.0 * 3 / 4 * 3 * 4 * 1024 + per_allreduce;
  CHECK(collective_payload(b.tasks, Category::TP, 0) == Approx(expected));
}

TEST_CASE("sequence parallelism turns each all-reduce into a reduce-scatter and all-gather of the same volume")
{
  const auto b = build({{"tp", 4}, {"global_batch", 1}, {"sequence_parallel", true}});
  const double act = 1024.0 * 1024 * 2;
  const double half = 3.0 / 4 * act;
  // Forward: 2 (AG + RS) per layer; backward: 2 x (AG grad + AG input + RS) per layer (the input is gathered again
  // for the weight gradient, as Megatron-LM does).
  const double layers = 4 * (4 * half + 6 * half);
  const double embedding = half + half; // reduce-scatter forward, all-gather backward
  const double head = half + 2.0 * 3 / 4 * 3 * 4 * 1024 + half;
  CHECK(collective_payload(b.tasks, Category::TP, 0) == Approx(layers + embedding + head));
}

TEST_CASE("data-parallel traffic per step is one all-reduce of the rank's gradients")
{
  const auto b = build({{"dp", 8}, {"global_batch", 16}});
  double grads = 0;
  for (const auto& c : b.tasks.collectives())
    if (c.category == Category::DP)
      grads += c.bytes;
  // fp32 gradients (bf16 training) of every parameter: 4 layers of 12h^2 + 13h, the tied word embedding, the
  // learned positions (s = h here) and the final norm.
  const double h = 1024;
  const double expected_grads = 4.0 * (4 * (12 * h * h + 13 * h) + 32000 * h + 1024 * h + 2 * h);
  CHECK(grads == Approx(expected_grads).epsilon(1e-6));
  CHECK(sent(b.tasks)[Category::DP][3] == Approx(2.0 * 7 / 8 * grads));
}

TEST_CASE("full recomputation adds the forward pass again, selective only the attention core")
{
  const auto none = build({{"tp", 2}, {"global_batch", 2}});
  const auto full = build({{"tp", 2}, {"global_batch", 2}, {"recompute", "full"}});
  const auto selective = build({{"tp", 2}, {"global_batch", 2}, {"recompute", "selective"}, {"attention", "unfused"}});
  const double layer_forward = compute_time(none.tasks, Category::FORWARD, 0);
  CHECK(compute_time(none.tasks, Category::RECOMPUTE, 0) == 0.0);
  // Full recomputation redoes every layer's forward (not the embedding or the output layer).
  double layers_only = 0;
  for (const auto& t : none.tasks.tasks())
    if (t.kind == TaskKind::COMPUTE && t.rank == 0 && t.category == Category::FORWARD && t.layer >= 0)
      layers_only += t.duration_s;
  CHECK(compute_time(full.tasks, Category::RECOMPUTE, 0) == Approx(layers_only));
  CHECK(compute_time(full.tasks, Category::FORWARD, 0) == Approx(layer_forward));
  CHECK(sent(full.tasks)[Category::TP][0] > sent(none.tasks)[Category::TP][0]); // its all-reduces run again
  // Selective: per layer and micro-batch, exactly the attention core's forward kernels.
  const auto programs =
      sim::workload::build_programs(selective.scenario.model, selective.scenario.plan, selective.scenario.cluster.gpu);
  double core = 0;
  for (const auto& step : programs.layer_backward[LayerKind::DENSE])
    if (step.recompute)
      core += step.duration_s;
  CHECK(core > 0);
  CHECK(compute_time(selective.tasks, Category::RECOMPUTE, 0) == Approx(4 * 2 * core));
  CHECK(sent(selective.tasks)[Category::TP][0] == Approx(sent(none.tasks)[Category::TP][0]));
}

TEST_CASE("ZeRO-3 gathers parameters before each layer's forward and backward and reduce-scatters gradients")
{
  const auto b = build({{"dp", 8}, {"global_batch", 16}, {"zero_stage", 3}});
  std::size_t gathers = 0;
  std::size_t scatters = 0;
  for (const auto& c : b.tasks.collectives()) {
    const auto& label = b.tasks.label_text(c.label);
    gathers += label == "zero-3 parameter all-gather";
    scatters += label.find("dp gradient bucket") == 0;
  }
  const int items = 4 + 2; // layers, embedding, output layer
  const int microbatches = 2;
  CHECK(gathers == static_cast<std::size_t>(2 * items * microbatches));
  CHECK(scatters >= static_cast<std::size_t>(microbatches)); // every micro-batch's gradients, in buckets
}

TEST_CASE("multi-token prediction runs beside the output layer, and its stage shares the embedding's gradient")
{
  const nlohmann::json plan{{"pp", 2}, {"dp", 4}, {"global_batch", 16}}; // 4 micro-batches
  auto untied = tiny_model();
  untied["tie_embeddings"] = false;
  const auto plain = build(plan, untied);
  auto with_model = untied;
  with_model["mtp_layers"] = 1;
  const auto with = build(plan, with_model);
  const auto programs =
      sim::workload::build_programs(with.scenario.model, with.scenario.plan, with.scenario.cluster.gpu);
  double module = 0;
  for (const auto& step : programs.mtp_forward)
    module += step.duration_s;
  REQUIRE(module > 0);
  const int last = 4; // stage 1's first GPU
  CHECK(compute_time(with.tasks, Category::FORWARD, last) ==
        Approx(compute_time(plain.tasks, Category::FORWARD, last) + 4 * module));
  CHECK(compute_time(with.tasks, Category::FORWARD, 0) == Approx(compute_time(plain.tasks, Category::FORWARD, 0)));
  auto shared = [](const Built& b) {
    std::size_t n = 0;
    for (const auto& c : b.tasks.collectives())
      n += b.tasks.label_text(c.label) == "embedding gradient all-reduce";
    return n;
  };
  CHECK(shared(plain) == 0);
  CHECK(shared(with) > 0);
}

TEST_CASE("hybrid sharding gathers and reduce-scatters within shard groups, then all-reduces each shard across them")
{
  const nlohmann::json plan{{"dp", 16}, {"global_batch", 16}, {"zero_stage", 3}};
  const auto full = build(plan);
  auto hybrid_plan = plan;
  hybrid_plan["shard_group"] = 4;
  const auto hybrid = build(hybrid_plan);
  std::size_t gathers = 0;
  std::size_t scatters = 0;
  std::size_t across = 0;
  double scattered = 0;
  double reduced = 0;
  for (const auto& c : hybrid.tasks.collectives()) {
    const auto& label = hybrid.tasks.label_text(c.label);
    if (label == "zero-3 parameter all-gather") {
      ++gathers;
      CHECK(c.ranks == 4);
    } else if (label.find("across shard groups") != std::string::npos) {
      ++across;
      CHECK(c.kind == CollectiveKind::ALL_REDUCE);
      CHECK(c.ranks == 4); // the 16 / 4 copies of each shard
      reduced += c.bytes;
    } else if (label.find("dp gradient bucket") == 0) {
      ++scatters;
      CHECK(c.kind == CollectiveKind::REDUCE_SCATTER);
      CHECK(c.ranks == 4);
      scattered += c.bytes;
    }
  }
  CHECK(gathers > 0);
  CHECK(across == scatters);               // per bucket and shard group
  CHECK(reduced == Approx(scattered / 4)); // a bucket's shard of 1/4 of it
  // The optimizer updates a quarter of the parameters, not a sixteenth.
  CHECK(compute_time(hybrid.tasks, Category::OPTIMIZER, 0) ==
        Approx(4 * compute_time(full.tasks, Category::OPTIMIZER, 0)));
}

TEST_CASE("the optimizer runs on a 1/dp shard with the distributed optimizer, then parameters are gathered")
{
  const auto plain = build({{"dp", 8}, {"global_batch", 8}});
  const auto sharded = build({{"dp", 8}, {"global_batch", 8}, {"distributed_optimizer", true}});
  CHECK(compute_time(sharded.tasks, Category::OPTIMIZER, 0) ==
        Approx(compute_time(plain.tasks, Category::OPTIMIZER, 0) / 8));
  bool gathered = false;
  for (const auto& c : sharded.tasks.collectives())
    gathered = gathered || sharded.tasks.label_text(c.label) == "parameter all-gather";
  CHECK(gathered);
}

TEST_CASE("folding keeps one GPU per stage with the same compute and the same traffic on its own links")
{
  const nlohmann::json plan{{"tp", 2}, {"pp", 2}, {"dp", 4}, {"global_batch", 16}};
  const auto full = build(plan);
  const auto folded = build(plan, tiny_model(), "dgx-a100", true);
  REQUIRE(folded.tasks.folded);
  CHECK(folded.tasks.multiplicity == 8);
  CHECK(folded.tasks.simulated == std::vector<int>{0, 8});
  for (int leader : folded.tasks.simulated) {
    INFO("GPU " << leader);
    CHECK(compute_time(folded.tasks, Category::FORWARD, leader) ==
          Approx(compute_time(full.tasks, Category::FORWARD, leader)));
    CHECK(compute_time(folded.tasks, Category::BACKWARD, leader) ==
          Approx(compute_time(full.tasks, Category::BACKWARD, leader)));
    for (auto c : {Category::TP, Category::PP, Category::DP})
      CHECK(sent(folded.tasks)[c][leader] == Approx(sent(full.tasks)[c][leader]));
  }
}

TEST_CASE("a folded collective inside a node is its one flow per phase, with no syncs around it")
{
  // TP 2 inside a node folds to one GPU per stage: each tensor-parallel collective is that GPU's flow, waiting for its
  // kernels directly; unfolded, its two flows are joined by syncs.
  const nlohmann::json plan{{"tp", 2}, {"pp", 2}, {"dp", 4}, {"global_batch", 16}};
  auto syncs = [](const sim::workload::TaskGraph& g) {
    return std::count_if(g.tasks().begin(), g.tasks().end(),
                         [](const auto& t) { return t.kind == TaskKind::SYNC && t.category == Category::TP; });
  };
  const auto folded = build(plan, tiny_model(), "dgx-a100", true);
  REQUIRE(folded.tasks.folded);
  CHECK(syncs(folded.tasks) == 0);
  CHECK(syncs(build(plan).tasks) > 0);
  for (sim::workload::TaskId t = 0; t < folded.tasks.size(); ++t)
    if (folded.tasks[t].kind == TaskKind::TRANSFER && folded.tasks[t].category == Category::TP)
      for (auto d : folded.tasks.dependencies(t))
        CHECK(folded.tasks[d].kind != TaskKind::SYNC);
}

TEST_CASE("GPUs that share NVLink lanes fold where a rotation of the ranks maps the node onto itself")
{
  // DGX-1 V100's hybrid cube mesh: rotating the data-parallel rank inside each group of four maps the mesh onto itself.
  const auto b =
      build({{"tp", 2}, {"dp", 4}, {"global_batch", 8}, {"precision", "fp16"}}, tiny_model(), "dgx-v100", true);
  CHECK(b.tasks.folded);
  CHECK(b.tasks.multiplicity * static_cast<int>(b.tasks.simulated.size()) == 8);
}

TEST_CASE("a node whose every GPU pair has a link of its own folds, one with a pair left out does not")
{
  const nlohmann::json plan{{"tp", 4}, {"dp", 4}, {"global_batch", 8}};
  const auto mesh = build(plan, tiny_model(), "mi300x", true);
  CHECK(mesh.tasks.folded);
  CHECK(mesh.tasks.simulated == std::vector<int>{0});
  const auto& fabric = std::get<sim::topology::NvLinkMeshFabric>(*mesh.scenario.cluster.node.nvlink);
  CHECK(fabric.uniform_full_mesh(8));
  auto uneven = fabric;
  uneven.links.front().lanes = 2;
  CHECK_FALSE(uneven.uniform_full_mesh(8));
  auto partial = fabric;
  partial.links.pop_back();
  CHECK_FALSE(partial.uniform_full_mesh(8));
}

TEST_CASE("a flat ring that mixes NVLink and network edges folds only by whole nodes, a hierarchical one folds fully")
{
  // Hierarchical: every GPU reduces inside its node, then over its own NIC, then gathers: symmetric.
  const auto hierarchical = build({{"tp", 16}, {"global_batch", 1}}, tiny_model(), "dgx-a100", true);
  CHECK(hierarchical.tasks.simulated.size() == 1);
  // A flat ring over two nodes: 14 GPUs send over NVLink, 2 over the network; only swapping the nodes keeps it.
  const auto flat =
      build({{"tp", 16}, {"global_batch", 1}, {"collective_algorithm", "ring"}}, tiny_model(), "dgx-a100", true);
  CHECK(flat.tasks.folded);
  CHECK(flat.tasks.simulated.size() == 8);
}

TEST_CASE("with overlap_param_gather the updated parameters arrive during the first forward, not after the optimizer")
{
  const auto plain = build({{"dp", 2}, {"global_batch", 4}, {"distributed_optimizer", true}});
  const auto overlapped =
      build({{"dp", 2}, {"global_batch", 4}, {"distributed_optimizer", true}, {"overlap_param_gather", true}});
  const auto gathers = [](const sim::workload::TaskGraph& g, bool after_optimizer) {
    int n = 0;
    for (const auto& c : g.collectives()) {
      const std::string& label = g.label_text(c.label);
      if (label.starts_with("parameter all-gather"))
        n += (label == "parameter all-gather") == after_optimizer ? 1 : 0;
    }
    return n;
  };
  CHECK(gathers(plain.tasks, true) > 0);
  CHECK(gathers(plain.tasks, false) == 0);
  CHECK(gathers(overlapped.tasks, true) == 0);
  CHECK(gathers(overlapped.tasks, false) > 0);
  // The bytes gathered are the same: every parameter once.
  CHECK(collective_payload(overlapped.tasks, Category::DP, 0) ==
        Approx(collective_payload(plain.tasks, Category::DP, 0)));
  // The first layer's first forward kernel waits for a gather.
  const auto& g = overlapped.tasks;
  for (sim::workload::TaskId t = 0; t < g.size(); ++t) {
    if (g[t].kind != TaskKind::COMPUTE || g[t].category != Category::FORWARD || g[t].layer != 0 ||
        g[t].microbatch != 0 || g[t].rank != 0)
      continue;
    bool waits = false;
    for (auto d : g.dependencies(t))
      waits = waits || (g[d].collective != sim::workload::no_task &&
                        g.label_text(g.collectives()[g[d].collective].label).starts_with("parameter all-gather"));
    CHECK(waits);
    break;
  }
}

namespace {

std::size_t count_label(const Built& b, const std::string& label, int rank = 0)
{
  std::size_t n = 0;
  for (const auto& t : b.tasks.tasks())
    if (t.rank == rank && b.tasks.label_text(t.label) == label)
      ++n;
  return n;
}

// Distinct collectives of a category whose label is `label`.
std::size_t count_collectives(const Built& b, const std::string& label)
{
  std::size_t n = 0;
  for (const auto& c : b.tasks.collectives())
    if (b.tasks.label_text(c.label) == label)
      ++n;
  return n;
}

} // namespace

TEST_CASE("the 2021 code's TP backward all-reduce blocks after the weight gradient, asynchronous it runs beside it")
{
  for (bool overlapped : {true, false}) {
    const auto s = build({{"tp", 2}, {"global_batch", 1}, {"tp_backward_overlap", overlapped}}).scenario;
    const auto programs = sim::workload::build_programs(s.model, s.plan, s.cluster.gpu);
    std::size_t beside = 0;
    std::size_t blocking_after_wgrad = 0;
    const auto& p = programs.layer_backward[LayerKind::DENSE];
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (p[i].kind == sim::workload::Step::Kind::OVERLAP &&
          p[i].collective == sim::workload::CollectiveKind::ALL_REDUCE)
        ++beside;
      if (p[i].kind == sim::workload::Step::Kind::COLLECTIVE && i > 0 &&
          p[i - 1].label.find("wgrad") != std::string::npos)
        ++blocking_after_wgrad;
    }
    CHECK(beside == (overlapped ? 2U : 0U)); // QKV and fc1
    CHECK(blocking_after_wgrad == (overlapped ? 0U : 2U));
  }
}

TEST_CASE("gradient accumulation: autograd's from the second micro-batch, the hook's every micro-batch, none fused")
{
  // 4 micro-batches, 4 layers plus the embedding and output layer on the one stage.
  CHECK(count_label(build({{"global_batch", 4}, {"grad_accumulation", "autograd"}}), "gradient accumulation") == 3 * 6);
  CHECK(count_label(build({{"global_batch", 4}, {"grad_accumulation", "hook"}}), "gradient accumulation") == 4 * 6);
  CHECK(count_label(build({{"global_batch", 4}, {"grad_accumulation", "fused"}}), "gradient accumulation") == 0);
  sim::plan::ParallelPlan p;
  p.software.grad_accumulation = sim::plan::GradAccumulation::HOOK;
  p.fp32_grad_accumulation = true;
  CHECK(sim::workload::grad_accumulation_bytes_per_param(p) == 10.0); // read fp32 and 16-bit, write fp32
  p.fp32_grad_accumulation = false;
  CHECK(sim::workload::grad_accumulation_bytes_per_param(p) == 6.0);
}

TEST_CASE("the optimizer step moves what its framework's passes move per parameter")
{
  sim::plan::ParallelPlan p;
  using sim::plan::OptimizerImpl;
  p.software.optimizer = OptimizerImpl::MEGATRON;
  p.precision = sim::hardware::Precision::FP16;
  CHECK(sim::workload::optimizer_bytes_per_param(p) == 52.0);
  p.precision = sim::hardware::Precision::BF16;
  CHECK(sim::workload::optimizer_bytes_per_param(p) == 38.0);
  p.software.optimizer = OptimizerImpl::DEEPSPEED;
  CHECK(sim::workload::optimizer_bytes_per_param(p) == 70.0);
  p.software.optimizer = OptimizerImpl::COMPOSER;
  CHECK(sim::workload::optimizer_bytes_per_param(p) == 92.0);
  p.software.optimizer = OptimizerImpl::FUSED;
  p.fp32_grad_accumulation = true;
  CHECK(sim::workload::optimizer_bytes_per_param(p) == 30.0);
}

TEST_CASE("under fp16 PyTorch's GradScaler reads and writes every gradient once more before the update")
{
  sim::plan::ParallelPlan p;
  p.software.optimizer = sim::plan::OptimizerImpl::FUSED;
  p.fp32_grad_accumulation = true;
  const double bf16 = sim::workload::optimizer_bytes_per_param(p);
  p.precision = sim::hardware::Precision::FP16;
  CHECK(sim::workload::optimizer_bytes_per_param(p) == bf16 + 2 * 4.0);
  p.software.optimizer = sim::plan::OptimizerImpl::MEGATRON; // its own unscale and inf check, already counted
  CHECK(sim::workload::optimizer_bytes_per_param(p) == 52.0);
}

TEST_CASE("another optimizer algorithm's update takes Adam's place inside its implementation's passes")
{
  using sim::plan::OptimizerAlgorithm;
  using sim::plan::OptimizerImpl;
  sim::plan::ParallelPlan p;
  p.software.optimizer = OptimizerImpl::FUSED;
  p.fp32_grad_accumulation = true;
  // A fused update: the fp32 gradient, the master weight and each state read and written, the 16-bit weight written.
  p.optimizer_algorithm = OptimizerAlgorithm::SGD;
  CHECK(sim::workload::optimizer_bytes_per_param(p) == 4.0 + 2 * 4.0 + 2 * 4.0 + 2.0);
  p.optimizer_algorithm = OptimizerAlgorithm::LION;
  CHECK(sim::workload::optimizer_bytes_per_param(p) == 22.0);
  p.optimizer_algorithm = OptimizerAlgorithm::ADAM_8BIT; // two one-byte states
  CHECK(sim::workload::optimizer_bytes_per_param(p) == 4.0 + 2 * 4.0 + 2 * 1.0 + 2 * 1.0 + 2.0);
  // Megatron's mixed-precision wrapper (10 bytes in bf16: the norm and the copy back) around transformers' Adafactor,
  // 21 unfused fp32 passes.
  p.software.optimizer = OptimizerImpl::MEGATRON;
  p.optimizer_algorithm = OptimizerAlgorithm::ADAFACTOR;
  CHECK(sim::workload::optimizer_bytes_per_param(p) == 10.0 + 21 * 4.0);
}

TEST_CASE("Megatron-LM 2021's timers idle the GPU a launch per synchronisation, half in each pass")
{
  const auto b = build({{"pp", 2}, {"global_batch", 2}, {"software", "megatron-lm-2021"}});
  CHECK(b.scenario.plan.software.host_syncs_per_microbatch == 10);
  std::size_t syncs = 0;
  for (const auto& t : b.tasks.tasks())
    if (t.kind == TaskKind::COMPUTE && b.tasks.label_text(t.label) == "host synchronisation") {
      ++syncs;
      CHECK(t.duration_s == Approx(5 * b.scenario.cluster.gpu.kernel_overhead_s));
    }
  CHECK(syncs == 2 * 2 * 2); // 2 stages x 2 micro-batches x (forward, backward), on the simulated GPUs
}

TEST_CASE("DeepSpeed's pipeline engine gathers the stage's own output again in backward and refuses interleaving")
{
  const auto ds = build({{"tp", 2}, {"pp", 2}, {"global_batch", 2}, {"pipeline_engine", "deepspeed"}});
  const auto mg =
      build({{"tp", 2}, {"pp", 2}, {"global_batch", 2}, {"pipeline_engine", "megatron"}, {"pp_scatter_gather", true}});
  CHECK(count_collectives(ds, "pp output re-gather") == 2); // stage 0's two backward passes (stage 1 sends nothing)
  CHECK(count_collectives(mg, "pp output re-gather") == 0);
  const auto doc = test::scenario_json(
      "llama2-7b", {{"pp", 2}, {"global_batch", 4}, {"virtual_stages", 2}, {"pipeline_engine", "deepspeed"}});
  const auto file = test::write_json(test::scratch_dir() / "ds.json", doc);
  CHECK_THAT(test::error_of([&] { sim::scenario::load_scenario(file, test::options()); }),
             Catch::Contains("DeepSpeed's pipeline engine runs only the non-interleaved 1F1B schedule"));
}

TEST_CASE("ZeRO-3 of 2021 gathers each weight matrix separately, otherwise a layer at a time")
{
  const nlohmann::json plan{{"dp", 8}, {"global_batch", 8}, {"zero_stage", 3}};
  auto per_tensor = plan;
  per_tensor["zero3_per_tensor"] = true;
  const auto layer = count_collectives(build(plan), "zero-3 parameter all-gather");
  const auto tensors = count_collectives(build(per_tensor), "zero-3 parameter all-gather");
  // 4 layers gathered twice (forward, backward), plus the embedding and the output layer: each layer in 4 matrices.
  CHECK(tensors - layer == 4 * 2 * 3);
}

TEST_CASE("FSDP's BACKWARD_POST gathers the next layer only after the current one's gradients are computed")
{
  for (const std::string prefetch : {"pre", "post"}) {
    const auto b = build({{"dp", 8}, {"global_batch", 8}, {"zero_stage", 3}, {"backward_prefetch", prefetch}});
    // A backward gather is issued while layer L runs (its transfers carry L): does it wait for L's own kernels?
    std::map<std::uint32_t, int> issued_at; // collective -> layer
    for (const auto& t : b.tasks.tasks())
      if (t.kind == TaskKind::TRANSFER && t.collective != sim::workload::no_task && t.category == Category::DP)
        issued_at[t.collective] = t.layer;
    std::size_t after_own_layer = 0;
    std::size_t gathers = 0;
    for (sim::workload::TaskId i = 0; i < b.tasks.size(); ++i) {
      const auto& t = b.tasks[i];
      if (t.kind != TaskKind::SYNC || t.collective == sim::workload::no_task ||
          b.tasks.label_text(b.tasks.collectives()[t.collective].label) != "zero-3 parameter all-gather")
        continue;
      const auto at = issued_at.find(t.collective);
      if (at == issued_at.end() || at->second < 0)
        continue;
      bool own = false;
      bool backward = false;
      for (auto d : b.tasks.dependencies(i)) {
        const auto& dep = b.tasks[d];
        backward = backward || dep.category == Category::BACKWARD;
        own = own || (dep.kind == TaskKind::COMPUTE && dep.rank == 0 && dep.layer == at->second);
      }
      if (!backward)
        continue;
      ++gathers;
      after_own_layer += own ? 1 : 0;
    }
    REQUIRE(gathers > 0);
    CHECK(after_own_layer == (prefetch == "post" ? gathers : 0U));
  }
}

TEST_CASE("the task graph's size is estimated before it is built, folded or not")
{
  for (const auto& plan :
       {nlohmann::json{{"tp", 2}, {"pp", 2}, {"dp", 4}, {"global_batch", 16}},
        nlohmann::json{{"tp", 8}, {"pp", 2}, {"dp", 1}, {"global_batch", 8}},
        nlohmann::json{{"tp", 1}, {"pp", 1}, {"dp", 8}, {"global_batch", 32}, {"zero_stage", 3}},
        nlohmann::json{{"tp", 2}, {"pp", 4}, {"dp", 1}, {"global_batch", 16}, {"schedule", "dualpipe"}},
        nlohmann::json{{"tp", 2}, {"pp", 2}, {"dp", 2}, {"global_batch", 16}, {"schedule", "dualpipev"}}})
    for (bool fold : {false, true})
      for (const char* topology : {"dgx-a100", "mi300x"}) {
        const auto built = build(plan, tiny_model(8), topology, fold);
        const auto estimate = sim::workload::estimate_graph_size(built.scenario.model, built.scenario.plan,
                                                                 built.scenario.cluster, {.fold = fold});
        const double actual = static_cast<double>(built.tasks.tasks().size());
        INFO(plan.dump() << " on " << topology << (fold ? " folded" : "") << ": estimate " << estimate.tasks
                         << ", built " << actual);
        CHECK(estimate.folded == built.tasks.folded);
        CHECK(estimate.tasks / actual > 0.8);
        CHECK(estimate.tasks / actual < 1.5);
        CHECK(estimate.bytes / estimate.tasks > 100); // graph, dependencies and replay state per task
      }
}

TEST_CASE(
    "DualPipe and DualPipeV run each micro-batch's passes once on its path, weight gradients after their backward")
{
  for (const auto schedule : {sim::plan::Schedule::DUALPIPE, sim::plan::Schedule::DUALPIPE_V}) {
    const int pp = 8;
    const int m = 20;
    auto p = plan_of(pp, m, schedule, 2);
    const bool bidirectional = schedule == sim::plan::Schedule::DUALPIPE;
    for (int stage = 0; stage < pp; ++stage) {
      INFO((bidirectional ? "DualPipe" : "DualPipeV") << " stage " << stage);
      std::map<std::tuple<Pass, int, int>, int> seen; // (pass, chunk, micro-batch) -> position
      std::set<std::pair<int, int>> deferred;
      const auto order = sim::plan::stage_order(p, stage);
      for (std::size_t i = 0; i < order.size(); ++i) {
        const PassRef& r = order[i];
        CHECK(seen.emplace(std::make_tuple(r.pass, r.chunk, r.microbatch), static_cast<int>(i)).second);
        if (r.pass == Pass::BACKWARD) // after its forward pass
          CHECK(seen.count(std::make_tuple(Pass::FORWARD, r.chunk, r.microbatch)) == 1);
        if (r.defer_weight)
          deferred.emplace(r.chunk, r.microbatch);
        if (r.pass == Pass::WEIGHT)
          CHECK(deferred.count({r.chunk, r.microbatch}) == 1);
      }
      // DualPipe: the first half of the micro-batches on chunk 0, the second half on chunk 1; DualPipeV: all on both.
      for (int chunk = 0; chunk < 2; ++chunk)
        for (int mb = 0; mb < m; ++mb) {
          const bool on_path = !bidirectional || (mb < m / 2) == (chunk == 0);
          CHECK(seen.count(std::make_tuple(Pass::FORWARD, chunk, mb)) == (on_path ? 1U : 0U));
          CHECK(seen.count(std::make_tuple(Pass::BACKWARD, chunk, mb)) == (on_path ? 1U : 0U));
        }
      std::size_t weights = 0;
      for (const auto& r : order)
        weights += r.pass == Pass::WEIGHT ? 1 : 0;
      CHECK(weights == deferred.size());
      CHECK(weights > 0);
    }
  }
  // deepseek-ai/DualPipe's step() on the first of 4 ranks, 8 micro-batches: two chunk-0 forwards (step 1), a forward on
  // each chunk (step 2), a zero-bubble backward, its weights and a forward (step 3), the overlapped pairs (step 4), ...
  const auto order = sim::plan::stage_order(plan_of(4, 8, sim::plan::Schedule::DUALPIPE, 2), 0);
  std::string text;
  for (const auto& r : order)
    text += (text.empty() ? "" : " ") +
            std::string(r.pass == Pass::FORWARD  ? "F"
                        : r.pass == Pass::WEIGHT ? "W"
                                                 : "B") +
            std::to_string(r.chunk) + "." + std::to_string(r.microbatch);
  CHECK(text == "F0.0 F0.1 F0.2 F1.4 B1.4 W1.4 F1.5 F0.3 B1.5 F1.6 B0.0 B1.6 F1.7 B0.1 B1.7 B0.2 W0.2 B0.3 W0.3");
}

TEST_CASE("a zero-bubble backward pass splits into the input gradients and the weight gradients, nothing lost")
{
  const auto b = build({{"tp", 2}, {"pp", 4}, {"global_batch", 8}, {"schedule", "dualpipe"}}, tiny_model(8));
  const auto& x = b.scenario;
  const auto programs = sim::workload::build_programs(x.model, x.plan, x.cluster.gpu);
  auto flops = [](const sim::workload::Program& program) {
    double f = 0;
    for (const auto& s : program)
      f += s.flops;
    return f;
  };
  const double full = flops(programs.layer_backward[LayerKind::DENSE]);
  const double weights = flops(programs.layer_weight[LayerKind::DENSE]);
  CHECK(flops(programs.layer_backward_input[LayerKind::DENSE]) + weights == Approx(full).epsilon(1e-12));
  // The weight gradients of QKV, the projection and both FFN matrices: 2 T x (4 h^2 + 2 h f) / t.
  const double h = 1024;
  const double f = 4 * h;
  const double tokens = 1024;
  CHECK(weights == Approx(2.0 * tokens * (4.0 * h * h + 2.0 * h * f) / 2.0).epsilon(1e-12));
  CHECK(flops(programs.head_weight) == Approx(2.0 * tokens * h * 32000 / 2.0).epsilon(1e-12));
  // Both tensor-parallel collectives of the backward stay with the input gradients.
  std::size_t collectives = 0;
  for (const auto& s : programs.layer_backward_input[LayerKind::DENSE])
    collectives += s.kind != sim::workload::Step::Kind::COMPUTE ? 1 : 0;
  CHECK(collectives == 2);
}

TEST_CASE("DualPipe does 1F1B's compute over two copies of the model, whose gradients each pair of GPUs sums")
{
  const nlohmann::json plan{{"tp", 2}, {"pp", 4}, {"global_batch", 8}};
  auto dual = plan;
  dual["schedule"] = "dualpipe";
  auto model = tiny_model(8);
  model["tie_embeddings"] = false; // (1F1B's last stage would keep a copy of a tied embedding)
  const auto a = build(plan, model);
  const auto b = build(dual, model);
  auto total = [](const sim::workload::TaskGraph& g) {
    double s = 0;
    for (const auto& t : g.tasks())
      if (t.kind == TaskKind::COMPUTE && t.category != Category::OPTIMIZER)
        s += t.duration_s;
    return s;
  };
  CHECK(total(b.tasks) == Approx(total(a.tasks)).epsilon(1e-9));
  // Twice the optimizer's work: every GPU holds two chunks of a stage's size.
  double optimizer_a = 0;
  double optimizer_b = 0;
  for (int r = 0; r < 8; ++r) {
    optimizer_a += compute_time(a.tasks, Category::OPTIMIZER, r);
    optimizer_b += compute_time(b.tasks, Category::OPTIMIZER, r);
  }
  CHECK(optimizer_b == Approx(2.0 * optimizer_a).epsilon(1e-9));
  // One all-reduce per GPU pair (s, 3 - s) and TP rank, of the two chunks' gradients in fp32.
  std::set<std::uint32_t> copies;
  for (const auto& t : b.tasks.tasks())
    if (t.kind == TaskKind::TRANSFER && t.collective != sim::workload::no_task &&
        b.tasks.label_text(b.tasks.collectives()[t.collective].label) == "model copies' gradient all-reduce") {
      copies.insert(t.collective);
      const auto from = sim::plan::coords_of(b.scenario.plan, t.rank);
      const auto to = sim::plan::coords_of(b.scenario.plan, t.peer);
      CHECK(from.pp + to.pp == 3);
    }
  CHECK(copies.size() == 2 * 2);
  // The graph has no cycle: every task is reached.
  CHECK(tasks_in_dependency_order(b.tasks) == b.tasks.size());
}

TEST_CASE("a layer's kind says whether it is a MoE layer and whether it attends through a sliding window")
{
  sim::model::ModelSpec m;
  m.num_layers = 4;
  CHECK(sim::workload::layer_kind(m, 0) == LayerKind::DENSE);
  m.moe = sim::model::MoeSpec{};
  m.moe->first_dense_layers = 1;
  m.sliding_window = 128;
  m.global_attention_every = 2; // layers 1 and 3 attend to the whole sequence
  CHECK(sim::workload::layer_kind(m, 0) == LayerKind::WINDOWED);
  CHECK(sim::workload::layer_kind(m, 1) == LayerKind::MOE);
  CHECK(sim::workload::layer_kind(m, 2) == LayerKind::WINDOWED_MOE);
  CHECK(sim::workload::layer_kind(m, 3) == LayerKind::MOE);
  CHECK((sim::workload::is_moe(LayerKind::WINDOWED_MOE) && sim::workload::is_windowed(LayerKind::WINDOWED_MOE)));
  CHECK((!sim::workload::is_moe(LayerKind::WINDOWED) && !sim::workload::is_windowed(LayerKind::MOE)));
}
