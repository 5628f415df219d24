// The validation harness: published runs into scenarios, predictions against measurements, error statistics.
#include "core/document.hpp"
#include "core/process_pool.hpp"
#include "support.hpp"
#include "validation/ablation.hpp"
#include "validation/case_hardware.hpp"
#include "validation/case_model.hpp"
#include "validation/case_plan.hpp"
#include "validation/comparison.hpp"
#include "validation/runner.hpp"
#include "validation/software_choice.hpp"

#include <fmt/format.h>
#include <iostream>

using sim::validation::CaseConversion;
using sim::validation::convert_case;
using sim::validation::Quantity;
using Json = nlohmann::json;

namespace {

Json sc21_row()
{
  return Json::parse(R"json({
    "id": "row", "source": "Narayanan et al., SC21 (arXiv 2104.04473), Table 1 (weak scaling)",
    "model": {"name": "GPT", "layers": 24, "hidden": 2304, "heads": 24, "ffn_hidden": 9216, "vocab": 51200,
              "seq_len": 2048},
    "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 32, "gpus_per_node": 8, "interconnect": "DGX A100"},
    "plan": {"tp": 1, "pp": 1, "dp": 32, "vpp": 1, "micro_batch": 16, "global_batch": 512,
             "recompute": "full (uniform)", "sequence_parallel": false, "zero_stage": 0, "precision": "fp16",
             "ddp_impl": "torch"},
    "measured": {"tflops_per_gpu": 137, "pct_of_peak": 44}
  })json");
}

Json mosaic_run()
{
  return Json::parse(R"json({
    "id": "mpt", "source": "mosaicml/llm-foundry benchmarking README (2024), section 'A100 40GB with 1600 Gbps'",
    "model": {"name": "MPT-1b", "layers": 24, "hidden": 2048, "heads": 16, "ffn_hidden": 8192, "vocab": 50368,
              "seq_len": 2048},
    "hardware": {"gpu": "a100_40gb", "num_gpus": 16, "gpus_per_node": 8, "interconnect": "1600 Gbps node-node (RoCE)"},
    "plan": {"tp": 1, "pp": 1, "dp": 16, "vpp": null, "micro_batch": 8, "global_batch": 128, "recompute": "none",
             "sequence_parallel": false, "zero_stage": 3, "precision": "bf16", "fsdp_sharding": "FULL_SHARD",
             "framework": "Composer/llm-foundry FSDP, FlashAttention"},
    "measured": {"mfu": 0.55, "hfu": 0.55, "tokens_per_s": 100000, "tokens_per_s_per_gpu": 6250}
  })json");
}

const sim::validation::Expectation* find(const CaseConversion& c, Quantity q)
{
  for (const auto& run : c.runs)
    for (const auto& e : run.expectations)
      if (e.quantity == q)
        return &e;
  return nullptr;
}

} // namespace

TEST_CASE("an SC21 row becomes a Megatron-LM scenario compared on TFLOP/s counting recomputation")
{
  const auto c = convert_case(sc21_row(), test::source_dir());
  REQUIRE(c.unsupported.empty());
  CHECK(c.source == "SC21 Table 1");
  CHECK(c.gpu == "a100-sxm4-80gb");
  REQUIRE(c.runs.size() == 1);
  const auto& s = c.runs[0].scenario;
  CHECK(s["topology"] == "dgx-a100");
  CHECK(s["model"]["num_layers"] == 24);
  CHECK(s["plan"]["dp"] == 32);
  CHECK(s["plan"]["micro_batch"] == 16);
  CHECK(s["plan"]["recompute"] == "full");
  CHECK(s["plan"]["precision"] == "fp16");
  CHECK(s["plan"]["software"] == "megatron-lm-2021"); // arXiv 2104: before the asynchronous TP all-reduce
  CHECK(s["plan"]["dp_bucket_size"] == "25MB");       // PyTorch DDP
  const auto* e = find(c, Quantity::HARDWARE_FLOPS);
  REQUIRE(e != nullptr);
  CHECK(e->measured == Approx(137e12));
  CHECK(e->primary);
  CHECK(c.runs[0].simulate);
  REQUIRE(c.ignored.size() == 1);
  CHECK(c.ignored[0].starts_with("pct_of_peak"));
}

