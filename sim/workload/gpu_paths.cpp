#include "workload/gpu_paths.hpp"

#include <algorithm>
#include <limits>

namespace sim::workload {

const PathInfo& GpuPaths::path(int a, int b)
{
  const std::uint64_t key = (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint32_t>(b);
  const auto [it, inserted] = paths_.try_emplace(key);
  if (inserted) {
    PathInfo& info = it->second;
    const auto links = topology::route(g_, a, b);
    info.bandwidth = std::numeric_limits<double>::infinity();
    info.hop = Hop::NVLINK;
    info.direct = links.size() == 1 && g_.graph[links.front()].cls == topology::LinkClass::NVLINK;
    for (auto e : links) {
      const auto& l = g_.graph[e];
      info.bandwidth = std::min(info.bandwidth, l.bandwidth * l.efficiency);
      info.through_cpu = info.through_cpu || l.cls == topology::LinkClass::CPU;
      if (l.cls != topology::LinkClass::NVLINK)
        info.hop =
            std::max(info.hop, l.cls == topology::LinkClass::PCIE || l.cls == topology::LinkClass::CPU ? Hop::PCIE
                                                                                                       : Hop::NETWORK);
    }
  }
  return it->second;
}

} // namespace sim::workload
