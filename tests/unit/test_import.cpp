// The importers: Megatron-LM arguments, DeepSpeed configs and torchtitan job files into scenario/v1, each setting
// carried over, said to change nothing, or listed as not simulated; the published examples in tests/data/import.
#include "core/document.hpp"
#include "importer/accelerate.hpp"
#include "importer/deepspeed.hpp"
#include "importer/hf_trainer.hpp"
#include "importer/llamafactory.hpp"
#include "importer/megatron.hpp"
#include "importer/megatron_arguments.hpp"
#include "importer/megatron_launcher.hpp"
#include "importer/megatron_no_effect.hpp"
#include "importer/nemo.hpp"
#include "importer/torchtitan.hpp"
#include "scenario/scenario.hpp"

#include "support.hpp"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

namespace {

using sim::importer::Imported;

const std::filesystem::path fixtures = test::source_dir() / "tests" / "data" / "import";

sim::importer::Target target(int gpus, const std::string& topology = "dgx-h100")
{
  return {topology, gpus, "imported"};
}

// The scenario as `check` and `run` read it.
sim::scenario::Scenario load(const Imported& imported)
{
  return sim::scenario::load_scenario(sim::core::Json::parse(imported.scenario.dump()),
                                      test::scratch_dir() / "imported.json", test::options());
}

bool listed(const std::vector<sim::importer::Setting>& settings, std::string_view text)
{
  return std::any_of(settings.begin(), settings.end(),
                     [&](const auto& s) { return s.setting.find(text) != std::string::npos; });
}

Imported deepspeed(const std::string& file, int gpus, const sim::importer::DeepSpeedOptions& options)
{
  static sim::core::Provenance provenance; // outlives the nodes read from it
  static std::vector<sim::core::Json> documents;
  provenance.add_source("", file);
  documents.push_back(sim::core::read_json_file(fixtures / "deepspeed" / file));
  return sim::importer::import_deepspeed(sim::core::Node(documents.back(), "", provenance), target(gpus), options);
}

Imported hf(const std::string& file, int gpus, const std::string& model = "llama2-7b")
{
  static sim::core::Provenance provenance;
  static std::vector<sim::core::Json> documents;
  provenance.add_source("", file);
  documents.push_back(sim::core::read_json_file(fixtures / "hf" / file));
  return sim::importer::import_hf_trainer(sim::core::Node(documents.back(), "", provenance), target(gpus),
                                          {model, std::nullopt, fixtures / "hf"});
}

// A four-layer Megatron-LM model, eight sequences of 1,024 tokens a step, followed by `extra`.
std::vector<std::string> small_megatron_args(std::initializer_list<std::string> extra)
{
  std::vector<std::string> args{"--num-layers",
                                "4",
                                "--hidden-size",
                                "1024",
                                "--num-attention-heads",
                                "16",
                                "--seq-length",
                                "1024",
                                "--max-position-embeddings",
                                "1024",
                                "--vocab-size",
                                "32000",
                                "--micro-batch-size",
                                "1",
                                "--global-batch-size",
                                "8"};
  args.insert(args.end(), extra);
  return args;
}

Imported torchtitan(const std::string& file, int gpus, const std::string& model = "")
{
  static sim::core::Provenance provenance;
  static std::vector<sim::core::Json> documents;
  provenance.add_source("", file);
  documents.push_back(sim::importer::read_toml_file(fixtures / "torchtitan" / file));
  return sim::importer::import_torchtitan(sim::core::Node(documents.back(), "", provenance), target(gpus), model);
}

// examples/llama/train_llama3_8b_h100_fp8.sh's command line, as bash expands it (mock data).
std::vector<std::string> llama3_8b_fp8()
{
  return {"torchrun",
          "--nproc_per_node",
          "8",
          "--nnodes",
          "1",
          "pretrain_gpt.py",
          "--use-mcore-models",
          "--num-layers",
          "32",
          "--hidden-size",
          "4096",
          "--ffn-hidden-size",
          "14336",
          "--num-attention-heads",
          "32",
          "--group-query-attention",
          "--num-query-groups",
          "8",
          "--kv-channels",
          "128",
          "--seq-length",
          "8192",
          "--max-position-embeddings",
          "8192",
          "--position-embedding-type",
          "rope",
          "--swiglu",
          "--normalization",
          "RMSNorm",
          "--attention-backend",
          "fused",
          "--untie-embeddings-and-output-weights",
          "--disable-bias-linear",
          "--attention-dropout",
          "0.0",
          "--hidden-dropout",
          "0.0",
          "--micro-batch-size",
          "1",
          "--global-batch-size",
          "128",
          "--lr",
          "0.00015",
          "--bf16",
          "--grad-reduce-in-bf16",
          "--fp8-format",
          "hybrid",
          "--fp8-amax-history-len",
          "1024",
          "--fp8-param-gather",
          "--tensor-model-parallel-size",
          "1",
          "--context-parallel-size",
          "1",
          "--sequence-parallel",
          "--use-distributed-optimizer",
          "--overlap-grad-reduce",
          "--overlap-param-gather",
          "--mock-data",
          "--tokenizer-type",
          "NullTokenizer",
          "--vocab-size",
          "128256",
          "--split",
          "'99,1,0'"};
}

} // namespace

TEST_CASE("Megatron-LM arguments become the model and plan Megatron-LM would build from them")
{
  const Imported imported = sim::importer::import_megatron(llama3_8b_fp8(), {"dgx-h100", std::nullopt, "llama"});
  const auto& m = imported.scenario["model"];
  CHECK(m["num_kv_heads"] == 8);
  CHECK(m["ffn_hidden_size"] == 14336);
  CHECK(m["vocab_size"] == 128256); // already a multiple of 128 x TP 1
  CHECK(m["ffn_kind"] == "swiglu");
  CHECK(m["norm"] == "rmsnorm");
  CHECK(m["tie_embeddings"] == false);
  CHECK(m["dropout"] == false);
  CHECK(!m.contains("head_dim")); // 128 = 4096 / 32
  const auto& p = imported.scenario["plan"];
  CHECK(imported.scenario["gpus"] == 8); // from torchrun
  CHECK(p["precision"] == "fp8");
  CHECK(p["fp8_param_gather"] == true);
  CHECK(p["fp32_grad_accumulation"] == false); // --grad-reduce-in-bf16
  CHECK(p["sequence_parallel"] == false);      // Megatron-LM turns it off at TP 1
  CHECK(p["overlap_grad_reduce"] == true);
  CHECK(listed(imported.no_effect, "--lr 0.00015"));
  CHECK(listed(imported.no_effect, "--nproc_per_node 8"));
  // A refusal of the scenario can name the argument a value came from.
  CHECK(std::count(imported.origins.begin(), imported.origins.end(),
                   std::pair<std::string, std::string>{"/model/hidden_size", "--hidden-size 4096"}) == 1);
  CHECK(imported.not_simulated.empty());

  const auto s = load(imported);
  CHECK(s.plan.dp == 8);
  CHECK(s.model.num_kv_heads == 8);
  CHECK(s.plan.microbatches() == 16);
}