TEST_CASE("an llm-foundry run becomes an MPT model under FSDP on the A100 40GB, its NICs from the stated interconnect")
{
  const auto c = convert_case(mosaic_run(), test::source_dir());
  REQUIRE(c.unsupported.empty());
  CHECK(c.source == "MosaicML A100");
  const auto& s = c.runs.at(0).scenario;
  CHECK_FALSE(s["model"].contains("linear_bias")); // the benchmark models' published counts need biases
  CHECK(s["model"]["dropout"] == false);
  CHECK(s["plan"]["software"] == "composer-fsdp");
  CHECK(s["plan"]["attention"] == "flash1"); // the benchmark script's Triton kernel, rated against FlashAttention-1
  CHECK(s["topology"]["node"]["gpu"] == "a100-sxm4-40gb");
  CHECK(s["topology"]["node"]["nics"]["bandwidth"] == "200Gbps");
  CHECK(s["topology"]["node"]["nics"]["kind"] == "ethernet");
  CHECK(s["plan"]["zero_stage"] == 3);
  CHECK(s["plan"]["fp32_grad_accumulation"] == false);
  // MFU is the comparison; HFU and tokens/s restate it.
  CHECK(find(c, Quantity::MFU)->primary);
  CHECK_FALSE(find(c, Quantity::HFU)->primary);
  CHECK_FALSE(find(c, Quantity::TOKENS_PER_GPU)->primary);
  CHECK(find(c, Quantity::TOKENS_PER_GPU)->measured == 6250);
}

TEST_CASE("cases simtrain cannot express are refused with the reason")
{
  auto cp = sc21_row(); // context parallelism converts, and counts in the GPUs
  cp["plan"]["cp"] = 2;
  cp["plan"].erase("dp");
  const auto with_cp = convert_case(cp, test::source_dir());
  REQUIRE(with_cp.unsupported.empty());
  CHECK(with_cp.runs.at(0).scenario["plan"]["cp"] == 2);
  CHECK(with_cp.runs.at(0).scenario["plan"]["dp"].get<int>() * 2 ==
        convert_case(sc21_row(), test::source_dir()).runs.at(0).scenario["plan"]["dp"].get<int>());
  auto no_split = sc21_row();
  no_split["plan"]["tp"] = nullptr;
  CHECK(convert_case(no_split, test::source_dir()).unsupported.find("tensor- and pipeline-parallel") !=
        std::string::npos);
  auto gpu = sc21_row();
  gpu["hardware"]["gpu"] = "MI355X";
  CHECK(convert_case(gpu, test::source_dir()).unsupported.find("not in the catalogue") != std::string::npos);
  auto batch = sc21_row();
  batch["plan"]["global_batch"] = 500;
  CHECK(convert_case(batch, test::source_dir()).unsupported.find("not a multiple") != std::string::npos);
  auto gpus = sc21_row();
  gpus["hardware"]["num_gpus"] = 64;
  CHECK(convert_case(gpus, test::source_dir()).unsupported.find("does not match") != std::string::npos);
  // A zero size is refused by name before anything divides by it (it stopped simtrain validate with SIGFPE).
  for (const char* key : {"tp", "pp", "cp", "micro_batch", "grad_accum"}) {
    auto zero = sc21_row();
    zero["plan"][key] = 0;
    CHECK(convert_case(zero, test::source_dir()).unsupported ==
          fmt::format("plan.{} is 0 (expected a size of at least 1)", key));
  }
  // Activation offloading needs a host: the DGX A100 describes one, the HGX A800 does not.
  auto offload = sc21_row();
  offload["plan"]["activation_cpu_offload"] = true;
  const auto offloaded = convert_case(offload, test::source_dir());
  REQUIRE(offloaded.unsupported.empty());
  CHECK(offloaded.runs.at(0).scenario["plan"]["offload_activations"] == true);
  offload["hardware"]["gpu"] = "A800-SXM4-80GB";
  CHECK_THAT(convert_case(offload, test::source_dir()).unsupported, Catch::Contains("hgx-a800 is not"));
  auto no_gpus = sc21_row();
  no_gpus["hardware"]["num_gpus"] = 0;
  no_gpus["plan"].erase("dp");
  CHECK(convert_case(no_gpus, test::source_dir()).unsupported.find("does not match the 0 GPUs") != std::string::npos);
}

