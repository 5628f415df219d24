// What each modelled effect is worth on the published runs: the validation run once with every effect, then once
// without each (its switch set back to the plain model through --set overrides), and the error per source of each.
#pragma once

#include "validation/comparison.hpp"

#include <string>
#include <vector>

namespace sim::validation {

struct Effect {
  std::string name;                   // short, for the table's header
  std::string what;                   // what removing it means
  std::vector<std::string> overrides; // --set PATH=VALUE that remove it
};

// The effects simtrain models beyond a roofline of catalogue efficiencies, in the order the table lists them.
const std::vector<Effect>& effects();

struct AblationRow {
  std::string effect; // empty: every effect on
  ValidationResult result;
};

// Per source: the bias and median absolute error with every effect, and with each effect removed.
std::string render_ablation_markdown(const std::vector<AblationRow>& rows);

} // namespace sim::validation
