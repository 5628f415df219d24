// A scenario built into its task graph, for the unit tests of the workload (no simulation: unit tests run no engine).
#pragma once

#include "topology/cluster_graph.hpp"
#include "workload/builder.hpp"

#include "support.hpp"

namespace test {

struct Built {
  sim::scenario::Scenario scenario;
  sim::topology::ClusterGraph graph;
  sim::workload::TaskGraph tasks;
};

// A scenario of `model` (a model/v1 object) on `topology` with the given plan, loaded and built (folded or not).
inline Built build(nlohmann::json plan, nlohmann::json model, const std::string& topology, bool fold)
{
  auto doc = scenario_json("x", std::move(plan), topology);
  doc["model"] = std::move(model);
  const auto file = write_json(scratch_dir() / "s.json", doc);
  auto s = sim::scenario::load_scenario(file, options());
  auto g = sim::topology::build_graph(s.cluster, s.nodes);
  auto t = sim::workload::build_task_graph(s.model, s.plan, s.cluster, g, {fold});
  return {std::move(s), std::move(g), std::move(t)};
}

} // namespace test
