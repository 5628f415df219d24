// Money and goodput: the closed forms of report/cost.
#include "report/cost.hpp"
#include "support.hpp"

#include <cmath>

TEST_CASE("a GPU-hour costs the list price spread over the amortization years, or the scenario's price")
{
  sim::hardware::GpuSpec gpu;
  gpu.list_price_usd = 15000.0;
  sim::scenario::Economics e;
  const auto c = sim::report::cost_metrics(e, gpu, 64, 1e6);
  REQUIRE(c.usd_per_gpu_hour);
  CHECK(*c.usd_per_gpu_hour == Approx(15000.0 / (3 * 8760.0)));
  CHECK(c.cluster_usd_per_hour == Approx(64 * 15000.0 / (3 * 8760.0)));
  CHECK(c.tokens_per_usd == Approx(1e6 * 3600.0 / c.cluster_usd_per_hour));
  CHECK_FALSE(c.time_to_train_s);

  e.usd_per_gpu_hour = 2.0;
  e.training_tokens = 3.6e12;
  const auto rented = sim::report::cost_metrics(e, gpu, 64, 1e6);
  CHECK(*rented.usd_per_gpu_hour == 2.0);
  CHECK(*rented.time_to_train_s == Approx(3.6e6));
  CHECK(*rented.cost_to_train_usd == Approx(1000.0 * 128.0));

  sim::hardware::GpuSpec unpriced;
  CHECK_FALSE(sim::report::cost_metrics({}, unpriced, 8, 1e6).usd_per_gpu_hour);
}

TEST_CASE("goodput: a failure costs a restart and half a checkpoint period, Young's interval is sqrt(2 delta/lambda)")
{
  sim::scenario::Reliability r{0.0027, 3600.0, 300.0, 600.0};
  const auto g = sim::report::goodput(r, 1024);
  const double lambda = 1024 * 0.0027 / 86400.0;
  CHECK(g.job_failures_per_day == Approx(1024 * 0.0027));
  CHECK(g.useful_fraction == Approx(3600.0 / 3900.0 * (1.0 - lambda * (600.0 + 1950.0))));
  REQUIRE(g.optimal_interval_s);
  CHECK(*g.optimal_interval_s == Approx(std::sqrt(2.0 * 300.0 / lambda)));
  CHECK(*g.useful_fraction_at_optimum >= g.useful_fraction);
  // Failures so frequent that nothing is left.
  const auto hopeless = sim::report::goodput({1.0, 36000.0, 300.0, 3600.0}, 1024);
  CHECK(hopeless.useful_fraction == 0.0);
}

TEST_CASE("time to train with failures stretches by the useful fraction")
{
  sim::scenario::Economics e;
  e.training_tokens = 1e12;
  e.reliability = sim::scenario::Reliability{0.0027, 3600.0, 300.0, 600.0};
  const auto c = sim::report::cost_metrics(e, {}, 1024, 1e6);
  CHECK(*c.time_to_train_with_failures_s == Approx(*c.time_to_train_s / c.goodput->useful_fraction));
}
