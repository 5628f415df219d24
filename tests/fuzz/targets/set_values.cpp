// `--set PATH=VALUE` expressions, one per line, applied to the default scenario and loaded as `simtrain run` would.
#include "../support.hpp"

#include "report/analysis.hpp"
#include "scenario/feasibility.hpp"
#include "workload/graph_size.hpp"

#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = text.find('\n', start);
    const std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!line.empty())
      overrides.push_back(line);
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  fuzz::only_input_errors([&] {
    const auto s =
        sim::scenario::load_scenario(fuzz::data_dir() / "scenarios/default.json", {fuzz::data_dir(), overrides});
    (void)sim::report::analyse(s);
    sim::scenario::refuse_out_of_memory(s);
    (void)sim::workload::estimate_graph_size(s.model, s.plan, s.cluster, {.fold = true});
  });
  return 0;
}
