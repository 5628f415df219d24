#include "core/document.hpp"
#include "memory/memory_model.hpp"
#include "model/param_count.hpp"
#include "scenario/scenario.hpp"

#include "support.hpp"

using test::scenario_json;

namespace {

constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

struct Loaded {
  sim::scenario::Scenario scenario;
  sim::memory::MemoryEstimate memory;
};

Loaded estimate(const nlohmann::json& doc)
{
  const auto file = test::write_json(test::scratch_dir() / "s.json", doc);
  auto s = sim::scenario::load_scenario(file, test::options());
  auto m = sim::memory::estimate_memory(s.model, s.plan, s.cluster.gpu);
  return {std::move(s), std::move(m)};
}

double state(const sim::memory::StageMemory& s)
{
  return s.weights_bytes + s.grads_bytes + s.optimizer_bytes;
}

nlohmann::json gpt(const std::string& name, int layers, int hidden, int heads)
{
  return {{"schema", "model/v1"},         {"name", name},        {"num_layers", layers}, {"hidden_size", hidden},
          {"num_attention_heads", heads}, {"vocab_size", 51200}, {"seq_length", 2048}};
}

} // namespace

TEST_CASE("mixed-precision Adam keeps 16 bytes per parameter without sharding")
{
  const auto e = estimate(scenario_json("llama2-7b", {{"precision", "fp16"}}));
  const auto& stage = e.memory.per_stage.at(0);
  CHECK(stage.params == Approx(6738415616.0));
  CHECK(state(stage) / stage.params == Approx(16.0));
  CHECK(state(stage) / stage.params * 7.0e9 == Approx(112e9)); // the textbook 112 GB at 7.0B
}

TEST_CASE("Megatron's fp32 gradient accumulation under bf16 makes it 18 bytes per parameter")
{
  const auto e = estimate(scenario_json("llama2-7b", {}));
  const auto& stage = e.memory.per_stage.at(0);
  CHECK(state(stage) / stage.params == Approx(18.0));
  const auto d = estimate(scenario_json("llama2-7b", {{"dp", 8}, {"distributed_optimizer", true}}));
  const auto& sharded = d.memory.per_stage.at(0);
  CHECK(state(sharded) / sharded.params == Approx(6.0 + 12.0 / 8)); // 6 + 12/d
  // Hybrid sharding: the optimizer state split over a shard group of 4 of the 8 ranks.
  const auto h = estimate(scenario_json("llama2-7b", {{"dp", 8}, {"distributed_optimizer", true}, {"shard_group", 4}}));
  const auto& hybrid = h.memory.per_stage.at(0);
  CHECK(state(hybrid) / hybrid.params == Approx(6.0 + 12.0 / 4));
}

TEST_CASE("each optimizer algorithm keeps its own state beside the fp32 master weights")
{
  const auto state_per_param = [](const std::string& algorithm) {
    const auto e = estimate(scenario_json("llama2-7b", {{"precision", "fp16"}, {"optimizer_algorithm", algorithm}}));
    const auto& stage = e.memory.per_stage.at(0);
    return stage.optimizer_bytes / stage.params;
  };
  CHECK(state_per_param("adam") == Approx(12.0));
  CHECK(state_per_param("sgd") == Approx(8.0));  // the momentum buffer
  CHECK(state_per_param("lion") == Approx(8.0)); // exp_avg
  // Two one-byte states and an fp32 absmax per 256 values of each (bitsandbytes' blockwise 8-bit Adam).
  CHECK(state_per_param("adam_8bit") == Approx(4.0 + 2.0 + 8.0 / 256));
  // Factored second moments: fp32 row and column means, 8 / hidden at most (Llama-2 7B: 4096 wide).
  CHECK(state_per_param("adafactor") == Approx(4.0 + 8.0 / 4096));
  // ZeRO-1 shards whichever state it is.
  const auto z = estimate(scenario_json("llama2-7b", {{"dp", 8}, {"zero_stage", 1}, {"optimizer_algorithm", "sgd"}}));
  CHECK(z.memory.per_stage.at(0).optimizer_bytes / z.memory.per_stage.at(0).params == Approx(8.0 / 8));
}