TEST_CASE("a case naming a published model without its architecture takes the preset, and the example script's "
          "FP8 settings")
{
  const nlohmann::json c{
      {"id", "fp8-70b"},
      {"source", "NVIDIA/Megatron-LM examples/llama/README.md 'FP8 Performance' table"},
      {"model",
       {{"name", "LLAMA3-70B"}, {"layers", nullptr}, {"hidden", nullptr}, {"vocab", 128256}, {"seq_len", 8192}}},
      {"hardware", {{"gpu", "H100 (assumed)"}, {"num_gpus", 64}, {"gpus_per_node", 8}}},
      {"plan",
       {{"tp", 4},
        {"pp", 8},
        {"dp", 2},
        {"vpp", 5},
        {"micro_batch", 1},
        {"global_batch", 128},
        {"cp", 1},
        {"precision", "fp8 (hybrid)"}}},
      {"measured", {{"tokens_per_s_per_gpu", 1621}}}};
  const auto converted = convert_case(c, test::source_dir());
  REQUIRE(converted.unsupported.empty());
  const auto& s = converted.runs.at(0).scenario;
  CHECK(s["model"]["num_layers"] == 80);
  CHECK(s["model"]["seq_length"] == 8192);
  CHECK(s["plan"]["precision"] == "fp8");
  CHECK(s["plan"]["fp8_param_gather"] == true);
  CHECK(s["plan"]["sequence_parallel"] == true);
  CHECK(s["plan"]["fp32_grad_accumulation"] == false);
  CHECK(std::any_of(converted.assumptions.begin(), converted.assumptions.end(),
                    [](const std::string& a) { return a.find("model preset llama3-70b") != std::string::npos; }));
  auto other = c;
  other["model"]["vocab"] = 32000; // disagrees with the preset
  CHECK_FALSE(convert_case(other, test::source_dir()).unsupported.empty());
}

TEST_CASE("a MoE case converts its expert layout, dispatcher and all-to-all overlap, and compares tokens per second "
          "first, and DeepSeek-V3's DualPipe converts")
{
  const auto cases = sim::core::read_json_file(test::source_dir() / "tests/data/validation/cases.json");
  const auto& qwen = cases.at(2); // Qwen3-235B-A22B on 256 H100s
  const auto converted = convert_case(qwen, test::source_dir());
  REQUIRE(converted.unsupported.empty());
  const auto& p = converted.runs.at(0).scenario["plan"];
  CHECK(p["ep"] == 32);
  CHECK(p["etp"] == 1);
  CHECK(p["moe_dispatcher"] == "alltoall");
  CHECK(p["fp32_grad_accumulation"] == false);
  CHECK(p["fp8_recipe"] == "current");
  CHECK(p["moe_a2a_overlap"] == true);
  for (const auto& e : converted.runs.at(0).expectations)
    CHECK(e.primary == (e.quantity == Quantity::TOKENS_PER_GPU));
  CHECK(convert_case(cases.at(0), test::source_dir()).runs.at(0).scenario["plan"]["moe_dispatcher"] == "deepep");
  const auto& deepseek_case = *std::find_if(cases.begin(), cases.end(),
                                            [](const auto& c) { return c["id"] == "deepseek-v3-report-h800-2048gpu"; });
  const auto deepseek = convert_case(deepseek_case, test::source_dir());
  REQUIRE(deepseek.unsupported.empty());
  CHECK(deepseek.runs.at(0).scenario["plan"]["schedule"] == "dualpipe");
  auto unknown = deepseek_case;
  unknown["plan"]["pipeline_schedule"] = "ZB-V";
  CHECK_THAT(convert_case(unknown, test::source_dir()).unsupported, Catch::Contains("ZB-V"));
  auto bad = qwen;
  bad["plan"]["moe_dispatcher"] = "magic";
  CHECK_THAT(convert_case(bad, test::source_dir()).unsupported, Catch::Contains("moe_dispatcher"));
}

TEST_CASE("what a case leaves open is chosen and said: micro-batch, recomputation, precision")
{
  auto c = sc21_row();
  c["plan"]["micro_batch"] = nullptr;
  c["plan"]["recompute"] = nullptr;
  c["plan"]["precision"] = nullptr;
  const auto conv = convert_case(c, test::source_dir());
  const auto& p = conv.runs.at(0).scenario["plan"];
  CHECK(p["micro_batch"] == 1);
  CHECK(p["recompute"] == "none");
  CHECK(p["precision"] == "bf16");
  CHECK(conv.assumptions.size() >= 3);
}

TEST_CASE("relative activation memory is compared against a tensor-parallel baseline run of the same case")
{
  auto c = sc21_row();
  c["plan"]["sequence_parallel"] = true;
  c["plan"]["recompute"] = "selective";
  c["measured"] = {{"fig7_activation_pct_of_tp_baseline", {{"sequence_parallel", 66.8}, {"full_recompute", 7.6}}}};
  const auto conv = convert_case(c, test::source_dir());
  REQUIRE(conv.runs.size() == 3);
  CHECK(conv.runs[0].name == "row/tp-baseline");
  CHECK(conv.runs[0].scenario["plan"]["sequence_parallel"] == false);
  CHECK(conv.runs[0].scenario["plan"]["recompute"] == "none");
  for (std::size_t i = 1; i < 3; ++i) {
    CHECK(conv.runs[i].baseline == "row/tp-baseline");
    CHECK_FALSE(conv.runs[i].simulate); // the memory analysis is enough
  }
}

