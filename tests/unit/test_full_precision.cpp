// Full-precision training (plan.precision fp32 or tf32): every weight, gradient and activation in 4 bytes, no master
// copy, GEMMs at the part's fp32 or TF32 rate, checked against closed forms beside the same plan in bf16.
#include "memory/memory_model.hpp"
#include "workload/layer_program.hpp"
#include "workload/optimizer_step.hpp"

#include "build_support.hpp"

#include <string_view>

namespace {

using sim::workload::KernelCost;

// Llama-2 7B on one A100 (micro-batch 1, 4,096 tokens), no recomputation.
sim::scenario::Scenario llama(nlohmann::json plan, const std::string& topology = "dgx-a100")
{
  plan.update({{"tp", 1}, {"pp", 1}, {"dp", 1}, {"global_batch", 1}});
  auto doc = test::scenario_json("llama2-7b", plan);
  doc["gpus"] = 1;
  doc["topology"] = topology;
  return sim::scenario::load_scenario(test::write_json(test::scratch_dir() / "full_precision.json", doc),
                                      test::options());
}

std::vector<KernelCost> costs(const nlohmann::json& plan)
{
  const auto s = llama(plan);
  return sim::workload::kernel_costs(s.model, s.plan, s.cluster.gpu);
}

const KernelCost& named(const std::vector<KernelCost>& ks, std::string_view program, std::string_view name)
{
  for (const auto& k : ks)
    if (k.program == program && k.kernel.name == name)
      return k;
  FAIL("no kernel " << name << " in " << program);
  throw std::logic_error("unreachable");
}

bool has(const std::vector<KernelCost>& ks, std::string_view name)
{
  for (const auto& k : ks)
    if (k.kernel.name == name)
      return true;
  return false;
}

} // namespace

TEST_CASE("fp32 keeps weights and gradients in 4 bytes and Adam only its moments, 16 bytes a parameter")
{
  const auto mixed = llama({{"precision", "bf16"}});
  const auto full = llama({{"precision", "fp32"}});
  const auto m = sim::memory::estimate_memory(mixed.model, mixed.plan, mixed.cluster.gpu).per_stage.at(0);
  const auto f = sim::memory::estimate_memory(full.model, full.plan, full.cluster.gpu).per_stage.at(0);
  const double n = m.params;
  CHECK(f.params == n);
  CHECK(m.weights_bytes == Approx(2.0 * n));
  CHECK(f.weights_bytes == Approx(4.0 * n));
  CHECK(m.grads_bytes == Approx(4.0 * n)); // bf16: fp32 gradient accumulation
  CHECK(f.grads_bytes == Approx(4.0 * n));
  CHECK(m.optimizer_bytes == Approx(12.0 * n)); // master weights and two moments
  CHECK(f.optimizer_bytes == Approx(8.0 * n));  // the weights are the master copy
  // Every activation doubles but flash attention's fp32 log-sum-exp (4 bytes per head and token, 32 heads, 32 layers).
  const double lse = 32.0 * 4.0 * 32.0 * 4096.0;
  CHECK(f.layer_activations_bytes == Approx(2.0 * (m.layer_activations_bytes - lse) + lse));
}

TEST_CASE("fp32 GEMMs run at the part's fp32 peak, tf32 at its TF32 peak, both streaming 4-byte operands")
{
  const auto bf16 = costs({{"precision", "bf16"}});
  const auto fp32 = costs({{"precision", "fp32"}});
  const auto tf32 = costs({{"precision", "tf32"}});
  const auto a100 = llama({}).cluster.gpu;
  const auto& gemm = named(fp32, "layer forward", "fc1");
  const auto& k = gemm.kernel;
  CHECK(k.flops == named(bf16, "layer forward", "fc1").kernel.flops);
  CHECK(k.bytes == Approx(2.0 * named(bf16, "layer forward", "fc1").kernel.bytes));
  CHECK(k.bytes == Approx(4.0 * (k.m * k.k + k.k * k.n + k.m * k.n)));
  // No measured fp32 table: the A100's 16-bit large-GEMM efficiency of its 19.5 TFLOP/s, less wave quantisation.
  const double rate = 19.5e12 * a100.gemm_efficiency * sim::hardware::wave_efficiency(k.m, k.n, k.batch, a100.sms) *
                      a100.sustained_compute_ratio;
  CHECK(gemm.time_s == Approx(a100.kernel_overhead_s + k.flops / rate));
  const auto& tf = named(tf32, "layer forward", "fc1");
  CHECK(tf.time_s == Approx(a100.kernel_overhead_s + k.flops / rate * 19.5 / 156.0));
}

TEST_CASE("fp32 streams every memory-bound kernel's values in 4 bytes and has no casts to make")
{
  const auto bf16 = costs({{"precision", "bf16"}, {"norm_impl", "eager"}});
  const auto fp32 = costs({{"precision", "fp32"}, {"norm_impl", "eager"}});
  // The FFN's residual add reads two hidden states and writes one.
  const double T = 4096;
  const double h = 4096;
  CHECK(named(fp32, "layer forward", "ffn residual").kernel.bytes == Approx(3.0 * 4.0 * T * h));
  CHECK(named(bf16, "layer forward", "ffn residual").kernel.bytes == Approx(3.0 * 2.0 * T * h));
  // The eager RMSNorm's upcast and downcast, and the logits' upcast and their gradient's downcast, are gone.
  for (const char* cast : {"rmsnorm: to fp32", "rmsnorm: to 16 bits", "rmsnorm backward: to fp32", "logits to fp32",
                           "logit gradient to 16 bits"}) {
    CHECK(has(bf16, cast));
    CHECK_FALSE(has(fp32, cast));
  }
  CHECK(named(fp32, "layer forward", "rmsnorm: weight").kernel.bytes == Approx(2.0 * 4.0 * T * h));
}

TEST_CASE("fp32's optimizer step writes no 16-bit copy")
{
  auto plan = llama({{"precision", "fp32"}}).plan;
  plan.software.optimizer = sim::plan::OptimizerImpl::FUSED;
  CHECK(sim::workload::optimizer_bytes_per_param(plan) == 28.0); // gradient; weight and moments read and written
  plan.software.optimizer = sim::plan::OptimizerImpl::MEGATRON;
  CHECK(sim::workload::optimizer_bytes_per_param(plan) == 32.0); // FP32Optimizer: the gradient norm, then Adam
  plan.precision = sim::hardware::Precision::BF16;
  CHECK(sim::workload::optimizer_bytes_per_param(plan) == 38.0);
}

TEST_CASE("full precision is refused where a part has no rate for it or a plan needs 16-bit weights")
{
  CHECK_THAT(test::error_of([] {
               llama({{"precision", "tf32"}}, "pcie-4090");
             }),
             Catch::Contains("/plan/precision: RTX-4090 has no tf32 rate"));
  CHECK_THAT(test::error_of([] {
               llama({{"precision", "fp32"}, {"lora_rank", 16}, {"base_quantization", "nf4"}});
             }),
             Catch::Contains("not run in fp32"));
  CHECK_THAT(test::error_of([] {
               llama({{"precision", "fp32"}, {"fp32_grad_accumulation", false}});
             }),
             Catch::Contains("/plan/fp32_grad_accumulation: false, but fp32 training"));
  CHECK_THAT(test::error_of([] {
               llama({{"precision", "tf32"}, {"zero_stage", 2}, {"offload_optimizer", "cpu"}});
             }),
             Catch::Contains("offloading the optimizer of tf32 training is not simulated"));
}