TEST_CASE("multi-token prediction's module and embedding copy live on the output layer's stage")
{
  auto doc = scenario_json("deepseek-v3", {{"pp", 4}, {"ep", 8}, {"dp", 8}, {"global_batch", 32}}, "hgx-h800");
  doc["gpus"] = 32;
  const auto plain = estimate(doc);
  doc["model"] = sim::core::read_json_file(test::source_dir() / "models/deepseek-v3.json");
  doc["model"]["mtp_layers"] = 1;
  const auto with = estimate(doc);
  const auto& counts = sim::model::count_params(with.scenario.model);
  CHECK(with.memory.per_stage.at(0).params == Approx(plain.memory.per_stage.at(0).params));
  const double added = with.memory.per_stage.at(3).params - plain.memory.per_stage.at(3).params;
  // Its layer's dense part and 1/ep of its experts, its norms and projection, and a copy of the embedding.
  CHECK(added == Approx(counts.mtp_layer.total() - counts.mtp_layer.experts + counts.mtp_layer.experts / 8 +
                        counts.mtp_extra + counts.word_embedding));
  CHECK(with.memory.per_stage.at(3).activations_bytes > plain.memory.per_stage.at(3).activations_bytes);
}

TEST_CASE("ZeRO 1, 2 and 3 on the 7.5B GPT over 64 GPUs hold 31.4, 16.6 and 1.9 GB (ZeRO paper)")
{
  const std::array<double, 4> expected{120e9, 31.4e9, 16.6e9, 1.9e9};
  for (int stage = 0; stage <= 3; ++stage) {
    INFO("ZeRO stage " << stage);
    const auto e = estimate(scenario_json(
        "sc21-gpt-7.5b", {{"dp", 64}, {"zero_stage", stage}, {"precision", "fp16"}, {"global_batch", 64}}));
    CHECK(state(e.memory.per_stage.at(0)) == Approx(expected[static_cast<std::size_t>(stage)]).epsilon(0.03));
  }
}

TEST_CASE("70B parameters carry 840 GB of Adam state, 140 GB of weights and 140 GB of 16-bit gradients")
{
  const auto e = estimate(scenario_json("llama3-70b", {{"precision", "fp16"}}));
  const auto& stage = e.memory.per_stage.at(0);
  CHECK(stage.optimizer_bytes == Approx(840e9).epsilon(0.01));
  CHECK(stage.weights_bytes == Approx(140e9).epsilon(0.01));
  CHECK(stage.grads_bytes == Approx(140e9).epsilon(0.01));
  CHECK(e.memory.oom);
}

// Korthikanti et al. 2022, Figure 1 (as transcribed in calculon's validation.py; shared/validation/cases.json):
// per-GPU state of the transformer layers and first-stage activations, in GiB. Unfused attention, with dropout.
TEST_CASE("layer state and first-stage activations match Korthikanti et al.'s memory figures within 5%")
{
  struct Case {
    const char* name;
    nlohmann::json model;
    nlohmann::json plan;
    double state_gib;
    double baseline_gib;
    double selective_sp_gib;
  };
  const std::vector<Case> cases{
      {"22B",
       gpt("GPT-22B", 48, 6144, 64),
       {{"tp", 8}, {"micro_batch", 4}, {"global_batch", 4}},
       45.5625,
       59.25,
       9.5625},
      {"175B",
       gpt("GPT-175B", 96, 12288, 96),
       {{"tp", 8}, {"pp", 8}, {"virtual_stages", 3}, {"global_batch", 64}},
       45.5625,
       66.8438,
       12.3516},
      {"530B",
       gpt("GPT-530B", 105, 20480, 128),
       {{"tp", 8}, {"pp", 35}, {"virtual_stages", 3}, {"global_batch", 280}},
       31.6406,
       114.023,
       23.0762},
      {"1T", gpt("GPT-1T", 128, 25600, 160), {{"tp", 8}, {"pp", 64}, {"global_batch", 512}}, 32.959, 131.25, 26.5625},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    auto doc = scenario_json("x", c.plan);
    doc["model"] = c.model;
    doc["plan"]["attention"] = "unfused";
    const auto baseline = estimate(doc);
    const auto& first = baseline.memory.per_stage.at(0);
    CHECK(first.layer_state_bytes / GiB == Approx(c.state_gib).epsilon(0.05));
    CHECK(first.layer_activations_bytes / GiB == Approx(c.baseline_gib).epsilon(0.05));
    doc["plan"]["recompute"] = "selective";
    doc["plan"]["sequence_parallel"] = true;
    const auto reduced = estimate(doc);
    CHECK(reduced.memory.per_stage.at(0).layer_activations_bytes / GiB == Approx(c.selective_sp_gib).epsilon(0.05));
  }
}

