// Validation cases of schema v2 (../shared/validation/README.md, "Case schema, version 2"): each field read into the
// scenario, or the case refused with the reason in the schema's terms.
#include "core/document.hpp"
#include "support.hpp"
#include "validation/case_architecture.hpp"
#include "validation/case_conversion.hpp"
#include "validation/case_hardware.hpp"
#include "validation/comparison.hpp"
#include "validation/software_choice.hpp"

#include <catch2/catch.hpp>

using sim::validation::CaseConversion;
using sim::validation::convert_case;
using sim::validation::Quantity;
using Json = nlohmann::json;

namespace {

// A Megatron-core run of a small DeepSeek-shaped MoE model on 16 H100s.
Json moe_case()
{
  return Json::parse(R"json({
    "id": "moe", "source": "github.com/NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md (2025)",
    "model": {"name": "DeepSeek-V3", "layers": 8, "hidden": 2048, "heads": 16, "ffn_hidden": 8192, "vocab": 32000,
              "seq_len": 4096, "experts": 256, "top_k": 8, "expert_ffn_hidden": 512, "shared_experts": 2,
              "dense_layers": 2, "moe_layer_freq": 2,
              "mla": {"q_lora_rank": 768, "kv_lora_rank": 256, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32,
                      "v_head_dim": 64},
              "activation": "SwiGLU", "norm": "RMSNorm", "position_embedding": "RoPE", "tie_embeddings": false,
              "bias": false, "dropout": false},
    "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 16, "gpus_per_node": 8, "interconnect": "DGX-H100"},
    "plan": {"tp": 1, "pp": 1, "dp": 16, "ep": 8, "micro_batch": 1, "global_batch": 64, "precision": "bf16",
             "recompute": "none", "framework": "Megatron-Bridge"},
    "measured": {"tokens_per_s_per_gpu": 5000}
  })json");
}

// A Llama run stated with its shape but not its activation, norm or positions.
Json llama_case()
{
  return Json::parse(R"json({
    "id": "llama", "source": "github.com/pytorch/torchtitan benchmarks (2025)",
    "model": {"name": "Llama-3.1-8B", "params_b": 8.0, "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
              "ffn_hidden": 14336, "vocab": 128256, "seq_len": 8192},
    "hardware": {"gpu": "H100", "num_gpus": 8, "gpus_per_node": 8, "interconnect": "DGX-H100"},
    "plan": {"tp": 1, "pp": 1, "dp": 8, "local_batch": 2, "global_batch": 64, "precision": "bf16",
             "recompute": "none", "fsdp_degree": 8, "framework": "torchtitan"},
    "measured": {"mfu": 0.4, "tokens_per_s_per_gpu": 7000}
  })json");
}

bool assumed(const CaseConversion& c, const std::string& text)
{
  return std::any_of(c.assumptions.begin(), c.assumptions.end(),
                     [&](const std::string& a) { return a.find(text) != std::string::npos; });
}

} // namespace

TEST_CASE("a schema v2 MoE case becomes model/v1's moe and mla objects, routing from the published model")
{
  const auto c = convert_case(moe_case(), test::source_dir());
  REQUIRE(c.unsupported.empty());
  const auto& m = c.runs.at(0).scenario["model"];
  CHECK(m["moe"]["num_experts"] == 256);
  CHECK(m["moe"]["experts_per_token"] == 8);
  CHECK(m["moe"]["expert_ffn_hidden_size"] == 512);
  CHECK(m["moe"]["shared_expert_ffn_hidden_size"] == 2 * 512); // two shared experts of the routed width
  CHECK(m["moe"]["first_dense_layers"] == 2);
  CHECK(m["moe"]["layer_frequency"] == 2);
  CHECK(m["moe"]["router"] == "sigmoid"); // models/deepseek-v3.json
  CHECK(m["mla"]["kv_lora_rank"] == 256);
  CHECK(assumed(c, "routing from the published config (model preset deepseek-v3)"));

  auto shared_width = moe_case();
  shared_width["model"]["shared_expert_ffn_hidden"] = 1024;
  CHECK(convert_case(shared_width, test::source_dir())
            .runs.at(0)
            .scenario["model"]["moe"]["shared_expert_ffn_hidden_size"] == 2 * 1024);
  auto no_top_k = moe_case();
  no_top_k["model"].erase("top_k");
  CHECK_THAT(convert_case(no_top_k, test::source_dir()).unsupported, Catch::Contains("top_k"));
  auto orphan = moe_case();
  orphan["model"].erase("experts");
  CHECK_THAT(convert_case(orphan, test::source_dir()).unsupported, Catch::Contains("without model.experts"));
  auto active = moe_case();
  active["model"]["active_params_b"] = 50.0; // the shape above has well under 1B active parameters
  CHECK_THAT(convert_case(active, test::source_dir()).unsupported, Catch::Contains("active parameters"));
}

