#include "topology/cluster_spec.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

namespace sim::topology {
namespace {

enum class NvLinkKind { SWITCH, MESH };
constexpr std::array<core::Choice<NvLinkKind>, 2> nvlink_kind_choices{
    {{"switch", NvLinkKind::SWITCH}, {"mesh", NvLinkKind::MESH}}};

std::vector<int> read_index_list(const core::Node& list, int limit)
{
  std::vector<int> out;
  const std::size_t n = list.array_size();
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(static_cast<int>(list.element(i).as_integer(0, limit - 1)));
  return out;
}

NvLinkFabric read_nvlink(const core::Node& node, const hardware::GpuSpec& gpu, int gpus)
{
  core::ObjectReader r(node);
  const auto kind = r.choice<NvLinkKind>("kind", nvlink_kind_choices);
  if (kind == NvLinkKind::SWITCH) {
    NvSwitchFabric f;
    if (auto bw = r.optional_quantity("bandwidth", core::Dimension::BANDWIDTH)) {
      f.bandwidth = *bw;
      f.given = true;
    } else if (gpu.nvlink_bandwidth > 0)
      f.bandwidth = gpu.nvlink_bandwidth;
    else
      throw core::InputError(node.provenance().locate(core::pointer_append(node.pointer(), "bandwidth")),
                             "missing, and GPU " + gpu.name + " has no nvlink_bandwidth", "nothing",
                             core::describe(core::Dimension::BANDWIDTH));
    f.latency = r.quantity("latency", core::Dimension::TIME);
    r.finish();
    return f;
  }
  NvLinkMeshFabric f;
  f.lane_bandwidth = r.quantity("lane_bandwidth", core::Dimension::BANDWIDTH);
  f.latency = r.quantity("latency", core::Dimension::TIME);
  const core::Node links = r.at("links", "an array of [gpu, gpu, lanes]");
  std::set<std::pair<int, int>> seen;
  for (std::size_t i = 0; i < links.array_size(); ++i) {
    const core::Node l = links.element(i);
    if (l.array_size() != 3)
      l.fail("wrong shape", "[gpu, gpu, lanes]");
    const NvLinkMeshFabric::Link link{static_cast<int>(l.element(0).as_integer(0, gpus - 1)),
                                      static_cast<int>(l.element(1).as_integer(0, gpus - 1)),
                                      static_cast<int>(l.element(2).as_integer(1, 18))};
    if (link.a == link.b)
      l.fail("links a GPU to itself", "two different GPUs");
    if (!seen.insert({std::min(link.a, link.b), std::max(link.a, link.b)}).second)
      l.fail("pair listed twice", "each GPU pair once (lanes counts parallel links)");
    f.links.push_back(link);
  }
  r.finish();
  return f;
}

// A quantity within bounds narrower than its dimension's.
double bounded_quantity(const core::Node& node, core::Dimension dimension, double min, double max,
                        const std::string& expected)
{
  const double value = node.as_quantity(dimension);
  if (value < min || value > max)
    node.fail("out of the plausible range", expected);
  return value;
}

NvmeSpec read_nvme(const core::Node& node, int sockets)
{
  core::ObjectReader r(node);
  NvmeSpec d;
  d.drives = static_cast<int>(r.integer_or("drives", 1, 1, 64));
  // From a 16 GB Optane module to a 61.44 TB U.2 drive (and room above); from a Gen3 x2 drive's 1 GB/s to a Gen5
  // x4's 14 GB/s (and room above).
  d.capacity_bytes = bounded_quantity(r.at("capacity", "each drive's capacity"), core::Dimension::BYTES, 16e9, 128e12,
                                      "from 16GB to 128TB per drive");
  d.read_bandwidth = bounded_quantity(r.at("read_bandwidth", "each drive's sequential read bandwidth"),
                                      core::Dimension::BANDWIDTH, 0.2e9, 30e9, "from 0.2GBps to 30GBps per drive");
  d.write_bandwidth = bounded_quantity(r.at("write_bandwidth", "each drive's sequential write bandwidth"),
                                       core::Dimension::BANDWIDTH, 0.1e9, 30e9, "from 0.1GBps to 30GBps per drive");
  if (auto list = r.find("sockets")) {
    if (list->array_size() != static_cast<std::size_t>(d.drives))
      list->fail_found("not one socket per drive", fmt::format("{} sockets", list->array_size()),
                       fmt::format("{} sockets, one per drive", d.drives));
    d.sockets = read_index_list(*list, sockets);
  } else { // spread evenly over the sockets, in order
    for (int i = 0; i < d.drives; ++i)
      d.sockets.push_back(i * sockets / d.drives);
  }
  r.finish();
  return d;
}

HostSpec read_host(const core::Node& node, const std::optional<PcieTree>& pcie)
{
  core::ObjectReader r(node);
  HostSpec h;
  // From a small workstation's 16 GB to the 32 TB an 8-socket server holds; from one socket's two channels of DDR4 to
  // twelve of MRDIMM-8800 (845 GB/s).
  if (auto memory = r.find("memory"))
    h.memory_bytes = bounded_quantity(*memory, core::Dimension::BYTES, 8e9, 64e12, "from 8GB to 64TB per node");
  if (auto bandwidth = r.find("memory_bandwidth"))
    h.memory_bandwidth =
        bounded_quantity(*bandwidth, core::Dimension::BANDWIDTH, 10e9, 2e12, "from 10GBps to 2TBps per socket");
  if (auto nvme = r.find("nvme")) {
    // A drive hangs on a socket's root port and moves data to and from that socket's memory.
    if (!pcie || h.memory_bandwidth == 0)
      nvme->fail_found("NVMe drives with no PCIe tree or no host memory bandwidth",
                       !pcie ? "no node.pcie" : "no node.host.memory_bandwidth",
                       "a pcie tree and host.memory_bandwidth: a drive reads and writes its socket's memory");
    h.nvme = read_nvme(*nvme, pcie->sockets);
  }
  r.finish();
  return h;
}

PcieTree read_pcie(const core::Node& node, const hardware::GpuSpec& gpu, int gpus, int nics)
{
  core::ObjectReader r(node);
  PcieTree t;
  t.link_bandwidth =
      r.quantity_or("link_bandwidth", core::Dimension::BANDWIDTH, pcie_x16_bandwidth(gpu.pcie_generation));
  t.uplink_bandwidth = r.quantity_or("uplink_bandwidth", core::Dimension::BANDWIDTH, t.link_bandwidth);
  t.latency = r.quantity("latency", core::Dimension::TIME);
  const core::Node switches = r.at("switches", "an array of {socket, gpus, nics}");
  std::set<int> gpus_seen;
  std::set<int> nics_seen;
  for (std::size_t i = 0; i < switches.array_size(); ++i) {
    core::ObjectReader s(switches.element(i));
    PcieTree::Switch sw;
    sw.socket = static_cast<int>(s.integer_or("socket", 0, 0, 7));
    if (auto g = s.find("gpus"))
      sw.gpus = read_index_list(*g, gpus);
    if (auto n = s.find("nics"))
      sw.nics = read_index_list(*n, nics);
    for (std::size_t k = 0; k < sw.gpus.size(); ++k)
      if (!gpus_seen.insert(sw.gpus[k]).second)
        s.at("gpus", "").element(k).fail("GPU under two switches", "each GPU under exactly one switch");
    for (std::size_t k = 0; k < sw.nics.size(); ++k)
      if (!nics_seen.insert(sw.nics[k]).second)
        s.at("nics", "").element(k).fail("NIC under two switches", "each NIC under exactly one switch");
    s.finish();
    t.sockets = std::max(t.sockets, sw.socket + 1);
    t.switches.push_back(std::move(sw));
  }
  if (static_cast<int>(gpus_seen.size()) != gpus)
    switches.fail_found("does not place every GPU", fmt::format("{} of {} GPUs", gpus_seen.size(), gpus),
                        "each of the node's GPUs under one switch");
  if (static_cast<int>(nics_seen.size()) != nics)
    switches.fail_found("does not place every NIC", fmt::format("{} of {} NICs", nics_seen.size(), nics),
                        "each of the node's NICs under one switch");
  if (t.sockets > 1)
    t.inter_socket_bandwidth = r.quantity("inter_socket_bandwidth", core::Dimension::BANDWIDTH);
  else if (auto n = r.find("inter_socket_bandwidth"))
    n->fail("given for a single CPU socket", "no inter-socket link (all switches on socket 0)");
  r.finish();
  return t;
}

// The NIC each GPU uses when the topology does not say: GPUs split evenly in order; with a PCIe tree, the NICs on
// the GPU's own switch, else on its socket.
std::vector<std::vector<int>> default_nic_gpus(const core::Node& count, int gpus, int nics,
                                               const std::optional<PcieTree>& pcie)
{
  std::vector<std::vector<int>> out(static_cast<std::size_t>(nics));
  if (pcie) {
    auto nics_near = [&](int gpu) {
      for (const auto& sw : pcie->switches)
        if (std::find(sw.gpus.begin(), sw.gpus.end(), gpu) != sw.gpus.end() && !sw.nics.empty())
          return std::make_pair(sw.nics, sw.gpus);
      int socket = 0;
      for (const auto& sw : pcie->switches)
        if (std::find(sw.gpus.begin(), sw.gpus.end(), gpu) != sw.gpus.end())
          socket = sw.socket;
      std::vector<int> near;
      for (const auto& sw : pcie->switches)
        if (sw.socket == socket)
          near.insert(near.end(), sw.nics.begin(), sw.nics.end());
      return std::make_pair(near, std::vector<int>{});
    };
    for (int g = 0; g < gpus; ++g) {
      auto [near, peers] = nics_near(g);
      if (near.empty())
        near.push_back(0);
      const auto position = std::find(peers.begin(), peers.end(), g) - peers.begin();
      const int nic = near[static_cast<std::size_t>(position) % near.size()];
      out[static_cast<std::size_t>(nic)].push_back(g);
    }
    return out;
  }
  if (gpus % nics != 0) {
    if (nics > gpus)
      count.fail(fmt::format("more NICs than the node's {} GPUs", gpus), "at most one NIC per GPU");
    count.fail(fmt::format("does not divide the node's {} GPUs", gpus),
               "a divisor of the GPU count, or an explicit `gpus` list per NIC");
  }
  const int per_nic = gpus / nics;
  for (int k = 0; k < nics; ++k)
    for (int i = 0; i < per_nic; ++i)
      out[static_cast<std::size_t>(k)].push_back(k * per_nic + i);
  return out;
}

NicSpec read_nics(const core::Node& node, int gpus)
{
  core::ObjectReader r(node);
  NicSpec n;
  n.kind = r.choice_or<NicKind>("kind", nic_kind_choices, NicKind::INFINIBAND);
  n.count = static_cast<int>(r.integer("count", 1, 256));
  n.bandwidth = r.quantity("bandwidth", core::Dimension::BANDWIDTH);
  n.latency = r.quantity("latency", core::Dimension::TIME);
  n.efficiency = r.number_or("efficiency", 1.0, 0.05, 1.0);
  if (auto list = r.find("gpus")) {
    if (list->array_size() != static_cast<std::size_t>(n.count))
      list->fail_found("wrong length", fmt::format("{} entries", list->array_size()),
                       fmt::format("one list of GPUs per NIC ({})", n.count));
    std::set<int> seen;
    for (std::size_t i = 0; i < list->array_size(); ++i) {
      auto g = read_index_list(list->element(i), gpus);
      for (std::size_t k = 0; k < g.size(); ++k)
        if (!seen.insert(g[k]).second)
          list->element(i).element(k).fail("GPU served by two NICs", "each GPU under one NIC");
      n.gpus.push_back(std::move(g));
    }
    if (static_cast<int>(seen.size()) != gpus)
      list->fail_found("leaves GPUs without a NIC", fmt::format("{} of {} GPUs", seen.size(), gpus),
                       "every GPU served by a NIC");
  }
  r.finish();
  return n;
}

NetworkSpec read_network(const core::Node& node, NicKind nics)
{
  core::ObjectReader r(node);
  NetworkSpec n;
  if (auto sharp = r.find("sharp")) {
    n.sharp = sharp->as_bool();
    if (n.sharp && nics != NicKind::INFINIBAND)
      sharp->fail("in-network reduction on Ethernet NICs", "SHARP only with InfiniBand NICs (node.nics.kind)");
  }
  n.kind = r.choice_or<NetworkKind>("kind", network_kind_choices, NetworkKind::FAT_TREE);
  n.rail_optimized = r.flag_or("rail_optimized", true);
  n.nodes_per_leaf = static_cast<int>(r.integer_or("nodes_per_leaf", 32, 1, 1 << 16));
  n.oversubscription = r.number_or("oversubscription", 1.0, 1.0, 64.0);
  n.latency = r.quantity("latency", core::Dimension::TIME);
  if (n.kind == NetworkKind::FAT_TREE) {
    n.leaves_per_pod = static_cast<int>(r.integer_or("leaves_per_pod", 0, 1, 1 << 16));
    n.core_oversubscription = r.number_or("core_oversubscription", 1.0, 1.0, 64.0);
  } else {
    for (const char* key : {"leaves_per_pod", "core_oversubscription"})
      if (auto k = r.find(key))
        k->fail("only applies to kind fat_tree", "no such key for this network kind");
  }
  r.finish();
  return n;
}

} // namespace

NetworkShape network_shape(const NetworkSpec& net, int nodes)
{
  NetworkShape s;
  s.nodes_per_leaf = net.kind == NetworkKind::SINGLE_SWITCH ? nodes : std::min(net.nodes_per_leaf, nodes);
  s.groups = (nodes + s.nodes_per_leaf - 1) / s.nodes_per_leaf;
  s.leaves_per_pod =
      net.kind == NetworkKind::FAT_TREE && net.leaves_per_pod > 0 ? std::min(net.leaves_per_pod, s.groups) : s.groups;
  s.pods = (s.groups + s.leaves_per_pod - 1) / s.leaves_per_pod;
  return s;
}

int network_tiers(const NetworkSpec& net, int nodes)
{
  if (nodes <= 1)
    return 0;
  const NetworkShape s = network_shape(net, nodes);
  return s.groups == 1 ? 1 : s.pods == 1 ? 2 : 3;
}

double pcie_x16_bandwidth(int generation)
{
  switch (generation) {
    case 3:
      return 15.75e9;
    case 4:
      return 31.5e9;
    case 5:
      return 63.0e9;
    default:
      return 126.0e9;
  }
}

ClusterSpec read_cluster(const core::Node& node)
{
  core::ObjectReader r(node);
  core::expect_schema(r, "topology/v1");
  ClusterSpec c;
  c.name = r.text("name");
  c.description = r.text_or("description", "");
  if (auto sources = r.find("sources"))
    for (std::size_t i = 0; i < sources->array_size(); ++i)
      c.sources.push_back(sources->element(i).as_string());

  core::ObjectReader n(r.at("node", "an object describing one node"));
  c.gpu = hardware::read_gpu(n.at("gpu", "a GPU preset name or a gpu/v1 object"));
  c.node.gpus = static_cast<int>(n.integer("gpus", 1, 256));
  const core::Node nics = n.at("nics", "an object {count, bandwidth, latency}");
  c.node.nics = read_nics(nics, c.node.gpus);
  if (!nics.json().contains("efficiency") || nics.json()["efficiency"].is_null())
    c.warnings.push_back(
        {nics.provenance().locate(core::pointer_append(nics.pointer(), "efficiency")),
         "not given: the NICs run at their nominal bandwidth, where NCCL reaches 0.94-0.96 of it (nccl-tests)"});
  if (auto sms = n.find("collective_sms")) {
    const int limit = c.gpu.sms > 0 ? c.gpu.sms - 1 : 1024;
    c.node.collective_sms = static_cast<int>(sms->as_integer(0, limit));
  }
  c.node.nccl_memory_traffic = n.number_or("nccl_memory_traffic", c.node.nccl_memory_traffic, 0.0, 10.0);
  c.node.power_w = n.quantity_or("power", core::Dimension::POWER, 0.0);
  if (auto price = n.find("price_usd"))
    c.node.price_usd = price->as_number(1.0, 1e9);
  if (auto nv = n.find("nvlink"))
    c.node.nvlink = read_nvlink(*nv, c.gpu, c.node.gpus);
  if (auto pcie = n.find("pcie"))
    c.node.pcie = read_pcie(*pcie, c.gpu, c.node.gpus, c.node.nics.count);
  if (auto host = n.find("host"))
    c.node.host = read_host(*host, c.node.pcie);
  if (!c.node.nvlink && !c.node.pcie)
    n.node().fail_found("no fabric between the node's GPUs", "neither nvlink nor pcie",
                        "an nvlink object (switch or mesh), a pcie object, or both");
  if (c.node.nics.gpus.empty()) {
    const core::Node count = n.at("nics", "").element_of("count");
    c.node.nics.gpus = default_nic_gpus(count, c.node.gpus, c.node.nics.count, c.node.pcie);
  }
  if (c.node.nvlink && std::holds_alternative<NvLinkMeshFabric>(*c.node.nvlink) && !c.node.pcie) {
    // Without a PCIe tree, every GPU pair needs its own lanes.
    const auto& mesh = std::get<NvLinkMeshFabric>(*c.node.nvlink);
    const auto pairs = static_cast<std::size_t>(c.node.gpus * (c.node.gpus - 1) / 2);
    if (mesh.links.size() != pairs)
      n.at("nvlink", "")
          .fail_found("leaves GPU pairs without a path", fmt::format("{} of {} pairs linked", mesh.links.size(), pairs),
                      "a pcie tree for the pairs without NVLink, or lanes between every pair");
  }
  if (!c.gpu.peer_to_peer && c.node.gpus > 1) {
    if (!c.node.pcie)
      n.node().fail_found(fmt::format("GPUs without peer-to-peer ({}) and no PCIe tree", c.gpu.name), "no pcie object",
                          "a pcie tree: their traffic is staged in host memory behind the CPU sockets");
    if (c.node.host.memory_bandwidth == 0)
      n.node().fail_found(fmt::format("GPUs without peer-to-peer ({}) and no host memory bandwidth", c.gpu.name),
                          "no host.memory_bandwidth",
                          "the DRAM bandwidth of a CPU socket: their traffic is staged in host memory");
  }
  n.finish();

  c.network = read_network(r.at("network", "an object describing the network between nodes"), c.node.nics.kind);
  if (auto nodes = r.find("nodes"))
    c.nodes = static_cast<int>(nodes->as_integer(1, 1 << 20));
  r.finish();
  return c;
}

bool NvLinkMeshFabric::uniform_full_mesh(int gpus) const
{
  // Pairs are distinct and never a GPU with itself (read_nvlink), so counting them suffices.
  return !links.empty() && links.size() == static_cast<std::size_t>(gpus * (gpus - 1) / 2) &&
         std::all_of(links.begin(), links.end(), [&](const Link& l) { return l.lanes == links.front().lanes; });
}

std::vector<Straggler> read_stragglers(const core::Node& list, const ClusterSpec& cluster, int nodes)
{
  std::vector<Straggler> out;
  const std::size_t n = list.array_size();
  // Each part's share given once: two entries for one part would multiply silently.
  std::map<std::tuple<int, int, int, int, int, std::string_view>, std::size_t> given;
  const auto claim = [&given](const core::Node& item, std::size_t i, const Straggler& s, std::string_view share) {
    const auto [at, fresh] = given.emplace(std::tuple{s.node, s.gpu, s.nic, s.leaf, s.spine, share}, i);
    if (!fresh)
      item.fail_found("a part listed twice", fmt::format("its `{}` also in element {}", share, at->second),
                      "one entry per part and share (two would multiply)");
  };
  for (std::size_t i = 0; i < n; ++i) {
    const core::Node item = list.element(i);
    core::ObjectReader r(item);
    Straggler s;
    const NetworkShape shape = network_shape(cluster.network, nodes);
    if (const auto leaf = r.find("leaf")) {
      if (shape.groups < 2)
        leaf->fail_found("no uplink", fmt::format("one leaf group of {} nodes", nodes),
                         "a network of several leaf groups (a slow NIC is `node` with `nic`)");
      s.leaf = static_cast<int>(leaf->as_integer(0, shape.groups - 1));
    }
    if (const auto spine = r.find("spine")) {
      if (shape.pods < 2)
        spine->fail_found("no uplink", fmt::format("{} pod{} of leaf groups", shape.pods, shape.pods == 1 ? "" : "s"),
                          "a fat tree of several pods, whose spines have uplinks to a core");
      s.spine = static_cast<int>(spine->as_integer(0, shape.pods - 1));
    }
    if (s.on_switch()) {
      for (const char* key : {"node", "gpu", "nic", "compute", "nvlink", "leaf"})
        if (const auto other = r.find(key); other && (key != std::string_view("leaf") || s.spine >= 0))
          other->fail_found("a switch's uplink with a node's part",
                            fmt::format("`{}` with `{}`", key, s.spine >= 0 ? "spine" : "leaf"),
                            "`leaf` (or `spine`) with `bandwidth` alone: a share of the uplink's bandwidth");
      s.bandwidth = r.number("bandwidth", 0.01, 1);
      r.finish();
      claim(item, i, s, "bandwidth");
      out.push_back(s);
      continue;
    }
    s.node = static_cast<int>(r.integer("node", 0, nodes - 1));
    if (const auto gpu = r.find("gpu"))
      s.gpu = static_cast<int>(gpu->as_integer(0, cluster.node.gpus - 1));
    if (const auto nic = r.find("nic"))
      s.nic = static_cast<int>(nic->as_integer(0, std::max(cluster.node.nics.count, 1) - 1));
    const auto compute = r.find("compute");
    const auto nvlink = r.find("nvlink");
    const auto bandwidth = r.find("bandwidth");
    if (compute)
      s.compute = compute->as_number(0.05, 1);
    if (nvlink)
      s.nvlink = nvlink->as_number(0.01, 1);
    if (bandwidth)
      s.bandwidth = bandwidth->as_number(0.01, 1);
    r.finish();
    if (!compute && !nvlink && !bandwidth)
      item.fail_found("nothing slower", "none of `compute`, `nvlink`, `bandwidth`",
                      "`compute` (a share of the kernels' speed), `nvlink` (of the GPUs' NVLink bandwidth) or "
                      "`bandwidth` (of the NICs')");
    if (s.gpu >= 0 && bandwidth)
      item.fail_found("a GPU's bandwidth", "`gpu` with `bandwidth`",
                      "`nic` with `bandwidth` (a NIC's), or `nvlink` (the GPU's NVLink)");
    if (s.nic >= 0 && (compute || nvlink))
      item.fail_found("a NIC's compute or NVLink", fmt::format("`nic` with `{}`", compute ? "compute" : "nvlink"),
                      "`gpu` (or the whole node) with `compute` or `nvlink`");
    if (nvlink && !cluster.node.nvlink)
      item.fail_found("no NVLink", fmt::format("`nvlink` on '{}', whose GPUs have no NVLink", cluster.name),
                      "`compute` or `bandwidth`");
    for (const auto& [given_share, share] : {std::pair{compute.has_value(), "compute"},
                                             {nvlink.has_value(), "nvlink"},
                                             {bandwidth.has_value(), "bandwidth"}})
      if (given_share)
        claim(item, i, s, share);
    out.push_back(s);
  }
  return out;
}

std::vector<NodeGpus> read_node_gpus(const core::Node& list, const ClusterSpec& cluster, int nodes)
{
  const std::size_t n = list.array_size();
  std::vector<NodeGpus> out(n);
  // The ranges first, and their overlaps in order of first node (each must end before the next begins): cheap
  // checks before each part's preset is read.
  for (std::size_t i = 0; i < n; ++i) {
    const core::Node range = core::ObjectReader(list.element(i)).at("nodes", "a [first, last] pair of node indices");
    if (range.array_size() != 2)
      range.fail_found("not a pair", fmt::format("{} values", range.array_size()), "[first, last] node indices");
    out[i].first = static_cast<int>(range.element(0).as_integer(0, nodes - 1));
    out[i].last = static_cast<int>(range.element(1).as_integer(out[i].first, nodes - 1));
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&out](std::size_t a, std::size_t b) { return std::tie(out[a].first, a) < std::tie(out[b].first, b); });
  for (std::size_t k = 1; k < n; ++k) {
    const std::size_t a = std::min(order[k - 1], order[k]);
    const std::size_t b = std::max(order[k - 1], order[k]);
    if (out[order[k]].first <= out[order[k - 1]].last)
      list.element(b).element_of("nodes").fail_found(
          "overlapping ranges",
          fmt::format("nodes {}-{} and {}-{}", out[a].first, out[a].last, out[b].first, out[b].last),
          "each node in at most one range");
  }
  for (std::size_t i = 0; i < n; ++i) {
    const core::Node item = list.element(i);
    core::ObjectReader r(item);
    NodeGpus& g = out[i];
    (void)r.at("nodes", "a [first, last] pair of node indices"); // read above
    g.gpu = hardware::read_gpu(r.at("gpu", "a GPU preset name or a gpu/v1 object"));
    r.finish();
    // The node's fabric is built for the topology's part: another kind must fit it. An NVSwitch takes a part of
    // another NVLink bandwidth (its ports run at the part's); direct NVLink lanes and PCIe links do not.
    const bool nvswitch = cluster.node.nvlink && std::holds_alternative<NvSwitchFabric>(*cluster.node.nvlink);
    const bool nvlink_fits =
        nvswitch ? g.gpu.nvlink_bandwidth > 0 : g.gpu.nvlink_bandwidth == cluster.gpu.nvlink_bandwidth;
    if (!nvlink_fits || g.gpu.pcie_generation != cluster.gpu.pcie_generation ||
        g.gpu.peer_to_peer != cluster.gpu.peer_to_peer)
      item.fail_found(
          fmt::format("a part for another node design than '{}'", cluster.name),
          fmt::format("{}: NVLink {:g} GB/s, PCIe gen {}{}", g.gpu.name, g.gpu.nvlink_bandwidth / 1e9,
                      g.gpu.pcie_generation,
                      g.gpu.peer_to_peer == cluster.gpu.peer_to_peer
                          ? ""
                          : ", peer-to-peer " + std::string(g.gpu.peer_to_peer ? "on" : "off")),
          nvswitch ? fmt::format("an NVLink part with PCIe gen {}, as {}'s (e.g. H200 or H800 nodes beside H100 ones)",
                                 cluster.gpu.pcie_generation, cluster.gpu.name)
                   : fmt::format("NVLink {:g} GB/s and PCIe gen {}, as {}'s", cluster.gpu.nvlink_bandwidth / 1e9,
                                 cluster.gpu.pcie_generation, cluster.gpu.name));
  }
  return out;
}

