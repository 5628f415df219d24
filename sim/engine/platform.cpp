#include "engine/platform.hpp"

#include <fmt/format.h>

namespace sim::engine {
namespace sg4 = simgrid::s4u;
using topology::ClusterGraph;
using topology::EdgeId;
using Direction = sg4::LinkInRoute::Direction;

namespace {

class PlatformBuilder {
 public:
  PlatformBuilder(const ClusterGraph& cg, Platform& p) : cg_(cg), p_(p)
  {
    p_.gpu.resize(cg.gpu.size());
    p_.host_memory.resize(cg.gpu.size());
    p_.nvme.resize(cg.gpu.size());
    p_.link.resize(boost::num_edges(cg.graph));
  }

  // The split-duplex SimGrid link of a graph edge, created on first use in `zone`.
  sg4::SplitDuplexLink* ensure_link(sg4::NetZone* zone, EdgeId e)
  {
    const auto& l = cg_.graph[e];
    if (p_.link[l.id] == nullptr) {
      p_.link[l.id] = zone->create_split_duplex_link(cg_.link_name(e), l.bandwidth * l.efficiency);
      p_.link[l.id]->set_latency(0)->seal();
    }
    return p_.link[l.id];
  }

  std::vector<sg4::LinkInRoute> links_of(sg4::NetZone* zone, topology::VertexId from, const std::vector<EdgeId>& path)
  {
    const auto forward = topology::link_directions(cg_, from, path);
    std::vector<sg4::LinkInRoute> out;
    for (std::size_t i = 0; i < path.size(); ++i)
      out.emplace_back(ensure_link(zone, path[i]), forward[i] ? Direction::UP : Direction::DOWN);
    return out;
  }

  // A full zone per rack of consecutive nodes (within one leaf group): their GPUs, a gateway towards the
  // network, every route between them. Racks rather than single nodes keep the zone count low: SimGrid 3.32
  // checks each new link's name against every zone.
  sg4::NetZone* rack_zone(int first_node, int nodes, const sg4::NetZone* parent,
                          simgrid::kernel::routing::NetPoint** gateway)
  {
    auto* zone = sg4::create_full_zone(fmt::format("rack{}", first_node));
    if (parent != nullptr)
      zone->set_parent(parent);
    const int per_node = cg_.gpus_per_node;
    std::vector<int> gpus;
    for (int g = first_node * per_node; g < (first_node + nodes) * per_node; ++g) {
      gpus.push_back(g);
      p_.gpu[static_cast<std::size_t>(g)] =
          zone->create_host(cg_.device_name(cg_.gpu[static_cast<std::size_t>(g)]), host_speed)->seal();
    }
    auto* gw = zone->create_router(fmt::format("rack{}.gw", first_node));
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      const int a = gpus[i];
      auto* ha = p_.gpu[static_cast<std::size_t>(a)];
      const auto from = cg_.gpu[static_cast<std::size_t>(a)];
      for (std::size_t j = i + 1; j < gpus.size(); ++j) {
        // Staged in host memory, a route and its way back cross different sockets' memory: each is its own.
        auto* hb = p_.gpu[static_cast<std::size_t>(gpus[j])];
        zone->add_route(ha->get_netpoint(), hb->get_netpoint(), nullptr, nullptr,
                        links_of(zone, from, topology::route(cg_, a, gpus[j])), !cg_.staged);
        if (cg_.staged)
          zone->add_route(hb->get_netpoint(), ha->get_netpoint(), nullptr, nullptr,
                          links_of(zone, cg_.gpu[static_cast<std::size_t>(gpus[j])], topology::route(cg_, gpus[j], a)),
                          false);
      }
      if (cg_.nodes > nodes)
        zone->add_route(ha->get_netpoint(), gw, nullptr, nullptr,
                        links_of(zone, from, topology::route_to_network(cg_, a)), true);
    }
    // Each socket's memory, where its GPUs offload: a host per socket, a route from each GPU to its own socket's.
    for (int n = first_node; n < first_node + nodes; ++n) {
      const auto& memory = cg_.host_memory[static_cast<std::size_t>(n)];
      std::vector<sg4::Host*> hosts;
      for (auto v : memory)
        hosts.push_back(zone->create_host(cg_.device_name(v), host_speed)->seal());
      if (hosts.empty())
        continue;
      // Its NVMe drives, each reached from every socket's memory.
      std::vector<sg4::Host*> drives;
      for (auto v : cg_.nvme[static_cast<std::size_t>(n)])
        drives.push_back(zone->create_host(cg_.device_name(v), host_speed)->seal());
      for (int g = n * per_node; g < (n + 1) * per_node; ++g) {
        const int socket = cg_.socket_of_gpu[static_cast<std::size_t>(g % per_node)];
        auto* memory_host = hosts[static_cast<std::size_t>(socket)];
        p_.host_memory[static_cast<std::size_t>(g)] = memory_host;
        p_.nvme[static_cast<std::size_t>(g)] = drives;
        zone->add_route(
            p_.gpu[static_cast<std::size_t>(g)]->get_netpoint(), memory_host->get_netpoint(), nullptr, nullptr,
            links_of(zone, cg_.gpu[static_cast<std::size_t>(g)], topology::route_to_host_memory(cg_, g)), true);
      }
      for (std::size_t s = 0; s < hosts.size(); ++s)
        for (std::size_t d = 0; d < drives.size(); ++d)
          zone->add_route(hosts[s]->get_netpoint(), drives[d]->get_netpoint(), nullptr, nullptr,
                          links_of(zone, cg_.host_memory[static_cast<std::size_t>(n)][s],
                                   topology::route_to_nvme(cg_, n, static_cast<int>(s), static_cast<int>(d))),
                          true);
    }
    zone->seal();
    *gateway = gw;
    return zone;
  }