TEST_CASE("throughput per global batch becomes one run per batch, with and without pipeline scatter/gather")
{
  auto c = sc21_row();
  c["plan"]["global_batch"] = "32..64";
  c["measured"] = {{"tflops_per_gpu_scatter_gather", {{"32", 140}, {"64", 150}}},
                   {"tflops_per_gpu_unoptimized", {{"32", 120}}}};
  const auto conv = convert_case(c, test::source_dir());
  REQUIRE(conv.runs.size() == 3);
  int without = 0;
  for (const auto& run : conv.runs) {
    CHECK((run.scenario["plan"]["global_batch"] == 32 || run.scenario["plan"]["global_batch"] == 64));
    without += run.scenario["plan"]["pp_scatter_gather"] == false ? 1 : 0;
  }
  CHECK(without == 1);
}

TEST_CASE("sources get short names for the tables")
{
  using sim::validation::short_source;
  CHECK(short_source("Narayanan et al., SC21 '...', Table 2 (PTD-P vs ZeRO-3)") == "SC21 Table 2");
  CHECK(short_source("Smith et al. 2022 'Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B'") == "MT-NLG");
  CHECK(short_source("NVIDIA/Megatron-LM examples/llama/README.md 'FP8 Performance' table") == "Megatron-LM FP8");
  CHECK(short_source("Some Lab, A Paper (2025), Table 3") == "Some Lab");
}

TEST_CASE("errors are summarised by median, 90th percentile and worst, and checked against targets")
{
  CaseConversion c;
  c.id = "x";
  c.source = "SC21 Table 1";
  c.gpu = "a100-sxm4-80gb";
  std::map<std::string, sim::validation::RunOutcome> outcomes;
  const std::vector<double> predicted{110, 95, 130, 100, 102};
  for (std::size_t i = 0; i < predicted.size(); ++i) {
    const std::string name = "run" + std::to_string(i);
    c.runs.push_back({name, Json::object(), true, "", {{Quantity::STEP_TIME, 100.0, "/measured/t", true}}});
    outcomes[name] = {true, {{"step_time_s", predicted[i]}}, ""};
  }
  c.runs.push_back({"broken", Json::object(), true, "", {{Quantity::STEP_TIME, 100.0, "/measured/t", true}}});
  outcomes["broken"] = {false, {}, "exit 1: bad input"};

  const auto r = sim::validation::compare({c}, outcomes, {{"SC21 Table 1", 0.05, 0.10}});
  REQUIRE(r.comparisons.size() == 5);
  REQUIRE(r.failed.size() == 1);
  CHECK(r.failed[0].why == "exit 1: bad input");
  REQUIRE(r.by_source.size() == 1);
  const auto& s = r.by_source[0];
  CHECK(s.count == 5);
  CHECK(s.median == Approx(0.05)); // |errors| 0.10, 0.05, 0.30, 0.00, 0.02
  CHECK(s.bias == Approx(0.02));
  CHECK(s.p90 == Approx(0.30));
  CHECK(s.worst == Approx(0.30));
  CHECK_FALSE(s.met); // worst 30 % > 10 %
  CHECK_FALSE(r.targets_met());
  const auto md = sim::validation::render_markdown(r, {.per_case = true});
  CHECK(md.find("| SC21 Table 1 | iteration time | 5 | +2.0% | 5.0% | 30.0% | 30.0% |") != std::string::npos);
  CHECK(md.find("- broken: exit 1: bad input") != std::string::npos);
  CHECK(md.find("| case | quantity | predicted | measured | error |") != std::string::npos);
  // README's tables: the summary without a row per comparison.
  const auto summary = sim::validation::render_markdown(r);
  CHECK(summary.find("| SC21 Table 1 | iteration time |") != std::string::npos);
  CHECK(summary.find("| case | quantity |") == std::string::npos);
}