int gpu_kind(const ClusterSpec& cluster, int gpu)
{
  const int node = gpu / cluster.node.gpus;
  for (std::size_t k = 0; k < cluster.node_gpus.size(); ++k)
    if (node >= cluster.node_gpus[k].first && node <= cluster.node_gpus[k].last)
      return static_cast<int>(k) + 1;
  return 0;
}

const hardware::GpuSpec& gpu_of_kind(const ClusterSpec& cluster, int kind)
{
  return kind == 0 ? cluster.gpu : cluster.node_gpus[static_cast<std::size_t>(kind - 1)].gpu;
}

std::vector<const hardware::GpuSpec*> gpu_kinds(const ClusterSpec& cluster)
{
  std::vector<const hardware::GpuSpec*> out{&cluster.gpu};
  for (const auto& k : cluster.node_gpus)
    out.push_back(&k.gpu);
  return out;
}

double mean_peak(const ClusterSpec& cluster, hardware::Precision precision, int gpus)
{
  if (cluster.node_gpus.empty())
    return cluster.gpu.peak(precision).value_or(0.0);
  double sum = 0;
  for (int g = 0; g < gpus; ++g)
    sum += gpu_of_kind(cluster, gpu_kind(cluster, g)).peak(precision).value_or(0.0);
  return gpus > 0 ? sum / gpus : 0.0;
}

