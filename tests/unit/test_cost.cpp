// Money and goodput: the closed forms of report/cost.
#include "report/cost.hpp"
#include "support.hpp"

#include <cmath>

namespace {

sim::topology::ClusterSpec cluster_of(std::optional<double> list_price, double tdp_w = 0)
{
  sim::topology::ClusterSpec c;
  c.gpu.list_price_usd = list_price;
  c.gpu.tdp_w = tdp_w;
  c.node.gpus = 8;
  return c;
}

} // namespace

TEST_CASE("a GPU-hour costs the list price spread over the amortization years, or the scenario's price")
{
  const auto cluster = cluster_of(15000.0);
  sim::scenario::Economics e;
  const auto c = sim::report::cost_metrics(e, cluster, 64, 1e6);
  REQUIRE(c.usd_per_gpu_hour);
  CHECK(*c.usd_per_gpu_hour == Approx(15000.0 / (3 * 8760.0)));
  CHECK(c.cluster_usd_per_hour == Approx(64 * 15000.0 / (3 * 8760.0)));
  CHECK(c.tokens_per_usd == Approx(1e6 * 3600.0 / c.cluster_usd_per_hour));
  CHECK(*c.usd_per_million_tokens == Approx(c.cluster_usd_per_hour / 3600.0));
  CHECK(c.power_usd_per_hour == 0.0); // no TDP in this catalogue entry
  CHECK_FALSE(c.time_to_train_s);

  e.usd_per_gpu_hour = 2.0;
  e.training_tokens = 3.6e12;
  const auto rented = sim::report::cost_metrics(e, cluster, 64, 1e6);
  CHECK(*rented.usd_per_gpu_hour == 2.0);
  CHECK(rented.capital_usd_per_hour == 0.0);
  CHECK(rented.basis == "rented");
  CHECK(rented.power_usd_per_hour == 0.0); // in the rental price
  CHECK(*rented.time_to_train_s == Approx(3.6e6));
  CHECK(*rented.cost_to_train_usd == Approx(1000.0 * 128.0));

  CHECK_FALSE(sim::report::cost_metrics({}, cluster_of(std::nullopt), 8, 1e6).usd_per_gpu_hour);
}

TEST_CASE("owning adds power: the node's rated power, or its GPUs' TDP, x utilization x PUE x the energy price")
{
  sim::scenario::Economics e;
  e.usd_per_kwh = 0.10;
  e.pue = 1.5;
  e.power_utilization = 0.8;
  auto cluster = cluster_of(30000.0, 1000.0);
  const auto gpus_only = sim::report::cost_metrics(e, cluster, 64, 1e6);
  CHECK(gpus_only.capital_usd_per_hour == Approx(64 * 30000.0 / (3 * 8760.0)));
  CHECK(gpus_only.power_usd_per_hour == Approx(64 * 1.0 * 0.8 * 1.5 * 0.10));
  CHECK(gpus_only.cluster_usd_per_hour == Approx(gpus_only.capital_usd_per_hour + gpus_only.power_usd_per_hour));
  CHECK(gpus_only.basis == "GPU price, GPU power");
  CHECK(gpus_only.price_basis.ends_with(": host left out"));
  // A node's own price and rated power (CPUs, memory, NICs, fans) replace its GPUs'.
  cluster.node.price_usd = 400000.0;
  cluster.node.power_w = 14300.0;
  const auto node = sim::report::cost_metrics(e, cluster, 64, 1e6);
  CHECK(node.basis == "node price, node power");
  CHECK(node.price_basis.find("host left out") == std::string::npos);
  CHECK(node.capital_usd_per_hour == Approx(8 * 400000.0 / (3 * 8760.0)));
  CHECK(node.power_usd_per_hour == Approx(8 * 14.3 * 0.8 * 1.5 * 0.10));
  CHECK(*node.usd_per_gpu_hour == Approx(node.cluster_usd_per_hour / 64));
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
  const auto c = sim::report::cost_metrics(e, cluster_of(std::nullopt), 1024, 1e6);
  CHECK(*c.time_to_train_with_failures_s == Approx(*c.time_to_train_s / c.goodput->useful_fraction));
}

TEST_CASE("the network costs a link and a switch port per NIC and tier, thinned above an oversubscribed tier")
{
  auto cluster = cluster_of(30000.0);
  cluster.node.nics.count = 8; // one 400G NIC per GPU, as the price sheet's cluster
  cluster.network.kind = sim::topology::NetworkKind::FAT_TREE;
  cluster.network.nodes_per_leaf = 32;
  cluster.network.leaves_per_pod = 8;
  const sim::scenario::Economics e;
  const auto per_gpu = [&](int nodes) { return sim::report::network_price_usd(e, cluster, nodes) / (8.0 * nodes); };
  CHECK(per_gpu(1) == 0.0); // one node: no network
  // The price sheet's per-GPU totals (August 2024): one tier $1,883, two $4,248, three $6,613.
  CHECK(per_gpu(32) == Approx(1883).epsilon(0.05));
  CHECK(per_gpu(256) == Approx(4248).epsilon(0.05));
  CHECK(per_gpu(512) == Approx(6613).epsilon(0.05));
  // 2:1 above the leaves: half the uplinks, links and ports.
  cluster.network.oversubscription = 2;
  CHECK(per_gpu(256) == Approx(e.usd_per_network_link * 1.5 + e.usd_per_switch_port * 2));
  // Owned, the network is part of the capital.
  const auto c = sim::report::cost_metrics(e, cluster, 2048, 1e6);
  CHECK(c.network_usd_per_hour == Approx(sim::report::network_price_usd(e, cluster, 256) / (3 * 8760.0)));
  CHECK(c.capital_usd_per_hour == Approx(2048 * 30000.0 / (3 * 8760.0) + c.network_usd_per_hour));
}
