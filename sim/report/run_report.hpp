// The report of a simulated step: the terminal summary a person reads in ten seconds, and report.json.
#pragma once

#include "core/document.hpp"
#include "report/metrics.hpp"

#include <string>

namespace sim::report {

struct RunCost {
  double wall_s = 0;         // simtrain's own wall time
  double peak_rss_bytes = 0; // and memory
  std::size_t tasks = 0;
  bool folded = false;
  int simulated_gpus = 0; // folded: one per class of interchangeable GPUs
  int multiplicity = 1;   // GPUs per class
};

// `validation`: how close simtrain came to published runs on each of the scenario's GPU kinds
// (report::gpu_validation; topology::gpu_kinds' order, the topology's part first).
core::Json run_json(const scenario::Scenario& s, const Metrics& m, const RunCost& cost,
                    const std::vector<core::Json>& validation);
std::string run_text(const scenario::Scenario& s, const Metrics& m, const RunCost& cost,
                     const std::vector<core::Json>& validation);

} // namespace sim::report
