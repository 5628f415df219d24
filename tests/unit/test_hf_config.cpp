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

TEST_CASE("a mixture-of-experts config is refused, not read as a dense model")
{
  CHECK_THAT(test::error_of([] { from_hf("mixtral-8x7b"); }),
             Catch::EndsWith("mixtral-8x7b/config.json:/num_local_experts: mixture-of-experts models are not "
                             "supported yet (found 8; expected a dense model)"));
}
