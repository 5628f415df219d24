#include "workload/collectives.hpp"

#include "model/routing.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <map>

namespace sim::workload {
namespace {

// NCCL's tuning model for rings (src/graph/tuning.cc, NVIDIA/nccl): per-collective base latency and per-step
// hardware latency in microseconds, per protocol {LL, LL128, Simple}, and each protocol's share of the bus
// bandwidth (LL moves 4 bytes of data per 8-byte line and runs at 1/4 of the bus bandwidth in the model;
// LL128 at 0.92).
enum Protocol { LL = 0, LL128 = 1, SIMPLE = 2 };
constexpr std::array<double, 3> base_latency_us{3.6, 10.0, 8.4};
// Per-step hardware latency in microseconds per protocol {LL, LL128, Simple}, over each kind of hop.
struct HopLatencies {
  std::array<double, 3> nvlink, pcie, network;
};
constexpr HopLatencies ring_step_us{{0.47, 1.9, 3.4}, {1.0, 2.5, 5.7}, {2.7, 4.0, 9.6}};
constexpr std::array<double, 3> bandwidth_share{0.25, 0.92, 1.0};
// LL128 across the network, as NCCL enables it by default since 2.7.3 (tuning.cc): where each GPU's NIC is under
// its PCIe switch (PXB or closer) and the node's GPUs talk over NVLink. Its ring runs at 0.92 of the bus bandwidth
// with several GPUs per node and 0.7 with one, and its rings and trees at no more than a cap per channel, a channel
// being one NIC's ring at that NIC's rate. The caps are per GPU generation {Volta, Ampere, Hopper, Blackwell}: rings'
// perChMaxRingLL128Bws, trees' perChMaxTreeLL128Bws from four nodes on (trees run from three), as of NCCL 2.19 for
// Volta to Hopper (Hopper's 36.7 since 2.17; v2.16 had 20 GB/s for every part) and of 2.30 for Blackwell.
constexpr double ll128_ring_one_per_node = 0.7;
constexpr std::array<double, 4> ll128_ring_channel_cap{20e9, 20e9, 36.7e9, 40e9};
constexpr std::array<double, 4> ll128_tree_channel_cap{20e9, 20e9, 29e9, 20e9};
// NCCL's trees send a node's traffic across the network through one GPU and its NIC (NCCL_TOPO_PATTERN_TREE) when
// the communicator has one GPU per node, and on Hopper and later when no NIC serves two of the node's GPUs (the
// balanced tree, which splits it over two GPUs, needs one that does; search.cc since 2.19). Such a tree moves 0.85
// of its bandwidth (tuning.cc since 2.26), as measured: NVIDIA/nccl#1368, 5 DGX H100 nodes at 1 GiB, NCCL 2.20, tree
// 150 GB/s bus bandwidth against the ring's 190.
constexpr double one_gpu_tree_share = 0.85;
// NVLS runs the Simple protocol only, with no base latency and 25 us over NVLink (the same tuning.cc).
constexpr double nvls_latency_us = 25.0;
// Groups of 4 GPUs or fewer of a node stay on rings: multicast gains nothing there (NVIDIA's GB200 NVL Partition User
// Guide) and NCCL does not use it (stas00/ml-engineering network/README.md, 4 H200s: ring only; 5 and more: NVLS).
constexpr std::size_t nvls_fewest_gpus = 5;
// NCCL's NVLS-Tree (NVLS inside each node, a tree between nodes; NCCL 2.18 on) in the same model as of NCCL 2.30
// (src/graph/tuning.cc): NVLS's 25 us inside the node and 20.9 us per network hop, two per level of the tree.
constexpr double nvls_tree_network_us = 20.9;

// The same model for NCCL's double binary tree (all-reduce only), as of v2.16 like the ring's constants above: base
// and per-hop latencies per protocol, the tree's bandwidth (0.92 of the bus bandwidth, LL at 1/3.8 of it, LL128 at
// 120/128 of it and the per-channel cap), and the correction for medium sizes NCCL applies to it (powers of two of
// the buffer, 64 B to 256 MB: treeCorrectionFactor).
constexpr std::array<double, 3> tree_base_latency_us{4.4, 4.4, 0.0};
constexpr HopLatencies tree_step_us{{0.52, 1.25, 28.0}, {1.0, 1.9, 28.0}, {5.0, 8.5, 28.0}};
constexpr std::array<double, 3> tree_bandwidth_share{0.92 / 3.8, 0.92 * 120.0 / 128.0, 0.92};
constexpr std::array<std::array<double, 23>, 3> tree_correction{{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
}};
// Multi-node refinements of the same model: an LL hop inside a node costs 1.8 times as much, and a Simple ring
// all-reduce at least nRanks/16 x 64 KiB long pays 1.9 times its latency ("plateau effect of ring").
constexpr double ll_intra_multi_node = 1.8;
constexpr double ring_plateau = 1.9;
// The tree across nodes is considered from three nodes on: on two, NCCL's tree sends each node's share across the
// network once (NVIDIA/nccl#946, sjeaugey: "2 nodes is a special case"), which is what the hierarchical ring already
// moves.
constexpr std::size_t tree_fewest_nodes = 3;
// NCCL's CollNet Direct (SHARP) latency in the same model: 8.0 us over NVLink for the node's part, 0.5 us per further
// GPU of the node (arity serialisation) and 10.7 us across the network, Simple protocol.
constexpr double collnet_nvlink_us = 8.0;
constexpr double collnet_arity_us = 0.5;
constexpr double collnet_network_us = 10.7;

using Hop = Lowering::Hop;

double step_latency_us(Hop hop, Protocol p, const HopLatencies& table = ring_step_us)
{
  switch (hop) {
    case Hop::NVLINK:
      return table.nvlink[p];
    case Hop::PCIE:
      return table.pcie[p];
    case Hop::NETWORK:
      return table.network[p];
  }
  return table.network[p];
}

int steps_of(CollectiveKind kind, int n)
{
  return kind == CollectiveKind::ALL_REDUCE ? 2 * (n - 1) : n - 1;
}

// NCCL's log2i: the floor of log2.
int log2i(double n)
{
  int l = 0;
  for (auto v = static_cast<std::uint64_t>(n); v >>= 1U;)
    ++l;
  return l;
}

std::size_t row(NcclGeneration generation)
{
  return static_cast<std::size_t>(generation);
}

// LL128's share of a ring across nodes whose network edges run at `edge_bw` each (one channel per NIC): 0.92, or 0.7
// with one GPU per node, and no more than the per-channel cap of the GPUs' generation.
double ll128_network_share(const NetworkUse& net, double edge_bw)
{
  return std::min(net.ppn < 2 ? ll128_ring_one_per_node : bandwidth_share[LL128],
                  ll128_ring_channel_cap[row(net.generation)] / edge_bw);
}

// The share of the network bandwidth (`rail_bw` per NIC) a tree across nodes moves data at with protocol p, for a
// buffer of `bytes`, in NCCL's order: the protocol's share under LL128's per-channel cap, the one-GPU pattern's, then
// the correction for the buffer's size.
double tree_share(Protocol p, double bytes, const NetworkUse& net, double rail_bw)
{
  const int log_size = log2i(bytes / 64.0);
  const double correction =
      log_size < 23 ? tree_correction[static_cast<std::size_t>(p)][static_cast<std::size_t>(log_size)] : 1.0;
  double share = tree_bandwidth_share[p];
  if (p == LL128)
    share = std::min(share, ll128_tree_channel_cap[row(net.generation)] / rail_bw);
  if (net.one_gpu_tree)
    share *= one_gpu_tree_share;
  return share * correction;
}

} // namespace

NcclGeneration nccl_generation(double compute_capability)
{
  if (compute_capability >= 10.0)
    return NcclGeneration::BLACKWELL;
  if (compute_capability >= 9.0)
    return NcclGeneration::HOPPER;
  if (compute_capability >= 8.0)
    return NcclGeneration::AMPERE;
  return NcclGeneration::VOLTA;
}

const Lowering::PathInfo& Lowering::path(int a, int b)
{
  const std::uint64_t key = (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint32_t>(b);
  const auto [it, inserted] = paths_.try_emplace(key);
  if (inserted) {
    PathInfo& info = it->second;
    const auto links = topology::route(g_, a, b);
    info.bandwidth = std::numeric_limits<double>::infinity();
    info.hop = Hop::NVLINK;
    info.direct = links.size() == 1 && g_.graph[links.front()].cls == topology::LinkClass::NVLINK;
    for (auto e : links) {
      const auto& l = g_.graph[e];
      info.bandwidth = std::min(info.bandwidth, l.bandwidth * l.efficiency);
      info.through_cpu = info.through_cpu || l.cls == topology::LinkClass::CPU;
      if (l.cls != topology::LinkClass::NVLINK)
        info.hop =
            std::max(info.hop, l.cls == topology::LinkClass::PCIE || l.cls == topology::LinkClass::CPU ? Hop::PCIE
                                                                                                       : Hop::NETWORK);
    }
  }
  return it->second;
}

// How NCCL sees a collective over `by_node` (its checks are of the whole communicator). LL128 across the network: the
// nodes' GPUs talk over NVLink, and each GPU's path to the next node avoids the CPUs (its NIC under its PCIe switch).
// The generation: of its oldest GPU. The one-GPU tree: one GPU per node, or Hopper and later with no NIC serving two
// of a node's GPUs.
NetworkUse Lowering::network_use(const std::map<int, std::vector<int>>& by_node)
{
  std::size_t ranks = 0;
  double capability = std::numeric_limits<double>::infinity();
  bool nic_each = true;
  for (const auto& [node, members] : by_node) {
    ranks += members.size();
    std::vector<int> nics;
    for (int r : members) {
      capability = std::min(capability, g_.rates[g_.kind[static_cast<std::size_t>(r)]].compute_capability);
      nics.push_back(g_.nic_of_gpu[static_cast<std::size_t>(r % g_.gpus_per_node)]);
    }
    std::sort(nics.begin(), nics.end());
    nic_each = nic_each && std::adjacent_find(nics.begin(), nics.end()) == nics.end();
  }
  NetworkUse net{static_cast<double>(ranks) / static_cast<double>(by_node.size()), by_node.size() > 1,
                 nccl_generation(capability)};
  net.one_gpu_tree = net.ppn < 2 || (net.generation >= NcclGeneration::HOPPER && nic_each);
  for (auto it = by_node.begin(); it != by_node.end() && net.ll128; ++it) {
    const auto& members = it->second;
    const auto& next = std::next(it) == by_node.end() ? by_node.begin()->second : std::next(it)->second;
    if (members.size() > 1 && path(members[0], members[1]).hop != Hop::NVLINK)
      net.ll128 = false;
    for (std::size_t i = 0; i < std::min(members.size(), next.size()) && net.ll128; ++i)
      net.ll128 = !path(members[i], next[i]).through_cpu;
  }
  return net;
}

// NCCL's choice of protocol for a ring: the fastest by its model, from the ring's slowest hop and narrowest edge.
// LL128 runs over NVLink, and across the network where NCCL enables it for the ring's collective (`net`), at its
// share of a ring across nodes; never over PCIe.
Lowering::RingPlan Lowering::ring_plan(CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                       const NetworkUse& net)
{
  const int n = static_cast<int>(ranks.size());
  Hop slowest = Hop::NVLINK;
  double edge_bw = std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) {
    const PathInfo& info = path(ranks[static_cast<std::size_t>(i)], ranks[static_cast<std::size_t>((i + 1) % n)]);
    slowest = std::max(slowest, info.hop);
    edge_bw = std::min(edge_bw, info.bandwidth);
  }
  // NCCL's latency: the ring's steps cross each kind of hop in proportion; the slowest hop kind sets the pace.
  const int steps = steps_of(kind, n);
  std::array<double, 3> share = bandwidth_share;
  if (slowest == Hop::NETWORK)
    share[LL128] = net.ll128 ? ll128_network_share(net, edge_bw) : 0.0;
  else if (slowest == Hop::PCIE)
    share[LL128] = 0.0;
  const double per_rank = ring_bytes_per_rank(kind, n, bytes);
  RingPlan best{SIMPLE, 0, std::numeric_limits<double>::infinity(), 1.0};
  for (Protocol p : {LL, LL128, SIMPLE}) {
    if (share[p] <= 0)
      continue;
    const double latency = (base_latency_us[p] + steps * step_latency_us(slowest, p)) * 1e-6;
    const double time = latency + per_rank / (edge_bw * share[p]);
    if (time < best.time)
      best = RingPlan{p, latency, time, share[p]};
  }
  return best;
}

// One ring phase: n flows r_i -> r_{i+1}.
CollectivePhase Lowering::ring(CollectiveKind kind, const std::vector<int>& ranks, double bytes, const NetworkUse& net)
{
  const int n = static_cast<int>(ranks.size());
  if (n < 2)
    return {};
  const RingPlan plan = ring_plan(kind, ranks, bytes, net);
  const double per_rank = ring_bytes_per_rank(kind, n, bytes);
  CollectivePhase phase;
  for (int i = 0; i < n; ++i)
    phase.push_back(Flow{ranks[static_cast<std::size_t>(i)], ranks[static_cast<std::size_t>((i + 1) % n)],
                         per_rank / plan.share, plan.latency});
  return phase;
}

// The flows of an all-reduce of `bytes` by NVLink SHARP among `members` of one NVSwitch node: each GPU sends the whole
// buffer to the switch, which reduces, and receives the result it multicasts. Each GPU's port carries the buffer once
// each way, at the measured NVLS rate: a flow to the next member stands for it.
void Lowering::add_nvls_flows(const std::vector<int>& members, double bytes, double latency, CollectivePhase& phase)
{
  const double rate = g_.rates[g_.kind[static_cast<std::size_t>(members.front())]].nvls_rate;
  const std::size_t n = members.size();
  for (std::size_t i = 0; i < n; ++i) {
    const int a = members[i];
    const int b = members[(i + 1) % n];
    phase.push_back(Flow{a, b, bytes * path(a, b).bandwidth / rate, latency});
  }
}

// An all-reduce by NVLink SHARP inside one NVSwitch node, where NCCL's model finds it faster than the ring.
std::optional<CollectivePhase> Lowering::nvls_all_reduce(const std::vector<int>& ranks, double bytes)
{
  const int node = ranks.front() / g_.gpus_per_node;
  const double rate = g_.rates[g_.kind[static_cast<std::size_t>(ranks.front())]].nvls_rate;
  if (rate <= 0 || ranks.size() < nvls_fewest_gpus ||
      std::any_of(ranks.begin(), ranks.end(), [&](int r) { return r / g_.gpus_per_node != node; }))
    return std::nullopt;
  const double latency = nvls_latency_us * 1e-6;
  if (latency + bytes / rate >= ring_plan(CollectiveKind::ALL_REDUCE, ranks, bytes, {}).time)
    return std::nullopt;
  CollectivePhase phase;
  add_nvls_flows(ranks, bytes, latency, phase);
  return phase;
}

// The narrowest edge between the nodes of a group spanning nodes (`by_node`: its GPUs per node, as many on each): of
// the rails, the rings of each local rank across the nodes.
double Lowering::rail_bandwidth(const std::map<int, std::vector<int>>& by_node)
{
  double rail_bw = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < by_node.begin()->second.size(); ++i)
    for (auto it = by_node.begin(); it != by_node.end(); ++it) {
      const auto next = std::next(it) == by_node.end() ? by_node.begin() : std::next(it);
      rail_bw = std::min(rail_bw, path(it->second[i], next->second[i]).bandwidth);
    }
  return rail_bw;
}

