// NCCL's choice of algorithm for a collective (workload/algorithm_choice), pinned in representative cases.
#include "topology/cluster_graph.hpp"
#include "workload/algorithm_choice.hpp"

#include "support.hpp"

#include <numeric>

using sim::plan::CollectiveAlgorithm;
using sim::workload::Algorithm;
using sim::workload::CollectiveKind;
using sim::workload::Protocol;

CATCH_REGISTER_ENUM(sim::workload::Algorithm, sim::workload::Algorithm::ALL_TO_ALL, sim::workload::Algorithm::RING,
                    sim::workload::Algorithm::DIRECT, sim::workload::Algorithm::NVLS, sim::workload::Algorithm::TREE,
                    sim::workload::Algorithm::HIERARCHICAL_RING, sim::workload::Algorithm::HIERARCHICAL_TREE,
                    sim::workload::Algorithm::NVLS_TREE, sim::workload::Algorithm::COLLNET)

namespace {

sim::topology::ClusterGraph cluster(const std::string& name, int nodes)
{
  return sim::topology::build_graph(sim::scenario::load_cluster(name, test::options()), nodes);
}

// The first `per_node` GPUs of each of `nodes` nodes of `gpus_per_node`.
std::vector<int> group(int nodes, int per_node, int gpus_per_node = 8)
{
  std::vector<int> ranks;
  for (int node = 0; node < nodes; ++node)
    for (int local = 0; local < per_node; ++local)
      ranks.push_back(node * gpus_per_node + local);
  return ranks;
}

struct Chooser {
  sim::topology::ClusterGraph graph;
  sim::workload::GpuPaths paths{graph};

  explicit Chooser(sim::topology::ClusterGraph g) : graph(std::move(g)) {}
  Chooser(const Chooser&) = delete;
  Chooser& operator=(const Chooser&) = delete;

  sim::workload::AlgorithmChoice choice(CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                        CollectiveAlgorithm setting = CollectiveAlgorithm::AUTO)
  {
    return sim::workload::choose_algorithm(paths, kind, ranks, bytes, setting);
  }
  Algorithm operator()(CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                       CollectiveAlgorithm setting = CollectiveAlgorithm::AUTO)
  {
    return choice(kind, ranks, bytes, setting).algorithm;
  }
};

} // namespace

TEST_CASE("an all-to-all is NCCL's grouped sends whatever the plan asks")
{
  Chooser choose(cluster("dgx-h100", 2));
  for (auto setting : {CollectiveAlgorithm::AUTO, CollectiveAlgorithm::RING, CollectiveAlgorithm::TREE})
    CHECK(choose(CollectiveKind::ALL_TO_ALL, group(2, 8), 1e9, setting) == Algorithm::ALL_TO_ALL);
}

TEST_CASE("inside one NVSwitch node with NVLink SHARP a large all-reduce takes NVLS, where NCCL's model prefers it")
{
  Chooser choose(cluster("dgx-h100", 1));
  const auto node = group(1, 8);
  CHECK(choose(CollectiveKind::ALL_REDUCE, node, 8e9) == Algorithm::NVLS);
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(1, 5), 8e9) == Algorithm::NVLS); // five GPUs and more
  // Small (NVLS's 25 us do not pay), four GPUs (no multicast gain), asked for a ring, or not an all-reduce: the ring.
  CHECK(choose(CollectiveKind::ALL_REDUCE, node, 65536) == Algorithm::RING);
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(1, 4), 8e9) == Algorithm::RING);
  CHECK(choose(CollectiveKind::ALL_REDUCE, node, 8e9, CollectiveAlgorithm::RING) == Algorithm::RING);
  CHECK(choose(CollectiveKind::ALL_GATHER, node, 8e9) == Algorithm::RING);
  // Asked for the hierarchical ring or the tree inside one node: NVLS still (neither applies there).
  CHECK(choose(CollectiveKind::ALL_REDUCE, node, 8e9, CollectiveAlgorithm::HIERARCHICAL) == Algorithm::NVLS);
  CHECK(choose(CollectiveKind::ALL_REDUCE, node, 8e9, CollectiveAlgorithm::TREE) == Algorithm::NVLS);
  // An A100 has no NVLS.
  Chooser a100(cluster("dgx-a100", 1));
  CHECK(a100(CollectiveKind::ALL_REDUCE, node, 8e9) == Algorithm::RING);
}

TEST_CASE("on a full mesh every collective inside the node is direct, except between two GPUs")
{
  Chooser choose(cluster("mi300x", 1));
  const auto node = group(1, 8);
  for (auto kind : {CollectiveKind::ALL_REDUCE, CollectiveKind::REDUCE_SCATTER, CollectiveKind::ALL_GATHER})
    for (auto setting : {CollectiveAlgorithm::AUTO, CollectiveAlgorithm::RING})
      CHECK(choose(kind, node, 1e9, setting) == Algorithm::DIRECT);
  CHECK(choose(CollectiveKind::ALL_GATHER, group(1, 3), 1e6) == Algorithm::DIRECT);
  CHECK(choose(CollectiveKind::ALL_GATHER, group(1, 2), 1e6) == Algorithm::RING); // two ranks: a ring is direct
  // Behind NVSwitches no pair has a link of its own: the ring.
  Chooser a100(cluster("dgx-a100", 1));
  CHECK(a100(CollectiveKind::ALL_GATHER, node, 1e9) == Algorithm::RING);
}