TEST_CASE(
    "Megatron-LM's defaults: GeLU of 4h, learned positions, tied embeddings, biases, dropout, a padded vocabulary")
{
  const std::vector<std::string> args{"--num-layers",
                                      "24",
                                      "--hidden-size",
                                      "2048",
                                      "--num-attention-heads",
                                      "16",
                                      "--seq-length",
                                      "2048",
                                      "--tokenizer-type",
                                      "GPT2BPETokenizer",
                                      "--tensor-model-parallel-size",
                                      "2",
                                      "--pipeline-model-parallel-size",
                                      "2",
                                      "--num-layers-per-virtual-pipeline-stage",
                                      "3",
                                      "--global-batch-size",
                                      "64",
                                      "--recompute-activations",
                                      "--fp16"};
  const Imported imported = sim::importer::import_megatron(args, target(16, "dgx-a100"));
  const auto& m = imported.scenario["model"];
  CHECK(m["ffn_hidden_size"] == 4 * 2048);
  CHECK(m["vocab_size"] == 50432); // 50257 padded to a multiple of 128 x 2
  CHECK(m["position_embedding"] == "learned");
  CHECK(m["tie_embeddings"] == true);
  CHECK(m["linear_bias"] == true);
  CHECK(m["dropout"] == true);
  const auto& p = imported.scenario["plan"];
  CHECK(p["virtual_stages"] == 4); // 24 layers / (2 stages x 3 layers per chunk)
  CHECK(p["recompute"] == "selective");
  CHECK(p["overlap_grad_reduce"] == false);
  CHECK(p["fp32_grad_accumulation"] == false); // fp16 without --accumulate-allreduce-grads-in-fp32
  const auto s = load(imported);
  CHECK(s.plan.schedule == sim::plan::Schedule::INTERLEAVED);
  CHECK(s.plan.dp == 4);
}

TEST_CASE("Megatron-core's --recompute-modules becomes the plan's modules, and one simtrain does not model is listed")
{
  auto args = llama3_8b_fp8();
  args.insert(args.end(),
              {"--recompute-granularity", "selective", "--recompute-modules", "core_attn", "mlp", "mla_up_proj"});
  const Imported imported = sim::importer::import_megatron(args, {"dgx-h100", std::nullopt, "llama"});
  const auto& p = imported.scenario["plan"];
  CHECK(p["recompute"] == "selective");
  CHECK(p["recompute_modules"] == nlohmann::ordered_json{"core_attn", "mlp"});
  REQUIRE(imported.not_simulated.size() == 1);
  CHECK(imported.not_simulated[0].why.find("mla_up_proj") != std::string::npos);
  const auto s = load(imported);
  CHECK(s.plan.recompute_modules.has(sim::model::RecomputeModule::MLP));
}

TEST_CASE("Megatron-core's partial distributed optimizer is hybrid sharding over its instances")
{
  auto args = llama3_8b_fp8(); // 8 GPUs from torchrun, TP 1: 8 data-parallel ranks, the distributed optimizer
  args.insert(args.end(), {"--num-distributed-optimizer-instances", "2"});
  const Imported imported = sim::importer::import_megatron(args, {"dgx-h100", std::nullopt, "llama"});
  CHECK(imported.scenario["plan"]["shard_group"] == 4);
  CHECK(imported.not_simulated.empty());
  CHECK(load(imported).plan.shard_replicas() == 2);
  args.back() = "3";
  CHECK_THAT(test::error_of([&] {
               sim::importer::import_megatron(args, {"dgx-h100", std::nullopt, "llama"});
             }),
             Catch::Contains("groups of two or more"));
}

TEST_CASE("Megatron-LM's uneven pipeline split and SwiGLU width come out as Megatron-LM computes them")
{
  std::vector<std::string> args{"--num-layers",
                                "30",
                                "--hidden-size",
                                "4096",
                                "--num-attention-heads",
                                "32",
                                "--seq-length",
                                "4096",
                                "--vocab-size",
                                "32000",
                                "--swiglu",
                                "--pipeline-model-parallel-size",
                                "4",
                                "--decoder-first-pipeline-num-layers",
                                "6",
                                "--decoder-last-pipeline-num-layers",
                                "6",
                                "--bf16"};
  Imported imported = sim::importer::import_megatron(args, target(32));
  CHECK(imported.scenario["model"]["ffn_hidden_size"] == 10880); // int(4h x 2/3 / 64) x 64
  CHECK(imported.scenario["plan"]["layers_per_stage"] == nlohmann::ordered_json::parse("[6, 9, 9, 6]"));
  CHECK(imported.scenario["plan"]["fp32_grad_accumulation"] == true); // bf16: Megatron-LM reduces in fp32

  args.resize(args.size() - 5);
  args.insert(args.end(), {"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"});
  imported = sim::importer::import_megatron(args, target(32));
  CHECK(imported.scenario["plan"]["layers_per_stage"] == nlohmann::ordered_json::parse("[7, 8, 8, 7]"));
}

TEST_CASE("Megatron-LM MoE and latent-attention arguments become the model's moe and mla objects")
{
  const std::vector<std::string> args{"--num-layers",
                                      "61",
                                      "--hidden-size",
                                      "7168",
                                      "--num-attention-heads",
                                      "128",
                                      "--ffn-hidden-size",
                                      "18432",
                                      "--seq-length",
                                      "4096",
                                      "--vocab-size",
                                      "129280",
                                      "--swiglu",
                                      "--normalization",
                                      "RMSNorm",
                                      "--position-embedding-type",
                                      "rope",
                                      "--untie-embeddings-and-output-weights",
                                      "--disable-bias-linear",
                                      "--multi-latent-attention",
                                      "--q-lora-rank",
                                      "1536",
                                      "--kv-lora-rank",
                                      "512",
                                      "--qk-head-dim",
                                      "128",
                                      "--qk-pos-emb-head-dim",
                                      "64",
                                      "--v-head-dim",
                                      "128",
                                      "--num-experts",
                                      "256",
                                      "--moe-router-topk",
                                      "8",
                                      "--moe-ffn-hidden-size",
                                      "2048",
                                      "--moe-shared-expert-intermediate-size",
                                      "2048",
                                      "--moe-layer-freq",
                                      "([0]*3+[1]*58)",
                                      "--moe-router-score-function",
                                      "sigmoid",
                                      "--moe-router-enable-expert-bias",
                                      "--moe-router-num-groups",
                                      "8",
                                      "--moe-router-group-topk",
                                      "4",
                                      "--moe-token-dispatcher-type",
                                      "flex",
                                      "--moe-enable-deepep",
                                      "--expert-model-parallel-size",
                                      "64",
                                      "--pipeline-model-parallel-size",
                                      "16",
                                      "--bf16",
                                      "--sequence-parallel",
                                      "--moe-grouped-gemm",
                                      "--mtp-num-layers",
                                      "1",
                                      "--some-future-flag",
                                      "3"};
  const Imported imported = sim::importer::import_megatron(args, target(2048));
  const auto& m = imported.scenario["model"];
  CHECK(m["mla"]["kv_lora_rank"] == 512);
  CHECK(m["mtp_layers"] == 1);
  CHECK(m["moe"]["first_dense_layers"] == 3);
  CHECK(m["moe"]["router"] == "sigmoid");
  CHECK(m["moe"]["load_balancing"] == "aux_free");
  CHECK(m["moe"]["groups_per_token"] == 4);
  CHECK(imported.scenario["plan"]["moe_dispatcher"] == "deepep");
  CHECK(listed(imported.not_simulated, "--some-future-flag 3")); // never dropped silently
  const auto s = load(imported);
  REQUIRE(s.model.moe);
  CHECK(s.model.moe->num_experts == 256);
  CHECK(s.plan.ep == 64);
}

TEST_CASE("Megatron-LM's command line is read as argparse reads it: an option takes the words up to the next one")
{
  const std::vector<std::string> tokens{"--num-layers", "4",         "--recompute-modules", "core_attn", "mlp",
                                        "--bf16",       "--lr=1e-4", "model.num_layers=8",  "stray"};
  const auto given = sim::importer::parse_arguments(tokens);
  REQUIRE(given.size() == 7);
  CHECK(given[0].name == "num-layers");
  CHECK(given[1].values == std::vector<std::string>{"core_attn", "mlp"});
  CHECK(given[2].values.empty());
  CHECK(given[3].spelt() == "--lr 1e-4");
  CHECK(given[4].name == "num-layers"); // the NeMo override, as the argument it stands for
  CHECK(given[4].spelt() == "model.num_layers=8");
  CHECK(given[5].idle); // ends the override: the stray word after it is not its value
  CHECK(given[6].name.empty());
  CHECK(given[6].values == std::vector<std::string>{"stray"});
}

