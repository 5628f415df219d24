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

TEST_CASE("under context parallelism each packed document is split over the ring, or whole on each GPU after the "
          "all-to-all: the GPU's share of the per-document causal work either way")
{
  const double s = 4096, L = 512, qo = 2 * 4096.0, heads = 32, cp = 2;
  const double per_gpu = (s / L) * L * L * qo / cp; // s / L documents of L^2 (q + o) causal FLOPs, cp GPUs
  std::vector<sim::hardware::Kernel> ring;
  const auto ringed = load({{"document_length", L}, {"cp", cp}, {"dp", 4}});
  for (const auto& k : sim::workload::kernel_costs(ringed.model, ringed.plan, ringed.cluster.gpu))
    if (k.program == "layer forward" && k.kernel.kind == sim::hardware::KernelKind::ATTENTION)
      ring.push_back(k.kernel);
  REQUIRE(ring.size() == 2); // one kernel per ring step
  double flops = 0;
  for (const auto& k : ring) {
    CHECK(k.seq == L / cp);            // two chunks of L / 2cp tokens of each document
    CHECK(k.heads == heads * (s / L)); // every document in one variable-length call
    flops += k.flops;
  }
  CHECK(flops == Approx(per_gpu));
  const auto a2a = flash(load({{"document_length", L}, {"cp", cp}, {"dp", 4}, {"cp_kind", "all_to_all"}}));
  CHECK(a2a.seq == L);
  CHECK(a2a.heads == heads / cp * (s / L));
  CHECK(a2a.flops == Approx(per_gpu));
  // Unpacked, the ring's work is the whole sequence's.
  double whole = 0;
  const auto unpacked = load({{"cp", cp}, {"dp", 4}});
  for (const auto& k : sim::workload::kernel_costs(unpacked.model, unpacked.plan, unpacked.cluster.gpu))
    if (k.program == "layer forward" && k.kernel.kind == sim::hardware::KernelKind::ATTENTION)
      whole += k.kernel.flops;
  CHECK(whole == Approx(s * s * qo / cp));
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

TEST_CASE("a document longer than the sequence, shorter than a context-parallel ring's chunks or with unfused "
          "attention is refused")
{
  const auto refused = [](const nlohmann::json& plan) { return test::error_of([&] { load(plan); }); };
  CHECK_THAT(refused({{"document_length", 8192}}),
             Catch::Contains("/plan/document_length") && Catch::Contains("longer than seq_length=4096"));
  CHECK_THAT(refused({{"document_length", 6}, {"cp", 4}, {"dp", 2}}),
             Catch::Contains("do not split into 2 x cp = 8 chunks"));
  CHECK_THAT(refused({{"document_length", 512}, {"attention", "unfused"}}), Catch::Contains("fused kernels only"));
  CHECK_THAT(refused({{"document_length", -1}}), Catch::Contains("/plan/document_length"));
}
