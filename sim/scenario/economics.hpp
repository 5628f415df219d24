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
};

struct Economics {
  std::optional<double> usd_per_gpu_hour; // a rental price; else the list price over the amortization period
  double amortization_years = 3.0;
  std::optional<double> training_tokens;
  std::optional<Reliability> reliability;
};

// Reads the scenario keys `cost` ({usd_per_gpu_hour, amortization_years}), `training_tokens` and `reliability`
// ({gpu_failures_per_day, checkpoint_interval, checkpoint_time, restart_time}) from the scenario object.
Economics read_economics(core::ObjectReader& scenario);

} // namespace sim::scenario