TEST_CASE("a schema v2 case's attention variants: windows read, one whole chunk accepted, shorter chunks and MTP "
          "refused")
{
  auto windows = moe_case();
  windows["model"].erase("mla");
  windows["model"]["sliding_window"] = 128;
  windows["model"]["full_attention_every"] = 2;
  windows["model"]["attention_sinks"] = true;
  const auto w = convert_case(windows, test::source_dir());
  REQUIRE(w.unsupported.empty());
  CHECK(w.runs.at(0).scenario["model"]["sliding_window"] == 128);
  CHECK(w.runs.at(0).scenario["model"]["global_attention_every"] == 2);
  CHECK(assumed(w, "attention sinks"));

  auto chunk = moe_case();
  chunk["model"]["chunked_attention"] = 4096; // the whole sequence: full attention
  CHECK(convert_case(chunk, test::source_dir()).unsupported.empty());
  chunk["model"]["chunked_attention"] = 1024;
  CHECK_THAT(convert_case(chunk, test::source_dir()).unsupported, Catch::Contains("chunked attention of 1024"));
  auto mtp = moe_case();
  mtp["model"]["mtp_depth"] = 1;
  const auto with_mtp = convert_case(mtp, test::source_dir());
  REQUIRE(with_mtp.unsupported.empty());
  CHECK(with_mtp.runs.at(0).scenario["model"]["mtp_layers"] == 1);
}

TEST_CASE("a Llama case without activation, norm or positions takes them from Llama 3's published config")
{
  const auto c = convert_case(llama_case(), test::source_dir());
  REQUIRE(c.unsupported.empty());
  const auto& m = c.runs.at(0).scenario["model"];
  CHECK(m["ffn_kind"] == "swiglu");
  CHECK(m["norm"] == "rmsnorm");
  CHECK(m["position_embedding"] == "rope");
  CHECK(m["tie_embeddings"] == false);
  CHECK(assumed(c, "model preset llama3-8b"));
  // A name no preset shares keeps simtrain's defaults, and then the stated size refuses the GeLU model.
  auto unknown = llama_case();
  unknown["model"]["name"] = "Falcon-Mamba 8B";
  CHECK_THAT(convert_case(unknown, test::source_dir()).unsupported, Catch::Contains("parameters, the case states 8"));

  const auto exact = sim::validation::published_config(test::source_dir(), "LLAMA3-70B");
  REQUIRE(exact);
  CHECK(exact->preset == "llama3-70b");
  CHECK(exact->exact);
  const auto family = sim::validation::published_config(test::source_dir(), "Llama 3.2 3B");
  REQUIRE(family);
  CHECK(family->preset.starts_with("llama3-"));
  CHECK_FALSE(family->exact);
  CHECK_FALSE(sim::validation::published_config(test::source_dir(), "MPT-7b"));
}

