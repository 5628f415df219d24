#include "topology/symmetry.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <set>

namespace sim::topology {
namespace {

constexpr VertexId unmapped = std::numeric_limits<VertexId>::max();

bool is_switch(const Device& d)
{
  return d.kind == DeviceKind::LEAF || d.kind == DeviceKind::SPINE || d.kind == DeviceKind::CORE;
}

// The host's side of a node's PCIe tree: its switches, CPU sockets, their memory and NVMe drives.
bool is_host_side(const Device& d)
{
  return d.kind == DeviceKind::PCIE_SWITCH || d.kind == DeviceKind::CPU || d.kind == DeviceKind::HOST_MEMORY ||
         d.kind == DeviceKind::NVME;
}

bool same_link(const Link& a, const Link& b)
{
  return a.cls == b.cls && a.bandwidth == b.bandwidth && a.latency == b.latency && a.efficiency == b.efficiency;
}

class Extension {
 public:
  Extension(const ClusterGraph& g, bool network, bool host) : g_(g), network_(network), host_(host)
  {
    const auto n = boost::num_vertices(g.graph);
    map_.assign(n, unmapped);
    used_.assign(n, false);
  }

  // Maps the GPUs as given (and, when the host's side does not count, each GPU's NIC onto its image's), then every
  // other device (the switches only when the network counts, the host's side only when it does) onto the one
  // adjacent to the images of its mapped neighbours, the first such where several are.
  bool extend(const std::vector<int>& gpu_perm)
  {
    std::deque<VertexId> queue;
    node_map_.assign(static_cast<std::size_t>(g_.nodes), -1);
    for (std::size_t i = 0; i < gpu_perm.size(); ++i) {
      const VertexId from = g_.gpu[i];
      const VertexId to = g_.gpu[static_cast<std::size_t>(gpu_perm[i])];
      if (used_[to])
        return false;
      auto& node = node_map_[static_cast<std::size_t>(g_.graph[from].node)];
      if (node >= 0 && node != g_.graph[to].node)
        return false; // a node's GPUs must stay together
      node = g_.graph[to].node;
      map_[from] = to;
      used_[to] = true;
      queue.push_back(from);
    }
    if (!host_ && !map_nics(gpu_perm, queue))
      return false;
    while (!queue.empty()) {
      const VertexId u = queue.front();
      queue.pop_front();
      for (auto [e, end] = boost::out_edges(u, g_.graph); e != end; ++e) {
        const VertexId v = boost::target(*e, g_.graph);
        if (map_[v] != unmapped || !counted(g_.graph[v]))
          continue;
        const VertexId w = image_of(v, map_[u]);
        if (w == unmapped)
          return false;
        map_[v] = w;
        used_[w] = true;
        queue.push_back(v);
      }
    }
    return true;
  }

  // The link directions' permutation, if every link has an image of the same kind.
  std::optional<std::vector<std::uint32_t>> links() const
  {
    const auto& graph = g_.graph;
    std::vector<std::uint32_t> perm(2 * boost::num_edges(graph));
    for (auto [e, end] = boost::edges(graph); e != end; ++e) {
      const Link& l = graph[*e];
      const bool from_counted = counted(graph[l.from]);
      const bool to_counted = counted(graph[l.to]);
      // Links among what does not count carry no flow of the plan: left where they are; so is the link from a NIC that
      // no GPU uses to the host's side or a network that does not count.
      const VertexId anchor = from_counted ? l.from : l.to; // an end that is mapped
      if ((!from_counted && !to_counted) || (from_counted != to_counted && map_[anchor] == unmapped)) {
        perm[directed(l.id, true)] = directed(l.id, true);
        perm[directed(l.id, false)] = directed(l.id, false);
        continue;
      }
      std::optional<EdgeId> image;
      if (!from_counted || !to_counted) {
        image = link_to_kind(map_[anchor], graph[anchor == l.from ? l.to : l.from].kind);
      } else if (map_[l.from] != unmapped && map_[l.to] != unmapped) {
        const auto [found, exists] = boost::edge(map_[l.from], map_[l.to], graph);
        if (exists)
          image = found;
      }
      if (!image || !same_link(l, graph[*image]))
        return std::nullopt;
      const Link& m = graph[*image];
      const bool kept = (anchor == l.from) == (map_[anchor] == m.from); // its `from` end maps onto the image's
      perm[directed(l.id, true)] = directed(m.id, kept);
      perm[directed(l.id, false)] = directed(m.id, !kept);
    }
    return perm;
  }

