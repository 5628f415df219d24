// Context parallelism: attention FLOPs and kernels per GPU, the ring's and the all-to-all's traffic, activation
// memory, and the CP groups in the rank order.
#include "core/document.hpp"
#include "memory/memory_model.hpp"
#include "plan/parallel_plan.hpp"
#include "workload/layer_program.hpp"

#include "build_support.hpp"

using test::scenario_json;

namespace {

sim::scenario::Scenario load(const nlohmann::json& plan)
{
  nlohmann::json base{{"global_batch", 8}, {"seq_length", 8192}};
  base.update(plan);
  const auto file = test::write_json(test::scratch_dir() / "s.json", scenario_json("llama3-8b", base, "dgx-h100"));
  return sim::scenario::load_scenario(file, test::options());
}

struct Attention {
  double flops = 0;
  int kernels = 0;
};

Attention attention(const nlohmann::json& plan, std::string_view program)
{
  const auto s = load(plan);
  Attention a;
  for (const auto& k : sim::workload::kernel_costs(s.model, s.plan, s.cluster.gpu))
    if (k.program == program && (k.kernel.kind == sim::hardware::KernelKind::ATTENTION ||
                                 k.kernel.kind == sim::hardware::KernelKind::ATTENTION_BACKWARD)) {
      a.flops += k.kernel.flops;
      ++a.kernels;
    }
  return a;
}

const sim::workload::Step* cp_step(const sim::workload::Program& p)
{
  for (const auto& s : p)
    if (s.kind != sim::workload::Step::Kind::COMPUTE && s.group == sim::workload::Group::CP)
      return &s;
  return nullptr;
}

} // namespace

TEST_CASE("each GPU of a context-parallel group does its cp-th share of the causal attention: cp ring kernels, or "
          "one over its heads")
{
  const Attention whole = attention({{"dp", 8}}, "layer forward");
  const double s = 8192, q = 4096, o = 4096;
  CHECK(whole.flops == Approx(2.0 * s * (s / 2) * (q + o)));
  for (int cp : {2, 4, 8}) {
    INFO("cp " << cp);
    const Attention ring = attention({{"cp", cp}, {"dp", 8 / cp}}, "layer forward");
    CHECK(ring.kernels == cp);
    CHECK(ring.flops == Approx(whole.flops / cp));
    const Attention a2a = attention({{"cp", cp}, {"dp", 8 / cp}, {"cp_kind", "all_to_all"}}, "layer forward");
    CHECK(a2a.kernels == 1);
    CHECK(a2a.flops == Approx(whole.flops / cp));
    CHECK(attention({{"cp", cp}, {"dp", 8 / cp}}, "layer backward").flops == Approx(2.5 * whole.flops / cp));
  }
}

TEST_CASE("the ring passes every GPU's keys and values round the group beside the attention, the backward their "
          "gradients too, and the all-to-all reshards queries, keys and values, then the output")
{
  const double T = 8192.0 / 4, kv = 1024, q = 4096, e = 2;
  const auto ring = load({{"cp", 4}, {"dp", 2}});
  const auto programs = sim::workload::build_programs(ring.model, ring.plan, ring.cluster.gpu);
  const auto* forward = cp_step(programs.layer_forward[sim::workload::LayerKind::DENSE]);
  REQUIRE(forward != nullptr);
  CHECK(forward->kind == sim::workload::Step::Kind::OVERLAP);
  CHECK(forward->collective == sim::workload::CollectiveKind::ALL_GATHER);
  CHECK(forward->bytes == Approx(4 * T * 2 * kv * e));
  CHECK(cp_step(programs.layer_backward[sim::workload::LayerKind::DENSE])->bytes == Approx(2 * 4 * T * 2 * kv * e));

  const auto a2a = load({{"cp", 4}, {"dp", 2}, {"cp_kind", "all_to_all"}});
  const auto a2a_programs = sim::workload::build_programs(a2a.model, a2a.plan, a2a.cluster.gpu);
  const auto* first = cp_step(a2a_programs.layer_forward[sim::workload::LayerKind::DENSE]);
  REQUIRE(first != nullptr);
  CHECK(first->kind == sim::workload::Step::Kind::COLLECTIVE);
  CHECK(first->collective == sim::workload::CollectiveKind::ALL_TO_ALL);
  CHECK(first->bytes == Approx(T * (q + 2 * kv) * e));
}

TEST_CASE("context parallelism divides a layer's activations by cp and shards the optimizer over dp x cp")
{
  const auto one = load({{"dp", 8}, {"distributed_optimizer", true}});
  const auto four = load({{"cp", 4}, {"dp", 2}, {"distributed_optimizer", true}});
  CHECK(sim::memory::layer_activation_bytes(four.model, four.plan) ==
        Approx(sim::memory::layer_activation_bytes(one.model, one.plan) / 4));
  const auto m1 = sim::memory::estimate_memory(one.model, one.plan, one.cluster.gpu).per_stage[0];
  const auto m4 = sim::memory::estimate_memory(four.model, four.plan, four.cluster.gpu).per_stage[0];
  CHECK(m4.optimizer_bytes == Approx(m1.optimizer_bytes)); // the same 8 GPUs share it
  CHECK(m4.grads_bytes == Approx(m1.grads_bytes));
}