TEST_CASE("the launcher's GPU count is --nproc_per_node x --nnodes, and its arguments change nothing")
{
  const std::vector<std::string> launcher{"torchrun", "--nproc_per_node", "8", "--nnodes", "4", "--node_rank", "0"};
  const auto launch = sim::importer::read_launcher(launcher, "pretrain_gpt.py");
  CHECK(launch.gpus == 32);
  CHECK(launch.launcher.size() == 4);
  CHECK_FALSE(sim::importer::read_launcher(std::vector<std::string>{"torchrun", "--nnodes", "4"}, "x.py").gpus);
  CHECK(sim::importer::has_no_effect("lr"));
  CHECK(sim::importer::has_no_effect("log-interval"));
  CHECK_FALSE(sim::importer::has_no_effect("num-layers"));
}

TEST_CASE("a Megatron-LM command line that cannot be read is refused, naming the argument")
{
  auto error = [](std::vector<std::string> args, std::optional<int> gpus = 8) {
    return test::error_of([&] { sim::importer::import_megatron(args, {"dgx-h100", gpus, "x"}); });
  };
  const std::vector<std::string> base{"--num-layers", "2",   "--hidden-size", "64",  "--num-attention-heads", "4",
                                      "--seq-length", "128", "--vocab-size",  "1000"};
  auto with = [&](std::vector<std::string> more) {
    auto args = base;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  CHECK_THAT(error(with({"--tensor-model-parallel-size", "two"})),
             Catch::Contains("megatron argument --tensor-model-parallel-size: not an integer (found two"));
  CHECK_THAT(error(with({"--normalization", "BatchNorm"})), Catch::Contains("not one of Megatron-LM's choices"));
  CHECK_THAT(error(with({"--swiglu", "yes"})), Catch::Contains("is a flag and takes no value"));
  CHECK_THAT(error({"--hidden-size", "64"}), Catch::Contains("--num-layers is missing"));
  CHECK_THAT(error({"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "8"}),
             Catch::Contains("the vocabulary size is not known"));
  CHECK_THAT(error(base, std::nullopt), Catch::Contains("the GPU count is not known"));
}

TEST_CASE("DeepSpeed configs from DeepSpeedExamples: ZeRO stage, batches by DeepSpeed's rule, precision, AutoTP")
{
  Imported z3 = deepspeed("bf16_master_weight_baseline.json", 8, {"llama2-7b", 2048, std::nullopt, std::nullopt});
  CHECK(z3.scenario["plan"]["zero_stage"] == 3);
  CHECK(z3.scenario["plan"]["micro_batch"] == 4);
  CHECK(z3.scenario["plan"]["global_batch"] == 32); // 4 x 1 x 8 GPUs
  CHECK(z3.scenario["plan"]["precision"] == "bf16");
  CHECK(z3.scenario["plan"]["dp_bucket_size"] == "100000000B"); // 5e7 16-bit gradients
  CHECK(load(z3).plan.zero_stage == 3);
  // DeepSpeed's own defaults, from plan.framework: ZeRO's 16-bit gradients, overlap_comm at stage 3.
  CHECK(z3.scenario["plan"]["framework"] == "deepspeed");
  CHECK_FALSE(load(z3).plan.fp32_grad_accumulation);
  CHECK(load(z3).plan.overlap_grad_reduce);
  sim::core::Provenance ds_provenance;
  ds_provenance.add_source("", "ds.json");
  const sim::core::Json stage0 = {{"train_micro_batch_size_per_gpu", 1}, {"bf16", {{"enabled", true}}}};
  const auto plain = load(sim::importer::import_deepspeed(sim::core::Node(stage0, "", ds_provenance),
                                                          target(8, "dgx-a100"), {"llama2-7b", 1024, {}, {}}));
  CHECK(plain.plan.fp32_grad_accumulation);       // BF16_Optimizer without ZeRO
  CHECK(plain.plan.dp_bucket_bytes == 4.0 * 5e8); // allreduce_gradients' bucket
  CHECK_FALSE(plain.plan.overlap_grad_reduce);    // all-reduced after the backward pass
  const sim::core::Json overlapped = {{"train_micro_batch_size_per_gpu", 1},
                                      {"bf16", {{"enabled", true}}},
                                      {"zero_optimization", {{"stage", 2}, {"overlap_comm", true}}}};
  CHECK(load(sim::importer::import_deepspeed(sim::core::Node(overlapped, "", ds_provenance), target(8, "dgx-a100"),
                                             {"llama2-7b", 1024, {}, {}}))
            .plan.overlap_grad_reduce);

  Imported autotp = deepspeed("autotp_ds_config.json", 16, {"llama2-7b", std::nullopt, 2, 64});
  CHECK(autotp.scenario["plan"]["tp"] == 4);
  CHECK(autotp.scenario["plan"]["global_batch"] == 64); // "auto", from the command line
  CHECK(load(autotp).plan.dp == 4);

  Imported lamb = deepspeed("bing_bert_lamb_seq512.json", 64, {"sc21-gpt-1.7b", 512, std::nullopt, std::nullopt});
  CHECK(lamb.scenario["plan"]["precision"] == "fp16");
  CHECK(lamb.scenario["plan"]["global_batch"] == 32768);
  CHECK(listed(lamb.not_simulated, "/optimizer")); // Lamb, simulated as Adam: said so

  // Lion as DeepSpeed's optimizer documentation configures it (deepspeed.ai/docs/config-json, "Optimizer Parameters").
  Imported lion = deepspeed("lion_zero2.json", 8, {"llama2-7b", 2048, std::nullopt, std::nullopt});
  CHECK(lion.scenario["plan"]["optimizer_algorithm"] == "lion");
  CHECK_FALSE(listed(lion.not_simulated, "/optimizer"));
  CHECK(load(lion).plan.optimizer_algorithm == sim::plan::OptimizerAlgorithm::LION);

  Imported offload = deepspeed("zenflow_zf_config.json", 8, {"llama2-7b", std::nullopt, std::nullopt, std::nullopt});
  CHECK(offload.scenario["plan"]["offload_optimizer"] == "cpu"); // ZeRO-Offload, simulated
  CHECK_FALSE(listed(offload.not_simulated, "/zero_optimization/offload_optimizer"));
  CHECK(listed(offload.not_simulated, "/zero_optimization/zenflow"));
  CHECK(offload.scenario["plan"]["micro_batch"] == 1);

  // DeepSpeed 0.3's spelling (DeepSpeedExamples' ZeRO-3 Offload scripts of 2021): both offloads, simulated.
  sim::core::Provenance provenance;
  provenance.add_source("", "ds_zero3_offload.json");
  const sim::core::Json v03 = {
      {"train_micro_batch_size_per_gpu", 4},
      {"gradient_accumulation_steps", 1},
      {"fp16", {{"enabled", true}}},
      {"zero_optimization", {{"stage", 3}, {"cpu_offload", true}, {"cpu_offload_params", true}}}};
  const Imported old = sim::importer::import_deepspeed(sim::core::Node(v03, "", provenance), target(8),
                                                       {"llama2-7b", 1024, std::nullopt, std::nullopt});
  CHECK(old.scenario["plan"]["offload_optimizer"] == "cpu");
  CHECK(old.scenario["plan"]["offload_params"] == "cpu");
  CHECK(old.not_simulated.empty());

  CHECK_THAT(test::error_of([] {
               deepspeed("autotuning_ds_config_fp16_z3.json", 8, {"llama2-7b", {}, {}, {}});
             }),
             Catch::Contains("the batch size is not known"));
  CHECK_THAT(test::error_of([] {
               deepspeed("zenflow_zf_config.json", 8, {"llama2-7b", {}, 2, {}});
             }),
             Catch::Contains("/train_batch_size: is not micro batch x accumulation steps"));
}

TEST_CASE("torchtitan job files: FSDP as ZeRO-3, TP with sequence parallelism, float8, recomputation")
{
  Imported l405 = torchtitan("llama3_405b.toml", 128);
  CHECK(l405.scenario["model"] == "llama3-405b");
  const auto& p = l405.scenario["plan"];
  CHECK(p["tp"] == 8);
  CHECK(p["zero_stage"] == 3);
  CHECK(p["precision"] == "fp8");
  CHECK(p["fp8_recipe"] == "current");
  CHECK(p["fp8_param_gather"] == true);
  CHECK(p["recompute"] == "full");
  CHECK(p["tp_comm_overlap"] == true);
  CHECK(p["global_batch"] == 2 * 16);
  CHECK(listed(l405.no_effect, "[checkpoint]"));
  CHECK(l405.not_simulated.empty());
  const auto s = load(l405);
  CHECK(s.plan.dp == 16);

  Imported l8 = torchtitan("llama3_8b.toml", 8);
  CHECK(l8.scenario["plan"]["recompute"] == "selective");
  CHECK(l8.scenario["plan"]["precision"] == "bf16"); // float8 options without the converter
  CHECK(load(l8).plan.zero_stage == 3);

  CHECK_THAT(test::error_of([] { torchtitan("llama3_70b.toml", 100); }),
             Catch::Contains("do not multiply to the GPU count"));
  Imported ds = torchtitan("deepseek_v3_671b.toml", 256);
  CHECK(ds.scenario["model"] == "deepseek-v3");
  CHECK(listed(ds.no_effect, "/parallelism/pipeline_parallel_schedule"));
}

namespace {

// A torchtitan fixture with one line replaced, imported for `gpus` GPUs.
Imported torchtitan_edited(const std::string& file, const std::string& line, const std::string& replacement, int gpus)
{
  static sim::core::Provenance provenance;
  static std::vector<sim::core::Json> documents;
  const auto edited = test::scratch_dir() / ("edited-" + file);
  {
    std::ifstream in(fixtures / "torchtitan" / file);
    std::stringstream text;
    text << in.rdbuf();
    std::ofstream out(edited);
    out << std::regex_replace(text.str(), std::regex(line), replacement);
  }
  provenance.add_source("", edited.string());
  documents.push_back(sim::importer::read_toml_file(edited));
  return sim::importer::import_torchtitan(sim::core::Node(documents.back(), "", provenance), target(gpus), "");
}

} // namespace

TEST_CASE("torchtitan's HSDP: FSDP within the shard dimension, replicated over the replicate dimension")
{
  // llama3_8b.toml on 32 GPUs with two replicas of FSDP groups of 16.
  const Imported hsdp = torchtitan_edited("llama3_8b.toml", "data_parallel_replicate_degree = 1",
                                          "data_parallel_replicate_degree = 2", 32);
  CHECK(hsdp.not_simulated.empty());
  CHECK(hsdp.scenario["plan"]["zero_stage"] == 3);
  CHECK(hsdp.scenario["plan"]["shard_group"] == 16);
  const auto s = load(hsdp);
  CHECK(s.plan.dp == 32);
  CHECK(s.plan.shard_replicas() == 2);
}

TEST_CASE("torchtitan's FSDP with pipeline parallelism: one gather and one reduction per step, as PyTorch runs it")
{
  const Imported pipelined =
      torchtitan_edited("llama3_8b.toml", "pipeline_parallel_degree = 1", "pipeline_parallel_degree = 2", 16);
  const auto& p = pipelined.scenario["plan"];
  CHECK_FALSE(p.contains("zero_stage"));
  CHECK(p["distributed_optimizer"] == true);
  CHECK(p["overlap_param_gather"] == true);
  CHECK(p["overlap_grad_reduce"] == false);
  CHECK(std::any_of(pipelined.assumptions.begin(), pipelined.assumptions.end(),
                    [](const std::string& a) { return a.find("FSDP2 with pipeline parallelism") == 0; }));
  CHECK(load(pipelined).plan.pp == 2);
}

TEST_CASE("a torchtitan file that is not TOML is refused with its line and column")
{
  const auto file = test::scratch_dir() / "broken.toml";
  {
    std::ofstream out(file);
    out << "[model]\nname = \"llama3\"\nflavor = 8B\n";
  }
  CHECK_THAT(test::error_of([&] { sim::importer::read_toml_file(file); }), Catch::Contains("line 3"));
}

TEST_CASE("NeMo's model.* and trainer.* overrides read as the Megatron-LM arguments they stand for")
{
  // NeMo-Framework-Launcher's conf/training/gpt3/175b.yaml, as command-line overrides.
  const std::vector<std::string> args{"model.micro_batch_size=1",
                                      "model.global_batch_size=2048",
                                      "model.tensor_model_parallel_size=4",
                                      "model.pipeline_model_parallel_size=8",
                                      "model.virtual_pipeline_model_parallel_size=12",
                                      "model.encoder_seq_length=2048",
                                      "model.max_position_embeddings=2048",
                                      "model.num_layers=96",
                                      "model.hidden_size=12288",
                                      "model.num_attention_heads=96",
                                      "model.activations_checkpoint_granularity=selective",
                                      "model.activations_checkpoint_num_layers=null",
                                      "model.sequence_parallel=True",
                                      "model.tokenizer.type=GPT2BPETokenizer",
                                      "model.megatron_amp_O2=True",
                                      "model.ub_tp_comm_overlap=True",
                                      "model.optim.name=distributed_fused_adam",
                                      "model.optim.overlap_grad_sync=True",
                                      "++model.optim.lr=0.9e-4",
                                      "model.bias=False",
                                      "trainer.num_nodes=128",
                                      "trainer.devices=8",
                                      "trainer.precision=bf16",
                                      "model.unheard_of=1",
                                      "stray"};
  const Imported imported = sim::importer::import_megatron(args, {"dgx-a100", std::nullopt, "gpt3"});
  CHECK(imported.scenario["gpus"] == 1024);
  const auto& p = imported.scenario["plan"];
  CHECK(p["virtual_stages"] == 12);
  CHECK(p["recompute"] == "selective");
  CHECK(p["distributed_optimizer"] == true);
  CHECK(p["tp_comm_overlap"] == true);
  CHECK(p["precision"] == "bf16");
  CHECK(imported.scenario["model"]["linear_bias"] == false);
  CHECK(imported.scenario["model"]["vocab_size"] == 50688); // GPT-2's 50257 padded to 128 x 4
  CHECK(listed(imported.no_effect, "++model.optim.lr=0.9e-4"));
  CHECK(listed(imported.no_effect, "model.activations_checkpoint_num_layers=null"));
  CHECK(listed(imported.not_simulated, "model.unheard_of=1"));
  CHECK(listed(imported.not_simulated, "stray"));
  CHECK(load(imported).plan.dp == 32);
  CHECK_THAT(test::error_of([] {
               sim::importer::import_megatron({"model.num_layers=many"}, {"dgx-a100", 8, "x"});
             }),
             Catch::Contains("nemo override model.num_layers: not an integer"));
}

TEST_CASE("a NeMo-Framework-Launcher YAML reads as its overrides, interpolations resolved")
{
  const auto gpt3 = sim::importer::read_yaml_file(fixtures / "nemo" / "gpt3_175b.yaml");
  const auto overrides = sim::importer::nemo_overrides(gpt3);
  auto has = [&](const std::string& o) { return std::find(overrides.begin(), overrides.end(), o) != overrides.end(); };
  CHECK(has("model.ffn_hidden_size=49152")); // ${multiply:4, ${.hidden_size}}
  CHECK(has("trainer.num_nodes=128"));
  const Imported imported = sim::importer::import_nemo(gpt3, "gpt3_175b.yaml", {"dgx-h100", std::nullopt, "gpt3"}, {});
  CHECK(imported.scenario["gpus"] == 1024);
  CHECK(imported.scenario["plan"]["virtual_stages"] == 6);
  CHECK(imported.scenario["plan"]["distributed_optimizer"] == true);
  CHECK(imported.not_simulated.empty());
  CHECK(load(imported).plan.pp == 8);

  // Hugging Face tokenizers by name; overrides after the file win.
  const auto llama = sim::importer::read_yaml_file(fixtures / "nemo" / "llama3_1_405b.yaml");
  const Imported l405 = sim::importer::import_nemo(llama, "llama3_1_405b.yaml", {"dgx-h100", std::nullopt, "l"},
                                                   {"model.context_parallel_size=1", "trainer.num_nodes=288"});
  CHECK(l405.scenario["model"]["vocab_size"] == 129024); // 128256, padded to 128 x TP 8
  CHECK(l405.scenario["model"]["num_kv_heads"] == 16);
  CHECK(l405.scenario["gpus"] == 2304);
  CHECK(!l405.scenario["plan"].contains("cp"));

  const auto mixtral = sim::importer::read_yaml_file(fixtures / "nemo" / "mixtral_8x7b.yaml");
  const Imported moe = sim::importer::import_nemo(mixtral, "mixtral_8x7b.yaml", {"dgx-h100", std::nullopt, "m"}, {});
  CHECK(moe.scenario["model"]["moe"]["num_experts"] == 8);
  CHECK(moe.scenario["plan"]["ep"] == 8);

  CHECK_THAT(test::error_of([] {
               sim::importer::import_nemo(nlohmann::json{{"trainer", nlohmann::json::object()}}, "x.yaml",
                                          {"dgx-h100", 8, "x"}, {});
             }),
             Catch::Contains("not a NeMo training configuration"));
  const auto broken = test::scratch_dir() / "broken.yaml";
  {
    std::ofstream out(broken);
    out << "model:\n  num_layers: [1, 2\n";
  }
  CHECK_THAT(test::error_of([&] { sim::importer::read_yaml_file(broken); }), Catch::Contains("not valid YAML"));
}

TEST_CASE("NeMo's PEFT configuration: LoRA on a model restored from a checkpoint, the launcher's overrides applied")
{
  const auto sft = sim::importer::read_yaml_file(fixtures / "nemo" / "llama_sft.yaml");
  const sim::importer::GivenModel llama70{"llama2-70b", 80};
  // NeMo-Framework-Launcher's examples/peft/llama/h100/70b_1node_lora.sh (NeMo 24.07's LoRA row), its overrides as
  // the script writes them: the launcher's stage name, '++', Hydra's deletions of the file's optimizer settings.
  const std::vector<std::string> script{"peft.trainer.devices=8",
                                        "peft.trainer.num_nodes=1",
                                        "peft.model.micro_batch_size=1",
                                        "peft.model.global_batch_size=32",
                                        "peft.model.tensor_model_parallel_size=2",
                                        "peft.model.pipeline_model_parallel_size=4",
                                        "peft.model.peft.peft_scheme=lora",
                                        "peft.model.fp8=true",
                                        "++peft.model.fp8_params=true",
                                        "peft.model.optim.name=fused_adam",
                                        "~peft.model.optim.overlap_grad_sync",
                                        "~peft.model.optim.grad_sync_dtype",
                                        "peft.model.data.train_ds.packed_sequence=true",
                                        "peft.model.data.train_ds.max_seq_length=4096"};
  const Imported lora =
      sim::importer::import_nemo(sft, "llama_sft.yaml", {"dgx-h100", std::nullopt, "l"}, script, llama70);
  const auto& p = lora.scenario["plan"];
  CHECK(lora.scenario["model"] == "llama2-70b");
  CHECK(lora.scenario["gpus"] == 8);
  CHECK(p["tp"] == 2);
  CHECK(p["pp"] == 4);
  CHECK(p["seq_length"] == 4096); // the packed sequence's, through ${peft.model.data.train_ds.max_seq_length}
  CHECK(p["lora_rank"] == 32);    // lora_tuning.adapter_dim
  CHECK(p["lora_targets"] == nlohmann::ordered_json::array({"linear_qkv"})); // NeMo's default target, attention_qkv
  CHECK(p["precision"] == "fp8");
  CHECK(p["distributed_optimizer"] == false); // fused_adam replaces the file's mcore_distributed_optim
  CHECK(p["overlap_grad_reduce"] == false);   // the file's True taken away
  CHECK(p["fp32_grad_accumulation"] == true); // the file's bf16 gradient reduction taken away
  CHECK_FALSE(p.contains("fp8_param_gather"));
  CHECK(listed(lora.not_simulated, "packed_sequence=true"));
  CHECK(listed(lora.not_simulated, "fp8_params=true"));
  CHECK(std::any_of(lora.assumptions.begin(), lora.assumptions.end(),
                    [](const std::string& a) { return a.find("~peft.model.optim.overlap_grad_sync") == 0; }));
  const auto loaded = load(lora);
  CHECK(loaded.plan.lora_rank == 32);
  CHECK(loaded.plan.dp == 1);

  // Without a scheme the same file is full fine-tuning (SFT), its LoRA settings changing nothing.
  const Imported full = sim::importer::import_nemo(sft, "llama_sft.yaml", {"dgx-h100", 8, "s"}, {}, llama70);
  CHECK_FALSE(full.scenario["plan"].contains("lora_rank"));
  CHECK(full.scenario["plan"]["distributed_optimizer"] == true);

  // Targets by NeMo's names, the "canonical" variant's unfused Q, K, V and gate, up; dropout where NeMo puts it.
  const Imported all =
      sim::importer::import_nemo(sft, "llama_sft.yaml", {"dgx-h100", 8, "a"},
                                 {"model.peft.peft_scheme=lora", "model.peft.lora_tuning.target_modules=[all]",
                                  "+model.peft.lora_tuning.variant=canonical", "model.peft.lora_tuning.adapter_dim=16",
                                  "model.peft.lora_tuning.adapter_dropout=0.1"},
                                 llama70);
  CHECK(all.scenario["plan"]["lora_targets"] ==
        nlohmann::ordered_json::array(
            {"q_proj", "k_proj", "v_proj", "linear_proj", "gate_proj", "up_proj", "linear_fc2"}));
  CHECK(all.scenario["plan"]["lora_rank"] == 16);
  CHECK(all.scenario["plan"]["lora_dropout"] == 0.1);
  CHECK(all.scenario["plan"]["lora_dropout_position"] == "output"); // NeMo's default "post"
  const Imported mlp = sim::importer::import_nemo(
      sft, "llama_sft.yaml", {"dgx-h100", 8, "m"},
      {"model.peft.peft_scheme=lora", "model.peft.lora_tuning.target_modules=['attention_qkv', 'mlp']"}, llama70);
  CHECK(mlp.scenario["plan"]["lora_targets"] ==
        nlohmann::ordered_json::array({"linear_qkv", "linear_fc1", "linear_fc2"}));
  const Imported ptuning = sim::importer::import_nemo(sft, "llama_sft.yaml", {"dgx-h100", 8, "p"},
                                                      {"model.peft.peft_scheme=ptuning"}, llama70);
  CHECK(listed(ptuning.not_simulated, "peft_scheme=ptuning"));
  CHECK_FALSE(ptuning.scenario["plan"].contains("lora_rank"));

  CHECK_THAT(test::error_of([&] {
               sim::importer::import_nemo(
                   sft, "llama_sft.yaml", {"dgx-h100", 8, "x"},
                   {"model.peft.peft_scheme=lora", "model.peft.lora_tuning.target_modules=[qkv]"}, llama70);
             }),
             Catch::Contains("names a module NeMo's LoRA does not target"));
  CHECK_THAT(test::error_of([&] {
               sim::importer::import_nemo(sft, "llama_sft.yaml", {"dgx-h100", 8, "x"}, {});
             }),
             Catch::Contains("llama_sft.yaml:/model: the configuration does not describe its model"));
  CHECK_THAT(
      test::error_of([&] {
        sim::importer::import_nemo(sft, "llama_sft.yaml", {"dgx-h100", 8, "x"}, {"model.num_layers=80"}, llama70);
      }),
      Catch::Contains("describes a model while --model gives one"));
}

TEST_CASE("Hugging Face Trainer: Alpaca's FSDP fine-tune as ZeRO-3 with Trainer's batches and FSDP's 16-bit "
          "gradient reduction")
{
  // tatsu-lab/stanford_alpaca README: 4 A100s, --bf16 --per_device_train_batch_size 4 --gradient_accumulation_steps 8
  // --fsdp "full_shard auto_wrap" --tf32 True --model_max_length 512.
  Imported alpaca = hf("alpaca_fsdp.json", 4);
  const auto& plan = alpaca.scenario["plan"];
  CHECK(plan["zero_stage"] == 3);
  CHECK(plan["micro_batch"] == 4);
  CHECK(plan["global_batch"] == 4 * 8 * 4);
  CHECK(plan["precision"] == "bf16");
  CHECK(plan["seq_length"] == 512);
  // FSDP's defaults: Trainer's MixedPrecision(param_dtype, reduce_dtype, buffer_dtype all bf16).
  CHECK(plan["framework"] == "fsdp");
  CHECK_FALSE(load(alpaca).plan.fp32_grad_accumulation);
  CHECK_FALSE(plan.contains("recompute"));
  CHECK(listed(alpaca.no_effect, "/learning_rate"));
  CHECK(listed(alpaca.no_effect, "/tf32"));
  CHECK(alpaca.not_simulated.empty());
  CHECK(load(alpaca).plan.zero_stage == 3);
}

TEST_CASE("Hugging Face Trainer: a DeepSpeed config it names gets Trainer's batch and precision in its auto fields")
{
  // QLoRA's Guanaco 7B arguments (artidoro/qlora scripts/finetune_guanaco_7b.sh), with a ZeRO-2 config of "auto"
  // values as Transformers' DeepSpeed integration documents them.
  Imported run = hf("qlora_style.json", 8);
  const auto& plan = run.scenario["plan"];
  CHECK(plan["zero_stage"] == 2);
  CHECK(plan["micro_batch"] == 1);
  CHECK(plan["global_batch"] == 1 * 16 * 8);
  CHECK(plan["precision"] == "bf16");
  CHECK(plan["recompute"] == "full");                // gradient_checkpointing
  CHECK_FALSE(plan.contains("optimizer_algorithm")); // paged 32-bit AdamW: Adam, its paging noted
  CHECK(std::any_of(run.assumptions.begin(), run.assumptions.end(),
                    [](const std::string& a) { return a.find("paged_adamw_32bit") != std::string::npos; }));
  CHECK(load(run).plan.zero_stage == 2);
}

TEST_CASE("Hugging Face Trainer: arguments as the script takes them and optimizers by name and bad values refused")
{
  const auto args = sim::importer::hf_arguments_json(
      {"--bf16", "--per_device_train_batch_size", "2", "--optim=adamw_bnb_8bit", "--fsdp", "shard_grad_op"});
  CHECK(args["bf16"] == true);
  CHECK(args["per_device_train_batch_size"] == 2);
  CHECK(args["optim"] == "adamw_bnb_8bit");
  sim::core::Provenance provenance;
  provenance.add_source("", "args");
  const Imported eight =
      sim::importer::import_hf_trainer(sim::core::Node(args, "", provenance), target(2), {"llama2-7b", 1024, {}});
  CHECK(eight.scenario["plan"]["optimizer_algorithm"] == "adam_8bit");
  CHECK(eight.scenario["plan"]["zero_stage"] == 2);
  CHECK(eight.scenario["plan"]["global_batch"] == 4);

  const auto refused = [&provenance](const sim::core::Json& j) {
    return test::error_of([&] {
      sim::importer::import_hf_trainer(sim::core::Node(j, "", provenance), target(2), {"llama2-7b", 1024, {}});
    });
  };
  CHECK_THAT(refused({{"bf16", true}, {"fp16", true}}), Catch::Contains("bf16 and fp16 are both on"));
  CHECK_THAT(refused({{"fsdp", "full_shard everything"}}), Catch::Contains("unknown FSDP option (found everything"));
  CHECK_THAT(refused({{"per_device_train_batch_size", 0}}), Catch::Contains("/per_device_train_batch_size"));
  // An optimizer simtrain has no update for: simulated as Adam, and said so.
  const Imported galore = sim::importer::import_hf_trainer(
      sim::core::Node(sim::core::Json{{"optim", "galore_adamw"}}, "", provenance), target(2), {"llama2-7b", 1024, {}});
  CHECK(listed(galore.not_simulated, "/optim"));
}

TEST_CASE("Hugging Face Trainer: transformers' eager norms and pointwise operations, fused under torch_compile")
{
  sim::core::Provenance provenance;
  provenance.add_source("", "args");
  const auto import = [&provenance](const sim::core::Json& j) {
    return sim::importer::import_hf_trainer(sim::core::Node(j, "", provenance), target(2), {"llama2-7b", 1024, {}});
  };
  const Imported eager = import({{"bf16", true}});
  CHECK(eager.scenario["plan"]["norm_impl"] == "eager");
  CHECK(eager.scenario["plan"]["rope_impl"] == "eager");
  CHECK(eager.scenario["plan"]["activation_impl"] == "eager");
  const Imported compiled = import({{"bf16", true}, {"torch_compile", true}});
  CHECK(compiled.scenario["plan"]["norm_impl"] == "torch");
  CHECK(compiled.scenario["plan"]["rope_impl"] == "fused");
  CHECK(compiled.scenario["plan"]["activation_impl"] == "fused");
  CHECK_FALSE(listed(compiled.not_simulated, "/torch_compile"));
  // Liger fuses the same three; its fused linear cross entropy is said not simulated.
  const Imported liger = import({{"bf16", true}, {"use_liger_kernel", true}});
  CHECK(liger.scenario["plan"]["rope_impl"] == "fused");
  CHECK(listed(liger.not_simulated, "/use_liger_kernel"));
  CHECK(listed(import({{"bf16", true}, {"torch_compile", false}}).no_effect, "/torch_compile"));
  CHECK(load(eager).plan.software.rope == sim::plan::PointwiseImpl::EAGER);
  CHECK(load(eager).plan.software.activation == sim::plan::PointwiseImpl::EAGER);
}

TEST_CASE("LLaMA-Factory: its LoRA and QLoRA examples as adapters over a 16-bit or 4-bit base with checkpointing")
{
  const auto import = [](const std::string& file) {
    static sim::core::Provenance provenance;
    static std::vector<sim::core::Json> documents;
    provenance.add_source("", file);
    documents.push_back(sim::importer::typed_scalars(sim::importer::read_yaml_file(fixtures / "llamafactory" / file)));
    return sim::importer::import_llamafactory(sim::core::Node(documents.back(), "", provenance), target(4),
                                              {"llama3-8b", std::nullopt, fixtures / "llamafactory"});
  };
  const Imported lora = import("llama3_lora_sft.yaml");
  const auto& plan = lora.scenario["plan"];
  CHECK(plan["lora_rank"] == 8);
  CHECK_FALSE(plan.contains("lora_targets")); // "all": every projection, the default
  CHECK_FALSE(plan.contains("base_quantization"));
  CHECK(plan["seq_length"] == 2048);        // cutoff_len
  CHECK(plan["recompute"] == "full");       // LLaMA-Factory checkpoints by default
  CHECK(plan["global_batch"] == 1 * 8 * 4); // Trainer's batches
  CHECK(lora.not_simulated.empty());
  CHECK(load(lora).plan.lora_rank == 8);
  const Imported qlora = import("llama3_lora_sft_otfq.yaml");
  CHECK(qlora.scenario["plan"]["base_quantization"] == "nf4");
  CHECK(load(qlora).plan.base_quantization == sim::plan::BaseQuantization::NF4);
}

TEST_CASE("LLaMA-Factory: named targets and what is not simulated said so")
{
  sim::core::Provenance provenance;
  provenance.add_source("", "lf.yaml");
  const sim::core::Json config = {{"finetuning_type", "lora"},
                                  {"lora_target", "q_proj, v_proj, c_attn"},
                                  {"lora_dropout", 0.05},
                                  {"quantization_bit", 8},
                                  {"use_dora", true},
                                  {"stage", "dpo"},
                                  {"bf16", true}};
  const Imported out =
      sim::importer::import_llamafactory(sim::core::Node(config, "", provenance), target(2), {"llama3-8b", 1024, {}});
  CHECK(out.scenario["plan"]["lora_targets"] == sim::importer::OrderedJson{"q_proj", "v_proj"});
  CHECK(out.scenario["plan"]["lora_dropout"] == 0.05); // PEFT's dropout on each adapter's input
  CHECK_FALSE(out.scenario["plan"].contains("base_quantization"));
  CHECK(listed(out.not_simulated, "c_attn"));
  CHECK(listed(out.not_simulated, "/quantization_bit"));
  CHECK(listed(out.not_simulated, "/use_dora"));
  CHECK(listed(out.not_simulated, "/stage"));
  // transformers' eager norm, rotary embedding and SwiGLU, unless Liger's kernels replace them (its fused loss said
  // not simulated).
  CHECK(out.scenario["plan"]["norm_impl"] == "eager");
  sim::core::Json liger = config;
  liger["enable_liger_kernel"] = true;
  const Imported fused =
      sim::importer::import_llamafactory(sim::core::Node(liger, "", provenance), target(2), {"llama3-8b", 1024, {}});
  CHECK(fused.scenario["plan"]["norm_impl"] == "torch");
  CHECK(fused.scenario["plan"]["rope_impl"] == "fused");
  CHECK(fused.scenario["plan"]["activation_impl"] == "fused");
  CHECK(listed(fused.not_simulated, "/enable_liger_kernel"));
  CHECK(std::any_of(fused.origins.begin(), fused.origins.end(),
                    [](const auto& o) { return o.first == "/plan/rope_impl" && o.second == "/enable_liger_kernel"; }));
}

// An Accelerate config from tests/data/import/accelerate with the script's Trainer arguments.
Imported import_accelerate(const std::string& file, const std::vector<std::string>& arguments,
                           std::optional<int> gpus = std::nullopt)
{
  static sim::core::Provenance provenance;
  static sim::core::Provenance trainer_provenance;
  static std::vector<sim::core::Json> documents;
  provenance.add_source("", file);
  trainer_provenance.add_source("", "Trainer arguments");
  documents.push_back(sim::importer::typed_scalars(sim::importer::read_yaml_file(fixtures / "accelerate" / file)));
  documents.push_back(sim::importer::hf_arguments_json(arguments));
  const auto& config = documents[documents.size() - 2];
  return sim::importer::import_accelerate(sim::core::Node(config, "", provenance),
                                          sim::core::Node(documents.back(), "", trainer_provenance),
                                          {"dgx-h100", gpus, "imported"}, {"llama3-8b", 2048, fixtures / "accelerate"});
}

TEST_CASE("Accelerate: TRL's FSDP2, FSDP with CPU offload and DeepSpeed ZeRO-3 configs under Trainer's arguments")
{
  const Imported fsdp2 = import_accelerate("fsdp2.yaml", {"--per_device_train_batch_size", "2"});
  const auto& plan = fsdp2.scenario["plan"];
  CHECK(fsdp2.scenario["gpus"] == 8); // num_processes
  CHECK(plan["zero_stage"] == 3);     // reshard_after_forward: FULL_SHARD
  CHECK(plan["precision"] == "bf16");
  CHECK(plan["global_batch"] == 2 * 8);
  CHECK_FALSE(plan.contains("recompute")); // fsdp_activation_checkpointing: false
  CHECK_FALSE(plan.contains("offload_params"));
  CHECK(fsdp2.not_simulated.empty());
  CHECK(listed(fsdp2.no_effect, "/fsdp_config/fsdp_state_dict_type"));
  CHECK(load(fsdp2).plan.zero_stage == 3);

  const Imported offload = import_accelerate("fsdp_qlora.yaml", {"--gradient_checkpointing"}, 4);
  CHECK(offload.scenario["gpus"] == 4); // --gpus over num_processes
  CHECK(offload.scenario["plan"]["offload_params"] == "cpu");
  CHECK(offload.scenario["plan"]["offload_optimizer"] == "cpu");
  CHECK(offload.scenario["plan"]["recompute"] == "full");
  // Where the offload came from is the config's key, for a refusal to name it.
  const auto origin = std::find_if(offload.origins.begin(), offload.origins.end(),
                                   [](const auto& o) { return o.first == "/plan/offload_params"; });
  REQUIRE(origin != offload.origins.end());
  CHECK(origin->second == "/fsdp_config/fsdp_offload_params");

  const Imported zero3 = import_accelerate("deepspeed_zero3.yaml", {"--per_device_train_batch_size", "1"});
  CHECK(zero3.scenario["plan"]["zero_stage"] == 3);
  CHECK(zero3.scenario["plan"]["precision"] == "fp16"); // mixed_precision into DeepSpeed's fp16 section
  CHECK(zero3.scenario["plan"]["framework"] == "deepspeed");
  CHECK(load(zero3).plan.software.optimizer == sim::plan::OptimizerImpl::DEEPSPEED);
  CHECK(zero3.scenario["plan"]["global_batch"] == 8); // gradient_accumulation_steps 1
  CHECK(load(zero3).plan.zero_stage == 3);
}

TEST_CASE("Accelerate: the script's arguments win, offload devices and bad values")
{
  // Trainer's bf16 over the config's fp16; DeepSpeed's offload devices as ZeRO-Offload / ZeRO-Infinity.
  sim::core::Provenance provenance;
  provenance.add_source("", "accelerate.yaml");
  sim::core::Provenance trainer_provenance;
  trainer_provenance.add_source("", "Trainer arguments");
  const sim::core::Json config = {
      {"distributed_type", "DEEPSPEED"},
      {"mixed_precision", "fp16"},
      {"num_processes", 2},
      {"deepspeed_config", {{"zero_stage", 3}, {"offload_optimizer_device", "nvme"}, {"offload_param_device", "cpu"}}}};
  const auto args = sim::importer::hf_arguments_json({"--bf16", "--per_device_train_batch_size", "1"});
  const auto imported = [&](const sim::core::Json& c) {
    return sim::importer::import_accelerate(sim::core::Node(c, "", provenance),
                                            sim::core::Node(args, "", trainer_provenance), {"dgx-h100", {}, "x"},
                                            {"llama3-8b", 1024, {}});
  };
  const Imported out = imported(config);
  CHECK(out.scenario["plan"]["precision"] == "bf16");
  CHECK(out.scenario["plan"]["offload_optimizer"] == "nvme");
  CHECK(out.scenario["plan"]["offload_params"] == "cpu");
  CHECK(std::any_of(out.assumptions.begin(), out.assumptions.end(),
                    [](const std::string& a) { return a.find("the script's bf16") != std::string::npos; }));

  sim::core::Json megatron = config;
  megatron["distributed_type"] = "MEGATRON_LM";
  CHECK(listed(imported(megatron).not_simulated, "MEGATRON_LM"));

  const auto refused = [&](const std::string& key, const sim::core::Json& value, const std::string& pointer) {
    sim::core::Json bad = config;
    bad[sim::core::Json::json_pointer(key)] = value;
    CHECK_THROWS_WITH(imported(bad), Catch::Contains("accelerate.yaml:" + pointer));
  };
  refused("/distributed_type", "MULTI_CPU", "/distributed_type");
  refused("/mixed_precision", "fp4", "/mixed_precision");
  refused("/deepspeed_config/offload_param_device", "disk", "/deepspeed_config/offload_param_device");
  refused("/deepspeed_config/zero_stage", 4, "/deepspeed_config/zero_stage");
  refused("/use_cpu", true, "/use_cpu");
  sim::core::Json no_count = config;
  no_count.erase("num_processes");
  CHECK_THROWS_WITH(imported(no_count), Catch::Contains("the GPU count is not known"));
}

TEST_CASE("FSDP's CPU offload, from Trainer's arguments and torchtitan's job, offloads parameters and the optimizer")
{
  sim::core::Provenance provenance;
  provenance.add_source("", "args");
  const auto args = sim::importer::hf_arguments_json({"--bf16", "--fsdp", "full_shard offload auto_wrap"});
  const Imported trainer =
      sim::importer::import_hf_trainer(sim::core::Node(args, "", provenance), target(8), {"llama2-7b", 1024, {}});
  const auto& plan = trainer.scenario["plan"];
  CHECK(plan["zero_stage"] == 3);
  CHECK(plan["offload_params"] == "cpu");
  CHECK(plan["offload_optimizer"] == "cpu");
  CHECK(plan["cpu_optimizer"] == "pytorch"); // the PyTorch optimizer steps on the CPU tensors
  CHECK(trainer.not_simulated.empty());

  std::ifstream in(fixtures / "torchtitan" / "llama3_8b.toml");
  std::string toml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  toml.insert(toml.find("[training]\n") + 11, "enable_cpu_offload = true\n");
  const auto file = test::write_text(test::scratch_dir() / "offload.toml", toml);
  static sim::core::Provenance titan_provenance;
  static std::vector<sim::core::Json> documents;
  titan_provenance.add_source("", file.string());
  documents.push_back(sim::importer::read_toml_file(file));
  const Imported titan = sim::importer::import_torchtitan(sim::core::Node(documents.back(), "", titan_provenance),
                                                          target(8, "pcie-4090"), "");
  CHECK(titan.scenario["plan"]["offload_params"] == "cpu");
  CHECK(titan.scenario["plan"]["cpu_optimizer"] == "pytorch");
  const auto s = load(titan);
  CHECK(s.plan.offload_optimizer == sim::plan::OffloadDevice::CPU);

  // ZeRO-Infinity's parameters and optimizer on the CPU, as DeepSpeed's config names them.
  const sim::core::Json ds = {{"train_batch_size", 8},
                              {"bf16", {{"enabled", true}}},
                              {"zero_optimization",
                               {{"stage", 3},
                                {"offload_optimizer", {{"device", "cpu"}, {"pin_memory", true}}},
                                {"offload_param", {{"device", "cpu"}}}}}};
  const Imported infinity = sim::importer::import_deepspeed(sim::core::Node(ds, "", provenance), target(8),
                                                            {"llama2-7b", 1024, std::nullopt, std::nullopt});
  CHECK(infinity.scenario["plan"]["offload_params"] == "cpu");
  CHECK(infinity.scenario["plan"]["offload_optimizer"] == "cpu");
  CHECK_FALSE(infinity.scenario["plan"].contains("cpu_optimizer")); // DeepSpeed's CPU Adam, the default
  CHECK(infinity.not_simulated.empty());

  // And to NVMe, with its swapping unit and pipelined reads.
  const sim::core::Json nvme = {
      {"train_batch_size", 8},
      {"bf16", {{"enabled", true}}},
      {"zero_optimization",
       {{"stage", 3},
        {"sub_group_size", 1e8},
        {"offload_optimizer", {{"device", "nvme"}, {"nvme_path", "/local_nvme"}, {"pipeline_read", true}}},
        {"offload_param", {{"device", "nvme"}, {"nvme_path", "/local_nvme"}}}}}};
  const Imported to_nvme = sim::importer::import_deepspeed(sim::core::Node(nvme, "", provenance), target(8),
                                                           {"llama2-7b", 1024, std::nullopt, std::nullopt});
  CHECK(to_nvme.scenario["plan"]["offload_params"] == "nvme");
  CHECK(to_nvme.scenario["plan"]["offload_optimizer"] == "nvme");
  CHECK(to_nvme.scenario["plan"]["nvme_pipeline"] == true);
  CHECK(to_nvme.scenario["plan"]["nvme_sub_group"] == 100000000);
  CHECK(to_nvme.not_simulated.empty());
}

TEST_CASE(
    "Megatron-LM's --optimizer-cpu-offload: a fraction of the distributed optimizer on the CPU under torch's AdamW")
{
  const std::vector<std::string> args =
      small_megatron_args({"--bf16", "--use-distributed-optimizer", "--optimizer-cpu-offload",
                           "--optimizer-offload-fraction", "0.5", "--use-precision-aware-optimizer"});
  const Imported imported = sim::importer::import_megatron(args, target(8, "pcie-4090"));
  const auto& p = imported.scenario["plan"];
  CHECK(p["offload_optimizer"] == "cpu");
  CHECK(p["cpu_optimizer"] == "pytorch");
  CHECK(p["offload_fraction"] == 0.5);
  CHECK(listed(imported.not_simulated, "use-precision-aware-optimizer"));
  CHECK_FALSE(listed(imported.not_simulated, "optimizer-cpu-offload"));
  const auto s = load(imported);
  CHECK(s.plan.distributed_optimizer);
  CHECK(s.plan.offload_fraction == 0.5);
}

TEST_CASE("fp32 training from the importers: Trainer without bf16 or fp16 (tf32 on TF32 cores), Megatron-LM without a "
          "16-bit flag, DeepSpeed without a precision section")
{
  sim::core::Provenance provenance;
  provenance.add_source("", "args");
  const auto trainer = [&provenance](const sim::core::Json& j) {
    return sim::importer::import_hf_trainer(sim::core::Node(j, "", provenance), target(1, "dgx-a100"),
                                            {"llama2-7b", 1024, {}});
  };
  const Imported fp32 = trainer({{"per_device_train_batch_size", 1}});
  CHECK(fp32.scenario["plan"]["precision"] == "fp32");
  CHECK(fp32.not_simulated.empty());
  const Imported tf32 = trainer({{"per_device_train_batch_size", 1}, {"tf32", true}});
  CHECK(tf32.scenario["plan"]["precision"] == "tf32");
  CHECK(load(tf32).plan.precision == sim::hardware::Precision::TF32);
  // With bf16 the matmuls are 16-bit: TF32 changes nothing simtrain runs, and says so.
  const Imported both = trainer({{"per_device_train_batch_size", 1}, {"tf32", true}, {"bf16", true}});
  CHECK(both.scenario["plan"]["precision"] == "bf16");
  CHECK(listed(both.no_effect, "tf32"));

  const std::vector<std::string> args = small_megatron_args({});
  const Imported megatron = sim::importer::import_megatron(args, target(8, "dgx-a100"));
  CHECK(megatron.scenario["plan"]["precision"] == "fp32");
  CHECK(megatron.scenario["plan"]["fp32_grad_accumulation"] == true);
  CHECK(load(megatron).plan.full_precision());

  const sim::core::Json ds = {{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", {{"stage", 2}}}};
  const Imported deepspeed = sim::importer::import_deepspeed(sim::core::Node(ds, "", provenance), target(8, "dgx-a100"),
                                                             {"llama2-7b", 1024, {}, {}});
  CHECK(deepspeed.scenario["plan"]["precision"] == "fp32");
  CHECK(load(deepspeed).plan.fp32_grad_accumulation);
  CHECK(load(deepspeed).plan.value_bytes() == 4.0);
}
