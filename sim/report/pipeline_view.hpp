// Pictures of the pipeline schedule from a simulated step: the forward and backward pass of each micro-batch on
// each stage, numbered, with the idle time between them visible. SVG for slides, text for the terminal, and a
// Chrome / Perfetto trace of every GPU stream.
#pragma once

#include "engine/timeline.hpp"
#include "report/metrics.hpp"
#include "workload/task_graph.hpp"

#include <ostream>
#include <string>
#include <vector>

namespace sim::report {

// One pass of one micro-batch on one stage (its first GPU), as drawn.
struct PassBox {
  int stage = 0;
  int chunk = 0;
  int microbatch = 0;
  bool backward = false;
  bool weight = false; // the weight gradients a zero-bubble backward pass left (DualPipe)
  double start_s = 0;
  double end_s = 0;
  double recompute_s = 0; // of which recomputation
};

std::vector<PassBox> pass_boxes(const scenario::Scenario& s, const workload::TaskGraph& g, const engine::Timeline& tl);

std::string pipeline_svg(const scenario::Scenario& s, const Metrics& m, const std::vector<PassBox>& boxes);
std::string pipeline_text(const scenario::Scenario& s, const Metrics& m, const std::vector<PassBox>& boxes,
                          int width = 100);

// Chrome trace-event JSON (opens in Perfetto / chrome://tracing): a process per GPU with compute, TP, PP and DP
// streams, and link-utilisation counters for the busiest links. Large runs keep data-parallel replica 0.
void write_trace(std::ostream& out, const scenario::Scenario& s, const workload::TaskGraph& g,
                 const topology::ClusterGraph& cluster, const engine::Timeline& tl);

} // namespace sim::report
