// The model part of a Megatron-LM command line: the architecture its arguments give (Megatron-LM's defaults where
// they are silent, the vocabulary padded as Megatron-LM pads it) as a model/v1 object.
#pragma once

#include "importer/megatron_arguments.hpp"

#include <cstdint>

namespace sim::importer {

// `tp`: the tensor-parallel size, which the padded vocabulary depends on.
OrderedJson megatron_model(Arguments& a, Imported& out, std::int64_t tp);

} // namespace sim::importer
