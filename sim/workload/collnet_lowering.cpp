#include "workload/algorithm_lowerings.hpp"

namespace sim::workload {

// An all-reduce reduced by the switches (InfiniBand SHARP) as NCCL's CollNet Direct runs it: a reduce-scatter inside
// each node, each GPU's share sent up to the switches once and the reduced share received once, an all-gather inside
// each node, all pipelined, at NCCL's CollNet latency. It puts half the ring's bytes on the NICs. The share's trip
// through the switches is a flow to the same local GPU of the next node (the ring's edge), which loads every NIC as
// the switches would, once each way; the links above the leaves carry the rings' bytes, not the switches' reduced
// streams.
CollectivePhase lower_collnet(GpuPaths& paths, const GroupByNode& by_node, double bytes)
{
  const std::size_t per_node = by_node.begin()->second.size();
  const double shard = bytes / static_cast<double>(per_node);
  std::vector<CollectivePhase> phases(3);
  for (const auto& [node, members] : by_node)
    if (per_node > 1)
      for (CollectiveKind k : {CollectiveKind::REDUCE_SCATTER, CollectiveKind::ALL_GATHER})
        for (const Flow& f : lower_ring_or_direct(paths, k, members, bytes))
          phases[k == CollectiveKind::REDUCE_SCATTER ? 0 : 2].push_back(f);
  add_rail_flows(by_node, shard, 0.0, phases[1]);
  CollectivePhase merged = pipelined(phases);
  const double latency = collnet_latency_s(per_node);
  for (Flow& f : merged)
    f.latency_s = latency;
  return merged;
}

} // namespace sim::workload
