// The measured part of a validation case: each measured value as an expectation of the run that predicts it, the
// variant runs a table keyed by a setting needs, which comparisons count in the statistics, and why the values left
// out are left out.
#pragma once

#include "validation/case_reading.hpp"

namespace sim::validation {

// Adds to the conversion the runs that hold the case's measurements (none when nothing measured is predicted) and
// the measured values it ignores; `scenario` is the case converted, the base of every run.
void add_runs(Conversion& conv, const core::Json& scenario);

} // namespace sim::validation
