#include "scenario/scenario.hpp"
#include "topology/cluster_graph.hpp"

#include "support.hpp"

using sim::topology::LinkClass;

namespace {

sim::topology::ClusterGraph cluster(const std::string& preset, int nodes, std::vector<std::string> overrides = {})
{
  return sim::topology::build_graph(sim::scenario::load_cluster(preset, test::options(std::move(overrides))), nodes);
}

std::vector<std::string> names(const sim::topology::ClusterGraph& g, const std::vector<sim::topology::EdgeId>& path)
{
  std::vector<std::string> out;
  for (auto e : path)
    out.push_back(g.link_name(e));
  return out;
}

} // namespace

TEST_CASE("every topology preset expands into a connected graph with positive bandwidths")
{
  for (const char* preset :
       {"dgx-a100", "hgx-a800", "dgx-h100", "hgx-h800", "hgx-h20", "dgx-v100", "dgx-2", "pcie-4090",
        "workstation-rtx3090", "workstation-rtx5090", "workstation-rtx-a6000", "workstation-rtx6000-ada"}) {
    INFO(preset);
    const auto g = cluster(preset, 4);
    CHECK_NOTHROW(sim::topology::check_graph(g, preset));
    CHECK(g.gpus() == 4 * g.gpus_per_node);
  }
}

TEST_CASE("on NVSwitch two GPUs talk through the switch, across nodes through their PCIe switches, NICs and leaf")
{
  const auto g = cluster("dgx-a100", 2);
  CHECK(names(g, sim::topology::route(g, 0, 5)) ==
        std::vector<std::string>{"n0.gpu0--n0.nvswitch", "n0.gpu5--n0.nvswitch"});
  CHECK(names(g, sim::topology::route(g, 3, 11)) == std::vector<std::string>{"n0.gpu3--n0.pcie1", "n0.nic3--n0.pcie1",
                                                                             "n0.nic3--leaf0", "n1.nic3--leaf0",
                                                                             "n1.nic3--n1.pcie1", "n1.gpu3--n1.pcie1"});
}

TEST_CASE("the DGX-1 mesh uses direct NVLink where wired and PCIe through the CPUs where not")
{
  const auto g = cluster("dgx-v100", 1);
  const auto direct = sim::topology::route(g, 0, 3);
  REQUIRE(direct.size() == 1);
  CHECK(g.graph[direct[0]].bandwidth == Approx(50e9)); // two lanes
  CHECK(names(g, sim::topology::route(g, 0, 5)) == std::vector<std::string>{"n0.gpu0--n0.pcie0", "n0.pcie0--n0.cpu0",
                                                                            "n0.cpu0--n0.cpu1", "n0.pcie2--n0.cpu1",
                                                                            "n0.gpu5--n0.pcie2"});
}

TEST_CASE("traffic between leaf groups climbs to the spine, between pods to the core")
{
  const auto g = cluster("dgx-h100", 8, {"network.nodes_per_leaf=2", "network.leaves_per_pod=2"});
  // Each end: GPU to its PCIe switch to its NIC.
  CHECK(sim::topology::route(g, 0, 8).size() == 6);   // same leaf group
  CHECK(sim::topology::route(g, 0, 16).size() == 8);  // same pod: leaf, spine, leaf
  CHECK(sim::topology::route(g, 0, 32).size() == 10); // other pod: leaf, spine, core, spine, leaf
  CHECK(sim::topology::route_latency(g, sim::topology::route(g, 0, 32)) == Approx(2e-6 + 2.7e-6 + 4 * 0.13e-6));
}

TEST_CASE("leaf uplinks carry the group's NIC bandwidth divided by the oversubscription")
{
  const auto g = cluster("dgx-h100", 4, {"network.nodes_per_leaf=2", "network.oversubscription=4"});
  const auto path = sim::topology::route(g, 0, 16);
  REQUIRE(path.size() == 8);
  CHECK(g.graph[path[3]].bandwidth == Approx(2 * 8 * 50e9 / 4));
}

TEST_CASE("bisection bandwidth: NICs across nodes, NVLink within one, and oversubscription cuts it")
{
  CHECK(sim::topology::bisection_bandwidth(cluster("dgx-h100", 4)) == Approx(2 * 8 * 50e9));
  // One node: four GPUs' NVLink, plus their own PCIe links (Gen4 x16) into their switches, whence the NICs' path
  // through the leaf and the CPUs' go on.
  CHECK(sim::topology::bisection_bandwidth(cluster("dgx-a100", 1)) == Approx(4 * 300e9 + 4 * 31.5e9));
  CHECK(sim::topology::bisection_bandwidth(cluster(
            "dgx-h100", 4, {"network.nodes_per_leaf=2", "network.oversubscription=2"})) == Approx(2 * 8 * 50e9 / 2));
}

TEST_CASE("the summary gives per-GPU bandwidth per link class")
{
  const auto s = sim::topology::summarize(cluster("dgx-v100", 2));
  CHECK(s.gpus == 16);
  CHECK(s.links.at(LinkClass::NVLINK).per_gpu_bandwidth == Approx(6 * 25e9));
  CHECK(s.links.at(LinkClass::NVLINK).count == 2 * 16);
  CHECK(s.links.at(LinkClass::IB).per_gpu_bandwidth == Approx(4 * 12.5e9 / 8));
  CHECK(s.links.at(LinkClass::PCIE).per_gpu_bandwidth == Approx(15.75e9));
  CHECK(s.devices.at(sim::topology::DeviceKind::NIC) == 8);
}