TEST_CASE("a schema v2 plan: local batch, FSDP degree, FP8 recipe and context-parallel kind")
{
  const auto c = convert_case(llama_case(), test::source_dir());
  REQUIRE(c.unsupported.empty());
  const auto& p = c.runs.at(0).scenario["plan"];
  CHECK(p["global_batch"] == 64);
  CHECK(p["micro_batch"] == 2); // the local batch, in one pass without a pipeline
  CHECK(p["zero_stage"] == 3);

  auto from_local = llama_case();
  from_local["plan"].erase("global_batch");
  CHECK(convert_case(from_local, test::source_dir()).runs.at(0).scenario["plan"]["global_batch"] == 16);
  auto uneven = llama_case();
  uneven["plan"]["global_batch"] = 20;
  CHECK_THAT(convert_case(uneven, test::source_dir()).unsupported, Catch::Contains("local_batch x dp"));
  auto hsdp = llama_case();
  hsdp["plan"]["fsdp_degree"] = 4;
  const auto hybrid = convert_case(hsdp, test::source_dir());
  REQUIRE(hybrid.unsupported.empty());
  CHECK(hybrid.runs.at(0).scenario["plan"]["shard_group"] == 4);
  CHECK(hybrid.runs.at(0).scenario["plan"]["zero_stage"] == 3);
  hsdp["plan"]["fsdp_degree"] = 3;
  CHECK_THAT(convert_case(hsdp, test::source_dir()).unsupported, Catch::Contains("into shard groups"));
  auto maxtext = llama_case(); // no recomputation stated: the framework's default
  maxtext["plan"].erase("recompute");
  maxtext["plan"]["framework"] = "MaxText (JAX)";
  const auto remat = convert_case(maxtext, test::source_dir());
  CHECK(remat.runs.at(0).scenario["plan"]["recompute"] == "full");
  CHECK(assumed(remat, "MaxText's default remat_policy 'full'"));
  const auto bridge = convert_case(moe_case(), test::source_dir()); // no optimizer stated: the recipes' own
  REQUIRE(bridge.unsupported.empty());
  CHECK(bridge.runs.at(0).scenario["plan"]["distributed_optimizer"] == true);
  CHECK(bridge.runs.at(0).scenario["plan"]["overlap_param_gather"] == true);
  CHECK(assumed(bridge, "Megatron-Bridge's recipe optimizer"));
  auto nemo = llama_case(); // NeMo's Megatron-core configs name the same optimizer; AutoModel runs FSDP2
  nemo["plan"].erase("fsdp_degree");
  nemo["plan"].erase("local_batch");
  nemo["plan"]["framework"] = "NeMo 24.03.01 container (Megatron-Core)";
  const auto nemo_run = convert_case(nemo, test::source_dir());
  CHECK(nemo_run.runs.at(0).scenario["plan"]["distributed_optimizer"] == true);
  CHECK(assumed(nemo_run, "NeMo's recipe and training-config optimizer"));
  nemo["plan"]["framework"] = "NeMo AutoModel (PyTorch FSDP2 backend)";
  CHECK_FALSE(assumed(convert_case(nemo, test::source_dir()), "optimizer not given"));
  auto stated = moe_case();
  stated["plan"]["distributed_optimizer"] = false;
  CHECK(convert_case(stated, test::source_dir()).runs.at(0).scenario["plan"].value("distributed_optimizer", false) ==
        false);
  auto modules = moe_case(); // selective recomputation of the modules a recipe names
  modules["plan"]["recompute"] = "selective (recompute_modules: layernorm, moe_act)";
  const auto named = convert_case(modules, test::source_dir());
  REQUIRE(named.unsupported.empty());
  CHECK(named.runs.at(0).scenario["plan"]["recompute"] == "selective");
  CHECK(named.runs.at(0).scenario["plan"]["recompute_modules"] == Json{"layernorm", "moe_act"});
  auto pipelined = llama_case(); // FSDP2 with a pipeline: one gather and one reduction per step
  pipelined["plan"]["pp"] = 2;
  pipelined["plan"]["dp"] = 4;
  pipelined["plan"]["fsdp_degree"] = 4;
  pipelined["plan"]["micro_batch"] = 1;
  const auto staged = convert_case(pipelined, test::source_dir());
  REQUIRE(staged.unsupported.empty());
  CHECK(staged.runs.at(0).scenario["plan"]["distributed_optimizer"] == true);
  CHECK_FALSE(staged.runs.at(0).scenario["plan"].contains("zero_stage"));
  CHECK(assumed(staged, "FSDP2 with pipeline parallelism (pp 2)"));

  auto fp8 = llama_case();
  fp8["plan"]["precision"] = "fp8";
  fp8["plan"]["fp8_recipe"] = "blockwise";
  CHECK(convert_case(fp8, test::source_dir()).runs.at(0).scenario["plan"]["fp8_recipe"] == "blockwise");
  fp8["plan"]["fp8_recipe"] = "mxfp8";
  const auto mx = convert_case(fp8, test::source_dir()); // as blockwise, said so
  CHECK(mx.runs.at(0).scenario["plan"]["fp8_recipe"] == "blockwise");
  CHECK(assumed(mx, "MXFP8"));

  auto cp = llama_case();
  cp["plan"]["cp"] = 2;
  cp["plan"]["dp"] = 4;
  cp["plan"]["fsdp_degree"] = 4;
  cp["plan"]["cp_comm_type"] = "a2a";
  CHECK(convert_case(cp, test::source_dir()).runs.at(0).scenario["plan"]["cp_kind"] == "all_to_all");
  cp["plan"]["cp_comm_type"] = "a2a+p2p";
  CHECK_THAT(convert_case(cp, test::source_dir()).unsupported, Catch::Contains("is not modelled"));
}

