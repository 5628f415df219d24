// The hardware part of a validation case: the GPU preset its GPU names, and the topology preset with that kind of
// node, inlined where the case changes its GPU, its GPUs per node or its NICs.
#pragma once

#include "validation/case_reading.hpp"

#include <optional>
#include <set>
#include <string>

namespace sim::validation {

// The fields of a case's "hardware" section that the conversion reads.
const std::set<std::string>& hardware_fields();

struct Hardware {
  std::string gpu;      // GPU preset
  std::string topology; // topology preset with that kind of node
};

// The catalogue's GPU for a GPU's name as a publication writes it ("8x A100 40GB"); nullopt when there is none.
std::optional<Hardware> match_gpu(const std::string& name);

// The scenario's topology: the preset's name, or the preset inlined with the case's changes. nullopt when the case
// asks for a node no preset has (the conversion is refused then).
std::optional<core::Json> convert_topology(Conversion& conv, Hardware hw);

} // namespace sim::validation
