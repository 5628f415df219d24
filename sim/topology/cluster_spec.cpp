#include "topology/cluster_spec.hpp"

#include <fmt/format.h>
#include <set>

namespace sim::topology {
namespace {

enum class InterconnectKind { NVSWITCH, NVLINK_MESH, PCIE };
constexpr std::array<core::Choice<InterconnectKind>, 3> interconnect_choices{
    {{"nvswitch", InterconnectKind::NVSWITCH},
     {"nvlink_mesh", InterconnectKind::NVLINK_MESH},
     {"pcie", InterconnectKind::PCIE}}};

// PCIe x16 bandwidth per direction by generation: 8/16/32/64 GT/s x 16 lanes x 128/130 encoding.
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

std::vector<int> read_index_list(const core::Node& list, int limit, const std::string& what)
{
  std::vector<int> out;
  const std::size_t n = list.array_size();
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(static_cast<int>(list.element(i).as_integer(0, limit - 1)));
  (void)what;
  return out;
}

IntraNodeFabric read_interconnect(const core::Node& node, const hardware::GpuSpec& gpu, int gpus, int nics)
{
  core::ObjectReader r(node);
  const auto kind = r.choice<InterconnectKind>("kind", interconnect_choices);
  switch (kind) {
    case InterconnectKind::NVSWITCH: {
      NvSwitchFabric f;
      if (auto bw = r.optional_quantity("bandwidth", core::Dimension::BANDWIDTH))
        f.bandwidth = *bw;
      else if (gpu.nvlink_bandwidth > 0)
        f.bandwidth = gpu.nvlink_bandwidth;
      else
        r.at("bandwidth", "")
            .fail_found("GPU " + gpu.name + " has no NVLink bandwidth", "nothing",
                        core::describe(core::Dimension::BANDWIDTH));
      f.latency = r.quantity("latency", core::Dimension::TIME);
      r.finish();
      return f;
    }
    case InterconnectKind::NVLINK_MESH: {
      NvLinkMeshFabric f;
      f.lane_bandwidth = r.quantity("lane_bandwidth", core::Dimension::BANDWIDTH);
      f.latency = r.quantity("latency", core::Dimension::TIME);
      const core::Node links = r.at("links", "an array of [gpu, gpu, lanes]");
      std::set<std::pair<int, int>> seen;
      for (std::size_t i = 0; i < links.array_size(); ++i) {
        const core::Node l = links.element(i);
        if (l.array_size() != 3)
          l.fail("wrong shape", "[gpu, gpu, lanes]");
        NvLinkMeshFabric::Link link{static_cast<int>(l.element(0).as_integer(0, gpus - 1)),
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
    case InterconnectKind::PCIE: {
      PcieFabric f;
      f.link_bandwidth =
          r.quantity_or("link_bandwidth", core::Dimension::BANDWIDTH, pcie_x16_bandwidth(gpu.pcie_generation));
      f.uplink_bandwidth = r.quantity_or("uplink_bandwidth", core::Dimension::BANDWIDTH, f.link_bandwidth);
      f.latency = r.quantity("latency", core::Dimension::TIME);
      const core::Node switches = r.at("switches", "an array of {socket, gpus, nics}");
      std::set<int> gpus_seen;
      std::set<int> nics_seen;
      int sockets = 0;
      for (std::size_t i = 0; i < switches.array_size(); ++i) {
        core::ObjectReader s(switches.element(i));
        PcieFabric::Switch sw;
        sw.socket = static_cast<int>(s.integer_or("socket", 0, 0, 7));
        sw.gpus = read_index_list(s.at("gpus", "an array of GPU indices"), gpus, "GPU");
        if (auto n = s.find("nics"))
          sw.nics = read_index_list(*n, nics, "NIC");
        for (std::size_t k = 0; k < sw.gpus.size(); ++k)
          if (!gpus_seen.insert(sw.gpus[k]).second)
            s.at("gpus", "").element(k).fail("GPU under two switches", "each GPU under exactly one switch");
        for (std::size_t k = 0; k < sw.nics.size(); ++k)
          if (!nics_seen.insert(sw.nics[k]).second)
            s.at("nics", "").element(k).fail("NIC under two switches", "each NIC under exactly one switch");
        s.finish();
        sockets = std::max(sockets, sw.socket + 1);
        f.switches.push_back(std::move(sw));
      }
      if (static_cast<int>(gpus_seen.size()) != gpus)
        switches.fail_found("does not place every GPU", fmt::format("{} of {} GPUs", gpus_seen.size(), gpus),
                            "each of the node's GPUs under one switch");
      if (sockets > 1)
        f.inter_socket_bandwidth = r.quantity("inter_socket_bandwidth", core::Dimension::BANDWIDTH);
      else
        r.allow({"inter_socket_bandwidth"});
      r.finish();
      return f;
    }
  }
  r.node().fail("unknown interconnect", "nvswitch, nvlink_mesh or pcie");
}

NicSpec read_nics(const core::Node& node, int gpus)
{
  core::ObjectReader r(node);
  NicSpec n;
  n.count = static_cast<int>(r.integer("count", 1, 64));
  n.bandwidth = r.quantity("bandwidth", core::Dimension::BANDWIDTH);
  n.latency = r.quantity("latency", core::Dimension::TIME);
  if (auto list = r.find("gpus")) {
    if (list->array_size() != static_cast<std::size_t>(n.count))
      list->fail_found("wrong length", fmt::format("{} entries", list->array_size()),
                       fmt::format("one list of GPUs per NIC ({})", n.count));
    std::set<int> seen;
    for (std::size_t i = 0; i < list->array_size(); ++i) {
      auto g = read_index_list(list->element(i), gpus, "GPU");
      seen.insert(g.begin(), g.end());
      n.gpus.push_back(std::move(g));
    }
    if (static_cast<int>(seen.size()) != gpus)
      list->fail_found("leaves GPUs without a NIC", fmt::format("{} of {} GPUs", seen.size(), gpus),
                       "every GPU served by a NIC");
  } else if (gpus % n.count == 0) {
    const int per_nic = gpus / n.count;
    for (int k = 0; k < n.count; ++k) {
      std::vector<int> g;
      for (int i = 0; i < per_nic; ++i)
        g.push_back(k * per_nic + i);
      n.gpus.push_back(std::move(g));
    }
  } else if (n.count > gpus) {
    r.at("count", "").fail(fmt::format("more NICs than the node's {} GPUs", gpus), "at most one NIC per GPU");
  } else {
    r.at("count", "")
        .fail(fmt::format("does not divide the node's {} GPUs", gpus),
              "a divisor of the GPU count, or an explicit `gpus` list per NIC");
  }
  r.finish();
  return n;
}

NetworkSpec read_network(const core::Node& node, const NicSpec& nics)
{
  core::ObjectReader r(node);
  NetworkSpec n;
  n.kind = r.choice_or<FabricKind>("kind", fabric_kind_choices, FabricKind::FAT_TREE);
  n.rail_optimized = r.flag_or("rail_optimized", true);
  n.nodes_per_leaf = static_cast<int>(r.integer_or("nodes_per_leaf", 32, 1, 4096));
  n.oversubscription = r.number_or("oversubscription", 1.0, 1.0, 64.0);
  n.link_bandwidth = r.quantity_or("link_bandwidth", core::Dimension::BANDWIDTH, nics.bandwidth);
  n.latency = r.quantity("latency", core::Dimension::TIME);
  r.finish();
  return n;
}

} // namespace

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
  c.gpus_per_node = static_cast<int>(n.integer("gpus", 1, 256));
  const core::Node nics_node = n.at("nics", "an object {count, bandwidth, latency}");
  c.nics = read_nics(nics_node, c.gpus_per_node);
  c.intra = read_interconnect(n.at("interconnect", "an object with kind nvswitch, nvlink_mesh or pcie"), c.gpu,
                              c.gpus_per_node, c.nics.count);
  n.finish();

  c.network = read_network(r.at("network", "an object describing the network between nodes"), c.nics);
  if (auto nodes = r.find("nodes"))
    c.nodes = static_cast<int>(nodes->as_integer(1, 1 << 20));
  r.finish();
  return c;
}

} // namespace sim::topology
