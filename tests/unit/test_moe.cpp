// Mixture-of-experts: parameter, FLOP and memory closed forms, and the expert-parallel task graph.
#include "memory/memory_model.hpp"
#include "model/flops.hpp"
#include "model/param_count.hpp"

#include "build_support.hpp"

namespace {

// A small MoE: 8 layers, the first dense, then MoE layers of 16 experts (top-2, SwiGLU FFN 512) and a shared expert.
nlohmann::json moe_model()
{
  return {{"schema", "model/v1"},
          {"name", "moe"},
          {"num_layers", 8},
          {"hidden_size", 1024},
          {"num_attention_heads", 16},
          {"num_kv_heads", 4},
          {"ffn_hidden_size", 4096},
          {"ffn_kind", "swiglu"},
          {"norm", "rmsnorm"},
          {"position_embedding", "rope"},
          {"qkv_bias", false},
          {"tie_embeddings", false},
          {"dropout", false},
          {"vocab_size", 32000},
          {"seq_length", 2048},
          {"moe",
           {{"num_experts", 16},
            {"experts_per_token", 2},
            {"expert_ffn_hidden_size", 512},
            {"shared_expert_ffn_hidden_size", 512},
            {"first_dense_layers", 1}}}};
}

sim::model::ModelSpec read(const nlohmann::json& j)
{
  sim::core::Provenance prov;
  prov.add_source("", "moe.json");
  return sim::model::read_model(sim::core::Node(j, "", prov));
}

test::Built build(nlohmann::json plan, bool fold, nlohmann::json model = moe_model())
{
  return test::build(std::move(plan), std::move(model), "dgx-h100", fold);
}

} // namespace

TEST_CASE("a MoE layer has routed experts, a shared expert and a router, and fewer active parameters per token")
{
  const auto m = read(moe_model());
  const double h = 1024;
  const double expert = 3.0 * h * 512;
  const auto p = sim::model::count_params(m);
  CHECK(m.moe_layers() == 7);
  CHECK(p.moe_layer.experts == 16 * expert);
  CHECK(p.moe_layer.active_experts == 2 * expert);
  CHECK(p.moe_layer.ffn == expert); // the shared expert
  CHECK(p.moe_layer.router == 16 * h);
  CHECK(p.layer.ffn == 3.0 * h * 4096);
  CHECK(p.total - p.active == 7 * 14 * expert);
}

TEST_CASE("MoE FLOPs count the experts a token goes to: 6 x active matrix parameters per token")
{
  const auto m = read(moe_model());
  const auto p = sim::model::count_params(m);
  const double tokens = 2048.0 * 4;
  const auto step = sim::model::step_flops(m, 2048, 4, sim::model::Recompute::NONE);
  // Matrix parameters a token uses (all but norms and the word embedding, which is a lookup), and the attention core.
  const double matrices = p.active - p.word_embedding - p.final_norm - 8.0 * p.layer.norms;
  // Per layer and sequence, two attention matmuls of 2 s^2 q FLOPs; forward and backward 3x.
  const double attention = 8.0 * 4.0 * 2.0 * 2.0 * 2048.0 * 2048.0 * 1024.0 * 3.0;
  CHECK(step.model() == Approx(6.0 * tokens * matrices + attention));
}

TEST_CASE("multi-head latent attention counts its low-rank projections")
{
  auto j = moe_model();
  j.erase("num_kv_heads");
  j["mla"] = {{"q_lora_rank", 256},
              {"kv_lora_rank", 128},
              {"qk_nope_head_dim", 64},
              {"qk_rope_head_dim", 32},
              {"v_head_dim", 64}};
  const auto m = read(j);
  CHECK(m.head_dim == 96);
  CHECK(m.num_kv_heads == 16);
  const double h = 1024;
  const double q = 256 * h + 256 + 256 * 16 * 96;                // down, norm, up
  const double kv = h * (128 + 32) + 128 + 128 * 16 * (64 + 64); // down (+ shared rotary key), norm, up
  const double o = 16 * 64 * h;
  CHECK(sim::model::count_params(m).layer.attention == q + kv + o);
}

TEST_CASE("expert parallelism shards the experts' weights and optimizer state over EP, the rest over DP")
{
  const auto b = build({{"ep", 8}, {"dp", 16}, {"global_batch", 16}, {"distributed_optimizer", true}}, true);
  const auto& m = b.scenario.model;
  const auto mem = sim::memory::estimate_memory(m, b.scenario.plan, b.scenario.cluster.gpu);
  const auto p = sim::model::count_params(m);
  const double experts_per_gpu = 7 * p.moe_layer.experts / 8;
  const auto& st = mem.per_stage[0];
  CHECK(st.expert_params == Approx(experts_per_gpu));
  CHECK(st.params == Approx(p.total - 7 * p.moe_layer.experts + experts_per_gpu));
  // Adam's 12 bytes per parameter: the dense ones over 16 replicas, each expert over its 2.
  CHECK(st.optimizer_bytes == Approx(12.0 * (st.params - experts_per_gpu) / 16 + 12.0 * experts_per_gpu / 2));
  CHECK(mem.active_params == Approx(p.active));
}

TEST_CASE("expert plans Megatron-core cannot run, or simtrain does not simulate yet, are refused")
{
  auto err = [](nlohmann::json plan) { return test::error_of([&] { build(std::move(plan), true); }); };
  CHECK_THAT(err({{"ep", 3}, {"dp", 3}}), Catch::Contains("3 does not divide num_experts=16"));
  CHECK_THAT(err({{"ep", 4}, {"dp", 6}}), Catch::Contains("4 does not divide dp=6"));
  CHECK_THAT(err({{"tp", 2}, {"dp", 2}}), Catch::Contains("need sequence parallelism"));
  CHECK_THAT(err({{"tp", 2}, {"etp", 1}, {"sequence_parallel", true}}), Catch::Contains("not simulated yet"));
  CHECK_THAT(err({{"dp", 2}, {"zero_stage", 2}}), Catch::Contains("not simulated yet"));
  CHECK_THAT(err({{"cp", 2}}), Catch::Contains("context parallelism with MoE layers is not simulated yet"));
  auto dense = moe_model();
  dense.erase("moe");
  CHECK_THAT(test::error_of([&] { build({{"ep", 2}, {"dp", 2}}, true, dense); }), Catch::Contains("has no experts"));
}
