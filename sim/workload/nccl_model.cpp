#include "workload/nccl_model.hpp"

#include <algorithm>
#include <array>
#include <limits>

namespace sim::workload {
namespace {

using enum Protocol;
constexpr std::array<Protocol, 3> protocols{LL, LL128, SIMPLE};

// A value per protocol {LL, LL128, Simple}, indexed by it.
template <typename T>
struct PerProtocol {
  std::array<T, 3> values;
  constexpr const T& operator[](Protocol p) const { return values[static_cast<std::size_t>(p)]; }
  constexpr T& operator[](Protocol p) { return values[static_cast<std::size_t>(p)]; }
};

// NCCL's tuning model for rings (src/graph/tuning.cc, NVIDIA/nccl): per-collective base latency and per-step
// hardware latency in microseconds, per protocol {LL, LL128, Simple}, and each protocol's share of the bus
// bandwidth (LL moves 4 bytes of data per 8-byte line and runs at 1/4 of the bus bandwidth in the model;
// LL128 at 0.92).
constexpr PerProtocol<double> base_latency_us{3.6, 10.0, 8.4};
// Per-step hardware latency in microseconds per protocol {LL, LL128, Simple}, over each kind of hop.
struct HopLatencies {
  PerProtocol<double> nvlink, pcie, network;
};
constexpr HopLatencies ring_step_us{{0.47, 1.9, 3.4}, {1.0, 2.5, 5.7}, {2.7, 4.0, 9.6}};
constexpr PerProtocol<double> bandwidth_share{0.25, 0.92, 1.0};
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
constexpr PerProtocol<double> tree_base_latency_us{4.4, 4.4, 0.0};
constexpr HopLatencies tree_step_us{{0.52, 1.25, 28.0}, {1.0, 1.9, 28.0}, {5.0, 8.5, 28.0}};
constexpr PerProtocol<double> tree_bandwidth_share{0.92 / 3.8, 0.92 * 120.0 / 128.0, 0.92};
constexpr PerProtocol<std::array<double, 23>> tree_correction{{{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
}}};
// Multi-node refinements of the same model: an LL hop inside a node costs 1.8 times as much, and a Simple ring
// all-reduce at least nRanks/16 x 64 KiB long pays 1.9 times its latency ("plateau effect of ring").
constexpr double ll_intra_multi_node = 1.8;
constexpr double ring_plateau = 1.9;
// NCCL's CollNet Direct (SHARP) latency in the same model: 8.0 us over NVLink for the node's part, 0.5 us per further
// GPU of the node (arity serialisation) and 10.7 us across the network, Simple protocol.
constexpr double collnet_nvlink_us = 8.0;
constexpr double collnet_arity_us = 0.5;
constexpr double collnet_network_us = 10.7;

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
  const double correction = log_size < 23 ? tree_correction[p][static_cast<std::size_t>(log_size)] : 1.0;
  double share = tree_bandwidth_share[p];
  if (p == LL128)
    share = std::min(share, ll128_tree_channel_cap[row(net.generation)] / rail_bw);
  if (net.one_gpu_tree)
    share *= one_gpu_tree_share;
  return share * correction;
}

} // namespace

GroupByNode group_by_node(const std::vector<int>& ranks, int gpus_per_node)
{
  GroupByNode by_node;
  for (int r : ranks)
    by_node[r / gpus_per_node].push_back(r);
  return by_node;
}

double ring_bytes_per_rank(CollectiveKind kind, int n, double bytes)
{
  const double share = static_cast<double>(n - 1) / n;
  return kind == CollectiveKind::ALL_REDUCE ? 2.0 * share * bytes : share * bytes;
}

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

