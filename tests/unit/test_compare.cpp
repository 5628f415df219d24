// Side-by-side comparison of two reports: deltas, and which part of the step explains the difference.
#include "study/compare.hpp"
#include "support.hpp"

namespace {

nlohmann::json report(double step, double compute, double tp_exposed, double nvlink_util)
{
  return {{"step_time_s", step},
          {"tokens_per_s", 1000.0 / step},
          {"tflops_per_gpu", 100.0 / step},
          {"mfu", 0.5 / step},
          {"bubble", {{"mean", 0.0}}},
          {"memory", {{"per_stage", {{{"peak_bytes", 1e10}}}}, {"oom", false}}},
          {"breakdown_s",
           {{"compute", compute},
            {"tp_exposed", tp_exposed},
            {"pp_exposed", 0.0},
            {"dp_exposed", 0.0},
            {"bubble", step - compute - tp_exposed},
            {"optimizer", 0.0}}},
          {"comm_s", {{"tp", tp_exposed}, {"pp", 0.0}, {"dp", 0.0}}},
          {"links", {{"nvlink", {{"bytes", 1e12}, {"avg_util", nvlink_util}}}}}};
}

} // namespace

TEST_CASE("a comparison names the part of the step that grew and the links that got busier")
{
  const auto c = sim::study::compare_reports(report(1.0, 0.8, 0.1, 0.2), report(1.2, 0.8, 0.3, 0.3), "a", "b");
  REQUIRE_FALSE(c.contributions.empty());
  CHECK(c.contributions.front().part == "exposed TP communication");
  CHECK(c.contributions.front().delta_s == Approx(0.2));
  CHECK(c.contributions.front().share == Approx(1.0));
  CHECK(c.explanation.starts_with("B is 20.0% slower than A"));
  CHECK(c.explanation.find("exposed TP communication +200.000 ms (100% of the difference)") != std::string::npos);
  CHECK(c.explanation.find("nvlink links average 20.0% busy in A, 30.0% in B") != std::string::npos);
  const auto text = sim::study::comparison_text(c);
  CHECK(text.find("step time") != std::string::npos);
  CHECK(text.find("+200.000 ms (+20.0%)") != std::string::npos);
}

TEST_CASE("identical steps compare as equal")
{
  const auto c = sim::study::compare_reports(report(1.0, 0.8, 0.1, 0.2), report(1.0, 0.8, 0.1, 0.2), "a", "b");
  CHECK(c.explanation == "B takes as long as A.");
}

TEST_CASE("a --set path given twice splits into A's and B's value, the rest apply to both")
{
  const auto s = sim::study::split_overrides({"plan.tp=4", "plan.pp=2", "plan.tp=8"});
  CHECK(s.a == std::vector<std::string>{"plan.tp=4", "plan.pp=2"});
  CHECK(s.b == std::vector<std::string>{"plan.pp=2", "plan.tp=8"});
  CHECK_THROWS_AS(sim::study::split_overrides({"plan.tp=4"}), sim::core::InputError);
  CHECK_THROWS_AS(sim::study::split_overrides({"plan.tp=4", "plan.tp=8", "plan.tp=2"}), sim::core::InputError);
}

TEST_CASE("a side that changes tp or pp keeps the GPU count by deriving dp again")
{
  using sim::study::keep_gpu_count;
  CHECK(keep_gpu_count({"plan.tp=4"}, 8, 2, 64) == std::optional<std::string>("plan.dp=8"));
  CHECK(keep_gpu_count({"plan.tp=4", "plan.pp=4"}, 8, 2, 64) == std::optional<std::string>("plan.dp=4"));
  CHECK_FALSE(keep_gpu_count({"plan.schedule=gpipe"}, 8, 2, 64));    // the layout is unchanged
  CHECK_FALSE(keep_gpu_count({"plan.tp=4", "plan.dp=2"}, 8, 2, 64)); // the side names its own count
  CHECK_FALSE(keep_gpu_count({"plan.tp=4", "gpus=32"}, 8, 2, 64));
  CHECK_FALSE(keep_gpu_count({"plan.tp=four"}, 8, 2, 64)); // left to the scenario loader to refuse
  const auto error = test::error_of([] { keep_gpu_count({"plan.tp=3"}, 8, 2, 64); });
  CHECK(error.find("tp*pp = 3*2 = 6 does not divide the scenario's 64 GPUs") != std::string::npos);
  // a product beyond int is refused, not wrapped
  const auto huge = test::error_of([] { keep_gpu_count({"plan.tp=65536", "plan.pp=65536"}, 8, 2, 64); });
  CHECK(huge.find("4294967296") != std::string::npos);
}