// A flow of `bytes` from each GPU of `by_node` to the same local GPU of the next node (the rails' ring edges).
void Lowering::add_rail_flows(const std::map<int, std::vector<int>>& by_node, double bytes, double latency,
                              CollectivePhase& phase)
{
  for (auto it = by_node.begin(); it != by_node.end(); ++it) {
    const auto next = std::next(it) == by_node.end() ? by_node.begin() : std::next(it);
    for (std::size_t i = 0; i < it->second.size(); ++i)
      phase.push_back(Flow{it->second[i], next->second[i], bytes, latency});
  }
}

// NCCL's model of its ring and of its double binary tree for an all-reduce of `bytes` across the nodes of `by_node`,
// at bus bandwidth `bus`: the ring's 2(n-1) steps, 2 x nodes of them across the network, the tree's 2 log2(nodes)
// network hops and its chain of the node's GPUs, each with its fastest protocol. The tree's latency is that of the
// part across nodes (the node's chain runs in the phases inside the node, as for the hierarchical ring).
Lowering::AcrossNodes Lowering::across_nodes(const std::map<int, std::vector<int>>& by_node, const NetworkUse& net,
                                             double bytes, double bus)
{
  const int nodes = static_cast<int>(by_node.size());
  const std::size_t per_node = by_node.begin()->second.size();
  const int n = nodes * static_cast<int>(per_node);
  const auto& first = by_node.begin()->second;
  const Hop intra = per_node > 1 ? path(first[0], first[1]).hop : Hop::NVLINK;
  const int steps = steps_of(CollectiveKind::ALL_REDUCE, n);
  const int network_steps = 2 * nodes;
  // LL128's shares across the network, where NCCL runs it: the per-channel caps against one NIC's rate.
  const double rail_bw = rail_bandwidth(by_node);
  const double ring_ll128 = ll128_network_share(net, rail_bw);
  AcrossNodes model;
  model.ring_time = model.tree_time = std::numeric_limits<double>::infinity();
  for (Protocol p : {LL, LL128, SIMPLE}) {
    if (p == LL128 && !net.ll128)
      continue;
    const double intra_factor = p == LL ? ll_intra_multi_node : 1.0;
    double ring_latency = base_latency_us[p] +
                          std::max(0, steps - network_steps) * step_latency_us(intra, p) * intra_factor +
                          network_steps * ring_step_us.network[p];
    if (p == SIMPLE && bytes >= n / 16.0 * 65536.0)
      ring_latency *= ring_plateau;
    const double ring_share = p == LL128 ? ring_ll128 : bandwidth_share[p];
    model.ring_time = std::min(model.ring_time, ring_latency * 1e-6 + bytes * steps / n / (bus * ring_share));
    if (p == SIMPLE)
      model.ring_simple_latency = ring_latency * 1e-6;
    const double tree_latency =
        tree_base_latency_us[p] +
        2.0 * (static_cast<double>(per_node - 1) * step_latency_us(intra, p, tree_step_us) * intra_factor +
               log2i(nodes) * tree_step_us.network[p]);
    const double share = tree_share(p, bytes, net, rail_bw);
    const double time = tree_latency * 1e-6 + 2.0 * bytes / (bus * share);
    if (p == SIMPLE) {
      model.tree_simple_latency = tree_latency * 1e-6;
      model.tree_simple_share = share;
    }
    if (time < model.tree_time) {
      model.tree_time = time;
      model.tree = TreePlan{p, (tree_base_latency_us[p] + 2.0 * log2i(nodes) * tree_step_us.network[p]) * 1e-6, share};
    }
  }
  return model;
}

