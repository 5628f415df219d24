// Summarizing a validation run as each GPU's accuracy (validation-summary/v1, report/validation_summary.hpp): what
// `simtrain validate --summary` writes.
#pragma once

#include "report/validation_summary.hpp"
#include "validation/comparison.hpp"

#include <map>
#include <string>

namespace sim::validation {

// `gpu_names` maps a GPU preset to its catalogue entry's name (a preset without one is keyed by itself).
report::Summary summarize(const ValidationResult& result, const std::string& cases_file,
                          const std::map<std::string, std::string>& gpu_names);

} // namespace sim::validation
