#include "plan/parallel_plan.hpp"

#include "support.hpp"

using sim::plan::balanced_split;

TEST_CASE("an uneven layer split gives the first and last stages the fewer layers (Llama 3 405B: 126 on 16)")
{
  const std::vector<int> expected{7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7};
  CHECK(balanced_split(126, 16) == expected);
  CHECK(balanced_split(32, 4) == std::vector<int>{8, 8, 8, 8});
  CHECK(balanced_split(10, 4) == std::vector<int>{2, 3, 3, 2});
  CHECK(balanced_split(7, 2) == std::vector<int>{3, 4});
  CHECK(balanced_split(5, 1) == std::vector<int>{5});
}

TEST_CASE("with TP innermost, consecutive ranks form a TP group and PP is outermost")
{
  sim::plan::ParallelPlan p;
  p.tp = 8;
  p.dp = 4;
  p.pp = 2;
  const auto c = sim::plan::coords_of(p, 8 * 4 + 8 + 3);
  CHECK(c.tp == 3);
  CHECK(c.dp == 1);
  CHECK(c.pp == 1);
  for (int r = 0; r < p.gpus(); ++r)
    CHECK(sim::plan::rank_of(p, sim::plan::coords_of(p, r)) == r);
}

TEST_CASE("rank_order puts the named dimension innermost")
{
  sim::plan::ParallelPlan p;
  p.tp = 2;
  p.dp = 3;
  p.pp = 4;
  p.rank_order = {sim::plan::ParallelDim::DP, sim::plan::ParallelDim::TP, sim::plan::ParallelDim::PP};
  CHECK(sim::plan::rank_of(p, {0, 1, 0}) == 1);
  CHECK(sim::plan::rank_of(p, {1, 0, 0}) == 3);
  CHECK(sim::plan::rank_of(p, {0, 0, 1}) == 6);
}
