#include "model/routing.hpp"

#include <algorithm>
#include <cmath>

namespace sim::model {
namespace {

// n choose r, as a double (the counts here are small).
double choose(double n, double r)
{
  if (r < 0 || r > n)
    return 0.0;
  double c = 1.0;
  for (double i = 0; i < r; ++i)
    c *= (n - i) / (i + 1.0);
  return c;
}

// The chance that k distinct experts drawn from `pool` all miss `held` of them.
double miss(double pool, double held, double k)
{
  double p = 1.0;
  for (double i = 0; i < k; ++i)
    p *= std::max(0.0, (pool - held - i) / (pool - i));
  return p;
}

} // namespace

double reach_probability(const MoeSpec& moe, double held)
{
  const auto experts = static_cast<double>(moe.num_experts);
  const auto k = static_cast<double>(moe.experts_per_token);
  const auto groups = static_cast<double>(moe.expert_groups);
  const auto picked = static_cast<double>(moe.groups_per_token);
  const double group_size = experts / groups;
  const double pool = picked * group_size; // the experts a token chooses among
  if (held >= experts)
    return 1.0;
  if (held <= group_size) // inside one group: that group picked, then one of the block's experts drawn
    return picked / groups * (1.0 - miss(pool, held, k));
  // Whole groups: j of the block's w groups picked (hypergeometric), then every draw misses their experts.
  const double w = std::floor(held / group_size);
  double missed = 0.0;
  for (double j = 0; j <= std::min(w, picked); ++j)
    missed += choose(w, j) * choose(groups - w, picked - j) / choose(groups, picked) * miss(pool, j * group_size, k);
  return 1.0 - missed;
}

} // namespace sim::model