TEST_CASE("the GPUs sources name for Blackwell, AMD and Ada map to the catalogue, variants it lacks to none")
{
  using sim::validation::match_gpu;
  CHECK(match_gpu("B200").value().gpu == "b200");
  CHECK(match_gpu("GB200").value().topology == "gb200-nvl72"); // not the B200 its name contains
  CHECK(match_gpu("MI325X").value().gpu == "mi325x");
  CHECK(match_gpu("MI300X").value().gpu == "mi300x");
  CHECK(match_gpu("L40S").value().topology == "l40s-pcie");
  CHECK_FALSE(match_gpu("H100 (96GB HBM2e, 500W power limit; Grand Teton)"));
  CHECK_FALSE(match_gpu("GH200")); // not the H200 its name contains
  CHECK_FALSE(match_gpu("MI355X"));
  // Cards of parts the catalogue holds as SXM modules, and the 16 GB V100: none, not the module's numbers.
  CHECK_FALSE(match_gpu("A100 PCIe 40GB"));
  CHECK_FALSE(match_gpu("H100 NVL"));
  CHECK_FALSE(match_gpu("H200 NVL 141GB"));
  CHECK_FALSE(match_gpu("V100-SXM2-16GB"));
  CHECK(match_gpu("V100-SXM2-32GB").value().gpu == "v100-sxm2-32gb");
  CHECK(match_gpu("GB200 NVL72").value().gpu == "gb200"); // a rack, not a card
}

TEST_CASE("MFU and model FLOP/s are counted with the source's FLOPs per sequence when the case gives them")
{
  auto c = llama_case();
  c["model"]["model_flops_per_seq"] = 8192.0 * 6e10; // 6e10 FLOPs per token
  const auto conv = convert_case(c, test::source_dir());
  REQUIRE(conv.unsupported.empty());
  const sim::validation::Expectation* mfu = nullptr;
  for (const auto& e : conv.runs.at(0).expectations)
    if (e.quantity == Quantity::MFU)
      mfu = &e;
  REQUIRE(mfu);
  REQUIRE(mfu->source_flops_per_token);
  CHECK(*mfu->source_flops_per_token == Approx(6e10));
  // A report of 8 GPUs at 8,000 tokens/s each, 400 TFLOP/s of simtrain's count at an MFU of 0.4 (a 1 PFLOP/s peak).
  const auto report =
      Json::parse(R"({"tokens_per_s": 64000, "cluster": {"gpus": 8}, "tflops_per_gpu": 400, "mfu": 0.4, "hfu": 0.4})");
  CHECK(sim::validation::predicted_value(*mfu, report, nullptr) == Approx(8000 * 6e10 / 1e15));
  auto flops = *mfu;
  flops.quantity = Quantity::MODEL_FLOPS;
  CHECK(sim::validation::predicted_value(flops, report, nullptr) == Approx(8000 * 6e10));
  flops.source_flops_per_token.reset();
  CHECK(sim::validation::predicted_value(flops, report, nullptr) == Approx(400e12));
}