TEST_CASE("per-layer activations follow Korthikanti's formulas for each recompute and parallel setting")
{
  auto doc = scenario_json("x", {{"tp", 8}, {"micro_batch", 4}, {"global_batch", 4}, {"attention", "unfused"}});
  doc["model"] = gpt("GPT-22B", 48, 6144, 64);
  const double s = 2048, b = 4, h = 6144, a = 64, t = 8;
  const double sbh = s * b * h;
  auto per_layer = [&](const nlohmann::json& changes) {
    auto d = doc;
    if (changes.is_object())
      d["plan"].update(changes);
    return estimate(d).memory.layer_activation_bytes;
  };
  CHECK(per_layer({}) == Approx(sbh * (10 + 24 / t + 5 * a * s / (h * t))));
  CHECK(per_layer({{"sequence_parallel", true}}) == Approx(sbh * (34 / t + 5 * a * s / (h * t))));
  CHECK(per_layer({{"recompute", "selective"}}) == Approx(sbh * (10 + 24 / t)));
  CHECK(per_layer({{"recompute", "selective"}, {"sequence_parallel", true}}) == Approx(sbh * 34 / t));
  CHECK(per_layer({{"recompute", "full"}}) == Approx(2 * sbh));
}

TEST_CASE("1F1B holds at most p micro-batches on stage 0, GPipe all m, interleaving 1 + (p-1)/(p v) more")
{
  auto doc = scenario_json("llama2-7b", {{"pp", 4}, {"dp", 2}, {"global_batch", 16}});
  auto e = estimate(doc);
  CHECK(e.memory.per_stage[0].in_flight.per_chunk == std::vector<int>{4});
  CHECK(e.memory.per_stage[3].in_flight.per_chunk == std::vector<int>{1});
  doc["plan"]["schedule"] = "gpipe";
  e = estimate(doc);
  CHECK(e.memory.per_stage[0].in_flight.per_chunk == std::vector<int>{8});
  CHECK(e.memory.per_stage[3].in_flight.per_chunk == std::vector<int>{8});
  doc["plan"]["schedule"] = "interleaved";
  doc["plan"]["virtual_stages"] = 2;
  e = estimate(doc);
  // 32 layers in 8 chunks of 4: stage 0 holds L (1 + (p-1)/(p v)) = 32 * (1 + 3/8) = 44 layer-micro-batches.
  CHECK(e.memory.per_stage[0].in_flight.layer_microbatches == Approx(44));
  doc["plan"]["global_batch"] = 4; // only 2 micro-batches: nothing beyond them is ever in flight
  doc["plan"]["schedule"] = "1f1b";
  doc["plan"]["virtual_stages"] = 1;
  e = estimate(doc);
  CHECK(e.memory.per_stage[0].in_flight.per_chunk == std::vector<int>{2});
}

TEST_CASE("DualPipe holds pp + 1 chunks' activations and two copies of the weights, DualPipeV 2 pp + 1 half-size "
          "chunks, as deepseek-ai/DualPipe's table has them")
{
  auto doc = scenario_json("llama2-7b", {{"pp", 4}, {"dp", 2}, {"global_batch", 32}});
  const auto one = estimate(doc).memory.per_stage;
  doc["plan"]["schedule"] = "dualpipe";
  const auto dual = estimate(doc).memory.per_stage;
  doc["plan"]["schedule"] = "dualpipev";
  const auto v = estimate(doc).memory.per_stage;
  for (int stage = 0; stage < 4; ++stage) {
    INFO("stage " << stage);
    const auto& d = dual[static_cast<std::size_t>(stage)];
    CHECK(d.in_flight.per_chunk[0] + d.in_flight.per_chunk[1] == 4 + 1);
    CHECK(d.in_flight.layer_microbatches == Approx(8.0 * 5)); // chunks of a stage's 8 layers
    const auto& w = v[static_cast<std::size_t>(stage)];
    CHECK(w.in_flight.per_chunk[0] + w.in_flight.per_chunk[1] == 2 * 4 + 1);
    CHECK(w.in_flight.layer_microbatches == Approx(4.0 * 9)); // chunks of 4 layers
    CHECK(d.layer_params == Approx(2.0 * one[1].layer_params));
    CHECK(w.layer_params == Approx(one[1].layer_params));
  }
  // Both ends hold an embedding and an output layer under DualPipe, the first GPU under DualPipeV.
  CHECK(dual[0].params == Approx(dual[3].params));
  CHECK(v[0].params > v[3].params);
}

