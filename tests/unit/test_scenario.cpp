#include "cli/file_check.hpp"
#include "report/analysis.hpp"
#include "scenario/feasibility.hpp"
#include "scenario/scenario.hpp"
#include "workload/graph_size.hpp"

#include "support.hpp"

using test::error_of;
using test::options;
using test::scenario_json;

namespace {

sim::scenario::Scenario load(const nlohmann::json& doc, std::vector<std::string> overrides = {})
{
  const auto file = test::write_json(test::scratch_dir() / "s.json", doc);
  return sim::scenario::load_scenario(file, options(std::move(overrides)));
}

std::string load_error(const nlohmann::json& doc, std::vector<std::string> overrides = {})
{
  const auto file = test::write_json(test::scratch_dir() / "s.json", doc);
  return error_of([&] { sim::scenario::load_scenario(file, options(std::move(overrides))); });
}

} // namespace

TEST_CASE("the default scenario loads with its presets and Megatron-LM's defaults")
{
  const auto s = sim::scenario::load_scenario(test::source_dir() / "scenarios/default.json", options());
  CHECK(s.model.name == "Llama-2 13B");
  CHECK(s.cluster.gpu.name == "A100-SXM4-80GB");
  CHECK(s.gpus == 16);
  CHECK(s.nodes == 2);
  CHECK(s.plan.tp == 8);
  CHECK(s.plan.pp == 2);
  CHECK(s.plan.microbatches() == 16);
  CHECK(s.plan.layers_per_chunk == std::vector<int>{20, 20});
  CHECK(s.plan.rank_order[0] == sim::plan::ParallelDim::TP);
  CHECK(s.plan.overlap_grad_reduce);
  CHECK(s.plan.fp32_grad_accumulation); // bf16: Megatron accumulates gradients in fp32
  CHECK(s.warnings.empty());
}

TEST_CASE("dp defaults to the GPUs left over by tp and pp, and global batch to one micro-batch per replica")
{
  auto doc = scenario_json("llama2-7b", {{"tp", 2}, {"pp", 2}});
  doc["gpus"] = 32;
  const auto s = load(doc);
  CHECK(s.plan.dp == 8);
  CHECK(s.plan.global_batch == 8);
  CHECK(s.plan.seq_length == 4096);
}

TEST_CASE("command-line overrides set plan, model and topology values by dotted path")
{
  const auto s = load(scenario_json("llama2-7b", {{"tp", 2}}),
                      {"plan.tp=4", "model.num_layers=16", "topology.node.gpu.memory=40GiB", "plan.schedule=gpipe",
                       "topology.node.nvlink.bandwidth=200GBps"});
  CHECK(s.plan.tp == 4);
  CHECK(s.model.num_layers == 16);
  CHECK(s.cluster.gpu.memory_bytes == Approx(40.0 * (1 << 30)));
  CHECK(s.plan.schedule == sim::plan::Schedule::GPIPE);
  CHECK(std::get<sim::topology::NvSwitchFabric>(*s.cluster.node.nvlink).bandwidth == Approx(200e9));
}

TEST_CASE("an overridden value is validated like the file and the error names the override")
{
  const auto message = load_error(scenario_json("llama2-7b", {{"tp", 2}}), {"plan.tp=3"});
  CHECK_THAT(message, Catch::Contains("s.json:/plan/tp: 3 does not divide num_attention_heads=32"));
  CHECK_THAT(message, Catch::EndsWith("[set by --set plan.tp=3]"));
  CHECK_THAT(load_error(scenario_json("llama2-7b", {}), {"plan.tp"}),
             Catch::StartsWith("--set plan.tp: malformed override"));
  CHECK_THAT(load_error(scenario_json("llama2-7b", {{"tp", 2}}), {"plan.tp.x=1"}),
             Catch::Contains("cannot set plan.tp.x: not an object here"));
}

TEST_CASE("a misspelt preset name gets a did-you-mean and the list of presets")
{
  CHECK_THAT(load_error(scenario_json("llama2-7", {})),
             Catch::Contains(R"(s.json:/model: unknown model preset; did you mean "llama2-7b"?)"));
  CHECK_THAT(load_error(scenario_json("llama2-7b", {}, "dgx-a10")),
             Catch::Contains(R"(/topology: unknown topology preset; did you mean "dgx-a100"?)"));
}