// NCCL's choice between its ring and its double binary tree for an all-reduce across nodes, by its model of both over
// the whole group at the nodes' network bandwidth (the narrowest rail edge times the GPUs on each node). `forced`: the
// tree whatever the model says.
std::optional<Lowering::TreePlan> Lowering::tree_plan(const std::map<int, std::vector<int>>& by_node,
                                                      const NetworkUse& net, double bytes, bool forced)
{
  const double bus = rail_bandwidth(by_node) * static_cast<double>(by_node.begin()->second.size());
  const AcrossNodes model = across_nodes(by_node, net, bytes, bus);
  if (!forced && model.tree_time >= model.ring_time)
    return std::nullopt;
  return model.tree;
}

// An all-reduce across NVSwitch nodes as NCCL's NVLS-Tree runs it, where it is faster than the ring and the tree:
// NVLink SHARP inside each node (each GPU's port carries the buffer once each way at the NVLS rate) while the nodes'
// reduced shares cross the network, all pipelined. Every GPU of a node is a head with its NIC: on two nodes each sends
// its share across once (NCCL's model doubles the network bandwidth of a two-node NVLS-Tree), on more it sends twice
// its share, the busiest node of a double binary tree (see tree_phase), on the ring's edges. Each is weighed by its
// latency in NCCL's model and its narrowest part, the NVLink ports or the NICs: NVLS-Tree wins where NVLink binds the
// hierarchical ring (GB200 racks), and for mid-sized buffers by its lower latency.
std::optional<CollectivePhase> Lowering::nvls_tree_all_reduce(const std::map<int, std::vector<int>>& by_node,
                                                              const NetworkUse& net, double bytes)
{
  const std::size_t per_node = by_node.begin()->second.size();
  if (per_node < nvls_fewest_gpus)
    return std::nullopt;
  double rate = std::numeric_limits<double>::infinity();
  double intra_bw = std::numeric_limits<double>::infinity();
  for (const auto& [node, members] : by_node) {
    rate = std::min(rate, g_.rates[g_.kind[static_cast<std::size_t>(members.front())]].nvls_rate);
    for (std::size_t i = 0; i < per_node; ++i)
      intra_bw = std::min(intra_bw, path(members[i], members[(i + 1) % per_node]).bandwidth);
  }
  if (rate <= 0)
    return std::nullopt;
  const int nodes = static_cast<int>(by_node.size());
  const double n = static_cast<double>(per_node) * nodes;
  const double rail_bw = rail_bandwidth(by_node);
  const double shard = bytes / static_cast<double>(per_node);
  const double network_bytes = nodes == 2 ? shard : 2.0 * shard;
  const double latency = (nvls_latency_us + 2.0 * log2i(nodes) * nvls_tree_network_us) * 1e-6;
  const double time = latency + std::max(bytes / rate, network_bytes / rail_bw);
  // The others: NCCL's model over the whole group, and the hierarchical ring's and tree's parts at the same latency.
  const AcrossNodes model =
      across_nodes(by_node, net, bytes, std::min(rail_bw * static_cast<double>(per_node), intra_bw));
  const double intra_parts =
      2.0 * (static_cast<double>(per_node) - 1) / static_cast<double>(per_node) * bytes / intra_bw;
  double others =
      std::min(model.ring_time, model.ring_simple_latency + std::max(intra_parts, 2.0 * (n - 1) / n * shard / rail_bw));
  if (nodes >= static_cast<int>(tree_fewest_nodes))
    others = std::min(
        {others, model.tree_time,
         model.tree_simple_latency + std::max(intra_parts, 2.0 * shard / (rail_bw * model.tree_simple_share))});
  if (time >= others)
    return std::nullopt;
  CollectivePhase phase;
  for (const auto& [node, members] : by_node)
    add_nvls_flows(members, bytes, latency, phase);
  add_rail_flows(by_node, network_bytes, latency, phase);
  return phase;
}

