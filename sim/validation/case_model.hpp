// The model part of a validation case: its architecture as a model/v1 document (or the model preset a case names
// without one), checked against the parameter count the case states.
#pragma once

#include "validation/case_reading.hpp"

#include <optional>
#include <set>
#include <string>

namespace sim::validation {

// The fields of a case's "model" section that the conversion reads.
const std::set<std::string>& model_fields();

// The scenario's model/v1 document; nullopt when the case's model cannot be expressed (the conversion is refused).
std::optional<core::Json> convert_model(Conversion& conv);

} // namespace sim::validation