TEST_CASE("child processes run side by side and report their exit statuses in order")
{
  const auto dir = test::scratch_dir();
  std::vector<sim::core::Command> commands;
  for (int status : {0, 3, 0, 7})
    commands.push_back({{"/bin/sh", "-c", "echo hi; exit " + std::to_string(status)},
                        dir / ("out" + std::to_string(commands.size())),
                        dir / ("err" + std::to_string(commands.size()))});
  commands.push_back({{"/no/such/program"}, dir / "out-missing", dir / "err-missing"});
  const auto status = sim::core::run_commands(commands, 2);
  REQUIRE(status.size() == 5);
  CHECK(status[0] == 0);
  CHECK(status[1] == 3);
  CHECK(status[2] == 0);
  CHECK(status[3] == 7);
  CHECK(status[4] != 0);
  std::ifstream out(dir / "out0");
  std::string line;
  std::getline(out, line);
  CHECK(line == "hi");
}

TEST_CASE("children of the running binary run as forks of this process, their output and status as a fresh one's")
{
  // The in-process runner stands for simtrain's command line: what it prints goes to the command's files, what it
  // returns (or an exception: 3) is the child's status; a command of another program still starts afresh.
  const auto dir = test::scratch_dir();
  const sim::core::InProcess in_process = [](const std::vector<std::string>& args) {
    std::cout << "args " << args.size() << " " << args.at(0) << std::flush;
    std::cerr << "log\n";
    if (args.at(0) == "throw")
      throw std::runtime_error("internal");
    return std::stoi(args.at(1));
  };
  std::cout << "unflushed"; // the parent's buffered output stays the parent's
  std::vector<sim::core::Command> commands{
      {{"simtrain", "run", "5"}, dir / "f-out0", dir / "f-err0", true},
      {{"simtrain", "throw", "0"}, dir / "f-out1", dir / "f-err1", true},
      {{"/bin/sh", "-c", "echo spawned; exit 4"}, dir / "f-out2", dir / "f-err2", false}};
  const auto status = sim::core::run_commands(commands, 2, in_process);
  std::cout << "\n";
  REQUIRE(status.size() == 3);
  CHECK(status[0] == 5);
  CHECK(status[1] == 3);
  CHECK(status[2] == 4);
  CHECK(sim::core::read_text(dir / "f-out0") == "args 2 run");
  CHECK(sim::core::read_text(dir / "f-err0") == "log\n");
  CHECK(sim::core::read_text(dir / "f-out2") == "spawned\n");
}

TEST_CASE("a case field simtrain does not read is refused with its name, never dropped")
{
  auto top = sc21_row();
  top["dataset"] = "the pile";
  CHECK(convert_case(top, test::source_dir()).unsupported.find("\"dataset\"") != std::string::npos);
  auto model = sc21_row();
  model["model"]["moe_experts"] = 8;
  CHECK(convert_case(model, test::source_dir()).unsupported.find("\"model.moe_experts\"") != std::string::npos);
  auto plan = sc21_row();
  plan["plan"]["zero_quantized_weights"] = true;
  CHECK(convert_case(plan, test::source_dir()).unsupported.find("\"plan.zero_quantized_weights\"") !=
        std::string::npos);
  // Offload is read (this project's extension): the devices and the CPU's optimizer.
  auto offload = sc21_row();
  offload["plan"]["zero_stage"] = 2;
  offload["plan"]["offload_optimizer"] = "cpu";
  offload["plan"]["cpu_optimizer"] = "DeepSpeed CPU Adam";
  offload["plan"]["delayed_update"] = false;
  const auto offloaded = convert_case(offload, test::source_dir());
  REQUIRE(offloaded.unsupported.empty());
  CHECK(offloaded.runs.at(0).scenario["plan"]["offload_optimizer"] == "cpu");
  CHECK(offloaded.runs.at(0).scenario["plan"]["cpu_optimizer"] == "deepspeed");
  offload["plan"]["offload_params"] = "disk";
  CHECK_THAT(convert_case(offload, test::source_dir()).unsupported, Catch::Contains("offload_params"));
  auto recompute = sc21_row();
  recompute["plan"]["recompute"] = "block";
  CHECK(convert_case(recompute, test::source_dir()).unsupported.find("recompute \"block\" is not understood") !=
        std::string::npos);
}

TEST_CASE("a field belongs to one section: known in its own, refused in another")
{
  using sim::validation::unknown_field;
  const auto plan = Json::parse(R"({"tp": 8, "micro_batch": 1})");
  CHECK(unknown_field(plan, "plan", sim::validation::plan_fields()).empty());
  CHECK(unknown_field(plan, "model", sim::validation::model_fields()) == "model.micro_batch");
  CHECK(unknown_field(Json::parse(R"({"gpu": "H100", "nics": 8})"), "hardware", sim::validation::hardware_fields()) ==
        "hardware.nics");
}

