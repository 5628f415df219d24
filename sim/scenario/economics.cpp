#include "scenario/economics.hpp"

namespace sim::scenario {

Economics read_economics(core::ObjectReader& scenario)
{
  Economics e;
  if (auto cost = scenario.find("cost")) {
    core::ObjectReader c(*cost);
    if (auto price = c.find("usd_per_gpu_hour"))
      e.usd_per_gpu_hour = price->as_number(0.01, 1000.0); // a cent (an old card on a spot market) to a rack-scale part
    e.amortization_years = c.number_or("amortization_years", 3.0, 0.1, 50.0);
    e.usd_per_kwh = c.number_or("usd_per_kwh", e.usd_per_kwh, 0.0, 10.0);
    e.pue = c.number_or("pue", e.pue, 1.0, 5.0);
    e.power_utilization = c.number_or("power_utilization", e.power_utilization, 0.0, 1.0);
    e.usd_per_switch_port = c.number_or("usd_per_switch_port", e.usd_per_switch_port, 0.0, 1e5);
    e.usd_per_network_link = c.number_or("usd_per_network_link", e.usd_per_network_link, 0.0, 1e5);
    c.finish();
  }
  if (auto tokens = scenario.find("training_tokens"))
    e.training_tokens = tokens->as_number(1.0, 1e18);
  if (auto rel = scenario.find("reliability")) {
    core::ObjectReader r(*rel);
    Reliability x;
    x.gpu_failures_per_day = r.number("gpu_failures_per_day", 0.0, 1.0);
    x.checkpoint_interval_s = r.quantity("checkpoint_interval", core::Dimension::TIME);
    x.checkpoint_time_s = r.quantity_or("checkpoint_time", core::Dimension::TIME, 0.0);
    x.restart_time_s = r.quantity_or("restart_time", core::Dimension::TIME, 0.0);
    r.finish();
    e.reliability = x;
  }
  return e;
}

} // namespace sim::scenario
