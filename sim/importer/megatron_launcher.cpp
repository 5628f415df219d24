#include "importer/megatron_launcher.hpp"

#include <cstdint>

namespace sim::importer {

Launch read_launcher(std::span<const std::string> tokens, const std::string& script)
{
  Launch l;
  l.script = script;
  l.launcher = parse_arguments(tokens);
  std::optional<std::int64_t> per_node;
  std::int64_t nodes = 1;
  for (const auto& g : l.launcher) {
    if (g.values.size() != 1)
      continue;
    if (g.name == "nproc-per-node" || g.name == "num-gpus")
      per_node = parse_integer(g.values.front());
    else if (g.name == "nnodes" || g.name == "num-nodes")
      nodes = parse_integer(g.values.front()).value_or(0);
  }
  if (per_node && *per_node > 0 && nodes > 0 && *per_node * nodes <= (1 << 24))
    l.gpus = static_cast<int>(*per_node * nodes);
  return l;
}

} // namespace sim::importer