TEST_CASE("a publication's GPU name maps to the catalogue's GPU and a node with it, a PCIe H100 to none")
{
  using sim::validation::match_gpu;
  const auto gpu = [](const std::string& name) { return match_gpu(name).value_or(sim::validation::Hardware{}).gpu; };
  CHECK(gpu("A100-SXM4-80GB") == "a100-sxm4-80gb");
  CHECK(gpu("8x A100 40GB") == "a100-sxm4-40gb");
  CHECK(gpu("NVIDIA H200") == "h200-sxm-141gb"); // not the H20, whose name it contains
  CHECK(gpu("H20") == "h20");
  CHECK(match_gpu("H800").value().topology == "hgx-h800");
  CHECK_FALSE(match_gpu("H100 PCIe"));
  CHECK(gpu("NVIDIA GeForce RTX 3090") == "rtx-3090");
  CHECK(match_gpu("RTX 5090").value().topology == "workstation-rtx5090");
  CHECK(gpu("RTX A6000 48GB") == "rtx-a6000");
  CHECK(gpu("RTX 6000 Ada") == "rtx-6000-ada");
  // The V100's SXM3 module is the DGX-2's; sixteen V100s to a node make one too.
  CHECK(match_gpu("V100-SXM3-32GB").value().topology == "dgx-2");
  CHECK(match_gpu("Tesla V100 32GB").value().topology == "dgx-v100");
  auto dgx2 = sc21_row();
  dgx2["hardware"] = {{"gpu", "V100 32GB"}, {"num_gpus", 32}, {"gpus_per_node", 16}};
  const auto converted = convert_case(dgx2, test::source_dir());
  REQUIRE(converted.unsupported.empty());
  CHECK(converted.runs.at(0).scenario["topology"] == "dgx-2");
}

TEST_CASE("kv_heads and a SwiGLU activation are read: a Llama-shaped case is simulated as one")
{
  auto c = sc21_row();
  c["model"] = Json::parse(R"json({"name": "Llama-2 70B", "params_b": 69.0, "layers": 80, "hidden": 8192, "heads": 64,
                                   "kv_heads": 8, "ffn_hidden": 28672, "vocab": 32000, "seq_len": 4096,
                                   "activation": "swiglu", "norm": "rmsnorm", "position_embedding": "rope",
                                   "tie_embeddings": false})json");
  c["plan"]["tp"] = 8;
  c["plan"]["pp"] = 4;
  c["plan"]["dp"] = 1;
  c["plan"]["micro_batch"] = 1;
  c["plan"]["global_batch"] = 32;
  const auto conv = convert_case(c, test::source_dir());
  REQUIRE(conv.unsupported.empty());
  const auto& m = conv.runs.at(0).scenario["model"];
  CHECK(m["num_kv_heads"] == 8);
  CHECK(m["ffn_kind"] == "swiglu");
  CHECK(m["norm"] == "rmsnorm");
  CHECK(m["position_embedding"] == "rope");
  CHECK(m["tie_embeddings"] == false);
}

TEST_CASE("an architecture whose parameter count is far from the stated one is refused")
{
  auto c = sc21_row();
  c["model"]["params_b"] = 8.0; // as read, the row's architecture has 1.7B parameters
  const auto conv = convert_case(c, test::source_dir());
  CHECK(conv.unsupported.find("parameters, the case states 8") != std::string::npos);
}

TEST_CASE("a batch stated in tokens becomes sequences, and gradient-accumulation steps give the micro-batch")
{
  auto tokens = sc21_row();
  tokens["plan"]["global_batch"] = "1M tokens"; // 1,048,576 tokens of 2048: 512 sequences
  auto conv = convert_case(tokens, test::source_dir());
  REQUIRE(conv.unsupported.empty());
  CHECK(conv.runs.at(0).scenario["plan"]["global_batch"] == 512);
  auto numeric = sc21_row();
  numeric["plan"].erase("global_batch");
  numeric["plan"]["global_batch_tokens"] = 2097152;
  conv = convert_case(numeric, test::source_dir());
  REQUIRE(conv.unsupported.empty());
  CHECK(conv.runs.at(0).scenario["plan"]["global_batch"] == 1024);
  auto accumulation = sc21_row();
  accumulation["plan"]["micro_batch"] = nullptr;
  accumulation["plan"]["grad_accum"] = 4;
  conv = convert_case(accumulation, test::source_dir());
  REQUIRE(conv.unsupported.empty());
  CHECK(conv.runs.at(0).scenario["plan"]["micro_batch"] == 4); // 512 / (32 x 4)
  auto contradiction = sc21_row();
  contradiction["plan"]["grad_accum"] = 3;
  CHECK(convert_case(contradiction, test::source_dir()).unsupported.find("grad_accum") != std::string::npos);
}

