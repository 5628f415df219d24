// A scenario file: loaded as `simtrain run` loads it, then what runs before the engine: the memory and FLOP
// analysis, the feasibility checks, and (for graphs small enough to build in a moment) the cluster and task graph.
#include "../support.hpp"

#include "report/analysis.hpp"
#include "scenario/feasibility.hpp"
#include "topology/cluster_graph.hpp"
#include "workload/builder.hpp"
#include "workload/graph_size.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const auto file = fuzz::write_input(data, size);
  fuzz::only_input_errors([&] {
    const auto s = sim::scenario::load_scenario(file, {fuzz::data_dir(), {}});
    (void)sim::report::analyse(s);
    sim::scenario::refuse_out_of_memory(s);
    const auto size_estimate = sim::workload::estimate_graph_size(s.model, s.plan, s.cluster, {.fold = true});
    if (size_estimate.tasks > 20000 || s.nodes > 64)
      return;
    const auto graph = sim::topology::build_graph(s.cluster, s.nodes);
    sim::topology::check_graph(graph, s.cluster.name);
    (void)sim::workload::build_task_graph(s.model, s.plan, s.cluster, graph);
  });
  return 0;
}