// The tree across the nodes of `rail` (one GPU per node) for an all-reduce of `shard` bytes on each. Each node's NIC
// sends and receives twice its shard at the tree's share of its bandwidth (NCCL's model, `plan`), the
// busiest node of a double binary tree: interior in one tree (its share up to its parent and down to two children),
// a leaf in the other. Those bytes travel on the ring's edges between the nodes: the same load on every NIC, so every
// GPU of the rail sends what the others send and a folded cluster stays folded; the switch links they cross are the
// ring's, not the tree's.
CollectivePhase Lowering::tree_phase(const std::vector<int>& rail, double shard, const TreePlan& plan)
{
  CollectivePhase phase;
  const std::size_t n = rail.size();
  for (std::size_t i = 0; i < n; ++i)
    phase.push_back(Flow{rail[i], rail[(i + 1) % n], 2.0 * shard / plan.share, plan.latency});
  return phase;
}

// The phases of a hierarchical collective run as one pipeline, as NCCL's rings do: its chunks go on inside the node
// while earlier ones cross the network, so every link is busy at once and the narrowest one sets the pace. One phase
// of all their flows, each after the sum of the phases' latencies (the pipeline's fill).
namespace {
CollectivePhase pipelined(const std::vector<CollectivePhase>& phases)
{
  double latency = 0;
  for (const auto& phase : phases) {
    double longest = 0;
    for (const Flow& f : phase)
      longest = std::max(longest, f.latency_s);
    latency += longest;
  }
  CollectivePhase merged;
  for (const auto& phase : phases)
    for (Flow f : phase) {
      f.latency_s = latency;
      merged.push_back(f);
    }
  return merged;
}
} // namespace