TEST_CASE("a scenario can point its model at a HuggingFace config.json")
{
  auto doc =
      scenario_json(test::source_dir().string() + "/tests/data/hf/mistral-7b", {{"tp", 8}, {"seq_length", 4096}});
  const auto s = load(doc);
  CHECK(s.model.num_kv_heads == 8);
  CHECK(s.plan.seq_length == 4096);
  doc["plan"]["tp"] = 16;
  doc["gpus"] = 16;
  CHECK_THAT(load_error(doc), Catch::Contains("/plan/tp: 16 does not divide num_kv_heads=8 of model 'mistral-7b'"));
}

TEST_CASE("a model can be given inline")
{
  nlohmann::json model = {{"schema", "model/v1"},     {"name", "tiny"},     {"num_layers", 4},  {"hidden_size", 256},
                          {"num_attention_heads", 4}, {"vocab_size", 1000}, {"seq_length", 512}};
  auto doc = scenario_json("x", {{"pp", 2}});
  doc["model"] = model;
  CHECK(load(doc).plan.layers_per_chunk == std::vector<int>{2, 2});
}

TEST_CASE("tp*pp*dp must equal the GPU count the topology or scenario fixes")
{
  auto doc = scenario_json("llama2-7b", {{"tp", 8}, {"dp", 2}});
  doc["gpus"] = 32;
  CHECK_THAT(load_error(doc), Catch::Contains("/plan/dp: tp*pp*dp = 8*1*2 = 16 does not match the cluster's 32 GPUs"));
  doc["topology"] = "dgx-a100";
  CHECK_THAT(load_error(doc, {"topology.nodes=2"}), Catch::Contains("/gpus: topology 'dgx-a100' pins 2 nodes"));
}

TEST_CASE("infeasible plans are reported with their numbers")
{
  CHECK_THAT(load_error(scenario_json("llama2-7b", {{"pp", 64}})),
             Catch::Contains("/plan/pp: 64 stages exceed num_layers=32 of model 'Llama-2 7B'"));
  CHECK_THAT(load_error(scenario_json("llama2-7b", {{"pp", 4}, {"virtual_stages", 16}, {"global_batch", 8}})),
             Catch::Contains("/plan/virtual_stages: pp*virtual_stages = 4*16 = 64 chunks exceed num_layers=32"));
  CHECK_THAT(load_error(scenario_json("llama2-7b", {{"dp", 4}, {"micro_batch", 2}, {"global_batch", 12}})),
             Catch::Contains("/plan/global_batch: 12 is not divisible by micro_batch*dp = 2*4 = 8"));
  CHECK_THAT(load_error(scenario_json("llama2-70b", {{"tp", 16}})),
             Catch::Contains("/plan/tp: 16 does not divide num_kv_heads=8 of model 'Llama-2 70B'"));
  CHECK_THAT(load_error(scenario_json("llama2-7b", {{"pp", 2}, {"zero_stage", 2}})),
             Catch::Contains("/plan/zero_stage: ZeRO stage 2 shards gradients"));
  CHECK_THAT(load_error(scenario_json("llama2-7b", {{"pp", 2}, {"schedule", "interleaved"}})),
             Catch::Contains("/plan/virtual_stages: the interleaved schedule needs virtual_stages >= 2"));
  CHECK_THAT(load_error(scenario_json("llama2-7b", {{"pp", 2}, {"virtual_stages", 2}, {"global_batch", 3}})),
             Catch::Contains("micro-batches per step to be a multiple of pp=2"));
  CHECK_THAT(load_error(scenario_json("llama2-7b", {{"dp", 8}}, "dgx-v100")),
             Catch::Contains("/plan/precision: V100-SXM2-32GB has no bf16 rate"));
  CHECK_THAT(load_error(scenario_json("gpt3-175b", {{"tp", 8}, {"seq_length", 4096}})),
             Catch::Contains("/plan/seq_length: 4096 exceeds the 2048 learned positions"));
  CHECK_THAT(load_error(scenario_json("llama2-7b", {{"dp", 12}})),
             Catch::Contains("12 GPUs do not fill whole 8-GPU nodes of 'dgx-a100'"));
}