TEST_CASE("the NIC count and rate come from an interconnect stated as links or HCAs")
{
  auto c = llama_case();
  c["hardware"]["interconnect"] = "4 OmniPath links per node";
  const auto omni = convert_case(c, test::source_dir());
  REQUIRE(omni.unsupported.empty());
  const auto& nics = omni.runs.at(0).scenario["topology"]["node"]["nics"];
  CHECK(nics["count"] == 4);
  CHECK(nics["bandwidth"] == "100Gbps");
  c["hardware"]["interconnect"] = "2x 200 Gb/s HCAs";
  CHECK(convert_case(c, test::source_dir()).runs.at(0).scenario["topology"]["node"]["nics"]["bandwidth"] == "200Gbps");
  c["hardware"]["interconnect"] = "8x 400 Gb/s HCAs"; // the DGX H100 preset's own NICs: the preset, by name
  CHECK(convert_case(c, test::source_dir()).runs.at(0).scenario["topology"] == "dgx-h100");
}

TEST_CASE("an FP8 run's MFU is scored against the FP8 peak when the source divides by it, else the BF16 peak")
{
  const auto mfu_of = [](const CaseConversion& c) {
    for (const auto& e : c.runs.at(0).expectations)
      if (e.quantity == Quantity::MFU)
        return e;
    FAIL("no MFU comparison");
    return sim::validation::Expectation{};
  };
  auto c = llama_case();
  c["plan"]["precision"] = "fp8";
  c["notes"] = "MFU = model FLOPs / (gpus x peak); peak 989 (H100 BF16), 1979 (H100 FP8)";
  const auto fp8_peak = convert_case(c, test::source_dir());
  REQUIRE(fp8_peak.unsupported.empty());
  const auto e = mfu_of(fp8_peak);
  CHECK(e.peak_scale == Approx(989.4 / 1978.9)); // topologies/gpus/h100-sxm5-80gb.json
  CHECK(assumed(fp8_peak, "MFU against the FP8 peak"));
  const auto report =
      Json::parse(R"({"tokens_per_s": 64000, "cluster": {"gpus": 8}, "tflops_per_gpu": 400, "mfu": 0.4, "hfu": 0.4})");
  CHECK(sim::validation::predicted_value(e, report, nullptr) == Approx(0.4 * 989.4 / 1978.9));

  c.erase("notes");
  const auto bf16_peak = convert_case(c, test::source_dir());
  CHECK(mfu_of(bf16_peak).peak_scale == 1.0);
  CHECK(assumed(bf16_peak, "MFU against the BF16 peak"));
  CHECK(mfu_of(convert_case(llama_case(), test::source_dir())).peak_scale == 1.0); // a BF16 run
}

TEST_CASE("a container's or tag's release dates a case, and an FP8 Megatron run is Megatron-core at any date")
{
  using sim::validation::latest_date;
  const auto date = [](const std::string& text) { return latest_date(text).value_or(sim::validation::YearMonth{}); };
  CHECK(date("NeMo 25.02 container (NeMo 2.0, Megatron-Core)").value() == date("2025-02").value());
  CHECK(date("section \"26.04.01 NeMo Container\"; Container: NeMo 26.04.01").year == 2026);
  CHECK(date("NVIDIA/dgxc-benchmarking tag v24.11.1 (commit 35a9aec)").month == 11);
  CHECK_FALSE(latest_date("Table 23.05 of the appendix"));

  const auto bf16 = sim::validation::choose_software({.source = "Megatron-LM, 2023-05"});
  CHECK(bf16.plan["software"] == "megatron-lm-2022");
  const auto fp8 = sim::validation::choose_software({.source = "Megatron-LM, 2023-05", .fp8 = true});
  CHECK(fp8.plan["software"] == "megatron-core");
}

