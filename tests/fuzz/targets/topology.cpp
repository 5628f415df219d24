// A topology/v1 file: checked, then built into its graph of devices and links for one and two nodes, as
// `simtrain inspect` does.
#include "../support.hpp"

#include "scenario/scenario.hpp"
#include "topology/cluster_graph.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const auto file = fuzz::write_input(data, size);
  fuzz::only_input_errors([&] {
    const auto spec = sim::scenario::load_cluster(file.string(), {fuzz::data_dir(), {}});
    for (int nodes : {1, 2}) {
      const auto graph = sim::topology::build_graph(spec, nodes);
      sim::topology::check_graph(graph, spec.name);
      (void)sim::topology::summarize(graph);
    }
  });
  return 0;
}
