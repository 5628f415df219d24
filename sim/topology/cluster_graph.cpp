#include "topology/cluster_graph.hpp"

#include <algorithm>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <cmath>
#include <cstdint>
#include <deque>
#include <fmt/format.h>
#include <limits>
#include <map>

namespace sim::topology {
namespace {

class Builder {
 public:
  explicit Builder(ClusterGraph& cg) : cg_(cg) {}

  VertexId device(DeviceKind kind, int node, int index)
  {
    return boost::add_vertex(Device{kind, node, index}, cg_.graph);
  }
  void link(VertexId a, VertexId b, LinkClass cls, double bandwidth, double latency, double efficiency = 1.0)
  {
    boost::add_edge(a, b, Link{boost::num_edges(cg_.graph), a, b, cls, bandwidth, latency, efficiency}, cg_.graph);
  }

 private:
  ClusterGraph& cg_;
};

// An NVSwitch port's bandwidth per direction for a GPU of this part: the topology's, where the file gives it (a cap
// for every node), else the part's NVLink.
double nvswitch_port(const NvSwitchFabric& sw, const hardware::GpuSpec& part)
{
  return sw.given ? sw.bandwidth : part.nvlink_bandwidth;
}

void build_node(Builder& b, ClusterGraph& cg, const ClusterSpec& spec, int n)
{
  const NodeSpec& ns = spec.node;
  std::vector<VertexId> gpus;
  for (int i = 0; i < ns.gpus; ++i) {
    gpus.push_back(b.device(DeviceKind::GPU, n, i));
    cg.gpu.push_back(gpus.back());
  }
  std::vector<VertexId> nics;
  for (int k = 0; k < ns.nics.count; ++k)
    nics.push_back(b.device(DeviceKind::NIC, n, k));
  cg.nic.push_back(nics);

  if (ns.nvlink) {
    // The node's part: its NVLink's measured NCCL efficiency (and, on an NVSwitch, its bandwidth).
    const auto& part = gpu_of_kind(spec, gpu_kind(spec, n * ns.gpus));
    const double eff = part.nccl_nvlink_efficiency > 0 ? part.nccl_nvlink_efficiency : 1.0;
    if (const auto* sw = std::get_if<NvSwitchFabric>(&*ns.nvlink)) {
      const VertexId hub = b.device(DeviceKind::NVSWITCH, n, 0);
      for (int i = 0; i < ns.gpus; ++i)
        b.link(gpus[static_cast<std::size_t>(i)], hub, LinkClass::NVLINK,
               nvswitch_port(*sw, part) * nvlink_share(spec, n * ns.gpus + i), sw->latency / 2, eff);
    } else {
      const auto& mesh = std::get<NvLinkMeshFabric>(*ns.nvlink);
      for (const auto& l : mesh.links)
        b.link(gpus[static_cast<std::size_t>(l.a)], gpus[static_cast<std::size_t>(l.b)], LinkClass::NVLINK,
               l.lanes * mesh.lane_bandwidth *
                   std::min(nvlink_share(spec, n * ns.gpus + l.a), nvlink_share(spec, n * ns.gpus + l.b)),
               mesh.latency, eff);
    }
  }
  if (ns.pcie) {
    const PcieTree& t = *ns.pcie;
    std::vector<VertexId> cpus;
    for (int s = 0; s < t.sockets; ++s)
      cpus.push_back(b.device(DeviceKind::CPU, n, s));
    // Each socket's DRAM serves the reads and the writes of what is staged in it: half its bandwidth each way.
    std::vector<VertexId> memory;
    if (ns.host.memory_bandwidth > 0)
      for (int s = 0; s < t.sockets; ++s) {
        memory.push_back(b.device(DeviceKind::HOST_MEMORY, n, s));
        b.link(cpus[static_cast<std::size_t>(s)], memory.back(), LinkClass::DRAM, ns.host.memory_bandwidth / 2, 0.0);
      }
    cg.host_memory.push_back(memory);
    // NVMe drives on their sockets' root ports, each link at the faster of the drive's read and write rates (the
    // slower direction's copies count as more bytes: workload::nvme_wire_bytes).
    std::vector<VertexId> drives;
    const NvmeSpec& nvme = ns.host.nvme;
    for (int d = 0; d < nvme.drives; ++d) {
      drives.push_back(b.device(DeviceKind::NVME, n, d));
      b.link(cpus[static_cast<std::size_t>(nvme.sockets[static_cast<std::size_t>(d)])], drives.back(), LinkClass::PCIE,
             std::max(nvme.read_bandwidth, nvme.write_bandwidth), t.latency / 2);
    }
    cg.nvme.push_back(drives);
    for (int s = 0; s < t.sockets; ++s)
      for (int r = s + 1; r < t.sockets; ++r)
        b.link(cpus[static_cast<std::size_t>(s)], cpus[static_cast<std::size_t>(r)], LinkClass::CPU,
               t.inter_socket_bandwidth, t.latency / 2);
    for (std::size_t k = 0; k < t.switches.size(); ++k) {
      const auto& sw = t.switches[k];
      const VertexId v = b.device(DeviceKind::PCIE_SWITCH, n, static_cast<int>(k));
      b.link(v, cpus[static_cast<std::size_t>(sw.socket)], LinkClass::PCIE, t.uplink_bandwidth, t.latency / 2);
      for (int g : sw.gpus)
        b.link(gpus[static_cast<std::size_t>(g)], v, LinkClass::PCIE, t.link_bandwidth, t.latency / 2);
      for (int k2 : sw.nics)
        b.link(nics[static_cast<std::size_t>(k2)], v, LinkClass::PCIE, t.link_bandwidth, t.latency / 2);
    }
  } else {
    cg.host_memory.emplace_back();
    cg.nvme.emplace_back();
    // No PCIe tree described: each GPU reaches its NIC over its own x16 link.
    const double x16 = pcie_x16_bandwidth(spec.gpu.pcie_generation);
    for (int i = 0; i < ns.gpus; ++i)
      b.link(gpus[static_cast<std::size_t>(i)],
             nics[static_cast<std::size_t>(cg.nic_of_gpu[static_cast<std::size_t>(i)])], LinkClass::PCIE, x16, 0.0);
  }
}

void build_network(Builder& b, ClusterGraph& cg, const ClusterSpec& spec)
{
  const NicSpec& nics = spec.node.nics;
  const NetworkSpec& net = spec.network;
  const LinkClass cls = nics.kind == NicKind::INFINIBAND ? LinkClass::IB : LinkClass::ETHERNET;
  const NetworkShape shape = network_shape(net, cg.nodes);
  cg.nodes_per_leaf = shape.nodes_per_leaf;
  cg.sharp = net.sharp;
  const int groups = shape.groups;
  for (int g = 0; g < groups; ++g)
    cg.leaf.push_back(b.device(DeviceKind::LEAF, -1, g));
  for (int n = 0; n < cg.nodes; ++n)
    for (VertexId nic : cg.nic[static_cast<std::size_t>(n)])
      b.link(nic, cg.leaf[static_cast<std::size_t>(n / cg.nodes_per_leaf)], cls,
             nics.bandwidth * nic_share(spec, n, cg.graph[nic].index), nics.latency / 2, nics.efficiency);
  if (groups == 1)
    return;

  // Each leaf group's uplink carries its downlink bandwidth divided by the oversubscription.
  const double leaf_up = net.nodes_per_leaf * nics.count * nics.bandwidth / net.oversubscription;
  cg.leaves_per_pod = shape.leaves_per_pod;
  const int pods = shape.pods;
  for (int p = 0; p < pods; ++p)
    cg.spine.push_back(b.device(DeviceKind::SPINE, -1, p));
  for (int g = 0; g < groups; ++g)
    b.link(cg.leaf[static_cast<std::size_t>(g)], cg.spine[static_cast<std::size_t>(g / cg.leaves_per_pod)], cls,
           leaf_up * leaf_uplink_share(spec, g), net.latency);
  if (pods == 1)
    return;
  cg.core = b.device(DeviceKind::CORE, -1, 0);
  const double pod_up = cg.leaves_per_pod * leaf_up / net.core_oversubscription;
  for (int p = 0; p < pods; ++p)
    b.link(cg.spine[static_cast<std::size_t>(p)], *cg.core, cls, pod_up * spine_uplink_share(spec, p), net.latency,
           nics.efficiency);
}

EdgeId edge_between(const ClusterGraph& cg, VertexId a, VertexId b)
{
  const auto [e, found] = boost::edge(a, b, cg.graph);
  if (!found)
    throw std::logic_error("no link between " + cg.device_name(a) + " and " + cg.device_name(b));
  return e;
}

// Fewest-hop path inside one node from `src` to `dst`; GPUs and NICs other than the endpoints do not forward.
std::vector<EdgeId> path_in_node(const ClusterGraph& cg, VertexId src, VertexId dst)
{
  const Graph& g = cg.graph;
  const int node = g[src].node;
  std::map<VertexId, EdgeId> via;
  std::deque<VertexId> queue{src};
  std::map<VertexId, bool> seen{{src, true}};
  while (!queue.empty() && !seen.count(dst)) {
    const VertexId u = queue.front();
    queue.pop_front();
    if (u != src && (g[u].kind == DeviceKind::GPU || g[u].kind == DeviceKind::NIC ||
                     g[u].kind == DeviceKind::HOST_MEMORY || g[u].kind == DeviceKind::NVME))
      continue;
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      const VertexId v = boost::target(*e, g);
      if (g[v].node != node || seen.count(v))
        continue;
      seen[v] = true;
      via[v] = *e;
      queue.push_back(v);
    }
  }
  if (!seen.count(dst))
    return {};
  std::vector<EdgeId> path;
  for (VertexId v = dst; v != src;) {
    const EdgeId e = via.at(v);
    path.push_back(e);
    v = boost::source(e, g) == v ? boost::target(e, g) : boost::source(e, g);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

// Inside one node from `src` to `dst`: directly, or, when the GPUs stage their traffic, written into the memory of CPU
// socket `socket` and read from there.
std::vector<EdgeId> node_path(const ClusterGraph& cg, VertexId src, VertexId dst, int socket)
{
  if (!cg.staged)
    return path_in_node(cg, src, dst);
  const VertexId memory =
      cg.host_memory[static_cast<std::size_t>(cg.graph[src].node)][static_cast<std::size_t>(socket)];
  std::vector<EdgeId> path = path_in_node(cg, src, memory);
  const auto tail = path_in_node(cg, memory, dst);
  path.insert(path.end(), tail.begin(), tail.end());
  return path;
}

} // namespace

std::string ClusterGraph::device_name(VertexId v) const
{
  const Device& d = graph[v];
  switch (d.kind) {
    case DeviceKind::GPU:
      return fmt::format("n{}.gpu{}", d.node, d.index);
    case DeviceKind::NVSWITCH:
      return fmt::format("n{}.nvswitch", d.node);
    case DeviceKind::PCIE_SWITCH:
      return fmt::format("n{}.pcie{}", d.node, d.index);
    case DeviceKind::CPU:
      return fmt::format("n{}.cpu{}", d.node, d.index);
    case DeviceKind::HOST_MEMORY:
      return fmt::format("n{}.mem{}", d.node, d.index);
    case DeviceKind::NVME:
      return fmt::format("n{}.nvme{}", d.node, d.index);
    case DeviceKind::NIC:
      return fmt::format("n{}.nic{}", d.node, d.index);
    case DeviceKind::LEAF:
      return fmt::format("leaf{}", d.index);
    case DeviceKind::SPINE:
      return fmt::format("spine{}", d.index);
    case DeviceKind::CORE:
      return "core";
  }
  return "?";
}

std::string ClusterGraph::link_name(EdgeId e) const
{
  return device_name(graph[e].from) + "--" + device_name(graph[e].to);
}

ClusterGraph build_graph(const ClusterSpec& spec, int nodes)
{
  ClusterGraph cg;
  cg.nodes = nodes;
  cg.gpus_per_node = spec.node.gpus;
  for (int k = 0; k <= static_cast<int>(spec.node_gpus.size()); ++k) {
    const auto& gpu = gpu_of_kind(spec, k);
    ClusterGraph::GpuRates r;
    if (gpu.sms > 0)
      r.compute_share_during_comm = 1.0 - static_cast<double>(spec.node.collective_sms) / gpu.sms;
    r.memory_bandwidth = gpu.memory_bandwidth * gpu.memory_kernel_efficiency(hardware::MemoryKernel::ELEMENTWISE,
                                                                             hardware::KernelPass::FORWARD);
    if (const auto* sw = spec.node.nvlink ? std::get_if<NvSwitchFabric>(&*spec.node.nvlink) : nullptr)
      r.nvls_rate = nvswitch_port(*sw, gpu) * gpu.nccl_nvls_efficiency;
    r.compute_capability = gpu.compute_capability;
    cg.rates.push_back(r);
  }
  for (int g = 0; g < nodes * spec.node.gpus; ++g)
    cg.kind.push_back(static_cast<std::uint8_t>(gpu_kind(spec, g)));
  cg.nccl_memory_traffic = spec.node.nccl_memory_traffic;
  cg.nic_of_gpu.assign(static_cast<std::size_t>(spec.node.gpus), 0);
  for (std::size_t k = 0; k < spec.node.nics.gpus.size(); ++k)
    for (int g : spec.node.nics.gpus[k])
      cg.nic_of_gpu[static_cast<std::size_t>(g)] = static_cast<int>(k);
  cg.socket_of_gpu.assign(static_cast<std::size_t>(spec.node.gpus), 0);
  cg.socket_of_nic.assign(static_cast<std::size_t>(spec.node.nics.count), 0);
  if (spec.node.pcie)
    for (const auto& sw : spec.node.pcie->switches) {
      for (int g : sw.gpus)
        cg.socket_of_gpu[static_cast<std::size_t>(g)] = sw.socket;
      for (int k : sw.nics)
        cg.socket_of_nic[static_cast<std::size_t>(k)] = sw.socket;
    }
  cg.staged = !spec.gpu.peer_to_peer && spec.node.pcie && spec.node.host.memory_bandwidth > 0;
  Builder b(cg);
  for (int n = 0; n < nodes; ++n)
    build_node(b, cg, spec, n);
  build_network(b, cg, spec);
  cg.blocking = cg.leaf.size() > 1 && (spec.network.oversubscription > 1 || spec.network.core_oversubscription > 1 ||
                                       std::any_of(spec.stragglers.begin(), spec.stragglers.end(),
                                                   [](const Straggler& s) { return s.on_switch(); }));
  return cg;
}

std::vector<EdgeId> route(const ClusterGraph& cg, int src_gpu, int dst_gpu)
{
  const int src_node = src_gpu / cg.gpus_per_node;
  const int dst_node = dst_gpu / cg.gpus_per_node;
  const VertexId src = cg.gpu[static_cast<std::size_t>(src_gpu)];
  const VertexId dst = cg.gpu[static_cast<std::size_t>(dst_gpu)];
  const auto local_socket = [&cg](int gpu) {
    return cg.socket_of_gpu[static_cast<std::size_t>(gpu % cg.gpus_per_node)];
  };
  const auto nic_socket = [&cg](int gpu) {
    return cg.socket_of_nic[static_cast<std::size_t>(cg.nic_of_gpu[static_cast<std::size_t>(gpu % cg.gpus_per_node)])];
  };
  if (src_node == dst_node)
    return node_path(cg, src, dst, local_socket(dst_gpu));

  const VertexId src_nic =
      cg.nic[static_cast<std::size_t>(src_node)]
            [static_cast<std::size_t>(cg.nic_of_gpu[static_cast<std::size_t>(src_gpu % cg.gpus_per_node)])];
  const VertexId dst_nic =
      cg.nic[static_cast<std::size_t>(dst_node)]
            [static_cast<std::size_t>(cg.nic_of_gpu[static_cast<std::size_t>(dst_gpu % cg.gpus_per_node)])];
  std::vector<EdgeId> path = node_path(cg, src, src_nic, nic_socket(src_gpu));
  const std::size_t src_group = static_cast<std::size_t>(src_node / cg.nodes_per_leaf);
  const std::size_t dst_group = static_cast<std::size_t>(dst_node / cg.nodes_per_leaf);
  std::vector<VertexId> hops{src_nic, cg.leaf[src_group]};
  if (src_group != dst_group) {
    const std::size_t src_pod = src_group / static_cast<std::size_t>(cg.leaves_per_pod);
    const std::size_t dst_pod = dst_group / static_cast<std::size_t>(cg.leaves_per_pod);
    hops.push_back(cg.spine[src_pod]);
    if (src_pod != dst_pod) {
      hops.push_back(*cg.core);
      hops.push_back(cg.spine[dst_pod]);
    }
    hops.push_back(cg.leaf[dst_group]);
  }
  hops.push_back(dst_nic);
  for (std::size_t i = 0; i + 1 < hops.size(); ++i)
    path.push_back(edge_between(cg, hops[i], hops[i + 1]));
  const auto tail = node_path(cg, dst_nic, dst, nic_socket(dst_gpu));
  path.insert(path.end(), tail.begin(), tail.end());
  return path;
}

std::vector<EdgeId> route_to_network(const ClusterGraph& cg, int gpu)
{
  const int node = gpu / cg.gpus_per_node;
  const int k = cg.nic_of_gpu[static_cast<std::size_t>(gpu % cg.gpus_per_node)];
  const VertexId nic = cg.nic[static_cast<std::size_t>(node)][static_cast<std::size_t>(k)];
  auto path = node_path(cg, cg.gpu[static_cast<std::size_t>(gpu)], nic, cg.socket_of_nic[static_cast<std::size_t>(k)]);
  path.push_back(edge_between(cg, nic, cg.leaf[static_cast<std::size_t>(node / cg.nodes_per_leaf)]));
  return path;
}

std::vector<EdgeId> route_to_host_memory(const ClusterGraph& cg, int gpu)
{
  const auto& memory = cg.host_memory.at(static_cast<std::size_t>(gpu / cg.gpus_per_node));
  const int socket = cg.socket_of_gpu[static_cast<std::size_t>(gpu % cg.gpus_per_node)];
  if (static_cast<std::size_t>(socket) >= memory.size())
    throw std::logic_error("node " + std::to_string(gpu / cg.gpus_per_node) + " has no host memory to offload to");
  return path_in_node(cg, cg.gpu[static_cast<std::size_t>(gpu)], memory[static_cast<std::size_t>(socket)]);
}

std::vector<EdgeId> route_to_nvme(const ClusterGraph& cg, int node, int socket, int drive)
{
  const auto& memory = cg.host_memory.at(static_cast<std::size_t>(node));
  const auto& drives = cg.nvme.at(static_cast<std::size_t>(node));
  if (static_cast<std::size_t>(socket) >= memory.size() || static_cast<std::size_t>(drive) >= drives.size())
    throw std::logic_error("node " + std::to_string(node) + " has no NVMe drive " + std::to_string(drive));
  return path_in_node(cg, memory[static_cast<std::size_t>(socket)], drives[static_cast<std::size_t>(drive)]);
}

std::vector<EdgeId> route_to_nvme(const ClusterGraph& cg, int gpu, int drive)
{
  return route_to_nvme(cg, gpu / cg.gpus_per_node, cg.socket_of_gpu[static_cast<std::size_t>(gpu % cg.gpus_per_node)],
                       drive);
}

std::vector<bool> link_directions(const ClusterGraph& cg, VertexId from, const std::vector<EdgeId>& links)
{
  std::vector<bool> forward;
  forward.reserve(links.size());
  VertexId at = from;
  for (EdgeId e : links) {
    const Link& l = cg.graph[e];
    const bool f = l.from == at;
    forward.push_back(f);
    at = f ? l.to : l.from;
  }
  return forward;
}

double route_latency(const ClusterGraph& cg, const std::vector<EdgeId>& links)
{
  double latency = 0;
  for (EdgeId e : links)
    latency += cg.graph[e].latency;
  return latency;
}

void check_graph(const ClusterGraph& cg, const std::string& topology_name)
{
  const Graph& g = cg.graph;
  const core::Location where{"topology '" + topology_name + "'", "", ""};
  for (auto [e, end] = boost::edges(g); e != end; ++e)
    if (!(g[*e].bandwidth > 0))
      throw core::InputError(where, "link " + cg.link_name(*e) + " has no bandwidth");
  if (cg.gpu.empty())
    throw core::InputError(where, "has no GPU");
  // Every GPU reaches GPU 0 along a route (so every pair is connected, routes being symmetric).
  for (std::size_t i = 1; i < cg.gpu.size(); ++i)
    if (route(cg, static_cast<int>(i), 0).empty())
      throw core::InputError(where, cg.device_name(cg.gpu[i]) + " cannot reach " + cg.device_name(cg.gpu[0]));
}

double bisection_bandwidth(const ClusterGraph& cg)
{
  // listS out-edge lists: edge descriptors (stored as reverse edges) stay valid while edges are added.
  using Traits = boost::adjacency_list_traits<boost::listS, boost::vecS, boost::directedS>;
  using FlowGraph = boost::adjacency_list<
      boost::listS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, std::int64_t,
                      boost::property<boost::edge_residual_capacity_t, std::int64_t,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  const Graph& g = cg.graph;
  const std::size_t n = boost::num_vertices(g);
  FlowGraph f(n + 2);
  auto capacity = boost::get(boost::edge_capacity, f);
  auto reverse = boost::get(boost::edge_reverse, f);
  // Each direction of a link is its own arc with a zero-capacity reverse (push-relabel's convention); integer
  // capacities in bytes/s keep its flow-conservation check exact.
  auto arc = [&](std::size_t a, std::size_t b, std::int64_t cap) {
    const auto e1 = boost::add_edge(a, b, f).first;
    const auto e2 = boost::add_edge(b, a, f).first;
    capacity[e1] = cap;
    capacity[e2] = 0;
    reverse[e1] = e2;
    reverse[e2] = e1;
  };
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const auto bandwidth = static_cast<std::int64_t>(std::llround(g[*e].bandwidth));
    arc(boost::source(*e, g), boost::target(*e, g), bandwidth);
    arc(boost::target(*e, g), boost::source(*e, g), bandwidth);
  }
  const std::size_t source = n;
  const std::size_t sink = n + 1;
  const auto half = cg.gpu.size() / 2;
  for (std::size_t i = 0; i < cg.gpu.size(); ++i) {
    // Whole nodes on each side when there are several; GPUs of the one node otherwise.
    const bool first = cg.nodes > 1
                           ? (i / static_cast<std::size_t>(cg.gpus_per_node)) < static_cast<std::size_t>(cg.nodes / 2)
                           : i < half;
    if (cg.nodes > 1 && cg.nodes % 2 == 1 &&
        i / static_cast<std::size_t>(cg.gpus_per_node) == static_cast<std::size_t>(cg.nodes / 2))
      continue; // an odd node out stays out of the cut
    // A GPU cannot inject more than its links carry; a bounded source arc also keeps the preflow in range.
    std::int64_t injection = 0;
    for (auto [e, end] = boost::out_edges(cg.gpu[i], g); e != end; ++e)
      injection += static_cast<std::int64_t>(std::llround(g[*e].bandwidth));
    if (first)
      arc(source, cg.gpu[i], injection);
    else
      arc(cg.gpu[i], sink, injection);
  }
  return static_cast<double>(boost::push_relabel_max_flow(f, source, sink));
}

std::string to_dot(const ClusterGraph& cg, const std::string& title)
{
  const Graph& g = cg.graph;
  std::string out = fmt::format("graph \"{}\" {{\n  graph [rankdir=TB, fontname=\"Helvetica\"];\n"
                                "  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontsize=8];\n",
                                title);
  auto shape = [](DeviceKind k) {
    switch (k) {
      case DeviceKind::GPU:
        return "box, style=filled, fillcolor=\"#9ecae1\"";
      case DeviceKind::NIC:
        return "box, style=filled, fillcolor=\"#fdd0a2\"";
      case DeviceKind::CPU:
        return "box, style=filled, fillcolor=\"#d9d9d9\"";
      case DeviceKind::HOST_MEMORY:
      case DeviceKind::NVME:
        return "box, style=filled, fillcolor=\"#c7e9c0\"";
      default:
        return "ellipse";
    }
  };
  std::map<int, std::vector<VertexId>> by_node;
  for (auto [v, end] = boost::vertices(g); v != end; ++v)
    by_node[g[*v].node].push_back(*v);
  for (const auto& [node, vertices] : by_node) {
    const std::string indent = node >= 0 ? "    " : "  ";
    if (node >= 0)
      out += fmt::format("  subgraph cluster_n{} {{\n    label=\"node {}\";\n", node, node);
    for (VertexId v : vertices)
      out += fmt::format("{}\"{}\" [shape={}];\n", indent, cg.device_name(v), shape(g[v].kind));
    if (node >= 0)
      out += "  }\n";
  }
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const Link& l = g[*e];
    out += fmt::format("  \"{}\" -- \"{}\" [label=\"{} {:.4g} GB/s\"];\n", cg.device_name(l.from), cg.device_name(l.to),
                       core::choice_name(l.cls, link_class_choices), l.bandwidth / 1e9);
  }
  out += "}\n";
  return out;
}

} // namespace sim::topology

