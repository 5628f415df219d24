// What each optimizer algorithm keeps per parameter and how many bytes its update moves, read from the libraries that
// implement them. The memory model counts the first; the optimizer step's implementations (plan::OptimizerImpl) wrap
// the second in their own passes (workload/optimizer_step).
#pragma once

#include "plan/parallel_plan.hpp"

namespace sim::plan {

// Bytes of state per parameter the optimizer holds (and ZeRO stage 1 shards): the fp32 master weight (in mixed
// precision: `master_weights`) and the algorithm's own. `hidden`: the model's width, which bounds Adafactor's factored
// accumulators.
double optimizer_state_bytes(OptimizerAlgorithm algorithm, double hidden, bool master_weights);

// Bytes one fused update moves per parameter: an fp32 gradient read, the master weight and the states read and
// written (Adafactor: its unfused passes).
double optimizer_update_bytes(OptimizerAlgorithm algorithm);

} // namespace sim::plan