TEST_CASE("a group with as many GPUs on each of several nodes runs hierarchically unless the plan asks for rings")
{
  Chooser choose(cluster("dgx-a100", 3));
  const auto two_nodes = group(2, 4);
  for (auto kind : {CollectiveKind::ALL_REDUCE, CollectiveKind::REDUCE_SCATTER, CollectiveKind::ALL_GATHER}) {
    CHECK(choose(kind, two_nodes, 8e9) == Algorithm::HIERARCHICAL_RING);
    CHECK(choose(kind, two_nodes, 8e9, CollectiveAlgorithm::HIERARCHICAL) == Algorithm::HIERARCHICAL_RING);
    CHECK(choose(kind, two_nodes, 8e9, CollectiveAlgorithm::RING) == Algorithm::RING);
    // The tree needs three nodes: on two, asked for, the hierarchical ring.
    CHECK(choose(kind, two_nodes, 8e9, CollectiveAlgorithm::TREE) == Algorithm::HIERARCHICAL_RING);
  }
  CHECK(choose(CollectiveKind::REDUCE_SCATTER, group(3, 4), 12e9) == Algorithm::HIERARCHICAL_RING);
  // Not as many GPUs on each node, or one GPU per node: one flat ring.
  CHECK(choose(CollectiveKind::ALL_REDUCE, {0, 1, 8}, 8e9) == Algorithm::RING);
  CHECK(choose(CollectiveKind::ALL_GATHER, group(3, 1), 8e9) == Algorithm::RING);
  // The choice knows the group's nodes and how NCCL's communicator meets the network.
  const auto choice = choose.choice(CollectiveKind::ALL_REDUCE, two_nodes, 8e9);
  REQUIRE(choice.by_node.size() == 2);
  CHECK(choice.by_node.at(1) == std::vector<int>{8, 9, 10, 11});
  CHECK(choice.net.ppn == 4);
  CHECK(choice.net.ll128);
  CHECK(choice.net.generation == sim::workload::NcclGeneration::AMPERE);
}

TEST_CASE("across three nodes or more an all-reduce takes NCCL's double binary tree where its model prefers it")
{
  Chooser choose(cluster("dgx-a100", 128));
  // 1 MB over 128 nodes, one GPU each: the tree, in LL128, 4.4 us and 8.5 us per network hop, two per level.
  const auto rail = group(128, 1);
  const auto tree = choose.choice(CollectiveKind::ALL_REDUCE, rail, 1 << 20);
  CHECK(tree.algorithm == Algorithm::TREE);
  CHECK(tree.tree.protocol == Protocol::LL128);
  CHECK(tree.tree.latency == Approx((4.4 + 2 * 7 * 8.5) * 1e-6));
  // 64 MB over 16 nodes: bandwidth-bound, the ring; asked for, the tree (LL128 again, 64e6 / 64 B past 2^19).
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(16, 1), 64e6) == Algorithm::RING);
  const auto forced = choose.choice(CollectiveKind::ALL_REDUCE, group(16, 1), 64e6, CollectiveAlgorithm::TREE);
  CHECK(forced.algorithm == Algorithm::TREE);
  CHECK(forced.tree.protocol == Protocol::LL128);
  // Asked for rings, never; on two nodes, never; reduce-scatters and all-gathers have no tree.
  CHECK(choose(CollectiveKind::ALL_REDUCE, rail, 1 << 20, CollectiveAlgorithm::RING) == Algorithm::RING);
  CHECK(choose(CollectiveKind::ALL_REDUCE, rail, 1 << 20, CollectiveAlgorithm::HIERARCHICAL) == Algorithm::RING);
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(2, 1), 1 << 20, CollectiveAlgorithm::TREE) == Algorithm::RING);
  CHECK(choose(CollectiveKind::REDUCE_SCATTER, rail, 1 << 20, CollectiveAlgorithm::TREE) == Algorithm::RING);
  // Whole nodes (64 MB over 16 nodes of 8): the ring's steps inside the nodes tip the model to the tree, across the
  // nodes between the hierarchical phases inside them.
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(16, 8), 64e6) == Algorithm::HIERARCHICAL_TREE);
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(16, 8), 64e6, CollectiveAlgorithm::HIERARCHICAL) ==
        Algorithm::HIERARCHICAL_RING);
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(16, 8), 64e6, CollectiveAlgorithm::TREE) ==
        Algorithm::HIERARCHICAL_TREE);
  CHECK(choose(CollectiveKind::ALL_GATHER, group(16, 8), 64e6, CollectiveAlgorithm::TREE) ==
        Algorithm::HIERARCHICAL_RING);
}

