#include "workload/algorithm_lowerings.hpp"

namespace sim::workload {

// One ring phase: n flows r_i -> r_{i+1}.
CollectivePhase lower_ring(GpuPaths& paths, CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                           const NetworkUse& net)
{
  const int n = static_cast<int>(ranks.size());
  if (n < 2)
    return {};
  const RingPlan plan = ring_plan(paths, kind, ranks, bytes, net);
  const double per_rank = ring_bytes_per_rank(kind, n, bytes);
  CollectivePhase phase;
  for (int i = 0; i < n; ++i)
    phase.push_back(Flow{ranks[static_cast<std::size_t>(i)], ranks[static_cast<std::size_t>((i + 1) % n)],
                         per_rank / plan.share, plan.latency});
  return phase;
}

// A direct reduce-scatter or all-gather on a full mesh: n(n-1) flows of 1/n of the buffer, all at once, one step.
CollectivePhase lower_direct(GpuPaths& paths, const std::vector<int>& ranks, double bytes)
{
  const double share = bytes / static_cast<double>(ranks.size());
  const DirectPlan plan = direct_plan(paths, ranks, bytes);
  CollectivePhase phase;
  for (int a : ranks)
    for (int b : ranks)
      if (a != b)
        phase.push_back(Flow{a, b, share / plan.share, plan.latency});
  return phase;
}

CollectivePhase lower_ring_or_direct(GpuPaths& paths, CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                                     const NetworkUse& net)
{
  return kind != CollectiveKind::ALL_REDUCE && full_mesh(paths, ranks) ? lower_direct(paths, ranks, bytes)
                                                                       : lower_ring(paths, kind, ranks, bytes, net);
}

} // namespace sim::workload