TEST_CASE("DualPipe is refused where deepseek-ai/DualPipe asserts: an odd pp, too few or an odd number of "
          "micro-batches")
{
  CHECK_THAT(
      load_error(scenario_json(
          "llama2-7b", {{"pp", 2}, {"dp", 4}, {"global_batch", 32}, {"schedule", "dualpipe"}, {"virtual_stages", 3}})),
      Catch::Contains("/plan/virtual_stages: dualpipe runs two chunks per GPU, not virtual_stages=3"));
  CHECK_THAT(
      load_error(scenario_json("llama2-7b", {{"pp", 1}, {"dp", 8}, {"global_batch", 32}, {"schedule", "dualpipev"}})),
      Catch::Contains("/plan/pp: dualpipev needs at least 2 pipeline stages, not pp=1"));
  CHECK_THAT(load_error(scenario_json("llama2-7b", {{"pp", 8}, {"global_batch", 10}, {"schedule", "dualpipe"}})),
             Catch::Contains("/plan/global_batch: dualpipe needs at least 2*pp = 16 micro-batches per step, an even "
                             "number; this plan has 10"));
  CHECK_THAT(
      load_error(scenario_json("llama2-7b", {{"pp", 4}, {"dp", 2}, {"global_batch", 18}, {"schedule", "dualpipe"}})),
      Catch::Contains("at least 2*pp = 8 micro-batches per step, an even number; this plan has 9"));
  CHECK(load_error(scenario_json("llama2-7b", {{"pp", 4}, {"dp", 2}, {"global_batch", 18}, {"schedule", "dualpipev"}}))
            .empty());
}

TEST_CASE("a TP group spanning nodes and an uneven layer split are flagged, not refused")
{
  auto s = load(scenario_json("llama2-7b", {{"tp", 16}}));
  REQUIRE(s.warnings.size() == 1);
  CHECK_THAT(sim::core::format_warning(s.warnings[0]),
             Catch::Contains("/plan/tp: 1 of 1 tensor-parallel groups span nodes (up to 2 nodes each)"));
  s = load(scenario_json("llama2-7b", {{"tp", 4}, {"pp", 2}, {"rank_order", "pp-tp-dp"}, {"global_batch", 8}}));
  REQUIRE(s.warnings.empty()); // 8 GPUs: every group is inside the one node
  s = load(scenario_json("llama3-405b", {{"tp", 8}, {"pp", 16}, {"global_batch", 64}}));
  REQUIRE(s.warnings.size() == 1);
  CHECK_THAT(sim::core::format_warning(s.warnings[0]), Catch::Contains("balanced as 7 to 8 layers"));
}

TEST_CASE("check recognises every kind of file")
{
  using sim::cli::FileKind;
  const auto& dir = test::source_dir();
  CHECK(sim::cli::check_file(dir / "models/gpt3-175b.json", options()).kind == FileKind::MODEL);
  CHECK(sim::cli::check_file(dir / "topologies/dgx-v100.json", options()).kind == FileKind::TOPOLOGY);
  CHECK(sim::cli::check_file(dir / "topologies/gpus/h800-sxm5-80gb.json", options()).kind == FileKind::GPU);
  CHECK(sim::cli::check_file(dir / "scenarios/default.json", options()).kind == FileKind::SCENARIO);
  CHECK(sim::cli::check_file(dir / "tests/data/hf/gpt2/config.json", options()).kind == FileKind::HF_CONFIG);
  CHECK(sim::cli::check_file(dir / "topologies/gpus/validation/summary.json", options()).kind ==
        FileKind::VALIDATION_SUMMARY);
  const auto odd = test::write_json(test::scratch_dir() / "odd.json", {{"schema", "plan/v1"}});
  CHECK_THAT(error_of([&] { sim::cli::check_file(odd, options()); }),
             Catch::EndsWith(
                 R"(odd.json:/schema: unsupported schema (found "plan/v1"; expected one of scenario/v1, )"
                 "model/v1, topology/v1, gpu/v1, kernels/v1, validation-summary/v1 (or a HuggingFace config.json))"));
}

TEST_CASE("tp*pp*dp beyond a million GPUs is refused before any product overflows")
{
  CHECK_THAT(load_error(scenario_json("llama2-7b", {{"tp", 65536}, {"pp", 65536}})),
             Catch::Contains("/plan/pp: tp*pp = 65536*65536 = 4294967296 GPUs per replica (expected at most 1048576"));
  CHECK_THAT(load_error(scenario_json("llama2-7b", {{"tp", 8}, {"pp", 2}, {"dp", 1048576}})),
             Catch::Contains("/plan/dp: tp*pp*dp = 8*2*1048576 = 16777216 GPUs"));
}

TEST_CASE("fewer micro-batches than pipeline stages is flagged with the bubble it costs")
{
  const auto s = load(scenario_json("llama2-7b", {{"pp", 4}, {"dp", 2}, {"global_batch", 4}}));
  REQUIRE(s.warnings.size() == 1);
  CHECK_THAT(sim::core::format_warning(s.warnings[0]),
             Catch::Contains("/plan/global_batch: 2 micro-batches per step for 4 pipeline stages: about 60% of the "
                             "pipeline phase is bubble; a global_batch of 32 or more"));
}

