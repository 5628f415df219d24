// The plan part of a validation case: parallelism, batch, pipeline schedule, recomputation, precision, sharding and
// experts as a scenario's plan, with the software generation its framework, date and notes imply.
#pragma once

#include "validation/case_reading.hpp"

#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace sim::validation {

// The fields of a case's "plan" section that the conversion reads.
const std::set<std::string>& plan_fields();

// Why simtrain cannot express the case's plan (offloading, no TP or PP size), before anything is converted; "" when
// it can.
std::string plan_refusal(const core::Json& plan);

// The scenario's plan for the case's `seq_length`-token sequences; nullopt when the case's plan cannot be expressed
// (the conversion is refused).
std::optional<core::Json> convert_plan(Conversion& conv, std::int64_t seq_length);

} // namespace sim::validation
