// Packed documents (plan.document_length): attention runs within each document as a variable-length kernel, the
// model FLOPs count it so, and the plan keys around it are checked.
#include "model/flops.hpp"
#include "report/analysis.hpp"
#include "workload/layer_program.hpp"

#include "build_support.hpp"

using test::scenario_json;

namespace {

sim::scenario::Scenario load(const nlohmann::json& plan)
{
  nlohmann::json base{{"global_batch", 8}, {"seq_length", 4096}, {"dp", 8}};
  if (!plan.is_null())
    base.update(plan);
  const auto file = test::write_json(test::scratch_dir() / "s.json", scenario_json("llama3-8b", base, "dgx-h100"));
  return sim::scenario::load_scenario(file, test::options());
}

sim::hardware::Kernel flash(const sim::scenario::Scenario& s)
{
  for (const auto& k : sim::workload::kernel_costs(s.model, s.plan, s.cluster.gpu))
    if (k.program == "layer forward" && k.kernel.kind == sim::hardware::KernelKind::ATTENTION)
      return k.kernel;
  FAIL("no attention kernel");
  return {};
}

} // namespace

TEST_CASE("packed documents attend within themselves: a variable-length kernel over s / L sequences of L tokens")
{
  const double s = 4096, q = 4096, o = 4096, heads = 32;
  const auto whole = flash(load({}));
  CHECK(whole.seq == s);
  CHECK(whole.flops == Approx(2.0 * s * (s / 2) * (q + o)));
  const auto docs = flash(load({{"document_length", 256}}));
  CHECK(docs.seq == 256);
  CHECK(docs.heads == heads * s / 256);
  // Each query sees half its own document on average: 256 / 2 keys instead of 4096 / 2.
  CHECK(docs.flops == Approx(2.0 * s * (256.0 / 2) * (q + o)));
  // A document as long as the sequence is the unpacked sequence.
  CHECK(flash(load({{"document_length", 4096}})).flops == Approx(whole.flops));
}

TEST_CASE("model FLOPs count attention over each packed document, the linear layers over every token")
{
  const auto docs = load({{"document_length", 512}});
  const auto a = sim::report::analyse(docs);
  const auto expected = sim::model::step_flops(docs.model, 512, 8.0 * 4096 / 512, sim::model::Recompute::NONE);
  CHECK(a.step.model() == Approx(expected.model()));
  CHECK(a.step.model() < sim::report::analyse(load({})).step.model());
  CHECK(a.tokens_per_step == 8.0 * 4096);
}

TEST_CASE("a document longer than the sequence, with context parallelism or unfused attention is refused")
{
  const auto refused = [](const nlohmann::json& plan) { return test::error_of([&] { load(plan); }); };
  CHECK_THAT(refused({{"document_length", 8192}}),
             Catch::Contains("/plan/document_length") && Catch::Contains("longer than seq_length=4096"));
  CHECK_THAT(refused({{"document_length", 512}, {"cp", 2}, {"dp", 4}}), Catch::Contains("context parallelism"));
  CHECK_THAT(refused({{"document_length", 512}, {"attention", "unfused"}}), Catch::Contains("fused kernels only"));
  CHECK_THAT(refused({{"document_length", -1}}), Catch::Contains("/plan/document_length"));
}