  const std::vector<int>& node_map() const { return node_map_; }

 private:
  // The device `v` maps onto: a neighbour of `near` (the image of a neighbour of v) of v's kind, in v's node's image,
  // not taken, adjacent to the image of every mapped neighbour of v.
  VertexId image_of(VertexId v, VertexId near) const
  {
    const auto& graph = g_.graph;
    const Device& d = graph[v];
    for (auto [e, end] = boost::out_edges(near, graph); e != end; ++e) {
      const VertexId w = boost::target(*e, graph);
      if (used_[w] || graph[w].kind != d.kind)
        continue;
      if (d.node >= 0 && graph[w].node != node_map_[static_cast<std::size_t>(d.node)])
        continue;
      bool fits = true;
      for (auto [f, fend] = boost::out_edges(v, graph); f != fend && fits; ++f) {
        const VertexId x = boost::target(*f, graph);
        if (map_[x] != unmapped)
          fits = boost::edge(map_[x], w, graph).second;
      }
      if (fits)
        return w;
    }
    return unmapped;
  }

  // Whether the automorphism must map this device: not a network switch unless the network counts, not the host's
  // side unless the host does (the plan sends something through host memory).
  bool counted(const Device& d) const { return (network_ || !is_switch(d)) && (host_ || !is_host_side(d)); }

  // The link from a device to the neighbour of a kind that it has one of (the switch a NIC or GPU hangs from).
  std::optional<EdgeId> link_to_kind(VertexId v, DeviceKind kind) const
  {
    for (auto [e, end] = boost::out_edges(v, g_.graph); e != end; ++e)
      if (g_.graph[boost::target(*e, g_.graph)].kind == kind)
        return *e;
    return std::nullopt;
  }

  // Each GPU's NIC onto the NIC of the GPU's image (reached through the host's side otherwise).
  bool map_nics(const std::vector<int>& gpu_perm, std::deque<VertexId>& queue)
  {
    const auto nic = [this](int gpu) {
      return g_.nic[static_cast<std::size_t>(gpu / g_.gpus_per_node)]
                   [static_cast<std::size_t>(g_.nic_of_gpu[static_cast<std::size_t>(gpu % g_.gpus_per_node)])];
    };
    for (std::size_t i = 0; i < gpu_perm.size(); ++i) {
      const VertexId from = nic(static_cast<int>(i));
      const VertexId to = nic(gpu_perm[i]);
      if (map_[from] == to)
        continue;
      if (map_[from] != unmapped || used_[to])
        return false;
      map_[from] = to;
      used_[to] = true;
      queue.push_back(from);
    }
    return true;
  }

