#include "report/cost.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <optional>

namespace sim::report {
namespace {

constexpr double hours_per_year = 24.0 * 365.0;
constexpr double seconds_per_day = 86400.0;

double useful_fraction(double interval_s, double checkpoint_s, double restart_s, double failures_per_s)
{
  const double period = interval_s + checkpoint_s;
  const double lost = failures_per_s * (restart_s + period / 2.0);
  return interval_s / period * std::max(0.0, 1.0 - lost);
}

} // namespace

double network_price_usd(const scenario::Economics& e, const topology::ClusterSpec& cluster, int nodes)
{
  const topology::NetworkSpec& net = cluster.network;
  const int tiers = topology::network_tiers(net, nodes);
  // Per NIC: its link to the leaf and the leaf's port; above, an uplink to the spine (the leaf's port and the
  // spine's) and one to the core, each thinned by the oversubscription below it.
  double links = 0;
  double ports = 0;
  double share = 1; // of the NICs' bandwidth carried at this tier
  for (int tier = 1; tier <= tiers; ++tier) {
    links += share;
    ports += tier == 1 ? share : 2 * share;
    share /= tier == 1 ? net.oversubscription : net.core_oversubscription;
  }
  const double nics = static_cast<double>(nodes) * cluster.node.nics.count;
  return nics * (links * e.usd_per_network_link + ports * e.usd_per_switch_port);
}

Goodput goodput(const scenario::Reliability& r, int gpus)
{
  Goodput g;
  g.job_failures_per_day = r.gpu_failures_per_day * gpus;
  const double rate = g.job_failures_per_day / seconds_per_day;
  g.useful_fraction = useful_fraction(r.checkpoint_interval_s, r.checkpoint_time_s, r.restart_time_s, rate);
  if (rate > 0 && r.checkpoint_time_s > 0) {
    g.optimal_interval_s = std::sqrt(2.0 * r.checkpoint_time_s / rate);
    g.useful_fraction_at_optimum = useful_fraction(*g.optimal_interval_s, r.checkpoint_time_s, r.restart_time_s, rate);
  }
  return g;
}

CostMetrics cost_metrics(const scenario::Economics& e, const topology::ClusterSpec& cluster, int gpus,
                         double tokens_per_s)
{
  CostMetrics c;
  const auto& node = cluster.node;
  // The GPUs' list price and board power: their mean where some nodes hold another kind (no price if a kind has none).
  std::optional<double> list_price = cluster.gpu.list_price_usd;
  double tdp_w = cluster.gpu.tdp_w;
  if (!cluster.node_gpus.empty()) {
    double price = 0;
    double power = 0;
    for (int g = 0; g < gpus; ++g) {
      const auto& gpu = topology::gpu_of_kind(cluster, topology::gpu_kind(cluster, g));
      if (!gpu.list_price_usd)
        list_price.reset();
      price += gpu.list_price_usd.value_or(0.0) / gpus;
      power += gpu.tdp_w / gpus;
    }
    if (list_price)
      list_price = price;
    tdp_w = power;
  }
  const double nodes = static_cast<double>(gpus) / node.gpus; // a share of a node costs its share
  if (e.usd_per_gpu_hour) {
    c.usd_per_gpu_hour = *e.usd_per_gpu_hour;
    c.basis = "rented";
    c.price_basis = "the scenario's price per GPU-hour";
    c.cluster_usd_per_hour = *e.usd_per_gpu_hour * gpus;
  } else if (node.price_usd || list_price) {
    const double node_price = node.price_usd ? *node.price_usd : *list_price * node.gpus;
    const double per_year_hours = e.amortization_years * hours_per_year;
    c.network_usd_per_hour = network_price_usd(e, cluster, static_cast<int>(std::ceil(nodes))) * gpus /
                             (std::ceil(nodes) * node.gpus) / per_year_hours;
    c.capital_usd_per_hour = node_price * nodes / per_year_hours + c.network_usd_per_hour;
    const double node_power_w = node.power_w > 0 ? node.power_w : tdp_w * node.gpus;
    c.power_usd_per_hour = node_power_w * nodes / 1000.0 * e.power_utilization * e.pue * e.usd_per_kwh;
    c.cluster_usd_per_hour = c.capital_usd_per_hour + c.power_usd_per_hour;
    c.usd_per_gpu_hour = c.cluster_usd_per_hour / gpus;
    c.basis = fmt::format("{} price, {} power", node.price_usd ? "node" : "GPU", node.power_w > 0 ? "node" : "GPU");
    c.price_basis = node.price_usd
                        ? fmt::format("node price ${:.0f} over {:g} years", *node.price_usd, e.amortization_years)
                        : fmt::format("GPUs' {}list price ${:.0f} over {:g} years",
                                      cluster.node_gpus.empty() ? "" : "mean ", *list_price, e.amortization_years);
    if (c.network_usd_per_hour > 0)
      c.price_basis += fmt::format(", network ${:.0f} per GPU", c.network_usd_per_hour * per_year_hours / gpus);
    if (c.power_usd_per_hour > 0)
      c.price_basis +=
          fmt::format(", power {:.0f} W per GPU{} x {:g} x PUE {:g} at ${:g}/kWh", node_power_w / node.gpus,
                      node.power_w > 0 ? "" : " (the GPUs' own)", e.power_utilization, e.pue, e.usd_per_kwh);
    if (!node.price_usd || node.power_w <= 0)
      c.price_basis += ": host left out";
  }
  if (c.usd_per_gpu_hour && c.cluster_usd_per_hour > 0) {
    c.tokens_per_usd = tokens_per_s * 3600.0 / c.cluster_usd_per_hour;
    c.usd_per_million_tokens = 1e6 / c.tokens_per_usd;
  }
  if (e.reliability)
    c.goodput = goodput(*e.reliability, gpus);
  if (e.training_tokens) {
    c.training_tokens = *e.training_tokens;
    c.time_to_train_s = *e.training_tokens / tokens_per_s;
    if (c.usd_per_gpu_hour)
      c.cost_to_train_usd = *c.time_to_train_s / 3600.0 * c.cluster_usd_per_hour;
    if (c.goodput && c.goodput->useful_fraction > 0)
      c.time_to_train_with_failures_s = *c.time_to_train_s / c.goodput->useful_fraction;
  }
  return c;
}

} // namespace sim::report