TEST_CASE("the software generation follows the framework and the date each case's source gives")
{
  using sim::validation::choose_software;
  using sim::validation::latest_date;
  CHECK(latest_date("arXiv 2104.04473")->year == 2021);
  CHECK(latest_date("arXiv 2104.04473")->month == 4);
  CHECK(latest_date("README (added 2024-07-15 commit f2e5db402c)")->month == 7);
  CHECK(latest_date("SC'22 paper")->year == 2022);
  CHECK_FALSE(latest_date("no date here"));
  const auto software = [](std::string source, std::string framework = "", int zero = 0) {
    return choose_software({std::move(source), std::move(framework), "", zero, false, false}).plan["software"];
  };
  CHECK(software("Narayanan et al., SC21 (arXiv 2104.04473)") == "megatron-lm-2021");
  CHECK(software("Korthikanti et al. 2022 (arXiv 2205.05198)") == "megatron-lm-2022");
  CHECK(software("NVIDIA/Megatron-LM README (2024-07-15)") == "megatron-core");
  CHECK(software("Smith et al. 'Megatron-Turing NLG 530B' (arXiv 2201.11990)") == "megatron-deepspeed");
  CHECK(software("SC21 (arXiv 2104.04473) Table 2", "ZeRO-3 via DeepSpeed", 3) == "deepspeed-zero3-2021");
  CHECK(software("mosaicml/llm-foundry benchmarking README", "Composer FSDP") == "composer-fsdp");
  // From 2023, Megatron-LM runs FlashAttention; its timers stopped synchronising in August 2022.
  const auto late = choose_software({"NVIDIA Megatron-LM, 2023-06 run", "", "", 0, true, true});
  CHECK(late.plan["software"] == "megatron-lm-2022");
  CHECK(late.plan["attention"] == "flash2");
  CHECK(late.plan["host_syncs_per_microbatch"] == 0);
  CHECK_FALSE(late.assumptions.empty());
}

TEST_CASE("every ablation effect's overrides apply to a scenario, and the table shows each source with and without")
{
  for (const auto& effect : sim::validation::effects()) {
    INFO(effect.name);
    CHECK(test::error_of([&] {
            sim::scenario::load_scenario(test::source_dir() / "scenarios" / "default.json",
                                         test::options(effect.overrides));
          }).empty());
  }
  sim::validation::ValidationResult with, without;
  sim::validation::ErrorStats s;
  s.group = "SC21 Table 1";
  s.quantity = "TFLOP/s";
  s.bias = 0.01;
  s.median = 0.02;
  with.by_source = {s};
  s.bias = 0.2;
  s.median = 0.2;
  without.by_source = {s};
  const auto table = sim::validation::render_ablation_markdown({{"", with}, {"contention", without}});
  CHECK(table.find("| effect removed | SC21 Table 1 (TFLOP/s) |") != std::string::npos);
  CHECK(table.find("| none (every effect modelled) | +1.0% (2.0%) |") != std::string::npos);
  CHECK(table.find("| contention | +20.0% (20.0%) |") != std::string::npos);
}

namespace {

Json qwen_lora_row()
{
  return Json::parse(R"json({
    "id": "qwen", "source": "QwenLM/Qwen README.md, 'Profiling of Memory and Speed' (commit e8e1596, 2023-11-30)",
    "model": {"name": "Qwen-7B", "params_b": 7.72, "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32,
              "ffn_hidden": 11008, "vocab": 151936, "seq_len": 2048, "activation": "SwiGLU", "norm": "RMSNorm",
              "position_embedding": "rope", "tie_embeddings": false, "bias": "qkv", "dropout": false},
    "hardware": {"gpu": "A100 SXM4 80GB", "num_gpus": 1},
    "plan": {"tp": 1, "pp": 1, "dp": 1, "micro_batch": 1, "grad_accum": 8, "global_batch": 8,
             "recompute": "full (gradient checkpointing)", "precision": "bf16",
             "framework": "Hugging Face Trainer + PEFT (QwenLM/Qwen finetune.py)", "lora_rank": 64,
             "lora_targets": "all-linear", "optimizer": "AdamW"},
    "measured": {"iteration_time_s": 5.2, "peak_memory_gib": 23.8}
  })json");
}

} // namespace