namespace sim::topology {

ClusterSummary summarize(const ClusterGraph& cg)
{
  const Graph& g = cg.graph;
  ClusterSummary s;
  s.gpus = cg.gpus();
  s.nodes = cg.nodes;
  for (auto [v, end] = boost::vertices(g); v != end; ++v)
    ++s.devices[g[*v].kind];
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    auto& c = s.links[g[*e].cls];
    ++c.count;
    c.total_bandwidth += g[*e].bandwidth;
  }
  // A GPU's own NVLink and PCIe links; its share of node 0's NIC cables and inter-socket links.
  const VertexId gpu0 = cg.gpu.front();
  for (auto [e, end] = boost::out_edges(gpu0, g); e != end; ++e)
    if (g[*e].cls == LinkClass::NVLINK || g[*e].cls == LinkClass::PCIE)
      s.links[g[*e].cls].per_gpu_bandwidth += g[*e].bandwidth;
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const Device& a = g[boost::source(*e, g)];
    const Device& b = g[boost::target(*e, g)];
    const bool node0_nic_cable = (a.kind == DeviceKind::NIC && a.node == 0 && b.node < 0) ||
                                 (b.kind == DeviceKind::NIC && b.node == 0 && a.node < 0);
    const bool node0_socket_link =
        a.kind == DeviceKind::CPU && a.node == 0 && (b.kind == DeviceKind::CPU || b.kind == DeviceKind::HOST_MEMORY);
    if (node0_nic_cable || node0_socket_link)
      s.links[g[*e].cls].per_gpu_bandwidth += g[*e].bandwidth / cg.gpus_per_node;
  }
  s.bisection_bandwidth = bisection_bandwidth(cg);
  return s;
}

std::string_view link_label(LinkClass c, hardware::Vendor vendor)
{
  switch (c) {
    case LinkClass::NVLINK:
      return vendor == hardware::Vendor::AMD ? "Infinity Fabric" : "NVLink";
    case LinkClass::PCIE:
      return "PCIe";
    case LinkClass::IB:
      return "InfiniBand";
    case LinkClass::ETHERNET:
      return "Ethernet";
    case LinkClass::CPU:
      return "CPU-CPU";
    case LinkClass::DRAM:
      return "DRAM";
  }
  return "";
}

std::string link_label(std::string_view key, hardware::Vendor vendor)
{
  for (const auto& c : link_class_choices)
    if (c.name == key)
      return std::string(link_label(c.value, vendor));
  return std::string(key);
}

} // namespace sim::topology