// An all-reduce reduced by the switches (InfiniBand SHARP) as NCCL's CollNet Direct runs it: a reduce-scatter inside
// each node, each GPU's share sent up to the switches once and the reduced share received once, an all-gather inside
// each node, all pipelined. Taken for every all-reduce across nodes where the network has SHARP: NCCL's model gives it
// 34 us of latency with 8 GPUs per node, less than its ring's or tree's across two nodes or more, and it puts half
// the ring's bytes on the NICs. The share's trip through the switches is a flow to the same local GPU of the next
// node (the ring's edge), which loads every NIC as the switches would, once each way; the links above the leaves
// carry the rings' bytes, not the switches' reduced streams.
CollectivePhase Lowering::sharp_all_reduce(const std::map<int, std::vector<int>>& by_node, double bytes)
{
  const std::size_t per_node = by_node.begin()->second.size();
  const double shard = bytes / static_cast<double>(per_node);
  std::vector<CollectivePhase> phases(3);
  for (const auto& [node, members] : by_node)
    if (per_node > 1)
      for (CollectiveKind k : {CollectiveKind::REDUCE_SCATTER, CollectiveKind::ALL_GATHER})
        for (const Flow& f : ring_or_direct(k, members, bytes))
          phases[k == CollectiveKind::REDUCE_SCATTER ? 0 : 2].push_back(f);
  add_rail_flows(by_node, shard, 0.0, phases[1]);
  CollectivePhase merged = pipelined(phases);
  const double latency_us = 2.0 * (std::min<double>(1.0, static_cast<double>(per_node - 1)) * collnet_nvlink_us +
                                   static_cast<double>(per_node - 1) * collnet_arity_us) +
                            collnet_network_us;
  for (Flow& f : merged)
    f.latency_s = latency_us * 1e-6;
  return merged;
}

