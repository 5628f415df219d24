// What a training run costs and how much of the cluster's time is useful: the scenario's optional `cost`,
// `training_tokens` and `reliability` keys.
#pragma once

#include "core/json_reader.hpp"

#include <optional>

namespace sim::scenario {

struct Reliability {
  double gpu_failures_per_day = 0; // per GPU
  double checkpoint_interval_s = 0;
  double checkpoint_time_s = 0; // training stops while a checkpoint is written
  double restart_time_s = 0;    // from a failure to training again (detection, reschedule, reload)
  bool operator==(const Reliability&) const = default;
};

struct Economics {
  std::optional<double> usd_per_gpu_hour; // a rental price (power included); else owning: capital and power
  double amortization_years = 3.0;
  // Power of an owned cluster: the nodes' power (or the GPUs' TDP) x utilization x PUE x the price of energy.
  double usd_per_kwh = 0.08;      // about the US industrial average (EIA Electric Power Monthly, Table 5.6.B, 2024)
  double pue = 1.56;              // the industry average (Uptime Institute Global Data Center Survey 2024)
  double power_utilization = 1.0; // of the rated power: 1 prices every node at full load (an upper bound)
  // The network of an owned cluster, priced per switch port and per link (two transceivers and the fibre) from the
  // topology's counts. 400G NDR InfiniBand, August 2024 (E. Cheah's cluster-cost sheet behind "H100 Freakonomics",
  // substack.tech-talk-cto.com): a 64-port switch $36,000 (FS.com); cables and optics $1,320 per GPU for one tier,
  // $2,560 for two, $3,800 for three, one link per tier: $3,800 / 3.
  double usd_per_switch_port = 36000.0 / 64;
  double usd_per_network_link = 3800.0 / 3;
  std::optional<double> training_tokens;
  std::optional<Reliability> reliability;
  bool operator==(const Economics&) const = default;
};

// Reads the scenario keys `cost` ({usd_per_gpu_hour, amortization_years, usd_per_kwh, pue, power_utilization,
// usd_per_switch_port, usd_per_network_link}),
// `training_tokens` and `reliability`
// ({gpu_failures_per_day, checkpoint_interval, checkpoint_time, restart_time}) from the scenario object.
Economics read_economics(core::ObjectReader& scenario);

} // namespace sim::scenario
