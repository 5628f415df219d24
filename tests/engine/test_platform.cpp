// Engine tests: each TEST_CASE runs in its own process (one SimGrid engine per process).
#include "engine/platform.hpp"
#include "engine/transfers.hpp"
#include "scenario/scenario.hpp"

#include "../unit/support.hpp"

#include <xbt/log.h>

namespace {

using sim::engine::Transfer;

sim::topology::ClusterGraph cluster(const std::string& preset, int nodes, std::vector<std::string> overrides = {})
{
  const auto spec = sim::scenario::load_cluster(preset, test::options(std::move(overrides)));
  return sim::topology::build_graph(spec, nodes);
}

double one_transfer(const sim::topology::ClusterGraph& g, int src, int dst, double bytes = 1e9)
{
  return sim::engine::simulate_transfers(g, {Transfer{src, dst, bytes}}).transfers.at(0).end_s;
}

double latency(const sim::topology::ClusterGraph& g, int src, int dst)
{
  return sim::topology::route_latency(g, sim::topology::route(g, src, dst));
}

// A route's achievable bandwidth: its narrowest link's nominal bandwidth times NCCL's measured efficiency.
double rate(const sim::topology::ClusterGraph& g, int src, int dst)
{
  double r = 1e300;
  for (auto e : sim::topology::route(g, src, dst))
    r = std::min(r, g.graph[e].bandwidth * g.graph[e].efficiency);
  return r;
}

// dgx-a100 with one NIC per node, on its first PCIe switch.
const std::vector<std::string> one_nic{"node.nics.count=1", "node.pcie.switches.0.nics=[0]",
                                       "node.pcie.switches.1.nics=[]", "node.pcie.switches.2.nics=[]",
                                       "node.pcie.switches.3.nics=[]"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b)
{
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

} // namespace

TEST_CASE("1 GB over NVLink takes latency + size / bandwidth")
{
  const auto g = cluster("dgx-a100", 1);
  CHECK(latency(g, 0, 1) == Approx(0.47e-6));
  CHECK(rate(g, 0, 1) == Approx(300e9 * 0.767)); // NCCL's 230 GB/s of NVLink3's 300
  CHECK(one_transfer(g, 0, 1) == Approx(0.47e-6 + 1e9 / rate(g, 0, 1)).epsilon(1e-9));
}

TEST_CASE("1 GB over InfiniBand takes latency + size / bandwidth")
{
  const auto g = cluster("dgx-a100", 2);
  CHECK(latency(g, 3, 11) == Approx(1e-6 + 2.7e-6 + 1e-6)); // PCIe up to the NIC, the network, PCIe down
  CHECK(rate(g, 3, 11) == Approx(25e9 * 0.94));
  CHECK(one_transfer(g, 3, 11) == Approx(latency(g, 3, 11) + 1e9 / rate(g, 3, 11)).epsilon(1e-9));
}

// pcie-4090 with peer-to-peer turned on (tinygrad's patched driver): GPUs and NICs under one switch talk directly.
const std::vector<std::string> p2p{"node.gpu.peer_to_peer=true"};

TEST_CASE("1 GB over PCIe takes latency + size / bandwidth")
{
  const auto g = cluster("pcie-4090", 1, p2p);
  CHECK(latency(g, 0, 1) == Approx(1e-6));
  CHECK(one_transfer(g, 0, 1) == Approx(1e-6 + 1e9 / 31.5e9).epsilon(1e-9));
}

TEST_CASE("1 GB over Ethernet takes latency + size / achievable bandwidth")
{
  const auto g = cluster("pcie-4090", 2, p2p);
  CHECK(latency(g, 0, 8) == Approx(1e-6 + 2.7e-6 + 1e-6)); // PCIe up to the NIC, the network, PCIe down
  CHECK(one_transfer(g, 0, 8) ==
        Approx(latency(g, 0, 8) + 1e9 / (12.5e9 * 0.96)).epsilon(1e-9)); // NCCL: 96 % of 100 Gb/s
}

TEST_CASE("1 GB across CPU sockets is limited by the inter-socket link when it is the narrowest")
{
  const auto g = cluster("pcie-4090", 1, {"node.pcie.inter_socket_bandwidth=10GBps", p2p[0]});
  CHECK(latency(g, 0, 4) == Approx(2.5e-6)); // GPU-switch-CPU-CPU-switch-GPU: five half hops
  CHECK(one_transfer(g, 0, 4) == Approx(2.5e-6 + 1e9 / 10e9).epsilon(1e-9));
}

TEST_CASE("eight GPUs sending to the next node take 8x longer through one NIC than through eight")
{
  std::vector<Transfer> all;
  for (int i = 0; i < 8; ++i)
    all.push_back(Transfer{i, 8 + i, 1e9});
  const auto g = cluster("dgx-a100", 2);
  const double eight = sim::engine::simulate_transfers(g, all).end_s;
  CHECK(eight == Approx(latency(g, 0, 8) + 1e9 / rate(g, 0, 8)).epsilon(1e-9));
}

TEST_CASE("through a single shared NIC the eight transfers serialise on its bandwidth")
{
  std::vector<Transfer> all;
  for (int i = 0; i < 8; ++i)
    all.push_back(Transfer{i, 8 + i, 1e9});
  const auto g = cluster("dgx-a100", 2, one_nic);
  const double one = sim::engine::simulate_transfers(g, all).end_s;
  CHECK(one == Approx(latency(g, 0, 8) + 8e9 / rate(g, 0, 8)).epsilon(1e-9));
}

TEST_CASE("on pcie-4090 with peer-to-peer two transfers under one switch do not interfere")
{
  const auto g = cluster("pcie-4090", 1, p2p);
  const auto same_switch = sim::engine::simulate_transfers(g, {Transfer{0, 1, 1e9}, Transfer{2, 3, 1e9}});
  CHECK(same_switch.end_s == Approx(1e-6 + 1e9 / 31.5e9).epsilon(1e-9));
}

TEST_CASE("on pcie-4090 with peer-to-peer two transfers across sockets share their switch's uplink")
{
  const auto g = cluster("pcie-4090", 1, p2p);
  const auto across = sim::engine::simulate_transfers(g, {Transfer{0, 4, 1e9}, Transfer{1, 5, 1e9}});
  CHECK(across.end_s == Approx(2.5e-6 + 2e9 / 31.5e9).epsilon(1e-9));
  // The bookkeeping saw both gigabytes on the inter-socket link.
  double cpu_bytes = 0;
  for (auto [e, end] = boost::edges(g.graph); e != end; ++e)
    if (g.graph[*e].cls == sim::topology::LinkClass::CPU)
      cpu_bytes += across.bytes_forward[g.graph[*e].id] + across.bytes_backward[g.graph[*e].id];
  CHECK(cpu_bytes == Approx(2e9));
}

TEST_CASE("without peer-to-peer (GeForce) 1 GB between GPUs under one switch is staged in host memory")
{
  const auto g = cluster("pcie-4090", 1);
  // GPU-switch-CPU-memory and back: four PCIe half hops, the socket's memory link none.
  CHECK(latency(g, 0, 1) == Approx(2e-6));
  bool through_memory = false;
  for (auto e : sim::topology::route(g, 0, 1))
    through_memory = through_memory || g.graph[e].cls == sim::topology::LinkClass::DRAM;
  CHECK(through_memory);
  CHECK(one_transfer(g, 0, 1) == Approx(2e-6 + 1e9 / 31.5e9).epsilon(1e-9));
}

TEST_CASE("without peer-to-peer two transfers under one switch share its uplink to the CPU in both directions")
{
  // sjeaugey (NVIDIA/nccl#1309): 'the traffic cannot stay local to the PCI switch and has to go back to the CPU'.
  const auto g = cluster("pcie-4090", 1);
  const auto run = sim::engine::simulate_transfers(g, {Transfer{0, 1, 1e9}, Transfer{2, 3, 1e9}});
  CHECK(run.end_s == Approx(2e-6 + 2e9 / 31.5e9).epsilon(1e-9));
  // Each gigabyte was written into the socket's memory and read back from it.
  double written = 0;
  double read = 0;
  for (auto [e, end] = boost::edges(g.graph); e != end; ++e)
    if (g.graph[*e].cls == sim::topology::LinkClass::DRAM) {
      written += run.bytes_forward[g.graph[*e].id];
      read += run.bytes_backward[g.graph[*e].id];
    }
  CHECK(written == Approx(2e9));
  CHECK(read == Approx(2e9));
}

TEST_CASE("without peer-to-peer the host memory's bandwidth bounds what four GPUs stage at once")
{
  // A workstation whose DRAM (20 GB/s: 10 each way) is narrower than the GPUs' x16 links: four GPUs each sending
  // 1 GB to the next write 4 GB into it and read 4 GB back, 10 GB/s each way.
  const auto g = cluster("workstation-rtx3090", 1, {"node.host.memory_bandwidth=20GBps"});
  std::vector<Transfer> ring;
  for (int i = 0; i < 4; ++i)
    ring.push_back(Transfer{i, (i + 1) % 4, 1e9});
  CHECK(sim::engine::simulate_transfers(g, ring).end_s == Approx(2e-6 + 4e9 / 10e9).epsilon(1e-9));
}

TEST_CASE("without GPUDirect RDMA a GPU's traffic to another node is staged in the memory of its NIC's socket")
{
  const auto g = cluster("pcie-4090", 2);
  std::vector<std::string> names;
  for (auto e : sim::topology::route(g, 0, 8))
    names.push_back(g.link_name(e));
  CHECK(names == std::vector<std::string>{"n0.gpu0--n0.pcie0", "n0.pcie0--n0.cpu0", "n0.cpu0--n0.mem0",
                                          "n0.cpu0--n0.mem0", "n0.pcie0--n0.cpu0", "n0.nic0--n0.pcie0",
                                          "n0.nic0--leaf0", "n1.nic0--leaf0", "n1.nic0--n1.pcie0", "n1.pcie0--n1.cpu0",
                                          "n1.cpu0--n1.mem0", "n1.cpu0--n1.mem0", "n1.pcie0--n1.cpu0",
                                          "n1.gpu0--n1.pcie0"});
}

TEST_CASE("the same NVLink transfer takes 1.5x as long on hgx-a800 as on dgx-a100")
{
  const auto a100 = cluster("dgx-a100", 1);
  const auto a800 = cluster("hgx-a800", 1);
  // Two runs need two processes; compare the A800 run with the A100's closed form instead.
  const double t800 = one_transfer(a800, 0, 1);
  CHECK((t800 - latency(a800, 0, 1)) / (1e9 / rate(a100, 0, 1)) == Approx(1.5).epsilon(1e-9));
  CHECK(latency(a100, 0, 1) == Approx(latency(a800, 0, 1)));
}

TEST_CASE("flows share a link fairly whatever their route length")
{
  // One NIC per node; node 1 is in the sender's leaf group, node 2 behind the spine.
  const auto g = cluster("dgx-a100", 3, with(one_nic, {"network.nodes_per_leaf=2"}));
  REQUIRE(sim::topology::route(g, 1, 16).size() > sim::topology::route(g, 0, 8).size());
  const auto run = sim::engine::simulate_transfers(g, {Transfer{0, 8, 1e9}, Transfer{1, 16, 1e9}});
  // The nearer flow starts first and runs alone until the other arrives; then each gets half of the NIC until the
  // first is done, and the second ends alone. Fair sharing ends them exactly the latency gap apart.
  const double l0 = latency(g, 0, 8);
  const double l1 = latency(g, 1, 16);
  const double nic = rate(g, 0, 8);
  const double alone = (l1 - l0) * nic;
  CHECK(run.transfers[0].end_s == Approx(l1 + (1e9 - alone) / (nic / 2)).epsilon(1e-12));
  CHECK(run.transfers[1].end_s == Approx(run.transfers[0].end_s + (l1 - l0)).epsilon(1e-12));
}

TEST_CASE("SimGrid routes follow the cluster graph link for link")
{
  xbt_log_control_set("root.thresh:critical");
  simgrid::s4u::Engine engine("routes");
  sim::engine::configure_network_model();
  const auto g =
      cluster("dgx-v100", 4, {"network.nodes_per_leaf=2", "network.kind=fat_tree", "network.leaves_per_pod=1"});
  const auto platform = sim::engine::build_platform(g);
  for (const auto& [a, b] :
       std::vector<std::pair<int, int>>{{0, 1}, {0, 5}, {3, 6}, {0, 9}, {2, 17}, {7, 30}, {30, 7}}) {
    INFO(a << " -> " << b);
    std::vector<simgrid::s4u::Link*> links;
    double lat = 0;
    platform.gpu[static_cast<std::size_t>(a)]->route_to(platform.gpu[static_cast<std::size_t>(b)], links, &lat);
    const auto path = sim::topology::route(g, a, b);
    const auto forward = sim::topology::link_directions(g, g.gpu[static_cast<std::size_t>(a)], path);
    REQUIRE(links.size() == path.size());
    for (std::size_t k = 0; k < path.size(); ++k)
      CHECK(links[k]->get_name() == g.link_name(path[k]) + (forward[k] ? "_UP" : "_DOWN"));
    CHECK(lat == 0.0); // latencies are the engine's own, applied before each flow
  }
}
