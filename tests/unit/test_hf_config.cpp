#include "model/hf_config.hpp"
#include "model/model_spec.hpp"
#include "model/param_count.hpp"

#include "support.hpp"

namespace {

sim::model::ModelSpec from_hf(const std::string& name)
{
  const auto file = test::source_dir() / "tests/data/hf" / name / "config.json";
  const auto json = sim::core::read_json_file(file);
  sim::core::Provenance prov;
  prov.add_source("", file.string());
  REQUIRE(sim::model::looks_like_hf_config(json));
  const auto converted = sim::model::convert_hf_config(sim::core::Node(json, "", prov), name);
  sim::core::Provenance converted_prov;
  converted_prov.add_source("", file.string());
  return sim::model::read_model(sim::core::Node(converted.model, "", converted_prov));
}

} // namespace

TEST_CASE("HuggingFace configs give the checkpoints' exact parameter counts")
{
  // Totals of the published checkpoints (safetensors metadata / model cards).
  CHECK(sim::model::count_params(from_hf("llama-2-7b")).total == 6738415616.0);
  CHECK(sim::model::count_params(from_hf("mistral-7b")).total == 7241732096.0);
  CHECK(sim::model::count_params(from_hf("llama-3.1-8b")).total == 8030261248.0);
  CHECK(sim::model::count_params(from_hf("qwen2-7b")).total == 7615616512.0);
  CHECK(sim::model::count_params(from_hf("gpt2")).total == 124439808.0);
  CHECK(sim::model::count_params(from_hf("pythia-160m")).total == 162322944.0);
  CHECK(sim::model::count_params(from_hf("bloom-560m")).total == 559214592.0);
  // Falcon's parallel attention block has one norm where simtrain counts two: 9,088 parameters per layer.
  CHECK(sim::model::count_params(from_hf("falcon-7b")).total == Approx(6921720704.0).epsilon(1e-4));
}

TEST_CASE("HuggingFace configs map GQA, gating, biases and positions")
{
  const auto mistral = from_hf("mistral-7b");
  CHECK(mistral.num_kv_heads == 8);
  CHECK(mistral.ffn_kind == sim::model::FfnKind::SWIGLU);
  CHECK(mistral.norm == sim::model::NormKind::RMSNORM);
  CHECK_FALSE(mistral.tie_embeddings);
  // max_position_embeddings (32,768) is how far it can attend, not its pre-training length: unknown, the plan says.
  CHECK(mistral.seq_length == 0);
  CHECK(from_hf("llama-2-7b").seq_length == 0);
  // Llama 3.1 states it: the context extension's original length.
  CHECK(from_hf("llama-3.1-8b").seq_length == 8192);
  CHECK(from_hf("gpt2").seq_length == 1024); // learned positions: the table's length

  const auto qwen = from_hf("qwen2-7b");
  CHECK(qwen.qkv_bias);
  CHECK_FALSE(qwen.linear_bias);

  const auto gpt2 = from_hf("gpt2");
  CHECK(gpt2.ffn_hidden_size == 4 * 768);
  CHECK(gpt2.tie_embeddings);
  CHECK(gpt2.dropout);
  CHECK(gpt2.position_embedding == sim::model::PositionEmbedding::LEARNED);

  const auto bloom = from_hf("bloom-560m");
  CHECK(bloom.position_embedding == sim::model::PositionEmbedding::ALIBI);
  CHECK(bloom.embedding_norm);
  CHECK_FALSE(bloom.dropout);

  const auto falcon = from_hf("falcon-7b");
  CHECK(falcon.num_kv_heads == 1);
  CHECK(falcon.head_dim == 64);
  CHECK_FALSE(falcon.qkv_bias);
}

