#include "plan/parallel_plan.hpp"

namespace sim::plan {

int ParallelPlan::layers_on_stage(int stage) const
{
  int n = 0;
  for (int c = 0; c < virtual_stages; ++c)
    n += layers_in_chunk(stage, c);
  return n;
}

int ParallelPlan::first_layer(int vs) const
{
  const int along = schedule == Schedule::DUALPIPE ? vs % pp : vs; // DualPipe's second path runs a copy
  int first = 0;
  for (int v = 0; v < along; ++v)
    first += layers_per_chunk[static_cast<std::size_t>(v)];
  return first;
}

int ParallelPlan::size(ParallelDim d) const
{
  switch (d) {
    case ParallelDim::TP:
      return tp;
    case ParallelDim::DP:
      return dp * cp;
    case ParallelDim::PP:
      return pp;
  }
  return 1;
}

std::vector<int> balanced_split(int layers, int parts)
{
  std::vector<int> out(static_cast<std::size_t>(parts), layers / parts);
  int extra = layers % parts;
  // Middle pieces first, then the last (output layer), then the first (embedding).
  for (int i = 1; i + 1 < parts && extra > 0; ++i, --extra)
    ++out[static_cast<std::size_t>(i)];
  if (extra > 0 && parts > 1) {
    ++out.back();
    --extra;
  }
  if (extra > 0)
    ++out.front();
  return out;
}

RankCoords coords_of(const ParallelPlan& p, int rank)
{
  RankCoords c;
  int rest = rank;
  for (ParallelDim d : p.rank_order) {
    const int n = p.size(d);
    const int v = rest % n;
    rest /= n;
    switch (d) {
      case ParallelDim::TP:
        c.tp = v;
        break;
      case ParallelDim::DP:
        c.dp = v;
        break;
      case ParallelDim::PP:
        c.pp = v;
        break;
    }
  }
  return c;
}

int rank_of(const ParallelPlan& p, RankCoords c)
{
  int rank = 0;
  int stride = 1;
  for (ParallelDim d : p.rank_order) {
    const int v = d == ParallelDim::TP ? c.tp : d == ParallelDim::DP ? c.dp : c.pp;
    rank += v * stride;
    stride *= p.size(d);
  }
  return rank;
}

std::vector<int> group_of(const ParallelPlan& p, GroupDim dim, int gpu)
{
  const RankCoords c = coords_of(p, gpu);
  std::vector<int> r;
  switch (dim) {
    case GroupDim::TP:
      for (int t = 0; t < p.tp; ++t)
        r.push_back(rank_of(p, {t, c.dp, c.pp}));
      return r;
    case GroupDim::DP:
      for (int d = 0; d < p.dp_cp(); ++d)
        r.push_back(rank_of(p, {c.tp, d, c.pp}));
      return r;
    case GroupDim::CP: // cp consecutive coordinates of the DP dimension split each sequence
      for (int i = 0; i < p.cp; ++i)
        r.push_back(rank_of(p, {c.tp, c.dp / p.cp * p.cp + i, c.pp}));
      return r;
    case GroupDim::SHARD:
      for (int i = 0; i < p.shards(); ++i)
        r.push_back(rank_of(p, {c.tp, c.dp / p.shards() * p.shards() + i, c.pp}));
      return r;
    case GroupDim::REPLICA:
      for (int i = 0; i < p.shard_replicas(); ++i)
        r.push_back(rank_of(p, {c.tp, c.dp % p.shards() + i * p.shards(), c.pp}));
      return r;
    case GroupDim::EP:
    case GroupDim::ETP:
    case GroupDim::EDP: {
      const std::array<int, 3> sizes{p.etp, p.ep, p.edp()};
      const int q = c.tp + p.tp * c.dp;
      std::array<int, 3> coords{q % p.etp, q / p.etp % p.ep, q / (p.etp * p.ep)};
      const std::size_t k = dim == GroupDim::ETP ? 0 : dim == GroupDim::EP ? 1 : 2;
      for (int i = 0; i < sizes[k]; ++i) {
        coords[k] = i;
        const int member = coords[0] + p.etp * (coords[1] + p.ep * coords[2]);
        r.push_back(rank_of(p, {member % p.tp, member / p.tp, c.pp}));
      }
      return r;
    }
  }
  return r;
}

} // namespace sim::plan