TEST_CASE("a LoRA fine-tuning case converts its adapters, base and optimizer, and compares its peak memory beside "
          "its step time")
{
  const auto conv = convert_case(qwen_lora_row(), test::source_dir());
  REQUIRE(conv.unsupported.empty());
  const auto& s = conv.runs.at(0).scenario;
  CHECK(s["plan"]["lora_rank"] == 64);
  CHECK_FALSE(s["plan"].contains("lora_targets")); // all-linear: simtrain's default, every projection
  CHECK(s["plan"]["recompute"] == "full");
  // Qwen-1's modeling_qwen.py in eager mode: its own RMSNorm and SwiGLU, flash-attn's rotary.
  CHECK(s["plan"]["norm_impl"] == "eager");
  CHECK(s["plan"]["rope_impl"] == "fused");
  CHECK(s["plan"]["activation_impl"] == "eager");
  CHECK(s["plan"]["attention"] == "flash2");
  CHECK(s["plan"]["grad_accumulation"] == "autograd");
  CHECK(s["model"]["qkv_bias"] == true);
  CHECK(s["model"]["linear_bias"] == false);
  const auto* step = find(conv, Quantity::STEP_TIME);
  const auto* memory = find(conv, Quantity::PEAK_MEMORY);
  REQUIRE(step);
  REQUIRE(memory);
  CHECK(step->primary);
  CHECK(memory->primary); // counted on its own, beside the step time
  CHECK(memory->measured == Approx(23.8 * 1073741824.0));
  CHECK(conv.runs.at(0).simulate);

  auto tt = qwen_lora_row(); // torchtune's names, a quantized base, an 8-bit paged optimizer, GB
  tt["plan"]["lora_targets"] = Json::array({"q_proj", "output_proj"});
  tt["plan"]["base_quantization"] = "nf4 (torchao)";
  tt["plan"]["optimizer"] = "PagedAdamW8bit";
  tt["measured"] = Json{{"peak_memory_gb", 10.0}};
  const auto quantized = convert_case(tt, test::source_dir());
  REQUIRE(quantized.unsupported.empty());
  const auto& p = quantized.runs.at(0).scenario["plan"];
  CHECK(p["lora_targets"] == Json::array({"q_proj", "o_proj"}));
  CHECK(p["base_quantization"] == "nf4");
  CHECK(p["optimizer_algorithm"] == "adam_8bit");
  CHECK(find(quantized, Quantity::PEAK_MEMORY)->measured == Approx(1e10));
  CHECK_FALSE(quantized.runs.at(0).simulate); // memory alone: the memory analysis answers it
  const auto said = [&](const char* what) {
    return std::any_of(quantized.assumptions.begin(), quantized.assumptions.end(),
                       [&](const std::string& a) { return a.find(what) != std::string::npos; });
  };
  CHECK(said("torchao"));
  CHECK(said("paged"));

  // transformers' Llama code: every one of them eager; compiled, every one fused.
  auto hf = qwen_lora_row();
  hf["source"] = "a Hugging Face PEFT benchmark";
  hf["plan"]["framework"] = "Hugging Face Trainer + PEFT";
  const auto eager = convert_case(hf, test::source_dir()).runs.at(0).scenario["plan"];
  CHECK(eager["norm_impl"] == "eager");
  CHECK(eager["rope_impl"] == "eager");
  CHECK(eager["activation_impl"] == "eager");
  hf["plan"]["compile"] = true;
  const auto compiled = convert_case(hf, test::source_dir()).runs.at(0).scenario["plan"];
  CHECK(compiled["norm_impl"] == "torch");
  CHECK(compiled["rope_impl"] == "fused");
  CHECK(compiled["activation_impl"] == "fused");

  auto gptq = qwen_lora_row();
  gptq["plan"]["base_quantization"] = "GPTQ int4";
  CHECK(convert_case(gptq, test::source_dir()).unsupported.find("GPTQ int4") != std::string::npos);
  auto target = qwen_lora_row();
  target["plan"]["lora_targets"] = Json::array({"c_attn"});
  CHECK(convert_case(target, test::source_dir()).unsupported.find("c_attn") != std::string::npos);
  auto pure = qwen_lora_row(); // pure bf16 without LoRA: the master-less layout is not modelled
  pure["plan"].erase("lora_rank");
  pure["plan"]["precision"] = "bf16 (pure)";
  CHECK(convert_case(pure, test::source_dir()).unsupported.find("pure bf16") != std::string::npos);
}
