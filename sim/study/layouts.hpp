// The layouts a sweep tries: variants of one scenario as --set expressions, from lists of values (--vary) or every
// layout the model and the GPU count allow (--auto), how two lists combine, and how a layout is labelled.
#pragma once

#include "scenario/scenario.hpp"

#include <string>
#include <vector>

namespace sim::study {

// One variant: --set expressions (PATH=VALUE) applied to the base scenario.
struct Layout {
  std::vector<std::string> overrides;
};

// The PATH and the VALUE of an expression PATH=VALUE.
std::string override_path(const std::string& expression);
std::string override_value(const std::string& expression);
// The last component of a path: micro_batch of plan.micro_batch.
std::string short_name(const std::string& path);

// "tp=8 pp=4 schedule=interleaved": each override's last path component and value.
std::string layout_label(const Layout& layout);

// --vary PATH=V1,V2,...: the cross product of every spec's values, the last spec varying fastest. Commas inside
// brackets or quotes do not split. Paths joined by ':' vary together: plan.schedule:plan.virtual_stages=1f1b:1,
// interleaved:2 is two layouts, not four. Throws core::InputError naming the malformed spec.
std::vector<Layout> vary_layouts(const std::vector<std::string>& specs);

// Every layout of the scenario's model on its GPU count: tensor-parallel sizes within a node that divide the
// heads, context-parallel sizes leaving each GPU 4K tokens or more, pipeline sizes up to the layer count, the
// data-parallel size they leave (it must divide the global batch), micro-batches 1-16, 1F1B and interleaved (2 and 4
// chunks), ZeRO 0-1 (0-3 without a pipeline, CP or FP8), recomputation none / selective / full, sequence parallelism
// with TP off and on, and for MoE models the expert layouts. Each size meets plan/plan_rules.hpp's rules. GPipe is
// left out: it has 1F1B's bubble and more memory.
std::vector<Layout> auto_layouts(const scenario::Scenario& base);

// Each of `a` combined with each of `b` (an empty side is neutral). A path both set keeps only the pairs that agree
// on its value: `--vary plan.pp=1,13 --auto` is the automatic layouts with 1 or 13 pipeline stages.
std::vector<Layout> combine(const std::vector<Layout>& a, const std::vector<Layout>& b);

} // namespace sim::study
