// Selective recomputation by module (Megatron-core's --recompute-modules): what each module keeps out of memory,
// what it redoes in the backward pass, and how the plan reads and writes it.
#include "memory/memory_model.hpp"
#include "model/flops.hpp"
#include "plan/plan_keys.hpp"
#include "workload/layer_program.hpp"

#include "build_support.hpp"

namespace {

using sim::model::RecomputeModule;
using sim::workload::LayerKind;

sim::scenario::Scenario load(const nlohmann::json& doc)
{
  return sim::scenario::load_scenario(test::write_json(test::scratch_dir() / "r.json", doc), test::options());
}

// One layer's activation bytes on stage 0 of `model` under `plan`.
double per_layer(const std::string& model, nlohmann::json plan)
{
  const auto s = load(test::scenario_json(model, std::move(plan)));
  return sim::memory::estimate_memory(s.model, s.plan, s.cluster.gpu).layer_activation_bytes;
}

// The backward program of one layer kind, and the labels of its recomputed steps.
std::vector<std::string> recomputed_steps(const sim::scenario::Scenario& s, LayerKind kind)
{
  const auto programs = sim::workload::build_programs(s.model, s.plan, s.cluster.gpu);
  std::vector<std::string> labels;
  for (const auto& step : programs.layer_backward[kind])
    if (step.recompute)
      labels.push_back(step.label);
  return labels;
}

bool contains(const std::vector<std::string>& labels, const std::string& text)
{
  return std::any_of(labels.begin(), labels.end(), [&](const auto& l) { return l.find(text) != std::string::npos; });
}

} // namespace

TEST_CASE("recompute_modules reads Megatron-core's names, defaults to the attention core and writes back")
{
  auto doc = test::scenario_json("llama2-7b", {{"dp", 8}, {"global_batch", 8}, {"recompute", "selective"}});
  auto s = load(doc);
  CHECK(s.plan.recompute_modules == sim::model::RecomputeModules{});
  CHECK(s.plan.recompute_modules.has(RecomputeModule::CORE_ATTN));
  CHECK(sim::plan::write_plan(s.plan).count("recompute_modules") == 0);
  doc["plan"]["recompute_modules"] = {"mlp", "layernorm"};
  s = load(doc);
  CHECK(!s.plan.recompute_modules.has(RecomputeModule::CORE_ATTN));
  CHECK(s.plan.recompute_modules.has(RecomputeModule::MLP));
  CHECK(s.plan.recompute_modules.has(RecomputeModule::LAYERNORM));
  const auto written = sim::plan::write_plan(s.plan);
  CHECK(written["recompute_modules"] == nlohmann::json{"layernorm", "mlp"});
  doc["plan"] = written;
  CHECK(load(doc).plan == s.plan);
}

// Korthikanti et al.'s 22B layer (TP 8, no sequence parallelism, GeLU FFN of 4h): 10 sbh whole, 24 sbh / t split,
// 5 a s^2 b / t for the unfused attention core. The MLP module drops the FFN's 16 sbh / t; the norms, when they are
// kernels of their own, the 4 sbh of the QKV and fc1 inputs (Transformer Engine fuses them into those linear layers).
TEST_CASE("each recomputed module keeps its own tensors out of memory")
{
  nlohmann::json plan{{"tp", 8}, {"micro_batch", 4}, {"global_batch", 4}, {"attention", "unfused"}};
  auto doc = test::scenario_json("x", plan);
  doc["model"] = {{"schema", "model/v1"}, {"name", "GPT-22B"},         {"num_layers", 48},
                  {"hidden_size", 6144},  {"num_attention_heads", 64}, {"ffn_hidden_size", 4 * 6144},
                  {"ffn_kind", "gelu"},   {"norm", "layernorm"},       {"position_embedding", "learned"},
                  {"vocab_size", 51200},  {"seq_length", 2048},        {"dropout", true}};
  const double s = 2048, b = 4, h = 6144, a = 64, t = 8;
  const double sbh = s * b * h;
  auto bytes = [&](const nlohmann::json& changes) {
    auto d = doc;
    d["plan"].update(changes);
    const auto sc = load(d);
    return sim::memory::estimate_memory(sc.model, sc.plan, sc.cluster.gpu).layer_activation_bytes;
  };
  const double core = 5 * a * s / (h * t);
  auto selective = [](nlohmann::json modules, const char* norm = "apex") {
    return nlohmann::json{{"recompute", "selective"}, {"recompute_modules", std::move(modules)}, {"norm_impl", norm}};
  };
  CHECK(bytes(selective({"core_attn"})) == Approx(sbh * (10 + 24 / t)));
  CHECK(bytes(selective({"mlp"})) == Approx(sbh * (10 + 8 / t + core)));
  CHECK(bytes(selective({"core_attn", "mlp"})) == Approx(sbh * (10 + 8 / t)));
  CHECK(bytes(selective({"layernorm"})) == Approx(sbh * (6 + 24 / t + core)));
  CHECK(bytes(selective({"layernorm"}, "te")) == Approx(sbh * (10 + 24 / t + core)));
  // A MoE module on a dense model recomputes nothing.
  CHECK(bytes(selective({"moe", "moe_act", "shared_experts"})) == Approx(sbh * (10 + 24 / t + core)));
}