bool on_gpu(const Straggler& s, int gpu, int gpus_per_node)
{
  return s.node == gpu / gpus_per_node && (s.gpu < 0 || s.gpu == gpu % gpus_per_node);
}

namespace {

// The product of the given share over the stragglers on a part (those `on` picks).
template <class On>
double share_left(const ClusterSpec& cluster, double Straggler::*share, On on)
{
  double product = 1;
  for (const Straggler& s : cluster.stragglers)
    if (on(s))
      product *= s.*share;
  return product;
}

double gpu_share(const ClusterSpec& cluster, int gpu, double Straggler::*share)
{
  return share_left(cluster, share, [&](const Straggler& s) { return on_gpu(s, gpu, cluster.node.gpus); });
}

} // namespace

double compute_share(const ClusterSpec& cluster, int gpu)
{
  return gpu_share(cluster, gpu, &Straggler::compute);
}

double nvlink_share(const ClusterSpec& cluster, int gpu)
{
  return gpu_share(cluster, gpu, &Straggler::nvlink);
}

double nic_share(const ClusterSpec& cluster, int node, int nic)
{
  return share_left(cluster, &Straggler::bandwidth,
                    [&](const Straggler& s) { return s.node == node && (s.nic < 0 || s.nic == nic); });
}

double leaf_uplink_share(const ClusterSpec& cluster, int leaf_group)
{
  return share_left(cluster, &Straggler::bandwidth,
                    [&](const Straggler& s) { return leaf_group >= 0 && s.leaf == leaf_group; });
}

double spine_uplink_share(const ClusterSpec& cluster, int pod)
{
  return share_left(cluster, &Straggler::bandwidth, [&](const Straggler& s) { return pod >= 0 && s.spine == pod; });
}

} // namespace sim::topology