bool Lowering::full_mesh(const std::vector<int>& ranks)
{
  if (ranks.size() < 3) // two ranks: a ring is direct
    return false;
  const int node = ranks.front() / g_.gpus_per_node; // a mesh is inside a node: no pair to look up otherwise
  for (int r : ranks)
    if (r / g_.gpus_per_node != node)
      return false;
  for (int a : ranks)
    for (int b : ranks)
      if (a != b && !path(a, b).direct)
        return false;
  return true;
}

// A direct reduce-scatter or all-gather on a full mesh: n(n-1) flows of 1/n of the buffer, all at once, one step.
CollectivePhase Lowering::direct(const std::vector<int>& ranks, double bytes)
{
  const double share = bytes / static_cast<double>(ranks.size());
  double bandwidth = std::numeric_limits<double>::infinity();
  for (int a : ranks)
    for (int b : ranks)
      if (a != b)
        bandwidth = std::min(bandwidth, path(a, b).bandwidth);
  double best_time = std::numeric_limits<double>::infinity();
  Protocol best = SIMPLE;
  for (Protocol p : {LL, LL128, SIMPLE}) {
    const double time = (base_latency_us[p] + ring_step_us.nvlink[p]) * 1e-6 + share / (bandwidth * bandwidth_share[p]);
    if (time < best_time) {
      best_time = time;
      best = p;
    }
  }
  const double latency = (base_latency_us[best] + ring_step_us.nvlink[best]) * 1e-6;
  CollectivePhase phase;
  for (int a : ranks)
    for (int b : ranks)
      if (a != b)
        phase.push_back(Flow{a, b, share / bandwidth_share[best], latency});
  return phase;
}