TEST_CASE("across NVSwitch nodes of five GPUs or more an all-reduce takes NVLS-Tree where NCCL's model prefers it")
{
  Chooser gb200(cluster("gb200-nvl72", 4));
  const double bytes = 16.0 * (1 << 30);
  for (int racks : {2, 4}) {
    const auto choice = gb200.choice(CollectiveKind::ALL_REDUCE, group(racks, 72, 72), bytes);
    CHECK(choice.algorithm == Algorithm::NVLS_TREE);
    // NVLS's 25 us and 20.9 us per network hop, two per level; each GPU's share across once on two racks, twice on
    // more.
    CHECK(choice.nvls_tree.latency == Approx((25.0 + 2 * (racks == 2 ? 1 : 2) * 20.9) * 1e-6));
    CHECK(choice.nvls_tree.network_bytes == Approx((racks == 2 ? 1.0 : 2.0) * bytes / 72));
  }
  // Only under AUTO: asked for the hierarchical ring or the tree, those.
  CHECK(gb200(CollectiveKind::ALL_REDUCE, group(4, 72, 72), bytes, CollectiveAlgorithm::HIERARCHICAL) ==
        Algorithm::HIERARCHICAL_RING);
  CHECK(gb200(CollectiveKind::ALL_REDUCE, group(4, 72, 72), bytes, CollectiveAlgorithm::TREE) ==
        Algorithm::HIERARCHICAL_TREE);
  // Small too: the chains of 72 GPUs inside the racks cost the ring and the tree more latency than NVLS-Tree's.
  for (double size : {4096.0, 65536.0, 1048576.0})
    CHECK(gb200(CollectiveKind::ALL_REDUCE, group(4, 72, 72), size) == Algorithm::NVLS_TREE);
  // DGX H100 nodes, 8 GB: the NICs bind both and NVLS-Tree's busiest node sends more: the hierarchical ring. Four
  // GPUs per node: never NVLS-Tree.
  Chooser h100(cluster("dgx-h100", 4));
  CHECK(h100(CollectiveKind::ALL_REDUCE, group(4, 8), 8e9) == Algorithm::HIERARCHICAL_RING);
  for (double size : {1e8, 1e9, 8e9})
    CHECK(h100(CollectiveKind::ALL_REDUCE, group(4, 4), size) != Algorithm::NVLS_TREE);
}

TEST_CASE("with SHARP every all-reduce across nodes under AUTO runs on the switches (NCCL's CollNet)")
{
  auto spec = sim::scenario::load_cluster("dgx-h100", test::options());
  spec.network.sharp = true;
  Chooser choose(sim::topology::build_graph(spec, 4));
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(4, 8), 8e9) == Algorithm::COLLNET);
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(4, 1), 8e9) == Algorithm::COLLNET);  // one GPU per node too
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(4, 8), 4096) == Algorithm::COLLNET); // and small
  // Inside one node, for reduce-scatters, or with an algorithm forced: not on the switches.
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(1, 8), 8e9) == Algorithm::NVLS);
  CHECK(choose(CollectiveKind::REDUCE_SCATTER, group(4, 1), 8e9) == Algorithm::RING);
  CHECK(choose(CollectiveKind::REDUCE_SCATTER, group(4, 8), 8e9) == Algorithm::HIERARCHICAL_RING);
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(4, 1), 8e9, CollectiveAlgorithm::HIERARCHICAL) == Algorithm::RING);
  CHECK(choose(CollectiveKind::ALL_REDUCE, group(4, 8), 8e9, CollectiveAlgorithm::HIERARCHICAL) ==
        Algorithm::HIERARCHICAL_RING);
  // Not as many GPUs on each node: neither the switches nor the hierarchy, the flat ring.
  CHECK(choose(CollectiveKind::ALL_REDUCE, {0, 1, 8}, 8e9) == Algorithm::RING);
}

TEST_CASE("NCCL's ring plan takes a low-latency protocol for small buffers and Simple for large ones")
{
  auto graph = cluster("dgx-a100", 8);
  sim::workload::GpuPaths paths(graph);
  const sim::workload::NetworkUse inside{};
  CHECK(sim::workload::ring_plan(paths, CollectiveKind::ALL_REDUCE, group(1, 4), 4096, inside).protocol ==
        Protocol::LL);
  CHECK(sim::workload::ring_plan(paths, CollectiveKind::ALL_REDUCE, group(1, 4), 8e9, inside).protocol ==
        Protocol::SIMPLE);
  // 1 MB gathered over 8 nodes, one GPU each, where NCCL runs LL128 across the network: LL128, at 10 + 7 x 4 us.
  const auto rail = group(8, 1);
  const auto net = sim::workload::network_use(paths, sim::workload::group_by_node(rail, 8));
  CHECK(net.ll128);
  const auto ll128 = sim::workload::ring_plan(paths, CollectiveKind::ALL_GATHER, rail, 1e6, net);
  CHECK(ll128.protocol == Protocol::LL128);
  CHECK(ll128.latency == Approx((10.0 + 7 * 4.0) * 1e-6));
  CHECK(ll128.share == Approx(0.7));
}
