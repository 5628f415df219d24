// The HTML pages, each self-contained (no network; the data embedded, drawn by the page's own script):
// report.html, one simulated step: the pipeline timeline with zoom, each stage's bubble against the formula, where
// the step went, link utilisation per class over time, memory per stage and the scenario; compare.html, two steps
// side by side on one time scale; sweep.html, a sortable ranking with its charts.
#pragma once

#include "core/document.hpp"
#include "report/pipeline_view.hpp"

#include <string>
#include <vector>

namespace sim::report {

// The passes of a step's timeline as the pages draw them: [stage, chunk, micro-batch, kind (0 forward, 1 backward,
// 2 weight gradients), start_s, end_s, recompute_s] each.
core::Json passes_json(const std::vector<PassBox>& boxes);

// `report`: run_json's object; `scenario`: the scenario file as given (shown as is).
std::string run_html(const core::Json& report, const std::vector<PassBox>& boxes, const core::Json& scenario);
// `comparison`: comparison_json's object; each side's passes_json, or null where the side is a saved report.
std::string compare_html(const core::Json& comparison, const core::Json& passes_a, const core::Json& passes_b);
// `sweep`: sweep.json's object.
std::string sweep_html(const core::Json& sweep);

} // namespace sim::report