  // A star zone whose children reach its centre through `uplinks` (empty: a non-blocking switch).
  static sg4::NetZone* star(const std::string& name, const sg4::NetZone* parent)
  {
    auto* zone = sg4::create_star_zone(name);
    if (parent != nullptr)
      zone->set_parent(parent);
    return zone;
  }

  // A zone's gateway must not sit directly in an ancestor of the other endpoint: give it its own child zone.
  static simgrid::kernel::routing::NetPoint* gateway_zone(sg4::NetZone* parent, const std::string& name)
  {
    auto* zone = sg4::create_star_zone(name + ".gwzone");
    zone->set_parent(parent);
    auto* router = zone->create_router(name + ".gw");
    zone->seal();
    parent->add_route(zone->get_netpoint(), nullptr, router, nullptr, {}, true);
    return router;
  }

  // Up to 64 GPUs per rack zone: few zones, and each zone's full routing table stays small.
  int rack_nodes() const { return std::max(1, std::min(cg_.nodes_per_leaf, 64 / cg_.gpus_per_node)); }

  void leaf_children(sg4::NetZone* leaf, int group)
  {
    const int first = group * cg_.nodes_per_leaf;
    const int last = std::min(cg_.nodes, first + cg_.nodes_per_leaf);
    for (int n = first; n < last; n += rack_nodes()) {
      const int nodes = std::min(rack_nodes(), last - n);
      simgrid::kernel::routing::NetPoint* gw = nullptr;
      auto* rz = rack_zone(n, nodes, leaf, &gw);
      leaf->add_route(rz->get_netpoint(), nullptr, gw, nullptr, {}, true);
    }
  }

