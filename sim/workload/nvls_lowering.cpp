#include "workload/algorithm_lowerings.hpp"

namespace sim::workload {
namespace {

// The flows of an all-reduce of `bytes` by NVLink SHARP among `members` of one NVSwitch node: each GPU sends the whole
// buffer to the switch, which reduces, and receives the result it multicasts. Each GPU's port carries the buffer once
// each way, at the measured NVLS rate: a flow to the next member stands for it.
void add_nvls_flows(GpuPaths& paths, const std::vector<int>& members, double bytes, double latency,
                    CollectivePhase& phase)
{
  const auto& g = paths.graph();
  const double rate = g.rates[g.kind[static_cast<std::size_t>(members.front())]].nvls_rate;
  const std::size_t n = members.size();
  for (std::size_t i = 0; i < n; ++i) {
    const int a = members[i];
    const int b = members[(i + 1) % n];
    phase.push_back(Flow{a, b, bytes * paths.path(a, b).bandwidth / rate, latency});
  }
}

} // namespace

// An all-reduce by NVLink SHARP inside one NVSwitch node, where NCCL's model finds it faster than the ring.
CollectivePhase lower_nvls(GpuPaths& paths, const std::vector<int>& ranks, double bytes)
{
  CollectivePhase phase;
  add_nvls_flows(paths, ranks, bytes, nvls_latency_s(), phase);
  return phase;
}

// An all-reduce across NVSwitch nodes as NCCL's NVLS-Tree runs it, where it is faster than the ring and the tree:
// NVLink SHARP inside each node (each GPU's port carries the buffer once each way at the NVLS rate) while the nodes'
// reduced shares cross the network, all pipelined. Every GPU of a node is a head with its NIC: on two nodes each sends
// its share across once, on more it sends twice its share, the busiest node of a double binary tree (see tree_phase),
// on the ring's edges.
CollectivePhase lower_nvls_tree(GpuPaths& paths, const GroupByNode& by_node, double bytes, const NvlsTreePlan& plan)
{
  CollectivePhase phase;
  for (const auto& [node, members] : by_node)
    add_nvls_flows(paths, members, bytes, plan.latency, phase);
  add_rail_flows(by_node, plan.network_bytes, plan.latency, phase);
  return phase;
}

} // namespace sim::workload