double ring_bytes_per_rank(CollectiveKind kind, int n, double bytes)
{
  const double share = static_cast<double>(n - 1) / n;
  return kind == CollectiveKind::ALL_REDUCE ? 2.0 * share * bytes : share * bytes;
}

std::vector<CollectivePhase> lower_collective(CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                              const topology::ClusterGraph& g, CollectiveAlgorithm algorithm)
{
  return Lowering(g).collective(kind, ranks, bytes, algorithm);
}

std::vector<CollectivePhase> Lowering::collective(CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                                  CollectiveAlgorithm algorithm)
{
  if (kind == CollectiveKind::ALL_TO_ALL)
    return {all_to_all(ranks, bytes, {})};
  std::map<int, std::vector<int>> by_node;
  for (int r : ranks)
    by_node[r / g_.gpus_per_node].push_back(r);
  const std::size_t per_node = by_node.begin()->second.size();
  bool uniform = true;
  for (const auto& [node, members] : by_node)
    uniform = uniform && members.size() == per_node;
  const bool spans_nodes = by_node.size() > 1 && per_node > 1;
  const bool may_tree = algorithm == CollectiveAlgorithm::AUTO || algorithm == CollectiveAlgorithm::TREE;
  const bool hierarchical = uniform && spans_nodes && (may_tree || algorithm == CollectiveAlgorithm::HIERARCHICAL);
  const NetworkUse net = network_use(by_node);
  if (kind == CollectiveKind::ALL_REDUCE && uniform && by_node.size() > 1 && algorithm == CollectiveAlgorithm::AUTO) {
    if (g_.sharp)
      return {sharp_all_reduce(by_node, bytes)};
    if (auto nvls_tree = nvls_tree_all_reduce(by_node, net, bytes))
      return {*nvls_tree};
  }
  std::optional<TreePlan> tree;
  if (kind == CollectiveKind::ALL_REDUCE && uniform && by_node.size() >= tree_fewest_nodes && may_tree)
    tree = tree_plan(by_node, net, bytes, algorithm == CollectiveAlgorithm::TREE);
  if (tree && per_node == 1) {
    std::vector<int> rail;
    for (const auto& [node, members] : by_node)
      rail.push_back(members.front());
    return {tree_phase(rail, bytes, *tree)};
  }
  if (!hierarchical) {
    if (kind == CollectiveKind::ALL_REDUCE && algorithm != CollectiveAlgorithm::RING)
      if (auto nvls = nvls_all_reduce(ranks, bytes))
        return {*nvls};
    if (full_mesh(ranks) && kind == CollectiveKind::ALL_REDUCE)
      return {direct(ranks, bytes), direct(ranks, bytes)}; // reduce-scatter, then all-gather
    return {ring_or_direct(kind, ranks, bytes, net)};
  }

  // Inside each node over the node's share, across nodes per local rank over 1/per_node of the buffer.
  std::vector<CollectivePhase> phases;
  auto intra = [&](CollectiveKind k, double buffer) {
    CollectivePhase phase;
    for (const auto& [node, members] : by_node)
      for (const Flow& f : ring_or_direct(k, members, buffer))
        phase.push_back(f);
    return phase;
  };
  // NCCL's ring is flat: each of its channels crosses the network once per node, so a node's NICs carry what one GPU
  // of a ring of all n GPUs sends, (n-1)/n of the buffer per pass, not the (nodes-1)/nodes of a ring of nodes. Only an
  // all-reduce on two nodes sends less: NCCL runs its tree there, each node's share once across (NVIDIA/nccl#946).
  const int nodes = static_cast<int>(by_node.size());
  const double flat_share = static_cast<double>(ranks.size() - 1) / static_cast<double>(ranks.size());
  const double rail_share = static_cast<double>(nodes - 1) / nodes;
  auto inter = [&](CollectiveKind k, double buffer) {
    CollectivePhase phase;
    for (std::size_t i = 0; i < per_node; ++i) {
      std::vector<int> rail;
      for (const auto& [node, members] : by_node)
        rail.push_back(members[i]);
      for (Flow f : tree ? tree_phase(rail, buffer, *tree) : ring(k, rail, buffer, net)) {
        if (!tree && !(k == CollectiveKind::ALL_REDUCE && nodes == 2))
          f.bytes *= flat_share / rail_share;
        phase.push_back(f);
      }
    }
    return phase;
  };
  const double shard = bytes / static_cast<double>(per_node);
  switch (kind) {
    case CollectiveKind::ALL_REDUCE:
      phases = {intra(CollectiveKind::REDUCE_SCATTER, bytes), inter(CollectiveKind::ALL_REDUCE, shard),
                intra(CollectiveKind::ALL_GATHER, bytes)};
      break;
    case CollectiveKind::REDUCE_SCATTER:
      phases = {intra(CollectiveKind::REDUCE_SCATTER, bytes), inter(CollectiveKind::REDUCE_SCATTER, shard)};
      break;
    case CollectiveKind::ALL_GATHER:
      phases = {inter(CollectiveKind::ALL_GATHER, shard), intra(CollectiveKind::ALL_GATHER, bytes)};
      break;
    case CollectiveKind::ALL_TO_ALL:
      break;
  }
  return {pipelined(phases)};
}

