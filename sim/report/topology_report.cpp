#include "report/topology_report.hpp"

#include "core/units.hpp"

#include <fmt/format.h>

namespace sim::report {
namespace {

std::string device_label(topology::DeviceKind k)
{
  switch (k) {
    case topology::DeviceKind::GPU:
      return "gpu";
    case topology::DeviceKind::NVSWITCH:
      return "nvswitch";
    case topology::DeviceKind::PCIE_SWITCH:
      return "pcie_switch";
    case topology::DeviceKind::CPU:
      return "cpu";
    case topology::DeviceKind::HOST_MEMORY:
      return "host_memory";
    case topology::DeviceKind::NVME:
      return "nvme";
    case topology::DeviceKind::NIC:
      return "nic";
    case topology::DeviceKind::LEAF:
      return "leaf_switch";
    case topology::DeviceKind::SPINE:
      return "spine_switch";
    case topology::DeviceKind::CORE:
      return "core_switch";
  }
  return "device";
}

std::string class_label(topology::LinkClass c)
{
  return std::string(core::choice_name(c, topology::link_class_choices));
}

} // namespace

core::Json topology_json(const topology::ClusterSpec& spec, const topology::ClusterSummary& s)
{
  core::Json j;
  j["name"] = spec.name;
  j["gpu"] = spec.gpu.name;
  j["gpus"] = s.gpus;
  j["nodes"] = s.nodes;
  j["gpus_per_node"] = spec.node.gpus;
  for (const auto& [kind, count] : s.devices)
    j["devices"][device_label(kind)] = count;
  for (const auto& [cls, c] : s.links)
    j["links"][class_label(cls)] = {
        {"count", c.count}, {"per_gpu_bandwidth_Bps", c.per_gpu_bandwidth}, {"total_bandwidth_Bps", c.total_bandwidth}};
  j["bisection_bandwidth_Bps"] = s.bisection_bandwidth;
  j["sharp"] = spec.network.sharp;
  j["peer_to_peer"] = spec.gpu.peer_to_peer;
  if (spec.node.host.memory_bytes > 0)
    j["host_memory_bytes"] = spec.node.host.memory_bytes;
  if (spec.node.host.memory_bandwidth > 0)
    j["host_memory_bandwidth_Bps"] = spec.node.host.memory_bandwidth;
  return j;
}

std::string topology_text(const topology::ClusterSpec& spec, const topology::ClusterSummary& s)
{
  std::string out = fmt::format("{}: {} x {} in {} node{} of {}\n", spec.name, s.gpus, spec.gpu.name, s.nodes,
                                s.nodes == 1 ? "" : "s", spec.node.gpus);
  if (!spec.description.empty())
    out += spec.description + "\n";
  std::string devices;
  for (const auto& [kind, count] : s.devices)
    devices += fmt::format("{}{} {}", devices.empty() ? "" : ", ", count, device_label(kind));
  out += "devices  " + devices + "\n\n";
  out += fmt::format("{:<15} {:>7} {:>22} {:>18}\n", "links", "count", "per GPU, per direction", "total");
  for (const auto& [cls, c] : s.links)
    out += fmt::format("{:<15} {:>7} {:>22} {:>18}\n", topology::link_label(cls, spec.gpu.vendor), c.count,
                       core::format_bandwidth(c.per_gpu_bandwidth), core::format_bandwidth(c.total_bandwidth));
  out += fmt::format("\nbisection bandwidth {} per direction (first half of the {} against the second)\n",
                     core::format_bandwidth(s.bisection_bandwidth), s.nodes > 1 ? "nodes" : "GPUs");
  if (spec.node.host.memory_bytes > 0 || spec.node.host.memory_bandwidth > 0)
    out += fmt::format("host memory {} per node, {} per CPU socket\n",
                       spec.node.host.memory_bytes > 0 ? core::format_bytes(spec.node.host.memory_bytes) : "not given",
                       spec.node.host.memory_bandwidth > 0 ? core::format_bandwidth(spec.node.host.memory_bandwidth)
                                                           : "(bandwidth not given)");
  if (!spec.gpu.peer_to_peer)
    out += "no peer-to-peer between the GPUs: what they send to each other or to a NIC is staged in host memory\n";
  if (spec.network.sharp)
    out += "the switches reduce in the network (SHARP): all-reduces across nodes run on them (NCCL's CollNet)\n";
  return out;
}

} // namespace sim::report