  const ClusterGraph& g_;
  const bool network_;
  const bool host_;
  std::vector<VertexId> map_;
  std::vector<bool> used_;
  std::vector<int> node_map_;
};

// A route as link directions.
std::vector<std::uint32_t> directions(const ClusterGraph& g, int from_gpu, const std::vector<EdgeId>& path)
{
  const auto forward = link_directions(g, g.gpu[static_cast<std::size_t>(from_gpu)], path);
  std::vector<std::uint32_t> out;
  for (std::size_t k = 0; k < path.size(); ++k)
    out.push_back(directed(g.graph[path[k]].id, forward[k]));
  return out;
}

// Whether every route between two GPUs of a node is its only shortest path (GPUs and NICs forwarding nothing, as
// topology::route walks): then an automorphism maps each route onto the route between the images. Counted in the
// first node; every node is built alike.
bool unique_paths_in_node(const ClusterGraph& g)
{
  const auto& graph = g.graph;
  for (int i = 0; i < g.gpus_per_node; ++i) {
    const VertexId src = g.gpu[static_cast<std::size_t>(i)];
    std::map<VertexId, std::pair<int, int>> reached{{src, {0, 1}}}; // vertex -> (hops, shortest paths to it)
    std::deque<VertexId> queue{src};
    while (!queue.empty()) {
      const VertexId u = queue.front();
      queue.pop_front();
      if (u != src && (graph[u].kind == DeviceKind::GPU || graph[u].kind == DeviceKind::NIC))
        continue;
      const auto [hops, paths] = reached.at(u);
      for (auto [e, end] = boost::out_edges(u, graph); e != end; ++e) {
        const VertexId v = boost::target(*e, graph);
        if (graph[v].node != 0)
          continue;
        const auto [at, added] = reached.try_emplace(v, hops + 1, 0);
        if (added)
          queue.push_back(v);
        if (at->second.first == hops + 1)
          at->second.second += paths;
      }
    }
    for (int j = 0; j < g.gpus_per_node; ++j) {
      const auto found = reached.find(g.gpu[static_cast<std::size_t>(j)]);
      if (j != i && found != reached.end() && found->second.second > 1)
        return false;
    }
  }
  return true;
}

// Whether the routes the cluster picks (the NIC a GPU uses, the first of several shortest paths inside a node) map
// onto the routes it picks between the images: checked inside one node per distinct way the permutation moves a
// node's GPUs (every node is built alike, and the network above the NICs is a tree); the paths between GPUs only
// where some have more than one shortest path or the host's side did not count.
bool routes_follow(const ClusterGraph& g, const std::vector<int>& gpu_perm, const std::vector<std::uint32_t>& links,
                   bool host_counted)
{
  const int per_node = g.gpus_per_node;
  // Where the host's side was left out of the automorphism, a route through it may not map: check them all.
  const bool unique = unique_paths_in_node(g) && host_counted;
  std::set<std::vector<int>> seen; // local permutations checked
  for (int n = 0; n < g.nodes; ++n) {
    std::vector<int> local;
    for (int i = 0; i < per_node; ++i)
      local.push_back(gpu_perm[static_cast<std::size_t>(n * per_node + i)] % per_node);
    if (!seen.insert(local).second)
      continue;
    for (int i = 0; i < per_node; ++i) {
      const int a = n * per_node + i;
      const int pa = gpu_perm[static_cast<std::size_t>(a)];
      auto mapped = [&](std::vector<std::uint32_t> path) {
        for (auto& d : path)
          d = links[d];
        return path;
      };
      if (g.nodes > 1 && mapped(directions(g, a, route_to_network(g, a))) != directions(g, pa, route_to_network(g, pa)))
        return false;
      for (int j = 0; j < per_node && !unique; ++j) {
        const int b = n * per_node + j;
        const int pb = gpu_perm[static_cast<std::size_t>(b)];
        if (i != j && mapped(directions(g, a, route(g, a, b))) != directions(g, pa, route(g, pa, pb)))
          return false;
      }
    }
  }
  return true;
}

} // namespace

std::optional<std::vector<std::uint32_t>> link_permutation(const ClusterGraph& g, const ClusterSpec& spec,
                                                           const std::vector<int>& gpu_perm, bool host_traffic)
{
  if (gpu_perm.size() != g.gpu.size())
    return std::nullopt;
  for (std::size_t i = 0; i < gpu_perm.size(); ++i)
    if (compute_share(spec, static_cast<int>(i)) != compute_share(spec, gpu_perm[i]) ||
        gpu_kind(spec, static_cast<int>(i)) != gpu_kind(spec, gpu_perm[i]))
      return std::nullopt;
  const bool blocking = g.blocking;
  const auto with_host = [&](bool host) -> std::optional<std::vector<std::uint32_t>> {
    Extension x(g, blocking, host);
    if (!x.extend(gpu_perm))
      return std::nullopt;
    auto links = x.links();
    if (links && !routes_follow(g, gpu_perm, *links, host))
      return std::nullopt;
    return links;
  };
  // The whole node first (routes through the host's side map with it); where nothing goes through host memory and
  // the host's side breaks the symmetry (GPUs sharing PCIe switches unevenly for what they send), without it.
  auto links = with_host(true);
  if (!links && !host_traffic && !g.staged)
    links = with_host(false);
  return links;
}

} // namespace sim::topology
