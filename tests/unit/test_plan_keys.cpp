#include "plan/plan_keys.hpp"
#include "plan/plan_reader.hpp"
#include "report/analysis.hpp"
#include "study/layouts.hpp"

#include "support.hpp"

#include <algorithm>
#include <set>

namespace {

// The shipped scenarios, in two parts (two tests, which can run side by side).
enum class Part { WHATIF, OTHERS };
std::vector<std::filesystem::path> shipped_scenarios(Part part)
{
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(test::source_dir() / "scenarios"))
    if (e.path().extension() == ".json" && (e.path().parent_path().filename() == "whatif") == (part == Part::WHATIF))
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The plan read_plan makes of what write_plan writes of `plan`.
sim::plan::ParallelPlan read_back(const sim::plan::ParallelPlan& plan, const sim::scenario::Scenario& s)
{
  const auto written = sim::plan::write_plan(plan);
  sim::core::Provenance provenance;
  provenance.add_source("", "written.json");
  return sim::plan::read_plan(sim::core::Node(written, "", provenance), s.model, s.gpus);
}

// The scenario file's plan object with the layout's plan.KEY=VALUE expressions applied as --set applies them (VALUE
// is JSON, or else a string). Loading each of some 190,000 layouts as a scenario would take minutes (its GPU's kernel
// tables, its checks); this reads only the plan, and check_plan does not refuse any: an infeasible plan must read back
// too.
nlohmann::json with_layout(nlohmann::json plan, const sim::study::Layout& layout)
{
  for (const auto& expression : layout.overrides) {
    const std::string path = sim::study::override_path(expression);
    if (!path.starts_with("plan.") || path.find('.', 5) != std::string::npos)
      FAIL("not a key of the plan: " << expression);
    const std::string text = sim::study::override_value(expression);
    auto value = nlohmann::json::parse(text, nullptr, false);
    plan[path.substr(5)] = value.is_discarded() ? nlohmann::json(text) : value;
  }
  return plan;
}

// Checks that each scenario's plan and the plan of each of its automatic layouts read back as write_plan writes
// them; returns how many layouts it checked.
std::size_t check_round_trips(const std::vector<std::filesystem::path>& scenarios)
{
  std::size_t layouts = 0;
  for (const auto& file : scenarios) {
    INFO(file.string());
    const auto base = sim::scenario::load_scenario(file, test::options());
    CHECK(read_back(base.plan, base) == base.plan);
    const auto written = sim::core::read_json_file(file).at("plan");
    sim::core::Provenance provenance;
    provenance.add_source("", file.string());
    for (const auto& layout : sim::study::auto_layouts(base)) {
      INFO(sim::study::layout_label(layout));
      const auto json = with_layout(written, layout);
      const auto plan = sim::plan::read_plan(sim::core::Node(json, "", provenance), base.model, base.gpus);
      CHECK(read_back(plan, base) == plan);
      ++layouts;
    }
  }
  return layouts;
}

} // namespace

TEST_CASE("the plans of the shipped scenarios outside whatif/, and of all their automatic layouts, read back as "
          "write_plan writes them")
{
  const auto scenarios = shipped_scenarios(Part::OTHERS);
  REQUIRE(scenarios.size() > 20);
  CHECK(check_round_trips(scenarios) > 50000);
}

TEST_CASE("the plans of the shipped scenarios in whatif/, and of all their automatic layouts, read back as write_plan "
          "writes them")
{
  const auto scenarios = shipped_scenarios(Part::WHATIF);
  REQUIRE(scenarios.size() > 20);
  CHECK(check_round_trips(scenarios) > 50000);
}

TEST_CASE("write_plan leaves out what reads back anyway: FP8 keys without FP8, the balanced layer split")
{
  const auto s = sim::scenario::load_scenario(test::source_dir() / "scenarios/default.json", test::options());
  const auto j = sim::plan::write_plan(s.plan);
  CHECK(j.at("tp") == 8);
  CHECK(j.at("dp_bucket_size") == "160000000B");
  CHECK(j.at("software") == "megatron-core");
  CHECK(j.at("norm_impl") == "te");
  CHECK_FALSE(j.contains("fp8_recipe"));
  CHECK_FALSE(j.contains("layers_per_stage"));
  auto uneven = s.plan;
  uneven.layers_per_chunk = {19, 21};
  CHECK(sim::plan::write_plan(uneven).at("layers_per_stage") == nlohmann::json{19, 21});
  auto fp8 = s.plan;
  fp8.precision = sim::hardware::Precision::FP8;
  CHECK(sim::plan::write_plan(fp8).at("fp8_recipe") == "delayed");
}

TEST_CASE("the report's plan holds every plan key, the software's inside `software`, and the micro-batches")
{
  const auto s = sim::scenario::load_scenario(test::source_dir() / "scenarios/default.json", test::options());
  const auto j = sim::report::plan_json(s.plan);
  std::set<std::string> names;
  for (const auto& key : sim::plan::plan_keys()) {
    INFO(key.name);
    CHECK(names.insert(key.name).second); // each key once
    if (key.name != "fp8_recipe" && key.name != "fp8_param_gather" && key.name != "shard_group" &&
        key.name != "recompute_modules" && key.name != "lora_targets" && key.name != "lora_dropout" &&
        key.name != "lora_dropout_position" && key.name != "lora_scale_position")
      CHECK(j.contains(nlohmann::json::json_pointer(key.report)));
  }
  auto sharded = s.plan;
  sharded.distributed_optimizer = true;
  CHECK(sim::report::plan_json(sharded).at("shard_group") == 1); // all of dp x cp (dp 1 here)
  auto selective = s.plan;
  selective.recompute = sim::model::Recompute::SELECTIVE;
  CHECK(sim::report::plan_json(selective).at("recompute_modules") == nlohmann::json{"core_attn"});
  auto lora = s.plan;
  lora.lora_rank = 16;
  CHECK(sim::report::plan_json(lora).at("lora_targets").size() == 7); // every projection, the default
  CHECK(j.at("software").at("generation") == "megatron-core");
  CHECK(j.at("dp_bucket_size_bytes") == 160e6);
  CHECK(j.at("layers_per_chunk") == nlohmann::json{20, 20});
  CHECK(j.at("microbatches") == 16);
}
