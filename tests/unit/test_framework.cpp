// plan.framework: the defaults each framework's code sets (gradients, buckets, overlap, its current generation), and
// a scenario's setup compared by what it resolves to (sweep's own layout).
#include "plan/software.hpp"
#include "scenario/scenario.hpp"
#include "topology/cluster_graph.hpp"

#include "support.hpp"

#include <fmt/format.h>

namespace {

sim::scenario::Scenario zero(int stage, const std::string& framework, std::vector<std::string> more = {})
{
  more.push_back(fmt::format("plan.zero_stage={}", stage));
  if (!framework.empty())
    more.push_back("plan.framework=" + framework);
  return sim::scenario::load_scenario(test::source_dir() / "scenarios/finetune/full-8xa100.json",
                                      test::options(std::move(more)));
}

} // namespace

TEST_CASE("a framework's gradient defaults are its code's: fp32 or 16-bit, the bucket, the overlap")
{
  using sim::plan::Framework;
  using sim::plan::Generation;
  // Megatron: fp32 main_grad under bf16, Megatron-core's bucket of max(40M, 1M x dp) gradients, overlapped.
  const auto megatron = zero(3, "megatron");
  CHECK(megatron.plan.software.framework == Framework::MEGATRON);
  CHECK(megatron.plan.software.generation == Generation::MEGATRON_CORE);
  CHECK(megatron.plan.fp32_grad_accumulation);
  CHECK(megatron.plan.dp_bucket_bytes == 4.0 * 40e6);
  CHECK(megatron.plan.overlap_grad_reduce);
  // DeepSpeed v0.12-v0.17: ZeRO keeps bf16 gradients in buckets of reduce_bucket_size (5e8); overlap_comm only at
  // stage 3; without ZeRO, bf16 accumulates in fp32 (BF16_Optimizer) and all-reduces after the backward pass.
  const auto ds3 = zero(3, "deepspeed");
  CHECK(ds3.plan.software.generation == Generation::DEEPSPEED);
  CHECK_FALSE(ds3.plan.fp32_grad_accumulation);
  CHECK(ds3.plan.dp_bucket_bytes == 2.0 * 5e8);
  CHECK(ds3.plan.overlap_grad_reduce);
  const auto ds2 = zero(2, "deepspeed");
  CHECK_FALSE(ds2.plan.overlap_grad_reduce);
  const auto ds0 = zero(0, "deepspeed");
  CHECK(ds0.plan.fp32_grad_accumulation);
  CHECK(ds0.plan.dp_bucket_bytes == 4.0 * 5e8);
  CHECK_FALSE(ds0.plan.overlap_grad_reduce);
  CHECK(ds0.plan.software.norm == sim::plan::NormImpl::TORCH);
  CHECK(ds0.plan.software.attention == sim::plan::Attention::FLASH2);
  CHECK(ds0.plan.software.optimizer == sim::plan::OptimizerImpl::DEEPSPEED);
  CHECK_FALSE(zero(0, "deepspeed", {"plan.precision=fp16"}).plan.fp32_grad_accumulation);
  // FSDP: the MixedPrecision policy reduces in the 16-bit type; DDP under autocast keeps fp32 gradients in 25 MiB
  // buckets.
  const auto fsdp = zero(3, "fsdp");
  CHECK(fsdp.plan.software.generation == Generation::FSDP);
  CHECK_FALSE(fsdp.plan.fp32_grad_accumulation);
  CHECK(fsdp.plan.software.grad_accumulation == sim::plan::GradAccumulation::AUTOGRAD);
  CHECK(fsdp.plan.software.loss == sim::plan::LossImpl::EAGER_FP32);
  const auto ddp = zero(0, "fsdp");
  CHECK(ddp.plan.fp32_grad_accumulation);
  CHECK(ddp.plan.dp_bucket_bytes == 25.0 * 1024 * 1024);
  // torchtitan: mixed_precision_reduce float32.
  CHECK(zero(3, "torchtitan").plan.fp32_grad_accumulation);
  // What the scenario says stands.
  const auto set = zero(3, "deepspeed",
                        {"plan.fp32_grad_accumulation=true", "plan.dp_bucket_size=64MiB",
                         "plan.overlap_grad_reduce=false", "plan.norm_impl=te"});
  CHECK(set.plan.fp32_grad_accumulation);
  CHECK(set.plan.dp_bucket_bytes == 64.0 * 1024 * 1024);
  CHECK_FALSE(set.plan.overlap_grad_reduce);
  CHECK(set.plan.software.norm == sim::plan::NormImpl::TE);
}

