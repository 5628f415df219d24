// Money and time: the cluster's price per hour, tokens per dollar, the time and cost to train a token budget, and
// the share of the cluster's time left to training when GPUs fail (checkpoint, restart, lost work).
#pragma once

#include "scenario/economics.hpp"
#include "topology/cluster_spec.hpp"

#include <optional>
#include <string>

namespace sim::report {

struct Goodput {
  double job_failures_per_day = 0; // GPUs x failures per GPU per day
  // Useful share of wall time: interval / (interval + checkpoint time) x (1 - failure rate x (restart time + half a
  // period of lost work)).
  double useful_fraction = 0;
  std::optional<double> optimal_interval_s; // Young's sqrt(2 x checkpoint time / failure rate)
  std::optional<double> useful_fraction_at_optimum;
};

struct CostMetrics {
  std::optional<double> usd_per_gpu_hour; // none when neither a price nor a list price is known
  // What the price counts, to compare like with like: "rented" (the scenario's price per GPU-hour), or owned, its
  // price and power each of the whole "node" (host, NICs and fans included) or of its "GPU"s alone.
  std::string basis;
  std::string price_basis; // the same in words, with the numbers
  double cluster_usd_per_hour = 0;
  double capital_usd_per_hour = 0; // owning: the nodes' and the network's price over the amortization years
  double network_usd_per_hour = 0; // the network's part of it
  double power_usd_per_hour = 0;   // owning: their energy (rented: in the price)
  double tokens_per_usd = 0;
  std::optional<double> usd_per_million_tokens;
  std::optional<double> training_tokens;
  std::optional<double> time_to_train_s; // at the simulated rate, without failures
  std::optional<double> cost_to_train_usd;
  std::optional<Goodput> goodput;
  std::optional<double> time_to_train_with_failures_s;
};

Goodput goodput(const scenario::Reliability& r, int gpus);

// What `gpus` GPUs of `cluster` cost per hour, rented (the scenario's price) or owned (capital: the node's price, or
// its GPUs' list price, and the network's switch ports and links, over the amortization years; power: the node's rated
// power, or its GPUs' TDP, times the utilization, the PUE and the energy price), and what that makes of `tokens_per_s`.
// The network's price: for each NIC, a link and a switch port per tier it climbs, fewer above an oversubscribed
// tier (its uplinks carry 1/oversubscription of the NICs' bandwidth).
double network_price_usd(const scenario::Economics& e, const topology::ClusterSpec& cluster, int nodes);

CostMetrics cost_metrics(const scenario::Economics& e, const topology::ClusterSpec& cluster, int gpus,
                         double tokens_per_s);

} // namespace sim::report
