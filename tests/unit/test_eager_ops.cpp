// A model's Python code run eagerly (transformers' Llama): its RMSNorm, rotary embedding and gated activation as
// PyTorch operations, each a kernel, against the bytes per value each operation reads and writes.
#include "memory/memory_model.hpp"
#include "workload/layer_program.hpp"

#include "build_support.hpp"

#include <algorithm>
#include <string_view>

namespace {

using sim::workload::KernelCost;

// Llama-2 7B on one A100 (micro-batch 1, 4,096 tokens), no recomputation.
sim::scenario::Scenario llama(nlohmann::json plan)
{
  plan.update({{"tp", 1}, {"pp", 1}, {"dp", 1}, {"global_batch", 1}});
  auto doc = test::scenario_json("llama2-7b", plan);
  doc["gpus"] = 1;
  return sim::scenario::load_scenario(test::write_json(test::scratch_dir() / "eager.json", doc), test::options());
}

std::vector<KernelCost> costs(const nlohmann::json& plan)
{
  const auto s = llama(plan);
  return sim::workload::kernel_costs(s.model, s.plan, s.cluster.gpu);
}

struct Sum {
  double bytes = 0;
  double launches = 0;
  double time_s = 0;
};

// The kernels of one program whose names start with `prefix`.
Sum sum(const std::vector<KernelCost>& ks, std::string_view program, std::string_view prefix)
{
  Sum out;
  for (const auto& k : ks)
    if (k.program == program && k.kernel.name.starts_with(prefix)) {
      out.bytes += k.kernel.bytes;
      out.launches += k.kernel.launches;
      out.time_s += k.time_s;
    }
  return out;
}

double program_time(const std::vector<KernelCost>& ks, std::string_view program)
{
  double t = 0;
  for (const auto& k : ks)
    if (k.program == program)
      t += k.time_s;
  return t;
}

const double T = 4096; // tokens of the micro-batch
const double h = 4096; // hidden width, and the queries' and keys' widths (no GQA)
const double f = 11008;

} // namespace

TEST_CASE("an eager RMSNorm, rotary embedding and SwiGLU move the bytes of their PyTorch operations")
{
  const auto eager = costs({{"norm_impl", "eager"}, {"rope_impl", "eager"}, {"activation_impl", "eager"}});
  // Forward, per value: upcast 2+4, square 4+4, mean 4, scale 4+4, downcast 4+2, weight 2+2 = 36 bytes; per row the
  // mean's output, epsilon's add, rsqrt and the scale's broadcast read (4 + 8 + 8 + 4). Two norms a layer, 8 kernels
  // each.
  const Sum norms = sum(eager, "layer forward", "rmsnorm: ");
  CHECK(norms.bytes == Approx(2 * (36 * T * h + 24 * T)));
  CHECK(norms.launches == 16);
  // Backward: 84 bytes a value with the weight frozen, 92 when it trains (its product with the normed input and the
  // sum over rows); per row 4 + 4 + 24 + 4.
  CHECK(sum(eager, "layer backward", "rmsnorm backward: ").bytes == Approx(2 * (92 * T * h + 36 * T)));
  const auto lora =
      costs({{"norm_impl", "eager"}, {"rope_impl", "eager"}, {"activation_impl", "eager"}, {"lora_rank", 8}});
  CHECK(sum(lora, "layer backward", "rmsnorm backward: ").bytes == Approx(2 * (84 * T * h + 36 * T)));
  // Rotary, on the queries and the keys each: times cos 4, the negated half 2, the concatenation 4, times sin 4,
  // the sum 6: 20 bytes a value, 5 kernels; backward 30 (the two slices' zeros and copies, the three paths added).
  const Sum rotary = sum(eager, "layer forward", "rotary: ");
  CHECK(rotary.bytes == Approx(20 * T * 2 * h));
  CHECK(rotary.launches == 10);
  CHECK(sum(eager, "layer backward", "rotary backward: ").bytes == Approx(30 * T * 2 * h));
  // silu(gate) * up: 4 + 6 bytes a value of the FFN's width forward, 6 + 6 + 6 backward.
  CHECK(sum(eager, "layer forward", "silu").bytes == Approx(10 * T * f));
  CHECK(sum(eager, "layer backward", "silu").bytes == Approx(18 * T * f));

  // Fused: one kernel each, 4 bytes a value for a norm, 6 for SwiGLU; the eager layer takes longer, forward and back.
  const auto fused = costs({{"norm_impl", "torch"}, {"rope_impl", "fused"}, {"activation_impl", "fused"}});
  CHECK(sum(fused, "layer forward", "rmsnorm").launches == 0);
  CHECK(sum(fused, "layer forward", "input norm").bytes == Approx(4 * T * h));
  CHECK(sum(fused, "layer forward", "gated activation").bytes == Approx(6 * T * f));
  CHECK(program_time(eager, "layer forward") > program_time(fused, "layer forward"));
  CHECK(program_time(eager, "layer backward") > program_time(fused, "layer backward"));
  // A LayerNorm model keeps nn.LayerNorm's one kernel under norm_impl eager.
  auto gpt = test::scenario_json("sc21-gpt-3.6b",
                                 {{"tp", 1}, {"pp", 1}, {"dp", 1}, {"global_batch", 1}, {"norm_impl", "eager"}});
  gpt["gpus"] = 1;
  const auto g = sim::scenario::load_scenario(test::write_json(test::scratch_dir() / "gpt.json", gpt), test::options());
  const auto gk = sim::workload::kernel_costs(g.model, g.plan, g.cluster.gpu);
  CHECK(sum(gk, "layer forward", "rmsnorm").launches == 0);
  CHECK(sum(gk, "layer forward", "input norm").launches == 1);
}

TEST_CASE("eager model code keeps each RMSNorm's fp32 upcast and silu's output for the backward pass")
{
  const auto kept = [](const nlohmann::json& plan) {
    const auto s = llama(plan);
    return sim::memory::layer_activation_bytes(s.model, s.plan);
  };
  const double fused = kept({});
  CHECK(kept({{"norm_impl", "eager"}}) - fused == Approx(2 * 4 * T * h));
  CHECK(kept({{"activation_impl", "eager"}}) - fused == Approx(2 * T * f));
  CHECK(kept({{"rope_impl", "eager"}}) == fused);
  // Under full recomputation a layer keeps only its input either way.
  CHECK(kept({{"norm_impl", "eager"}, {"recompute", "full"}}) == kept({{"recompute", "full"}}));
}

TEST_CASE("plan.rope_impl and activation_impl take fused or eager, and nothing else")
{
  CHECK_THAT(test::error_of([] {
               costs({{"rope_impl", "compiled"}});
             }),
             Catch::Contains("/plan/rope_impl") && Catch::Contains("compiled"));
  CHECK_THAT(test::error_of([] { costs({{"norm_impl", "python"}}); }), Catch::Contains("eager"));
}