TEST_CASE("the OOM verdict compares each stage's peak with HBM")
{
  auto e = estimate(scenario_json("llama2-70b", {{"tp", 8}}));
  CHECK(e.memory.oom); // 70B on one node without sharding: 18 B/param / 8 > 80 GiB
  const auto& s = e.memory.per_stage[0];
  CHECK(s.peak_bytes > 80 * GiB);
  CHECK(s.peak_bytes == Approx(s.weights_bytes + s.grads_bytes + s.optimizer_bytes + s.activations_bytes +
                               s.buffers_bytes + s.working_bytes));
  e = estimate(scenario_json("llama2-70b",
                             {{"tp", 8}, {"pp", 4}, {"dp", 2}, {"distributed_optimizer", true}, {"global_batch", 16}}));
  CHECK_FALSE(e.memory.oom);
}

TEST_CASE("the busiest moment adds the loss's logit copies or the layer being recomputed, by the loss's "
          "implementation")
{
  // Llama-2 7B, one GPU, 2 x 4096 tokens: the logits are 8192 x 32000 16-bit values.
  const double logits = 2.0 * 4096 * 32000;
  const auto stage = [](const nlohmann::json& plan) {
    return estimate(scenario_json("llama2-7b", plan)).memory.per_stage.at(0);
  };
  const nlohmann::json base{{"micro_batch", 2}, {"global_batch", 2}};
  const auto fused = stage(base);
  // Megatron's vocab-parallel cross entropy keeps the fp32 softmax (4 bytes a logit) and briefly holds the 16-bit
  // logits beside it (2).
  CHECK(fused.working_bytes == Approx(2.0 * logits));
  auto with = [&](const char* key, const char* value) {
    auto p = base;
    p[key] = value;
    return stage(p);
  };
  const auto eager = with("loss_impl", "eager");     // keeps 2, holds 4 more
  const auto fp32 = with("loss_impl", "eager_fp32"); // keeps 4, holds 8 more
  const auto chunked = with("loss_impl", "chunked"); // keeps 2, one fp32 chunk of 8 at a time: 1 more
  CHECK(eager.working_bytes == Approx(4.0 * logits));
  CHECK(fused.activations_bytes - eager.activations_bytes == Approx(2.0 * logits));
  CHECK(fp32.working_bytes == Approx(8.0 * logits));
  CHECK(fp32.activations_bytes == Approx(fused.activations_bytes));
  CHECK(chunked.working_bytes == Approx(logits));
  CHECK(chunked.peak_bytes - fused.peak_bytes == Approx((2.0 + 1.0 - 4.0 - 2.0) * logits));
  // Full recomputation: the layer re-run for its backward holds all it would keep without recomputation, here more
  // than the chunked loss's working copy.
  auto full_plan = base;
  full_plan["recompute"] = "full";
  full_plan["loss_impl"] = "chunked";
  const auto full = stage(full_plan);
  const auto none = with("loss_impl", "chunked");
  const double one_layer = none.layer_activations_bytes / 32; // 32 identical layers, one micro-batch in flight
  CHECK(full.working_bytes == Approx(one_layer));
  CHECK(full.working_bytes > logits);
  // Other stages of a pipeline have no loss: only the recomputed layer, if any.
  auto piped = base;
  piped["pp"] = 2;
  const auto first = estimate(scenario_json("llama2-7b", piped)).memory.per_stage.at(0);
  CHECK(first.working_bytes == 0);
}