TEST_CASE("NICs serve the GPUs on their own PCIe switch unless the topology says otherwise")
{
  const auto spec = sim::scenario::load_cluster("pcie-4090", test::options());
  CHECK(spec.node.nics.gpus == std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
  const auto dgx = sim::scenario::load_cluster("hgx-a800", test::options({"node.nics.count=2"})); // no PCIe tree
  CHECK(dgx.node.nics.gpus == std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
}

TEST_CASE("GPUs without peer-to-peer need host memory to stage their traffic in")
{
  CHECK_THAT(test::error_of([] { sim::scenario::load_cluster("pcie-4090", test::options({"node.host=null"})); }),
             Catch::Contains("/node: GPUs without peer-to-peer (RTX-4090) and no host memory bandwidth"));
  CHECK_THAT(test::error_of([] {
               sim::scenario::load_cluster("pcie-4090",
                                           test::options({"node.host.memory_bandwidth=null", "node.host.nvme=null"}));
             }),
             Catch::Contains("no host.memory_bandwidth"));
  // Drives read and write their socket's memory: they need its bandwidth too, and a drive per listed socket.
  CHECK_THAT(test::error_of(
                 [] { sim::scenario::load_cluster("pcie-4090", test::options({"node.host.memory_bandwidth=null"})); }),
             Catch::Contains("/node/host/nvme: NVMe drives with no PCIe tree or no host memory bandwidth"));
  CHECK_THAT(
      test::error_of([] { sim::scenario::load_cluster("pcie-4090", test::options({"node.host.nvme.sockets=[0]"})); }),
      Catch::Contains("not one socket per drive"));
  CHECK_THAT(test::error_of(
                 [] { sim::scenario::load_cluster("pcie-4090", test::options({"node.host.nvme.capacity=500TB"})); }),
             Catch::Contains("from 16GB to 128TB per drive"));
  // A patched driver (peer-to-peer on) needs none.
  CHECK_NOTHROW(
      sim::scenario::load_cluster("pcie-4090", test::options({"node.host=null", "node.gpu.peer_to_peer=true"})));
}

TEST_CASE("host memory outside what a node can hold is refused")
{
  CHECK_THAT(test::error_of(
                 [] { sim::scenario::load_cluster("workstation-rtx3090", test::options({"node.host.memory=5PB"})); }),
             Catch::Contains("/node/host/memory"));
  CHECK_THAT(test::error_of(
                 [] { sim::scenario::load_cluster("workstation-rtx3090", test::options({"node.host.memory=4GB"})); }),
             Catch::Contains("from 8GB to 64TB per node"));
  CHECK_THAT(test::error_of([] {
               sim::scenario::load_cluster("workstation-rtx3090", test::options({"node.host.memory_bandwidth=5TBps"}));
             }),
             Catch::Contains("from 10GBps to 2TBps per socket"));
}

TEST_CASE("without peer-to-peer a GPU's routes pass through its socket's memory and with it they stay under the switch")
{
  const auto staged = cluster("pcie-4090", 1);
  CHECK(names(staged, sim::topology::route(staged, 4, 5)) ==
        std::vector<std::string>{"n0.gpu4--n0.pcie1", "n0.pcie1--n0.cpu1", "n0.cpu1--n0.mem1", "n0.cpu1--n0.mem1",
                                 "n0.pcie1--n0.cpu1", "n0.gpu5--n0.pcie1"});
  // Across sockets: in the receiver's memory (NCCL_SHM_LOCALITY's default).
  CHECK(names(staged, sim::topology::route(staged, 0, 4)) ==
        std::vector<std::string>{"n0.gpu0--n0.pcie0", "n0.pcie0--n0.cpu0", "n0.cpu0--n0.cpu1", "n0.cpu1--n0.mem1",
                                 "n0.cpu1--n0.mem1", "n0.pcie1--n0.cpu1", "n0.gpu4--n0.pcie1"});
  const auto direct = cluster("pcie-4090", 1, {"node.gpu.peer_to_peer=true"});
  CHECK(names(direct, sim::topology::route(direct, 4, 5)) ==
        std::vector<std::string>{"n0.gpu4--n0.pcie1", "n0.gpu5--n0.pcie1"});
}

TEST_CASE("a mesh that leaves GPU pairs unconnected needs a PCIe tree")
{
  CHECK_THAT(test::error_of([] { sim::scenario::load_cluster("dgx-v100", test::options({"node.pcie=null"})); }),
             Catch::Contains("/node/nvlink: leaves GPU pairs without a path (found 16 of 28 pairs linked"));
}

TEST_CASE("a topology that leaves out its NICs' efficiency is warned about, and every shipped one states it")
{
  for (const auto& entry : std::filesystem::directory_iterator(test::source_dir() / "topologies"))
    if (entry.path().extension() == ".json") {
      INFO(entry.path());
      CHECK(sim::scenario::load_cluster(entry.path().stem().string(), test::options()).warnings.empty());
    }
  const auto bare = sim::scenario::load_cluster("dgx-a100", test::options({"node.nics.efficiency=null"}));
  REQUIRE(bare.warnings.size() == 1);
  CHECK(bare.node.nics.efficiency == 1.0);
  CHECK_THAT(sim::core::format_warning(bare.warnings[0]),
             Catch::Contains("/node/nics/efficiency: not given: the NICs run at their nominal bandwidth"));
}
