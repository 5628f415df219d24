// The plan part of a Megatron-LM command line: parallelism, batch, pipeline schedule and split, recomputation,
// precision, the MoE dispatcher and the software choices as a scenario's plan, with what is simulated otherwise.
#pragma once

#include "importer/megatron_arguments.hpp"

#include <cstdint>

namespace sim::importer {

// `tp`: the tensor-parallel size; `layers`: the model's, which the pipeline's split shares out.
OrderedJson megatron_plan(Arguments& a, Imported& out, std::int64_t tp, std::int64_t layers);

} // namespace sim::importer