TEST_CASE("CP ranks are consecutive inside the DP dimension and reduce gradients with the DP ranks")
{
  auto doc = scenario_json(
      "llama3-8b", {{"tp", 2}, {"cp", 2}, {"dp", 2}, {"global_batch", 4}, {"sequence_parallel", true}}, "dgx-h100");
  const auto built = test::build(
      doc["plan"], sim::core::read_json_file(test::source_dir() / "models" / "llama3-8b.json"), "dgx-h100", false);
  const auto& p = built.scenario.plan;
  CHECK(p.size(sim::plan::ParallelDim::DP) == 4);
  // Megatron-core tp-cp-dp-pp: ranks 0,1 a TP group; 0 and 2 a CP group; 0, 2, 4, 6 hold the same weights.
  CHECK(sim::plan::coords_of(p, 2).dp == 1);
  CHECK(sim::plan::coords_of(p, 4).dp == 2);
  std::set<std::pair<int, int>> cp_pairs;
  for (const auto& t : built.tasks.tasks())
    if (t.kind == sim::workload::TaskKind::TRANSFER && t.category == sim::workload::Category::CP)
      cp_pairs.insert({std::min(t.rank, t.peer), std::max(t.rank, t.peer)});
  CHECK(cp_pairs == std::set<std::pair<int, int>>{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
}

TEST_CASE("sliding-window attention splits over the context-parallel group as all-to-all, each GPU attending over "
          "the whole sequence within the window for its share of the heads, and the ring is refused")
{
  auto model = sim::core::read_json_file(test::source_dir() / "models" / "llama3-8b.json");
  model["sliding_window"] = 1024;
  auto doc = scenario_json("llama3-8b", {{"global_batch", 8}, {"seq_length", 8192}, {"dp", 8}}, "dgx-h100");
  doc["model"] = model;
  auto attention_flops = [&](const nlohmann::json& plan) {
    auto d = doc;
    if (!plan.is_null())
      d["plan"].update(plan);
    const auto file = test::write_json(test::scratch_dir() / "s.json", d);
    const auto s = sim::scenario::load_scenario(file, test::options());
    double flops = 0;
    for (const auto& k : sim::workload::kernel_costs(s.model, s.plan, s.cluster.gpu))
      if (k.program == "windowed layer forward" && k.kernel.kind == sim::hardware::KernelKind::ATTENTION)
        flops += k.kernel.flops;
    return flops;
  };
  const double whole = attention_flops({});
  // Causal within a window w of s: each query sees w - w^2 / (2 s) keys on average.
  const double s = 8192, w = 1024, q = 4096;
  CHECK(whole == Approx(2.0 * s * (w - 0.5 * w * w / s) * (q + q)));
  CHECK(attention_flops({{"cp", 4}, {"dp", 2}, {"cp_kind", "all_to_all"}}) == Approx(whole / 4));
  CHECK_THAT(test::error_of([&] {
               attention_flops({{"cp", 4}, {"dp", 2}});
             }),
             Catch::Contains("Transformer Engine's ring context parallelism does not support the sliding-window"));
}

TEST_CASE("multi-head latent attention splits over the context-parallel group with its keys and values of different "
          "widths, as Transformer Engine passes them")
{
  // DeepSeek-V3's attention at 16K tokens: 128 heads, keys of 192 (128 + 64 rotary) and values of 128 per head.
  auto doc = scenario_json("deepseek-v3",
                           {{"global_batch", 8}, {"seq_length", 16384}, {"dp", 8}, {"ep", 8}, {"recompute", "full"}},
                           "dgx-h100");
  auto load_plan = [&](const nlohmann::json& plan) {
    auto d = doc;
    d["plan"].update(plan);
    const auto file = test::write_json(test::scratch_dir() / "s.json", d);
    return sim::scenario::load_scenario(file, test::options());
  };
  const double a = 128, dk = 192, dv = 128, e = 2;
  for (int cp : {2, 4}) {
    INFO("cp " << cp);
    const double T = 16384.0 / cp;
    const auto ring = load_plan({{"cp", cp}, {"dp", 8 / cp}});
    const auto programs = sim::workload::build_programs(ring.model, ring.plan, ring.cluster.gpu);
    const auto* step = cp_step(programs.layer_forward[sim::workload::LayerKind::MOE]); // a MoE layer
    REQUIRE(step != nullptr);
    CHECK(step->bytes == Approx(cp * T * a * (dk + dv) * e));
    const auto a2a = load_plan({{"cp", cp}, {"dp", 8 / cp}, {"cp_kind", "all_to_all"}});
    const auto a2a_programs = sim::workload::build_programs(a2a.model, a2a.plan, a2a.cluster.gpu);
    CHECK(cp_step(a2a_programs.layer_forward[sim::workload::LayerKind::MOE])->bytes ==
          Approx(T * a * (dk + dk + dv) * e));
  }
}