TEST_CASE("errors per kind of run: dense or MoE, FP8, CP, as step-time errors, a run in each kind it is")
{
  using sim::validation::Expectation;
  using sim::validation::SimulationRun;
  CHECK(sim::validation::run_kinds(Json::parse(R"({"model": {"moe": {}}, "plan": {"precision": "fp8", "cp": 2}})")) ==
        std::vector<std::string>{"MoE", "FP8", "CP"});
  CHECK(sim::validation::run_kinds(Json::parse(R"({"model": "gpt3-175b", "plan": {"precision": "bf16"}})")) ==
        std::vector<std::string>{"dense"});

  const auto report = Json::parse(
      R"({"tokens_per_s": 1000, "cluster": {"gpus": 1}, "tflops_per_gpu": 100, "mfu": 0.5, "hfu": 0.5,
          "step_time_s": 2.0})");
  const auto conversion = [](const std::string& id, const std::string& scenario, Expectation e) {
    CaseConversion c;
    c.id = id;
    c.source = "S";
    c.gpu = "h100-sxm5-80gb";
    c.runs.push_back(SimulationRun{.name = id, .scenario = Json::parse(scenario), .expectations = {e}});
    return c;
  };
  // A dense run 2 s against 2.5 s measured (-20 %); an MoE FP8 run at 1,000 tokens/s against 800 (+25 %: a step
  // 1 / 1.25 as long, -20 %).
  const std::vector<CaseConversion> cases{
      conversion("dense", R"({"model": {}, "plan": {}})", {.quantity = Quantity::STEP_TIME, .measured = 2.5}),
      conversion("moe", R"({"model": {"moe": {}}, "plan": {"precision": "fp8"}})",
                 {.quantity = Quantity::TOKENS_PER_GPU, .measured = 800})};
  std::map<std::string, sim::validation::RunOutcome> outcomes{{"dense", {true, report, ""}},
                                                              {"moe", {true, report, ""}}};
  const auto r = sim::validation::compare(cases, outcomes, {});
  REQUIRE(r.by_kind.size() == 3);
  CHECK(r.by_kind[0].group == "dense");
  CHECK(r.by_kind[1].group == "MoE");
  CHECK(r.by_kind[2].group == "FP8");
  for (const auto& s : r.by_kind) {
    CHECK(s.count == 1);
    CHECK(s.bias == Approx(-0.2));
  }
  CHECK_THAT(sim::validation::render_text(r), Catch::Contains("step-time error per kind of run"));
  CHECK_THAT(sim::validation::render_markdown(r), Catch::Contains("| MoE | 1 | -20.0% |"));
  // README.md's brief tables: per kind (cases, median, bias, worst) and per GPU, not per source.
  const auto brief = sim::validation::render_markdown(r, {.brief = true});
  CHECK_THAT(brief, Catch::Contains("| MoE | 1 | 20.0% | -20.0% | 20.0% |"));
  CHECK_THAT(brief, Catch::Contains("| h100-sxm5-80gb |"));
  CHECK_THAT(brief, !Catch::Contains("| source |"));
  CHECK(sim::validation::render_json(r)["by_kind"].size() == 3);
}

TEST_CASE("an MoE model named without its shape takes its preset, and an embedded HuggingFace config is read")
{
  auto named = moe_case();
  named["model"] = Json::parse(R"({"name": "Qwen3-30B-A3B", "moe": true, "seq_len": 4096})");
  const auto preset = convert_case(named, test::source_dir());
  REQUIRE(preset.unsupported.empty());
  CHECK(preset.runs.at(0).scenario["model"]["moe"]["num_experts"] == 128); // models/qwen3-30b-a3b.json
  CHECK(assumed(preset, "model preset qwen3-30b-a3b"));
  named["model"]["name"] = "Unreleased-MoE 1T";
  CHECK_THAT(convert_case(named, test::source_dir()).unsupported, Catch::Contains("an MoE model without its shape"));

  auto hf = llama_case();
  hf["model"] = Json::parse(R"json({"name": "tiny-llama", "seq_len": 2048, "hf_config": {
      "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "intermediate_size": 5632,
      "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4, "vocab_size": 32000,
      "hidden_act": "silu", "rms_norm_eps": 1e-5, "tie_word_embeddings": false, "max_position_embeddings": 2048}})json");
  const auto from_hf = convert_case(hf, test::source_dir());
  REQUIRE(from_hf.unsupported.empty());
  const auto& m = from_hf.runs.at(0).scenario["model"];
  CHECK(m["num_layers"] == 22);
  CHECK(m["num_kv_heads"] == 4);
  CHECK(m["ffn_kind"] == "swiglu");
  CHECK(m["seq_length"] == 2048);
  hf["model"]["hf_config"]["num_attention_heads"] = "many";
  CHECK_THAT(convert_case(hf, test::source_dir()).unsupported, Catch::Contains("model.hf_config is not a config"));
}
