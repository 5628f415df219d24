// The validation summary: each GPU's accuracy on published runs, step times and memory apart, and how reports quote it.
#include "support.hpp"
#include "validation/summary.hpp"

using sim::validation::Comparison;
using sim::validation::Quantity;
using Json = nlohmann::json;

namespace {

Comparison comparison(const std::string& case_id, const std::string& gpu, const std::string& source, Quantity q,
                      double error, bool primary = true)
{
  Comparison c;
  c.case_id = case_id;
  c.run = case_id;
  c.source = source;
  c.gpu = gpu;
  c.quantity = q;
  c.measured = 1.0;
  c.predicted = 1.0 + error;
  c.error = error;
  c.primary = primary;
  return c;
}

sim::validation::ValidationResult result()
{
  sim::validation::ValidationResult r;
  r.cases = 7;
  r.unsupported = {{"fp8", "FP8 training is not modelled"}};
  r.comparisons = {
      // A throughput 25 % too high is a step 20 % too short.
      comparison("sc21", "a100-sxm4-80gb", "SC21 Table 1", Quantity::HARDWARE_FLOPS, 0.25),
      comparison("mtnlg", "a100-sxm4-80gb", "MT-NLG", Quantity::STEP_TIME, -0.10),
      comparison("layer", "a100-sxm4-80gb", "Korthikanti Table 4", Quantity::LAYER_FORWARD, -0.30),
      comparison("layer", "a100-sxm4-80gb", "Korthikanti Table 4", Quantity::LAYER_TOTAL, 5.0, false),
      comparison("memory", "a100-sxm4-80gb", "Korthikanti memory", Quantity::ACTIVATION_MEMORY, 0.0),
      comparison("memory", "a100-sxm4-80gb", "Korthikanti memory", Quantity::ACTIVATION_SHARE, -0.01),
      comparison("h100", "h100-sxm5-80gb", "Megatron-LM H100", Quantity::MFU, 0.0),
  };
  return r;
}

sim::report::Summary summary()
{
  return sim::validation::summarize(result(), "cases.json", {{"a100-sxm4-80gb", "A100-SXM4-80GB"}});
}

// read_summary on `j`, as the file `summary.json`: "" or the error.
std::string read_error(const Json& j)
{
  sim::core::Provenance provenance;
  provenance.add_source("", "summary.json");
  return test::error_of([&] { sim::report::read_summary(sim::core::Node(j, "", provenance)); });
}

} // namespace

TEST_CASE("a GPU's accuracy counts step times and memory apart, a throughput's error as the step time's")
{
  const auto s = summary();
  CHECK(s.cases == 7);
  CHECK(s.comparisons == 6); // primary only
  CHECK(s.unsupported == 1);
  REQUIRE(s.gpus.size() == 2);
  const auto& a100 = s.gpus.at("A100-SXM4-80GB");
  CHECK(a100.preset == "a100-sxm4-80gb");
  CHECK(a100.runs == 4);
  CHECK(a100.comparisons == 5);
  REQUIRE(a100.time);
  CHECK(a100.time->overall.runs == 3);
  CHECK(a100.time->overall.comparisons == 3);
  CHECK(a100.time->overall.median_abs_error == Approx(0.20)); // step time errors -0.20, -0.10, -0.30
  CHECK(a100.time->overall.worst_abs_error == Approx(0.30));
  CHECK(a100.time->overall.bias == Approx(-0.20));
  REQUIRE(a100.time->sources.size() == 3);
  CHECK(a100.time->sources[0].source == "Korthikanti Table 4");
  CHECK(a100.time->sources[2].source == "SC21 Table 1");
  CHECK(a100.time->sources[2].quantity == "TFLOP/s per GPU (with recompute)");
  CHECK(a100.time->sources[2].accuracy.bias == Approx(-0.20));
  REQUIRE(a100.memory); // memory's near-zero errors stay out of the step time's statistics
  CHECK(a100.memory->overall.runs == 1);
  CHECK(a100.memory->overall.comparisons == 2);
  CHECK(a100.memory->overall.median_abs_error == Approx(0.005));
  CHECK(a100.memory->overall.worst_abs_error == Approx(0.01));
  const auto& h100 = s.gpus.at("h100-sxm5-80gb"); // no catalogue name given: keyed by its preset
  CHECK(h100.time);
  CHECK_FALSE(h100.memory);
}

TEST_CASE("a validation summary reads back as written, and a malformed one is refused with its pointer")
{
  const Json j = sim::report::summary_json(summary());
  CHECK(j["schema"] == "validation-summary/v1");
  CHECK(j["gpus"]["A100-SXM4-80GB"]["time"]["runs"] == 3);
  CHECK_FALSE(j["gpus"]["h100-sxm5-80gb"].contains("memory"));
  CHECK(read_error(j).empty());
  sim::core::Provenance provenance;
  CHECK(sim::report::summary_json(sim::report::read_summary(sim::core::Node(j, "", provenance))) == j);

  Json typo = j;
  typo["gpus"]["A100-SXM4-80GB"]["time"]["worst_abs_eror"] = 0.1;
  CHECK_THAT(read_error(typo), Catch::StartsWith("summary.json:/gpus/A100-SXM4-80GB/time/worst_abs_eror: unknown key; "
                                                 "did you mean \"worst_abs_error\"?"));
  Json negative = j;
  negative["gpus"]["A100-SXM4-80GB"]["memory"]["median_abs_error"] = -0.1;
  CHECK_THAT(read_error(negative),
             Catch::StartsWith("summary.json:/gpus/A100-SXM4-80GB/memory/median_abs_error: out of range"));
  Json worst_below_median = j;
  worst_below_median["gpus"]["A100-SXM4-80GB"]["time"]["worst_abs_error"] = 0.1;
  CHECK_THAT(read_error(worst_below_median), Catch::Contains("/time/worst_abs_error: out of range"));
  Json wrong_type = j;
  wrong_type["gpus"]["A100-SXM4-80GB"]["runs"] = "4";
  CHECK_THAT(read_error(wrong_type), Catch::Contains("/gpus/A100-SXM4-80GB/runs: wrong type"));
  Json empty = j;
  empty["gpus"]["h100-sxm5-80gb"].erase("time");
  CHECK_THAT(read_error(empty), Catch::Contains("/gpus/h100-sxm5-80gb: no comparisons"));
  CHECK_THAT(read_error({{"schema", "gpu/v1"}}), Catch::Contains("unsupported schema"));
}

