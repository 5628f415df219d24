#include "workload/schedule.hpp"

#include <algorithm>

namespace sim::workload {
namespace {

// Megatron-LM's interleaved schedule: virtual micro-batch k runs chunk (k mod pv) / p of micro-batch
// (k / pv) * p + k mod p; backward passes visit the chunks in reverse.
PassRef interleaved_pass(const plan::ParallelPlan& p, int k, Pass pass)
{
  const int group = p.pp * p.virtual_stages;
  int chunk = (k % group) / p.pp;
  if (pass == Pass::BACKWARD)
    chunk = p.virtual_stages - 1 - chunk;
  return PassRef{pass, chunk, (k / group) * p.pp + k % p.pp};
}

} // namespace

std::vector<PassRef> stage_order(const plan::ParallelPlan& p, int stage)
{
  const auto m = static_cast<int>(p.microbatches());
  std::vector<PassRef> order;
  switch (p.schedule) {
    case plan::Schedule::GPIPE:
      for (int i = 0; i < m; ++i)
        order.push_back({Pass::FORWARD, 0, i});
      for (int i = 0; i < m; ++i)
        order.push_back({Pass::BACKWARD, 0, i});
      break;
    case plan::Schedule::ONE_F_ONE_B: {
      const int warmup = std::min(p.pp - stage - 1, m);
      for (int i = 0; i < warmup; ++i)
        order.push_back({Pass::FORWARD, 0, i});
      for (int i = 0; i < m - warmup; ++i) {
        order.push_back({Pass::FORWARD, 0, warmup + i});
        order.push_back({Pass::BACKWARD, 0, i});
      }
      for (int i = m - warmup; i < m; ++i)
        order.push_back({Pass::BACKWARD, 0, i});
      break;
    }
    case plan::Schedule::INTERLEAVED: {
      const int total = m * p.virtual_stages;
      const int warmup = std::min((p.pp - stage - 1) * 2 + (p.virtual_stages - 1) * p.pp, total);
      for (int k = 0; k < warmup; ++k)
        order.push_back(interleaved_pass(p, k, Pass::FORWARD));
      for (int k = 0; k < total - warmup; ++k) {
        order.push_back(interleaved_pass(p, warmup + k, Pass::FORWARD));
        order.push_back(interleaved_pass(p, k, Pass::BACKWARD));
      }
      for (int k = total - warmup; k < total; ++k)
        order.push_back(interleaved_pass(p, k, Pass::BACKWARD));
      break;
    }
  }
  return order;
}

} // namespace sim::workload