TEST_CASE("a plan whose fullest GPU overflows its memory is refused with the stage and by how much")
{
  const auto fits = sim::scenario::load_scenario(test::source_dir() / "scenarios/default.json", options());
  CHECK_NOTHROW(sim::scenario::refuse_out_of_memory(fits));
  const auto s = sim::scenario::load_scenario(test::source_dir() / "scenarios/default.json",
                                              options({"topology.node.gpu.memory=8GiB"}));
  const auto error = error_of([&] { sim::scenario::refuse_out_of_memory(s, "topology.node.gpu.memory=8GiB"); });
  CHECK_THAT(error, Catch::Contains("/plan: does not fit in GPU memory: stage 0 needs"));
  CHECK_THAT(error, Catch::Contains("of 7.63 GiB per GPU (HBM less the CUDA context)")); // 8 GiB less 400 MB
  CHECK_THAT(error, Catch::Contains("--allow-oom simulates it anyway"));
  CHECK_THAT(error, Catch::Contains("[set by --set topology.node.gpu.memory=8GiB]"));
}

TEST_CASE("a task graph larger than the machine's memory is refused with the batch that would fit")
{
  const auto s = sim::scenario::load_scenario(test::source_dir() / "scenarios/default.json", options());
  CHECK_NOTHROW(sim::scenario::refuse_oversized_graph(s, {.fold = true}, {64e9, "test"}));
  const auto error = error_of([&] {
    sim::scenario::refuse_oversized_graph(s, {.fold = false}, {1e6, "a test's 1 MB"});
  });
  CHECK_THAT(error, Catch::Contains("the step's task graph would not fit in this machine's memory: about"));
  CHECK_THAT(error, Catch::Contains("16 micro-batches of 40 layers on 16 simulated GPUs"));
  CHECK_THAT(error, Catch::Contains("(a test's 1 MB)"));
  CHECK_THAT(error, Catch::Contains("even one micro-batch's graph would not fit; folding identical GPUs"));
  const double full = sim::workload::estimate_graph_size(s.model, s.plan, s.cluster, {.fold = false}).bytes;
  const auto quarter = error_of([&] {
    sim::scenario::refuse_oversized_graph(s, {.fold = false}, {full / 4, "a quarter"});
  });
  CHECK_THAT(quarter, Catch::Contains("a global_batch of at most 4 sequences")); // 16 micro-batches of 1
  CHECK_NOTHROW(sim::scenario::refuse_oversized_graph(s, {.fold = false}, {full * 1.01, "just enough"}));
  CHECK(sim::scenario::machine_memory().available_bytes > 0);
}

TEST_CASE("a scenario's variants read as loading it with both override lists, without reading the files again")
{
  const auto file = test::source_dir() / "scenarios/whatif/straggler-llama3-8b-h100.json";
  const std::vector<std::string> base = {"plan.micro_batch=2", "training_tokens=1e12"};
  const sim::scenario::ScenarioVariants variants(file, options(base));
  const auto same = [&](const std::vector<std::string>& overrides) {
    auto all = base;
    all.insert(all.end(), overrides.begin(), overrides.end());
    const auto loaded = sim::scenario::load_scenario(file, options(all));
    const auto variant = variants.variant(overrides);
    CHECK(sim::scenario::same_setup(variant, loaded));
    CHECK(sim::report::plan_json(variant.plan) == sim::report::plan_json(loaded.plan));
    CHECK(variant.cluster.stragglers == loaded.cluster.stragglers);
    CHECK(variant.overrides == loaded.overrides);
    CHECK(variant.name == loaded.name);
    CHECK(variant.warnings == loaded.warnings);
  };
  same({});
  same({"plan.tp=2", "plan.dp=16"}); // the layout alone: the model and cluster kept
  same({"plan.pp=4", "plan.dp=2", "plan.global_batch=64"});
  same({"gpus=128", "plan.dp=8"});                  // another GPU count: the stragglers placed again
  same({"topology.node.nvlink.bandwidth=200GBps"}); // the cluster: read again from the document resolved once
  same({"model.num_layers=16", "plan.tp=4", "plan.dp=8"});
  CHECK(sim::scenario::same_setup(variants.base(), sim::scenario::load_scenario(file, options(base))));
  // An invalid layout fails as the load would.
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"plan.tp=3"}, {"plan.schedule=zigzag"}, {"topology.node.gpu.memory=-1GiB"}}) {
    auto all = base;
    all.insert(all.end(), bad.begin(), bad.end());
    const auto expected = error_of([&] { sim::scenario::load_scenario(file, options(all)); });
    CHECK(!expected.empty());
    CHECK(error_of([&] { variants.variant(bad); }) == expected);
  }
}