TEST_CASE("a report quotes its GPU's step-time accuracy, or says why it cannot")
{
  const sim::report::SummaryFile file{summary(), "", ""};
  const auto a100 = sim::report::gpu_validation(file, "A100-SXM4-80GB");
  CHECK(a100["covered"] == true);
  CHECK(a100["runs"] == 3);
  CHECK(a100["median_abs_error"].get<double>() == Approx(0.20));
  CHECK(a100["sources"].size() == 3);
  CHECK(a100["memory"]["comparisons"] == 2);
  CHECK(sim::report::accuracy_line(a100) == "accuracy: A100-SXM4-80GB step times 20.0% off median, 30.0% worst "
                                            "over 3 published runs (mostly too short); memory within 1.0% (1 run)");

  const auto h20 = sim::report::gpu_validation(file, "H20-96GB");
  CHECK(h20["covered"] == false);
  CHECK(h20["memory"].is_null());
  CHECK(sim::report::accuracy_line(h20) ==
        "accuracy: H20-96GB: no published run validates this GPU; treat step times as estimates");

  const auto missing = sim::report::load_summary(test::scratch_dir());
  CHECK_FALSE(missing.summary);
  CHECK(missing.warning.empty());
  const auto none = sim::report::gpu_validation(missing, "A100-SXM4-80GB");
  CHECK(none["covered"] == false);
  CHECK(none["reason"].get<std::string>().starts_with("no validation summary"));

  const auto dir = test::scratch_dir();
  test::write_text(sim::report::summary_path(dir), R"({"schema": "validation-summary/v1")");
  const auto broken = sim::report::load_summary(dir);
  CHECK_FALSE(broken.summary);
  CHECK_THAT(broken.warning, Catch::Contains("summary.json"));
  CHECK(sim::report::gpu_validation(broken, "A100-SXM4-80GB")["reason"].get<std::string>().starts_with(
      "the validation summary is unreadable"));

  const auto shipped = sim::report::load_summary(test::source_dir());
  INFO(shipped.warning);
  CHECK(shipped.summary); // tools/validate wrote it, and it reads
}

TEST_CASE("a summary tells kinds of run apart, and a report quotes the accuracy of its own kinds")
{
  auto r = result();
  for (auto& c : r.comparisons)
    c.kinds = {"dense"};
  auto moe = comparison("moe", "a100-sxm4-80gb", "Megatron-Bridge", Quantity::TOKENS_PER_GPU, 0.25);
  moe.kinds = {"MoE", "FP8"};
  r.comparisons.push_back(moe);
  const auto s = sim::validation::summarize(r, "cases.json", {{"a100-sxm4-80gb", "A100-SXM4-80GB"}});
  const auto& a100 = s.gpus.at("A100-SXM4-80GB");
  REQUIRE(a100.kinds.count("MoE") == 1);
  CHECK(a100.kinds.at("MoE").runs == 1);
  CHECK(a100.kinds.at("MoE").bias == Approx(-0.2)); // tokens/s 25 % too high: a step 20 % too short
  CHECK(a100.kinds.at("dense").runs == 3);          // the step times only, not memory
  CHECK_FALSE(a100.kinds.count("CP"));

  const Json j = sim::report::summary_json(s);
  CHECK(j["gpus"]["A100-SXM4-80GB"]["kinds"]["FP8"]["runs"] == 1);
  sim::core::Provenance provenance;
  CHECK(sim::report::summary_json(sim::report::read_summary(sim::core::Node(j, "", provenance))) == j);
  Json unknown = j;
  unknown["gpus"]["A100-SXM4-80GB"]["kinds"]["FP4"] = unknown["gpus"]["A100-SXM4-80GB"]["kinds"]["FP8"];
  CHECK_THAT(read_error(unknown), Catch::Contains("/kinds/FP4: unknown kind of run"));

  const sim::report::SummaryFile file{s, "", ""};
  const auto v = sim::report::gpu_validation(file, "A100-SXM4-80GB", {"MoE", "CP"});
  REQUIRE(v["kinds"].size() == 2);
  CHECK(v["kinds"][0]["kind"] == "MoE");
  CHECK(v["kinds"][0]["covered"] == true);
  CHECK(v["kinds"][1]["covered"] == false);
  CHECK_THAT(sim::report::accuracy_line(v),
             Catch::Contains("; MoE runs 20.0% off median, 20.0% worst over 1 published run; no published CP run "
                             "validated on it; memory within"));
  // A dense run quotes its GPU only; so does every run with a summary written before kinds were told apart.
  CHECK_FALSE(sim::report::gpu_validation(file, "A100-SXM4-80GB", {"dense"}).contains("kinds"));
  const sim::report::SummaryFile old{summary(), "", ""};
  CHECK_FALSE(sim::report::gpu_validation(old, "A100-SXM4-80GB", {"MoE"}).contains("kinds"));
}