// How NCCL sees a collective over `by_node` (its checks are of the whole communicator). LL128 across the network: the
// nodes' GPUs talk over NVLink, and each GPU's path to the next node avoids the CPUs (its NIC under its PCIe switch).
// The generation: of its oldest GPU. The one-GPU tree: one GPU per node, or Hopper and later with no NIC serving two
// of a node's GPUs.
NetworkUse network_use(GpuPaths& paths, const GroupByNode& by_node)
{
  const auto& g = paths.graph();
  std::size_t ranks = 0;
  double capability = std::numeric_limits<double>::infinity();
  bool nic_each = true;
  for (const auto& [node, members] : by_node) {
    ranks += members.size();
    std::vector<int> nics;
    for (int r : members) {
      capability = std::min(capability, g.rates[g.kind[static_cast<std::size_t>(r)]].compute_capability);
      nics.push_back(g.nic_of_gpu[static_cast<std::size_t>(r % g.gpus_per_node)]);
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
    if (members.size() > 1 && paths.path(members[0], members[1]).hop != Hop::NVLINK)
      net.ll128 = false;
    for (std::size_t i = 0; i < std::min(members.size(), next.size()) && net.ll128; ++i)
      net.ll128 = !paths.path(members[i], next[i]).through_cpu;
  }
  return net;
}

// NCCL's choice of protocol for a ring: the fastest by its model, from the ring's slowest hop and narrowest edge.
// LL128 runs over NVLink, and across the network where NCCL enables it for the ring's collective (`net`), at its
// share of a ring across nodes; never over PCIe.
RingPlan ring_plan(GpuPaths& paths, CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                   const NetworkUse& net)
{
  const int n = static_cast<int>(ranks.size());
  Hop slowest = Hop::NVLINK;
  double edge_bw = std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) {
    const PathInfo& info = paths.path(ranks[static_cast<std::size_t>(i)], ranks[static_cast<std::size_t>((i + 1) % n)]);
    slowest = std::max(slowest, info.hop);
    edge_bw = std::min(edge_bw, info.bandwidth);
  }
  // NCCL's latency: the ring's steps cross each kind of hop in proportion; the slowest hop kind sets the pace.
  const int steps = steps_of(kind, n);
  PerProtocol<double> share = bandwidth_share;
  if (slowest == Hop::NETWORK)
    share[LL128] = net.ll128 ? ll128_network_share(net, edge_bw) : 0.0;
  else if (slowest == Hop::PCIE)
    share[LL128] = 0.0;
  const double per_rank = ring_bytes_per_rank(kind, n, bytes);
  RingPlan best{SIMPLE, 0, std::numeric_limits<double>::infinity(), 1.0};
  for (Protocol p : protocols) {
    if (share[p] <= 0)
      continue;
    const double latency = (base_latency_us[p] + steps * step_latency_us(slowest, p)) * 1e-6;
    const double time = latency + per_rank / (edge_bw * share[p]);
    if (time < best.time)
      best = RingPlan{p, latency, time, share[p]};
  }
  return best;
}

// The direct step's protocol: the fastest by the ring's model of one NVLink step, at the narrowest link of the mesh.
DirectPlan direct_plan(GpuPaths& paths, const std::vector<int>& ranks, double bytes)
{
  const double share = bytes / static_cast<double>(ranks.size());
  double bandwidth = std::numeric_limits<double>::infinity();
  for (int a : ranks)
    for (int b : ranks)
      if (a != b)
        bandwidth = std::min(bandwidth, paths.path(a, b).bandwidth);
  double best_time = std::numeric_limits<double>::infinity();
  Protocol best = SIMPLE;
  for (Protocol p : protocols) {
    const double time = (base_latency_us[p] + ring_step_us.nvlink[p]) * 1e-6 + share / (bandwidth * bandwidth_share[p]);
    if (time < best_time) {
      best_time = time;
      best = p;
    }
  }
  return DirectPlan{best, (base_latency_us[best] + ring_step_us.nvlink[best]) * 1e-6, bandwidth_share[best]};
}

bool full_mesh(GpuPaths& paths, const std::vector<int>& ranks)
{
  if (ranks.size() < 3) // two ranks: a ring is direct
    return false;
  const int gpus_per_node = paths.graph().gpus_per_node;
  const int node = ranks.front() / gpus_per_node; // a mesh is inside a node: no pair to look up otherwise
  for (int r : ranks)
    if (r / gpus_per_node != node)
      return false;
  for (int a : ranks)
    for (int b : ranks)
      if (a != b && !paths.path(a, b).direct)
        return false;
  return true;
}

// The narrowest edge between the nodes of a group spanning nodes (`by_node`: its GPUs per node, as many on each): of
// the rails, the rings of each local rank across the nodes.
double rail_bandwidth(GpuPaths& paths, const GroupByNode& by_node)
{
  double rail_bw = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < by_node.begin()->second.size(); ++i)
    for (auto it = by_node.begin(); it != by_node.end(); ++it) {
      const auto next = std::next(it) == by_node.end() ? by_node.begin() : std::next(it);
      rail_bw = std::min(rail_bw, paths.path(it->second[i], next->second[i]).bandwidth);
    }
  return rail_bw;
}

