// report.html: one simulated step as a self-contained page (no network): the pipeline timeline with zoom, each
// stage's bubble against the formula, where the step went, link utilisation per class over time, memory per stage and
// the scenario. The page draws everything from report.json and the timeline's passes, embedded in it.
#pragma once

#include "core/document.hpp"
#include "report/pipeline_view.hpp"

#include <string>
#include <vector>

namespace sim::report {

// `report`: run_json's object; `scenario`: the scenario file as given (shown as is).
std::string run_html(const core::Json& report, const std::vector<PassBox>& boxes, const core::Json& scenario);

} // namespace sim::report