// Qwen3-30B-A3B at EP 8, micro-batch 1 of 4,096 tokens: each GPU's experts take 4,096 x 8 token copies, whose SwiGLU
// output (fc2's input, expert width 768) is what moe_act recomputes; moe keeps the layer's input alone.
TEST_CASE("a MoE layer's modules: the experts' activation, the shared expert, the whole layer")
{
  const nlohmann::json plan{{"dp", 8}, {"ep", 8}, {"global_batch", 8}, {"seq_length", 4096}};
  auto with = [&](nlohmann::json modules) {
    auto p = plan;
    p["recompute"] = "selective";
    p["recompute_modules"] = std::move(modules);
    return per_layer("qwen3-30b-a3b", p);
  };
  const double attn_only = with({"core_attn"});
  CHECK(attn_only - with({"core_attn", "moe_act"}) == Approx(4096.0 * 8 * 768 * 2));
  CHECK(with({"core_attn", "moe"}) < with({"core_attn", "moe_act"}));
  CHECK(with({"core_attn", "moe"}) < 0.3 * attn_only);
  // Qwen3 has no shared expert: nothing to drop.
  CHECK(with({"core_attn", "shared_experts"}) == Approx(attn_only));
}

TEST_CASE("the backward pass redoes each recomputed module, the whole MoE layer with its all-to-alls")
{
  auto doc = test::scenario_json(
      "qwen3-30b-a3b", {{"dp", 8}, {"ep", 8}, {"global_batch", 8}, {"seq_length", 4096}, {"recompute", "selective"}});
  doc["plan"]["recompute_modules"] = {"moe_act", "layernorm"};
  auto s = load(doc);
  auto moe = recomputed_steps(s, LayerKind::MOE);
  CHECK(contains(moe, "moe recompute"));
  CHECK(!contains(moe, "attention core recompute"));
  doc["plan"]["recompute_modules"] = {"moe"};
  s = load(doc);
  moe = recomputed_steps(s, LayerKind::MOE);
  CHECK(contains(moe, "experts"));
  CHECK(contains(moe, "router"));
  const auto programs = sim::workload::build_programs(s.model, s.plan, s.cluster.gpu);
  int dispatches = 0;
  for (const auto& step : programs.layer_backward[LayerKind::MOE])
    dispatches += step.label == "moe dispatch all-to-all" ? 1 : 0;
  CHECK(dispatches == 1); // the recomputed forward's (the backward's own are labelled as backward all-to-alls)
  // HFU counts the recomputed layer; MFU does not.
  const auto none = sim::model::step_flops(s.model, 4096, 8, sim::model::Recompute::NONE);
  const auto redone =
      sim::model::step_flops(s.model, 4096, 8, sim::model::Recompute::SELECTIVE, s.plan.recompute_modules);
  CHECK(redone.model() == Approx(none.model()));
  CHECK(redone.recompute > 0.2 * none.forward);
}

TEST_CASE("a dense layer's MLP is redone with its tensor-parallel collectives")
{
  auto doc = test::scenario_json(
      "llama2-7b", {{"tp", 8}, {"global_batch", 1}, {"sequence_parallel", true}, {"recompute", "selective"}});
  doc["plan"]["recompute_modules"] = {"mlp"};
  const auto s = load(doc);
  const auto programs = sim::workload::build_programs(s.model, s.plan, s.cluster.gpu);
  bool ffn = false;
  int gathers = 0;
  for (const auto& step : programs.layer_backward[LayerKind::DENSE]) {
    ffn = ffn || (step.recompute && step.label == "ffn");
    gathers += step.label == "ffn all-gather" ? 1 : 0;
  }
  CHECK(ffn);
  CHECK(gathers == 1);
}