// NCCL's model of its ring and of its double binary tree for an all-reduce of `bytes` across the nodes of `by_node`,
// at bus bandwidth `bus`: the ring's 2(n-1) steps, 2 x nodes of them across the network, the tree's 2 log2(nodes)
// network hops and its chain of the node's GPUs, each with its fastest protocol. The tree's latency is that of the
// part across nodes (the node's chain runs in the phases inside the node, as for the hierarchical ring).
AcrossNodes across_nodes(GpuPaths& paths, const GroupByNode& by_node, const NetworkUse& net, double bytes, double bus)
{
  const int nodes = static_cast<int>(by_node.size());
  const std::size_t per_node = by_node.begin()->second.size();
  const int n = nodes * static_cast<int>(per_node);
  const auto& first = by_node.begin()->second;
  const Hop intra = per_node > 1 ? paths.path(first[0], first[1]).hop : Hop::NVLINK;
  const int steps = steps_of(CollectiveKind::ALL_REDUCE, n);
  const int network_steps = 2 * nodes;
  // LL128's shares across the network, where NCCL runs it: the per-channel caps against one NIC's rate.
  const double rail_bw = rail_bandwidth(paths, by_node);
  const double ring_ll128 = ll128_network_share(net, rail_bw);
  AcrossNodes model;
  model.ring_time = model.tree_time = std::numeric_limits<double>::infinity();
  for (Protocol p : protocols) {
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
// the whole group at the nodes' network bandwidth (the narrowest rail edge times the GPUs on each node).
std::optional<TreePlan> tree_plan(GpuPaths& paths, const GroupByNode& by_node, const NetworkUse& net, double bytes,
                                  const TreeOptions& options)
{
  const double bus = rail_bandwidth(paths, by_node) * static_cast<double>(by_node.begin()->second.size());
  const AcrossNodes model = across_nodes(paths, by_node, net, bytes, bus);
  if (!options.forced && model.tree_time >= model.ring_time)
    return std::nullopt;
  return model.tree;
}

double nvls_latency_s()
{
  return nvls_latency_us * 1e-6;
}

// NVLS needs the GPU's NVLink SHARP, at least nvls_fewest_gpus GPUs, all of one node, and must beat NCCL's ring there.
bool nvls_pays(GpuPaths& paths, const std::vector<int>& ranks, double bytes)
{
  const auto& g = paths.graph();
  const int node = ranks.front() / g.gpus_per_node;
  const double rate = g.rates[g.kind[static_cast<std::size_t>(ranks.front())]].nvls_rate;
  if (rate <= 0 || ranks.size() < nvls_fewest_gpus ||
      std::any_of(ranks.begin(), ranks.end(), [&](int r) { return r / g.gpus_per_node != node; }))
    return false;
  const double latency = nvls_latency_us * 1e-6;
  return !(latency + bytes / rate >= ring_plan(paths, CollectiveKind::ALL_REDUCE, ranks, bytes, {}).time);
}

// NVLS-Tree against the others, each weighed by its latency in NCCL's model and its narrowest part, the NVLink ports
// or the NICs: NVLS-Tree wins where NVLink binds the hierarchical ring (GB200 racks), and for mid-sized buffers by its
// lower latency. Its busiest NIC sends its GPU's share once on two nodes (NCCL's model doubles the network bandwidth of
// a two-node NVLS-Tree), twice on more (the busiest node of a double binary tree).
std::optional<NvlsTreePlan> nvls_tree_plan(GpuPaths& paths, const GroupByNode& by_node, const NetworkUse& net,
                                           double bytes)
{
  const auto& g = paths.graph();
  const std::size_t per_node = by_node.begin()->second.size();
  if (per_node < nvls_fewest_gpus)
    return std::nullopt;
  double rate = std::numeric_limits<double>::infinity();
  double intra_bw = std::numeric_limits<double>::infinity();
  for (const auto& [node, members] : by_node) {
    rate = std::min(rate, g.rates[g.kind[static_cast<std::size_t>(members.front())]].nvls_rate);
    for (std::size_t i = 0; i < per_node; ++i)
      intra_bw = std::min(intra_bw, paths.path(members[i], members[(i + 1) % per_node]).bandwidth);
  }
  if (rate <= 0)
    return std::nullopt;
  const int nodes = static_cast<int>(by_node.size());
  const double n = static_cast<double>(per_node) * nodes;
  const double rail_bw = rail_bandwidth(paths, by_node);
  const double shard = bytes / static_cast<double>(per_node);
  const double network_bytes = nodes == 2 ? shard : 2.0 * shard;
  const double latency = (nvls_latency_us + 2.0 * log2i(nodes) * nvls_tree_network_us) * 1e-6;
  const double time = latency + std::max(bytes / rate, network_bytes / rail_bw);
  // The others: NCCL's model over the whole group, and the hierarchical ring's and tree's parts at the same latency.
  const AcrossNodes model =
      across_nodes(paths, by_node, net, bytes, std::min(rail_bw * static_cast<double>(per_node), intra_bw));
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
  return NvlsTreePlan{latency, network_bytes};
}

// Taken for every all-reduce across nodes where the network has SHARP: NCCL's model gives it 34 us of latency with 8
// GPUs per node, less than its ring's or tree's across two nodes or more.
double collnet_latency_s(std::size_t per_node)
{
  const double latency_us = 2.0 * (std::min<double>(1.0, static_cast<double>(per_node - 1)) * collnet_nvlink_us +
                                   static_cast<double>(per_node - 1) * collnet_arity_us) +
                            collnet_network_us;
  return latency_us * 1e-6;
}

double send_latency_s(Hop hop)
{
  return (base_latency_us[SIMPLE] + step_latency_us(hop, SIMPLE)) * 1e-6;
}

} // namespace sim::workload