TEST_CASE("a software generation names its framework, and a plan naming both must agree")
{
  using sim::plan::Framework;
  // A scenario that names no framework (full-8xa100.json names DeepSpeed).
  const auto plain = [](std::vector<std::string> set) {
    return sim::scenario::load_scenario(test::source_dir() / "scenarios/teaching/1f1b.json",
                                        test::options(std::move(set)))
        .plan.software.framework;
  };
  CHECK(plain({"plan.software=deepspeed-zero3-2021"}) == Framework::DEEPSPEED);
  CHECK(plain({"plan.software=composer-fsdp"}) == Framework::FSDP);
  CHECK(plain({"plan.software=megatron-lm-2022"}) == Framework::MEGATRON);
  CHECK(plain({}) == Framework::MEGATRON);
  CHECK(zero(3, "fsdp", {"plan.software=composer-fsdp"}).plan.software.generation ==
        sim::plan::Generation::COMPOSER_FSDP);
  CHECK_THAT(test::error_of([] { zero(3, "", {"plan.software=megatron-core"}); }),
             Catch::Contains("expected a generation of framework \"deepspeed\""));
  const auto error = test::error_of([] { zero(3, "fsdp", {"plan.software=megatron-core"}); });
  CHECK_THAT(error, Catch::Contains("/plan/software: a generation of another framework"));
  CHECK_THAT(error, Catch::Contains("megatron's"));
  CHECK_THAT(error, Catch::Contains("its current one, \"fsdp\""));
  CHECK_THAT(test::error_of([] { zero(3, "jax"); }), Catch::Contains("/plan/framework"));
  for (const auto& c : sim::plan::generation_choices) {
    INFO(c.name);
    CHECK_FALSE(sim::plan::generation_summary(c.value).empty());
  }
  for (const auto& c : sim::plan::framework_choices)
    CHECK(sim::plan::framework_of(sim::plan::current_generation(c.value)) == c.value);
}

TEST_CASE("two scenarios have the same setup when they resolve to the same model, cluster and cost")
{
  const auto file = test::source_dir() / "scenarios/teaching/1f1b.json";
  const auto base = sim::scenario::load_scenario(file, test::options());
  const auto load = [&](std::vector<std::string> set) {
    return sim::scenario::load_scenario(file, test::options(std::move(set)));
  };
  // A value spelt out at what it resolves to anyway, or a name, a description: the same.
  CHECK(sim::scenario::same_setup(base, load({"topology.node.nvlink.bandwidth=300GBps"})));
  CHECK(sim::scenario::same_setup(base, load({"topology.name=renamed", "model.description=another text"})));
  CHECK(sim::scenario::same_setup(base, load({"topology.node.gpu.kernel_tables.description=remeasured"})));
  // Anything simulated: not.
  CHECK_FALSE(sim::scenario::same_setup(base, load({"topology.node.nvlink.bandwidth=200GBps"})));
  CHECK_FALSE(sim::scenario::same_setup(base, load({"model.vocab_size=32001"})));
  CHECK_FALSE(sim::scenario::same_setup(base, load({"cost.usd_per_gpu_hour=2"})));
  CHECK_FALSE(sim::scenario::same_setup(base, load({"topology.node.gpu.kernel_tables.gemm.best=300TFLOPS"})));
}

TEST_CASE("reports name an AMD part's GPU links Infinity Fabric, in JSON still the nvlink class")
{
  using sim::hardware::Vendor;
  CHECK(sim::topology::link_label("nvlink", Vendor::NVIDIA) == "NVLink");
  CHECK(sim::topology::link_label("nvlink", Vendor::AMD) == "Infinity Fabric");
  CHECK(sim::topology::link_label("ib", Vendor::AMD) == "InfiniBand");
  const auto mi300x = sim::scenario::load_scenario(test::source_dir() / "scenarios/whatif/buy-llama3-405b-mi300x.json",
                                                   test::options());
  CHECK(mi300x.cluster.gpu.vendor == Vendor::AMD);
  const auto h100 =
      sim::scenario::load_scenario(test::source_dir() / "scenarios/whatif/buy-llama3-405b-h100.json", test::options());
  CHECK(h100.cluster.gpu.vendor == Vendor::NVIDIA);
}
