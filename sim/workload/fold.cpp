#include "workload/fold.hpp"

#include "plan/parallel_plan.hpp"
#include "topology/symmetry.hpp"

#include <algorithm>
#include <numeric>

namespace sim::workload {
namespace {

std::vector<int> divisors(int n)
{
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0)
      out.push_back(d);
  return out;
}

// Every fold of a coordinate of `size` values: strides dividing blocks dividing steps dividing the size (a stride as
// long as its block rotates nothing: left out).
std::vector<CoordinateFold> coordinate_folds(int size)
{
  std::vector<CoordinateFold> out;
  for (int step : divisors(size))
    for (int block : divisors(step))
      for (int stride : divisors(block))
        if (stride == 1 || stride < block)
          out.push_back(CoordinateFold{size, block, step, stride});
  return out;
}

// Union-find over link directions.
std::uint32_t find(std::vector<std::uint32_t>& parent, std::uint32_t x)
{
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

} // namespace

std::vector<Crossing> crossings(const topology::ClusterGraph& g, const std::vector<std::uint32_t>& link_class,
                                const std::vector<std::uint32_t>& link_weight, int from_gpu, int to_gpu)
{
  const auto path = topology::route(g, from_gpu, to_gpu);
  const auto forward = topology::link_directions(g, g.gpu[static_cast<std::size_t>(from_gpu)], path);
  std::vector<Crossing> out;
  for (std::size_t k = 0; k < path.size(); ++k) {
    const auto d = topology::directed(g.graph[path[k]].id, forward[k]);
    out.push_back(Crossing{d, link_class[d], link_weight[d]});
  }
  return out;
}

std::vector<SwitchCrossings> unsimulated_crossings(const CoordinateFold& tp, const CoordinateFold& dp,
                                                   const plan::ParallelPlan& plan, const topology::ClusterGraph& g,
                                                   const std::vector<std::uint32_t>& link_weight,
                                                   const std::vector<std::pair<int, int>>& flows)
{
  const int per_leaf = g.gpus_per_node * g.nodes_per_leaf;
  // Between switches a route depends on the two leaf groups only.
  std::map<std::pair<int, int>, std::vector<std::uint32_t>> between;
  auto switch_links = [&](int a, int b) -> const std::vector<std::uint32_t>& {
    const auto [it, added] = between.try_emplace({a / per_leaf, b / per_leaf});
    if (added) {
      const auto path = topology::route(g, a, b);
      const auto forward = topology::link_directions(g, g.gpu[static_cast<std::size_t>(a)], path);
      for (std::size_t k = 0; k < path.size(); ++k)
        if (const auto d = topology::directed(g.graph[path[k]].id, forward[k]); link_weight[d] == 0)
          it->second.push_back(d);
    }
    return it->second;
  };
  // Each GPU under each symmetry of the fold.
  const int elements = tp.order() * dp.order();
  auto image = [&](int gpu, int e) {
    plan::RankCoords c = plan::coords_of(plan, gpu);
    c.tp = tp.moved(c.tp, e % tp.order());
    c.dp = dp.moved(c.dp, e / tp.order());
    return plan::rank_of(plan, c);
  };
  std::vector<SwitchCrossings> out;
  out.reserve(flows.size());
  for (const auto& [sender, target] : flows) {
    std::map<std::uint32_t, std::uint32_t> count;
    if (sender / g.gpus_per_node != target / g.gpus_per_node)
      for (int e = 0; e < elements; ++e) {
        const int a = image(sender, e);
        const int b = image(target, e);
        if (a / per_leaf != b / per_leaf)
          for (std::uint32_t d : switch_links(a, b))
            ++count[d];
      }
    out.emplace_back(count.begin(), count.end());
  }
  return out;
}

std::vector<int> CoordinateFold::simulated() const
{
  std::vector<int> out;
  for (int j = 0; j < step / block; ++j)
    for (int i = 0; i < stride; ++i)
      out.push_back(j * block + i);
  return out;
}

int CoordinateFold::relative(int x, int c) const
{
  const int shifted = (c - x / step * step + size) % size;
  return shifted / block * block + (shifted % block - x % block / stride * stride + block) % block;
}

FoldSearch::FoldSearch(const plan::ParallelPlan& plan, const topology::ClusterSpec& spec,
                       const topology::ClusterGraph& graph)
    : plan_(plan), spec_(spec), graph_(graph)
{
  for (const auto& tp : coordinate_folds(plan.tp))
    for (const auto& dp : coordinate_folds(plan.dp_cp()))
      if (tp.classes() * dp.classes() < plan.tp * plan.dp_cp())
        candidates_.emplace_back(tp, dp);
  // Fewest classes first; among equals, the data-parallel coordinate folded first, shifts before rotations.
  std::stable_sort(candidates_.begin(), candidates_.end(), [](const auto& x, const auto& y) {
    return x.first.classes() * x.second.classes() < y.first.classes() * y.second.classes();
  });
}

const std::optional<std::vector<std::uint32_t>>& FoldSearch::symmetry(bool tp, bool block, int by, int stride)
{
  const auto [it, added] = cache_.try_emplace(std::make_tuple(tp, block, by, stride));
  if (!added)
    return it->second;
  const int size = tp ? plan_.tp : plan_.dp_cp();
  if (by == (block ? stride : size)) { // the identity
    it->second.emplace(2 * boost::num_edges(graph_.graph));
    std::iota(it->second->begin(), it->second->end(), 0U);
    return it->second;
  }
  if (plan_.gpus() != graph_.gpus())
    return it->second;
  std::vector<int> gpus(static_cast<std::size_t>(plan_.gpus()));
  for (int r = 0; r < plan_.gpus(); ++r) {
    plan::RankCoords c = plan::coords_of(plan_, r);
    int& x = tp ? c.tp : c.dp;
    x = block ? x / by * by + (x % by + stride) % by : (x + by) % size;
    gpus[static_cast<std::size_t>(r)] = plan::rank_of(plan_, c);
  }
  it->second = topology::link_permutation(
      graph_, spec_, gpus, plan_.offload_optimizer != plan::OffloadDevice::NONE || plan_.offload_activations);
  return it->second;
}

Fold FoldSearch::fold(const CoordinateFold& tp, const CoordinateFold& dp)
{
  Fold f;
  f.tp = tp;
  f.dp = dp;
  f.multiplicity = plan_.tp / tp.classes() * (plan_.dp_cp() / dp.classes());
  std::vector<std::uint32_t> parent(2 * boost::num_edges(graph_.graph));
  std::iota(parent.begin(), parent.end(), 0U);
  for (const auto& [on_tp, block, by, stride] :
       {std::make_tuple(true, true, tp.block, tp.stride), std::make_tuple(true, false, tp.step, 1),
        std::make_tuple(false, true, dp.block, dp.stride), std::make_tuple(false, false, dp.step, 1)}) {
    const auto& perm = *symmetry(on_tp, block, by, stride);
    for (std::uint32_t x = 0; x < perm.size(); ++x) {
      const auto a = find(parent, x);
      const auto b = find(parent, perm[x]);
      if (a != b) // the smaller index stands for the class
        parent[std::max(a, b)] = std::min(a, b);
    }
  }
  std::vector<std::uint32_t> size(parent.size(), 0);
  f.link_class.resize(parent.size());
  for (std::uint32_t x = 0; x < parent.size(); ++x)
    ++size[f.link_class[x] = find(parent, x)];
  f.link_weight.resize(parent.size());
  const bool blocking = graph_.blocking;
  const auto& graph = graph_.graph;
  for (auto [e, end] = boost::edges(graph); e != end; ++e) {
    const auto& l = graph[*e];
    const bool between_switches = graph[l.from].node < 0 && graph[l.to].node < 0;
    for (bool forward : {true, false}) {
      const auto x = topology::directed(l.id, forward);
      // The group (multiplicity elements, acting freely on GPUs) moves a link onto each link of its class as often:
      // each link of the class carries multiplicity / class size of a flow class's flows per crossing.
      f.link_weight[x] =
          between_switches && !blocking ? 0U : static_cast<std::uint32_t>(f.multiplicity) / size[f.link_class[x]];
    }
  }
  return f;
}

std::optional<Fold> FoldSearch::next()
{
  while (at_ < candidates_.size()) {
    const auto [tp, dp] = candidates_[at_++];
    if (symmetry(true, true, tp.block, tp.stride) && symmetry(true, false, tp.step) &&
        symmetry(false, true, dp.block, dp.stride) && symmetry(false, false, dp.step))
      return fold(tp, dp);
  }
  return std::nullopt;
}

std::string FoldSearch::why_not() const
{
  if (plan_.tp * plan_.dp_cp() == 1)
    return "one GPU per stage already";
  if (!spec_.stragglers.empty())
    return "no other GPU of the cluster is interchangeable with a straggler's";
  if (!spec_.node_gpus.empty())
    return "GPUs of different kinds are not interchangeable";
  return "no rotation or shift of the tensor- or data-parallel rank maps the cluster onto itself (GPUs that share "
         "links unevenly, or stages spread unevenly over the network)";
}

} // namespace sim::workload
