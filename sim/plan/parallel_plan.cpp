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

} // namespace sim::plan
