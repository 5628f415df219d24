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
  PlatformBuilder(const ClusterGraph& cg, Platform& p, const std::vector<int>& active) : cg_(cg), p_(p)
  {
    p_.gpu.resize(static_cast<std::size_t>(topology::endpoint_count(cg)));
    p_.link.resize(boost::num_edges(cg.graph));
    folded_ = !active.empty();
    active_.assign(cg.gpu.size(), !folded_);
    for (int g : active)
      active_[static_cast<std::size_t>(g)] = true;
    for (int k = 0; k < speed_levels; ++k)
      speeds_.push_back(host_speed * (speed_levels - k) / speed_levels);
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
    for (int g = first_node * per_node; g < (first_node + nodes) * per_node; ++g)
      if (active_[static_cast<std::size_t>(g)])
        gpus.push_back(g);
    for (int g : gpus) {
      const std::string name = cg_.device_name(cg_.gpu[static_cast<std::size_t>(g)]);
      p_.gpu[static_cast<std::size_t>(g)] = zone->create_host(name, speeds_)->seal();
      if (folded_)
        for (int m : mirrors(g))
          p_.gpu[static_cast<std::size_t>(m)] = zone->create_host(mirror_name(name, g, m), 1e9)->seal();
    }
    auto* gw = zone->create_router(fmt::format("rack{}.gw", first_node));
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      const int a = gpus[i];
      auto* ha = p_.gpu[static_cast<std::size_t>(a)];
      const auto from = cg_.gpu[static_cast<std::size_t>(a)];
      for (std::size_t j = i + 1; j < gpus.size(); ++j)
        zone->add_route(ha->get_netpoint(), p_.gpu[static_cast<std::size_t>(gpus[j])]->get_netpoint(), nullptr, nullptr,
                        links_of(zone, from, topology::route(cg_, a, gpus[j])), true);
      if (cg_.nodes > nodes)
        zone->add_route(ha->get_netpoint(), gw, nullptr, nullptr,
                        links_of(zone, from, topology::route_to_network(cg_, a)), true);
      if (folded_) // out and back through the GPU's NIC, its NVLink port or each of its mesh links: folded peers
        for (int m : mirrors(a))
          if (const auto loop = topology::route(cg_, a, m); !loop.empty())
            zone->add_route(ha->get_netpoint(), p_.gpu[static_cast<std::size_t>(m)]->get_netpoint(), nullptr, nullptr,
                            links_of(zone, from, loop), false);
    }
    zone->seal();
    *gateway = gw;
    return zone;
  }

  // The endpoints that stand for a folded GPU's peers: through its NIC, its NVSwitch port, its mesh links.
  std::vector<int> mirrors(int gpu) const
  {
    std::vector<int> out{topology::network_mirror(cg_, gpu), topology::nvlink_mirror(cg_, gpu)};
    if (cg_.full_mesh)
      for (int k = 0; k < cg_.gpus_per_node; ++k)
        if (k != gpu % cg_.gpus_per_node)
          out.push_back(topology::peer_mirror(cg_, gpu, k));
    return out;
  }

  std::string mirror_name(const std::string& gpu_name, int gpu, int mirror) const
  {
    if (mirror == topology::network_mirror(cg_, gpu))
      return gpu_name + ".network-mirror";
    if (mirror == topology::nvlink_mirror(cg_, gpu))
      return gpu_name + ".nvlink-mirror";
    return fmt::format("{}.peer{}-mirror", gpu_name, topology::peer_of_mirror(cg_, mirror));
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

  bool any_active(int first_node, int nodes) const
  {
    for (int g = first_node * cg_.gpus_per_node; g < (first_node + nodes) * cg_.gpus_per_node; ++g)
      if (active_[static_cast<std::size_t>(g)])
        return true;
    return false;
  }

  void leaf_children(sg4::NetZone* leaf, int group)
  {
    const int first = group * cg_.nodes_per_leaf;
    const int last = std::min(cg_.nodes, first + cg_.nodes_per_leaf);
    for (int n = first; n < last; n += rack_nodes()) {
      const int nodes = std::min(rack_nodes(), last - n);
      if (!any_active(n, nodes))
        continue;
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
      const int group_first = static_cast<int>(g) * cg_.nodes_per_leaf;
      if (!any_active(group_first, std::min(cg_.nodes_per_leaf, cg_.nodes - group_first)))
        continue;
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
        const int pod_first = static_cast<int>(p) * cg_.leaves_per_pod * cg_.nodes_per_leaf;
        if (!any_active(pod_first, std::min(cg_.leaves_per_pod * cg_.nodes_per_leaf, cg_.nodes - pod_first))) {
          pod_zone[p]->seal();
          continue;
        }
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
  bool folded_ = false;
  std::vector<bool> active_;
  std::vector<double> speeds_; // a GPU host's pstates
};

} // namespace

void configure_network_model()
{
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:0");
}

Platform build_platform(const ClusterGraph& g, const std::vector<int>& active)
{
  Platform p;
  PlatformBuilder(g, p, active).build();
  return p;
}

} // namespace sim::engine
