// The keys of a scenario's `plan` object, each defined once: how it is read (its default and range), how it is
// written back, and where a report's resolved plan shows it. A new plan option is a new row of plan_keys().
#pragma once

#include "core/document.hpp"
#include "core/json_reader.hpp"
#include "model/model_spec.hpp"
#include "plan/parallel_plan.hpp"

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace sim::plan {

// A plan object being read: the keys read so far have set their part of `plan`, which the defaults and checks of the
// keys after them may use.
struct PlanReading {
  core::ObjectReader& in;
  const model::ModelSpec& model;
  std::optional<int> gpus; // when known, dp defaults to the GPUs that tp, pp and cp leave
  ParallelPlan plan;
};

struct PlanKey {
  std::string name; // in a scenario's plan object
  // Reads the key, or its default, into the plan, with the checks that need the keys read before it.
  std::function<void(PlanReading&)> read;
  // Its value in a scenario's plan object; null where it is left out (it then reads back as the plan's value).
  std::function<core::Json(const ParallelPlan&)> write;
  std::string report; // the JSON pointer of its value in a report's plan object
  // That value (null: left out of the report).
  std::function<core::Json(const ParallelPlan&)> report_value;
};

// Every key, in the order read_plan reads them: of several bad keys, the first in this order is the one named.
std::span<const PlanKey> plan_keys();

// The plan as a scenario's plan object, every default filled in: read_plan(write_plan(p)) == p for a plan read_plan
// returned. An explicit layers_per_stage is written only where it is not the balanced split (it would silence
// check_plan's warning about an uneven split).
core::Json write_plan(const ParallelPlan& p);

// Where `key` of the plan object is (or would be), for messages about it.
core::Location key_location(const core::Node& plan_node, std::string_view key);

// Throws core::InfeasiblePlan about `key` of the plan object.
[[noreturn]] void infeasible(const core::Node& plan_node, std::string_view key, const std::string& problem,
                             const std::string& expected = {});

} // namespace sim::plan