CollectivePhase Lowering::all_to_all(const std::vector<int>& ranks, double bytes, const std::vector<int>& senders)
{
  CollectivePhase phase;
  const double share = bytes / static_cast<double>(ranks.size());
  for (int src : senders.empty() ? ranks : senders)
    for (int dst : ranks)
      if (dst != src)
        phase.push_back(send(src, dst, share));
  return phase;
}

CollectivePhase Lowering::deduplicated_all_to_all(const std::vector<int>& ranks, double copy_bytes,
                                                  const model::MoeSpec& routing, const std::vector<int>& senders)
{
  std::map<int, std::vector<int>> by_node; // members per node, in group order
  for (int r : ranks)
    by_node[r / g_.gpus_per_node].push_back(r);
  const auto nodes = static_cast<double>(by_node.size());
  const double held = static_cast<double>(routing.num_experts) / static_cast<double>(ranks.size());
  CollectivePhase phase;
  for (int src : senders.empty() ? ranks : senders) {
    const auto& own = by_node.at(src / g_.gpus_per_node);
    const auto local = static_cast<std::size_t>(std::find(own.begin(), own.end(), src) - own.begin());
    const double to_node = copy_bytes * model::reach_probability(routing, held * static_cast<double>(own.size()));
    const double to_gpu = nodes * copy_bytes * model::reach_probability(routing, held);
    for (const auto& [node, members] : by_node) {
      if (&members == &own) {
        for (int dst : members)
          if (dst != src)
            phase.push_back(send(src, dst, to_gpu));
      } else {
        phase.push_back(send(src, members[local % members.size()], to_node));
      }
    }
  }
  return phase;
}

Flow Lowering::send(int src, int dst, double bytes)
{
  return Flow{src, dst, bytes, (base_latency_us[SIMPLE] + step_latency_us(path(src, dst).hop, SIMPLE)) * 1e-6};
}

} // namespace sim::workload