  void build()
  {
    if (cg_.nodes <= rack_nodes()) {
      simgrid::kernel::routing::NetPoint* gw = nullptr;
      rack_zone(0, cg_.nodes, nullptr, &gw);
      return;
    }
    const auto groups = cg_.leaf.size();
    if (groups == 1) {
      auto* leaf = star("leaf0", nullptr);
      leaf_children(leaf, 0);
      leaf->seal();
      return;
    }
    const bool pods = cg_.core.has_value();
    auto* top = star(pods ? "core" : "spine0", nullptr);
    std::vector<sg4::NetZone*> pod_zone;
    if (pods) {
      for (std::size_t p = 0; p < cg_.spine.size(); ++p) {
        auto* pz = star(fmt::format("pod{}", p), top);
        pod_zone.push_back(pz);
      }
    }
    for (std::size_t g = 0; g < groups; ++g) {
      const std::size_t pod = g / static_cast<std::size_t>(cg_.leaves_per_pod);
      sg4::NetZone* parent = pods ? pod_zone[pod] : top;
      auto* leaf = star(fmt::format("leaf{}", g), parent);
      leaf_children(leaf, static_cast<int>(g));
      auto* gw = gateway_zone(leaf, fmt::format("leaf{}", g));
      leaf->seal();
      const EdgeId up = boost::edge(cg_.leaf[g], cg_.spine[pod], cg_.graph).first;
      parent->add_route(leaf->get_netpoint(), nullptr, gw, nullptr, links_of(parent, cg_.leaf[g], {up}), true);
    }
    if (pods) {
      for (std::size_t p = 0; p < pod_zone.size(); ++p) {
        auto* gw = gateway_zone(pod_zone[p], fmt::format("pod{}", p));
        pod_zone[p]->seal();
        const EdgeId up = boost::edge(cg_.spine[p], *cg_.core, cg_.graph).first;
        top->add_route(pod_zone[p]->get_netpoint(), nullptr, gw, nullptr, links_of(top, cg_.spine[p], {up}), true);
      }
    }
    top->seal();
  }

 private:
  const ClusterGraph& cg_;
  Platform& p_;
};

} // namespace

// One star zone holding the simulated GPUs and the classes' links, and full zones of up to 64 endpoints, each a pair
// of hosts and its route (a star zone would keep a link that a route crosses twice only once).
Platform build_folded_platform(const ClusterGraph& cg, const std::vector<int>& simulated,
                               const std::vector<std::vector<std::uint32_t>>& routes, const std::vector<bool>& metered)
{
  // Far above any sum of rates, so that it never limits a flow (nor changes max-min's order of saturation).
  constexpr double meter_bandwidth = 1e18;
  Platform p;
  p.gpu.resize(cg.gpu.size());
  p.link.resize(boost::num_edges(cg.graph));
  auto* root = sg4::create_star_zone("folded");
  for (int g : simulated)
    p.gpu[static_cast<std::size_t>(g)] =
        root->create_host(cg.device_name(cg.gpu[static_cast<std::size_t>(g)]), host_speed)->seal();
  std::vector<EdgeId> by_id(p.link.size());
  for (auto [e, end] = boost::edges(cg.graph); e != end; ++e)
    by_id[cg.graph[*e].id] = *e;
  auto link = [&](std::uint32_t directed) {
    const std::size_t id = directed / 2;
    auto*& l = p.link[id];
    if (l == nullptr) {
      const auto& edge = cg.graph[by_id[id]];
      l = root->create_split_duplex_link(cg.link_name(by_id[id]), edge.bandwidth * edge.efficiency);
      l->set_latency(0)->seal();
    }
    return sg4::LinkInRoute(l, directed % 2 == 0 ? Direction::UP : Direction::DOWN);
  };
  constexpr std::size_t per_zone = 64;
  for (std::size_t first = 0; first < routes.size(); first += per_zone) {
    auto* zone = sg4::create_full_zone(fmt::format("endpoints{}", first / per_zone));
    zone->set_parent(root);
    auto* sink = zone->create_host(fmt::format("endpoints{}.sink", first / per_zone), 1e9)->seal();
    for (std::size_t i = first; i < std::min(routes.size(), first + per_zone); ++i) {
      auto* source = zone->create_host(fmt::format("endpoint{}", i), 1e9)->seal();
      std::vector<sg4::LinkInRoute> links;
      for (std::uint32_t d : routes[i])
        links.push_back(link(d));
      p.meter.push_back(nullptr);
      if (metered[i]) {
        p.meter.back() = root->create_link(fmt::format("meter{}", i), meter_bandwidth)->set_latency(0)->seal();
        links.emplace_back(p.meter.back());
      }
      zone->add_route(source->get_netpoint(), sink->get_netpoint(), nullptr, nullptr, links, false);
      p.endpoint.emplace_back(source, sink);
    }
    zone->seal();
  }
  root->seal();
  return p;
}

void configure_network_model()
{
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:0");
}

Platform build_platform(const ClusterGraph& g)
{
  Platform p;
  PlatformBuilder(g, p).build();
  return p;
}

} // namespace sim::engine