TEST_CASE("mixture-of-experts configs give the published total and active parameter counts")
{
  struct Case {
    const char* name;
    double total, active, tolerance;
  };
  // Model cards and reports: Mixtral (Mistral AI, "12.9B active"; 8x22B "141B, 39B active"), Qwen1.5-MoE-A2.7B
  // (14.3B, 2.7B), Qwen3-30B-A3B (30.5B, 3.3B), DeepSeek-V2-Lite (15.7B, 2.4B), DeepSeek-V3 (671B, 37B; without the
  // 14B multi-token-prediction module the checkpoint adds), gpt-oss-120b (116.83B, 5.13B active counting the
  // unembedding but not the embedding: 0.58B less than simtrain's active count, which has both; DeepSeek-V2-Lite's
  // 2.4B is counted the same way).
  const double gpt_oss_embedding = 201088.0 * 2880.0;
  const double v2_lite_embedding = 102400.0 * 2048.0;
  for (const Case& c :
       {Case{"mixtral-8x7b", 46.70e9, 12.9e9, 0.01}, Case{"mixtral-8x22b", 140.6e9, 39.2e9, 0.01},
        Case{"qwen1.5-moe-a2.7b", 14.3e9, 2.7e9, 0.03}, Case{"qwen3-30b-a3b", 30.5e9, 3.3e9, 0.02},
        Case{"deepseek-v2-lite", 15.7e9, 2.4e9 + v2_lite_embedding, 0.03}, Case{"deepseek-v3", 671e9, 37e9, 0.02},
        Case{"gpt-oss-120b", 116.83e9, 5.13e9 + gpt_oss_embedding, 0.005}}) {
    INFO(c.name);
    const auto p = sim::model::count_params(from_hf(c.name));
    CHECK(p.total == Approx(c.total).epsilon(c.tolerance));
    CHECK(p.active == Approx(c.active).epsilon(c.tolerance));
  }
  // Mixtral 8x7B to the parameter (its checkpoint's safetensors total).
  CHECK(sim::model::count_params(from_hf("mixtral-8x7b")).total == 46702792704.0);
}

TEST_CASE("MoE, MLA, QK-norm, post-norm and sliding-window configs map to model/v1")
{
  const auto v3 = from_hf("deepseek-v3");
  REQUIRE(v3.moe);
  REQUIRE(v3.mla);
  CHECK(v3.moe->num_experts == 256);
  CHECK(v3.moe->experts_per_token == 8);
  CHECK(v3.moe->shared_expert_ffn_hidden_size == 2048);
  CHECK(v3.moe->first_dense_layers == 3);
  CHECK(v3.moe->router == sim::model::Router::SIGMOID);
  CHECK(v3.moe->load_balancing == sim::model::LoadBalancing::AUX_FREE);
  CHECK(v3.moe->expert_groups == 8); // n_group, topk_group: node-limited routing
  CHECK(v3.moe->groups_per_token == 4);
  CHECK(v3.moe_layers() == 58);
  CHECK_FALSE(v3.is_moe_layer(2));
  CHECK(v3.is_moe_layer(3));
  CHECK(v3.head_dim == 192);
  CHECK(v3.o_width() == 128 * 128);
  CHECK(v3.seq_length == 4096); // rope_scaling's original length
  CHECK(from_hf("deepseek-v2-lite").mla->q_lora_rank == 0);
  CHECK(from_hf("deepseek-v2-lite").moe->expert_groups == 1);

  const auto qwen = from_hf("qwen1.5-moe-a2.7b");
  CHECK(qwen.moe->shared_expert_ffn_hidden_size == 5632);
  CHECK(qwen.moe->shared_expert_gate);
  CHECK(qwen.qkv_bias);
  CHECK(from_hf("qwen3-30b-a3b").qk_norm);

  const auto oss = from_hf("gpt-oss-120b");
  CHECK(oss.sliding_window == 128);
  CHECK(oss.global_attention_every == 2);
  CHECK(oss.is_local_attention(0));
  CHECK_FALSE(oss.is_local_attention(1));
  CHECK(oss.linear_bias);

  const auto gemma2 = from_hf("gemma-2-9b");
  CHECK(gemma2.post_norms);
  CHECK(gemma2.ffn_kind == sim::model::FfnKind::GEGLU);
  CHECK(gemma2.tie_embeddings);
  CHECK(gemma2.global_attention_every == 2);
  const auto gemma3 = from_hf("gemma-3-12b");
  CHECK(gemma3.qk_norm);
  CHECK(gemma3.global_attention_every == 6);
  CHECK(gemma3.is_local_attention(4));
  CHECK_FALSE(gemma3.is_local_attention(5));
}

TEST_CASE("dense Qwen3 and Gemma 2/3 configs give the checkpoints' parameter counts")
{
  CHECK(sim::model::count_params(from_hf("qwen3-8b")).total == 8190735360.0);
  CHECK(sim::model::count_params(from_hf("gemma-2-9b")).total == 9241705984.0);
  // Gemma 3 12B's language model (the multimodal checkpoint adds a 0.4B vision tower).
  CHECK(sim::model::count_params(from_hf("gemma-3-12b")).total == Approx(11.77e9).epsilon(0.005));
}
