// FP8 training (Transformer Engine): GEMM rates and bytes, the cast kernels per scaling recipe, memory closed forms,
// the per-step weight casts and the plan's refusals.
#include "core/document.hpp"
#include "hardware/compute_model.hpp"
#include "memory/memory_model.hpp"
#include "model/param_count.hpp"
#include "workload/layer_program.hpp"

#include "build_support.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

using test::scenario_json;

namespace {

sim::scenario::Scenario load(const nlohmann::json& doc)
{
  const auto file = test::write_json(test::scratch_dir() / "s.json", doc);
  return sim::scenario::load_scenario(file, test::options());
}

// Llama-2 7B on one H100 node, TP 1, eight replicas.
nlohmann::json llama(const nlohmann::json& plan)
{
  nlohmann::json base{{"dp", 8}, {"global_batch", 8}, {"distributed_optimizer", true}};
  if (plan.is_object())
    base.update(plan);
  return scenario_json("llama2-7b", base, "dgx-h100");
}

std::vector<sim::workload::KernelCost> costs(const nlohmann::json& plan)
{
  const auto s = load(llama(plan));
  return sim::workload::kernel_costs(s.model, s.plan, s.cluster.gpu);
}

bool has(const std::vector<sim::workload::KernelCost>& ks, std::string_view name)
{
  return std::any_of(ks.begin(), ks.end(), [&](const auto& k) { return k.kernel.name == name; });
}

const sim::workload::KernelCost& find(const std::vector<sim::workload::KernelCost>& ks, std::string_view program,
                                      std::string_view name)
{
  const auto it =
      std::find_if(ks.begin(), ks.end(), [&](const auto& k) { return k.program == program && k.kernel.name == name; });
  REQUIRE(it != ks.end());
  return *it;
}

double program_time(const std::vector<sim::workload::KernelCost>& ks, std::string_view program)
{
  double t = 0;
  for (const auto& k : ks)
    if (k.program == program)
      t += k.time_s;
  return t;
}

// The median of the FP8/BF16 speedups measure.py measured on a part in every pass (tools/kernels/data/GPU/
// fp8_layouts.csv, column 8: forward, data- and weight-gradient GEMMs).
double measured_fp8_speedup(const std::string& gpu)
{
  std::ifstream csv(test::source_dir() / "tools/kernels/data" / gpu / "fp8_layouts.csv");
  std::string line;
  std::vector<double> ratios;
  std::getline(csv, line);
  while (std::getline(csv, line)) {
    std::stringstream cells(line);
    std::string cell;
    for (int column = 0; column <= 7; ++column)
      std::getline(cells, cell, ',');
    ratios.push_back(std::stod(cell));
  }
  REQUIRE(ratios.size() > 150);
  std::sort(ratios.begin(), ratios.end());
  return ratios[ratios.size() / 2];
}

} // namespace

TEST_CASE("an FP8 GEMM runs at the measured BF16 rate of its shape times the FP8 speedup measured around it, one byte "
          "per input")
{
  using namespace sim::hardware;
  const auto s = load(llama({}));
  const GpuSpec& h100 = s.cluster.gpu;
  // The catalogue's speedup is the median of the FP8/BF16 ratios measured at the H100 cases' shapes in all three
  // passes, on the H100 and on the H200.
  const double speedup = h100.fp8_gemm_speedup;
  CHECK(speedup == Approx(measured_fp8_speedup("h100")).epsilon(0.005));
  CHECK(sim::scenario::load_cluster("hgx-h200", test::options()).gpu.fp8_gemm_speedup ==
        Approx(measured_fp8_speedup("h200")).epsilon(0.005));
  // The H100's table holds the speed-up of every pass's GEMM at the H100 cases' shapes: an FP8 GEMM takes the one
  // measured around its shape. At a measured shape, that row's (4,096 x 2,048 x 2,048, the smallest: 1.46); a shape
  // far from every row, the nearest rows'.
  const KernelTables& table = *h100.kernel_tables;
  REQUIRE(table.fp8_gemm.size() > 150);
  const auto ratio = [&](double m, double n, double k) {
    const Kernel bf16 = gemm("g", m, n, k);
    return busy_time(bf16, h100, Precision::BF16) / busy_time(fp8_gemm(bf16), h100, Precision::BF16);
  };
  CHECK(ratio(4096, 2048, 2048) == Approx(*table.fp8_speedup(4096, 2048, 2048, 1)));
  CHECK(*table.fp8_speedup(4096, 2048, 2048, 1) == Approx(1.462).epsilon(0.02));
  CHECK(ratio(4096, 16384, 16384) == Approx(*table.fp8_speedup(4096, 16384, 16384, 1)));
  CHECK(*table.fp8_speedup(4096, 16384, 16384, 1) > 1.8);
  // Every value lies within the measured range, and the table's median is the catalogue's.
  for (const double m : {64.0, 1024.0, 8192.0, 65536.0}) {
    const Kernel bf16 = gemm("g", m, 8192, 8192);
    const Kernel fp8 = fp8_gemm(bf16);
    CHECK(fp8.flops == bf16.flops);
    CHECK(fp8.bytes == Approx(m * 8192 + 8192.0 * 8192 + 2.0 * m * 8192));
    CHECK(ratio(m, 8192, 8192) >= 1.46);
    CHECK(ratio(m, 8192, 8192) <= 1.97);
  }
  // A chip without FP8 rows (B200: no table) runs every FP8 GEMM at the part's speed-up.
  const GpuSpec b200 = sim::scenario::load_cluster("hgx-b200", test::options()).gpu;
  const Kernel big = gemm("g", 8192, 8192, 8192);
  CHECK(busy_time(big, b200, Precision::BF16) / busy_time(fp8_gemm(big), b200, Precision::BF16) ==
        Approx(b200.fp8_gemm_speedup));
}

TEST_CASE("without a measured FP8 speedup the datasheet FP8/BF16 peak ratio stands in, and parts without FP8 have none")
{
  sim::hardware::GpuSpec gpu = load(llama({})).cluster.gpu;
  gpu.fp8_gemm_speedup = 0;
  CHECK(*gpu.fp8_speedup() == Approx(1978.9 / 989.4));
  const auto a100 = load(scenario_json("llama2-7b", {{"dp", 8}, {"global_batch", 8}}, "dgx-a100")).cluster.gpu;
  CHECK_FALSE(a100.fp8_speedup());
}

TEST_CASE("FP8 runs the linear layers' GEMMs in FP8 and attention, router and logits in bf16")
{
  const auto bf16 = costs({});
  const auto fp8 = costs({{"precision", "fp8"}});
  for (const char* name : {"qkv", "attention projection", "fc1", "fc2"}) {
    INFO(name);
    CHECK(find(fp8, "layer forward", name).kernel.fp8);
    CHECK_FALSE(find(bf16, "layer forward", name).kernel.fp8);
    CHECK(find(fp8, "layer forward", name).time_s < find(bf16, "layer forward", name).time_s);
  }
  for (const char* name : {"fc2 dgrad", "fc2 wgrad", "qkv wgrad", "projection dgrad"})
    CHECK(find(fp8, "layer backward", name).kernel.fp8);
  CHECK_FALSE(find(fp8, "output layer forward", "logits").kernel.fp8);
  CHECK(find(fp8, "layer forward", "flash attention").time_s == find(bf16, "layer forward", "flash attention").time_s);
  CHECK(program_time(fp8, "layer forward") < program_time(bf16, "layer forward"));
  CHECK(program_time(fp8, "layer backward") < program_time(bf16, "layer backward"));
}

TEST_CASE("each FP8 GEMM input is cast with its transpose: the norm writes it under delayed scaling, current scaling "
          "first reads the tensor for its amax")
{
  const double T = 4096, h = 4096, f = 11008; // Llama-2 7B, one 4K sequence
  const auto delayed = costs({{"precision", "fp8"}});
  CHECK_FALSE(has(delayed, "qkv input cast")); // fused into the input norm
  CHECK_FALSE(has(delayed, "amax"));
  CHECK(find(delayed, "layer forward", "fc2 input cast").kernel.bytes == Approx(4.0 * T * f));
  CHECK(find(delayed, "layer forward", "projection input cast").kernel.bytes == Approx(4.0 * T * h));
  CHECK(find(delayed, "layer backward", "fc2 output-grad cast").kernel.bytes == Approx(4.0 * T * h));
  CHECK(find(delayed, "layer backward", "fc1 output-grad cast").kernel.bytes == Approx(4.0 * T * 2 * f));

  const auto current = costs({{"precision", "fp8"}, {"fp8_recipe", "current"}});
  CHECK(find(current, "layer forward", "qkv input cast").kernel.bytes == Approx(4.0 * T * h));
  CHECK(find(current, "layer forward", "amax").kernel.bytes > 0);
  CHECK(program_time(current, "layer forward") > program_time(delayed, "layer forward"));

  for (const auto& k : costs({}))
    CHECK(k.kernel.name.find("cast") == std::string_view::npos);
}

TEST_CASE("FP8 keeps the linear layers' saved inputs in one byte and adds each layer weight's FP8 copy and transpose")
{
  const auto bf16 = load(llama({}));
  const auto fp8 = load(llama({{"precision", "fp8"}}));
  const auto gathered = load(llama({{"precision", "fp8"}, {"fp8_param_gather", true}}));
  const double sb = 4096, h = 4096, f = 11008;
  // QKV and fc1 inputs (hidden states) and fc2's (one FFN-wide tensor) go from two bytes to one.
  CHECK(sim::memory::layer_activation_bytes(bf16.model, bf16.plan) -
            sim::memory::layer_activation_bytes(fp8.model, fp8.plan) ==
        Approx(sb * (2.0 * h + f)));

  const auto m16 = sim::memory::estimate_memory(bf16.model, bf16.plan, bf16.cluster.gpu).per_stage[0];
  const auto m8 = sim::memory::estimate_memory(fp8.model, fp8.plan, fp8.cluster.gpu).per_stage[0];
  const auto mg = sim::memory::estimate_memory(gathered.model, gathered.plan, gathered.cluster.gpu).per_stage[0];
  CHECK(m8.weights_bytes - m16.weights_bytes == Approx(2.0 * m16.layer_params));
  CHECK(mg.weights_bytes == Approx(m16.weights_bytes)); // FP8 parameters: one byte, plus a one-byte transpose
  // Megatron keeps main gradients in fp32 under FP8 as under bf16.
  CHECK(m8.grads_bytes == Approx(m16.grads_bytes));
}

TEST_CASE("the first micro-batch casts every layer's weights to FP8 once per step, later ones reuse them")
{
  auto plan = llama({{"precision", "fp8"}, {"global_batch", 32}})["plan"];
  nlohmann::json model = sim::core::read_json_file(test::source_dir() / "models" / "llama2-7b.json");
  const auto built = test::build(plan, model, "dgx-h100", true);
  int casts = 0;
  for (const auto& t : built.tasks.tasks())
    if (t.kind == sim::workload::TaskKind::COMPUTE && built.tasks.label_text(t.label) == "fp8 weight cast") {
      CHECK(t.microbatch == 0);
      ++casts;
    }
  CHECK(casts == 32); // one per layer on the one simulated GPU
  const auto bf16 = test::build(llama({{"global_batch", 32}})["plan"], model, "dgx-h100", true);
  for (const auto& t : bf16.tasks.tasks())
    CHECK(bf16.tasks.label_text(t.label) != "fp8 weight cast");
}

TEST_CASE(
    "delayed scaling max-reduces each pass's amaxes over the stage's GPUs, blocking, and the other recipes do not")
{
  nlohmann::json model = sim::core::read_json_file(test::source_dir() / "models" / "llama2-7b.json");
  auto reductions = [&](const char* recipe) {
    const auto plan = llama({{"precision", "fp8"}, {"fp8_recipe", recipe}, {"tp", 2}, {"dp", 4}})["plan"];
    const auto built = test::build(plan, model, "dgx-h100", false);
    std::vector<double> bytes;
    for (std::uint32_t i = 0; i < built.tasks.collectives().size(); ++i) {
      const auto& c = built.tasks.collectives()[i];
      if (built.tasks.label_text(c.label) == "fp8 amax all-reduce") {
        CHECK(c.ranks == 8);
        bytes.push_back(c.bytes);
      }
    }
    return bytes;
  };
  const auto delayed = reductions("delayed");
  // A forward and a backward pass of each of the 2 micro-batches: 32 layers of 4 GEMMs, 3 and then 2 fp32 amaxes each.
  REQUIRE(delayed.size() == 4);
  for (std::size_t i = 0; i < 4; ++i)
    CHECK(delayed[i] == Approx(32 * 4 * (i % 2 == 0 ? 3 : 2) * 4.0));
  CHECK(reductions("current").empty());
  CHECK(reductions("blockwise").empty());
}

TEST_CASE("FP8 options are refused where they cannot apply")
{
  auto error = [](const nlohmann::json& plan, const std::string& topology = "dgx-h100") {
    return test::error_of([&] { load(scenario_json("llama2-7b", plan, topology)); });
  };
  CHECK_THAT(error({{"precision", "fp8"}, {"dp", 8}}, "dgx-a100"), Catch::Contains("A100-SXM4-80GB has no fp8 rate"));
  CHECK_THAT(error({{"fp8_recipe", "current"}, {"dp", 8}}), Catch::Contains("applies only to FP8 training"));
  CHECK_THAT(error({{"precision", "fp8"}, {"fp8_param_gather", true}, {"dp", 8}}),
             Catch::Contains("distributed_optimizer true"));
}

TEST_CASE("under ZeRO-3 every pass casts the weights it gathers, and FP8 parameters are gathered in one byte")
{
  nlohmann::json model = sim::core::read_json_file(test::source_dir() / "models" / "llama2-7b.json");
  auto zero3 = [&](bool fp8_gather) {
    auto plan = llama({{"precision", "fp8"},
                       {"global_batch", 16},
                       {"zero_stage", 3},
                       {"fp8_recipe", "current"},
                       {"fp8_param_gather", fp8_gather}})["plan"];
    plan.erase("distributed_optimizer");
    return test::build(plan, model, "dgx-h100", true);
  };
  const auto bf16_gather = zero3(false);
  int casts = 0;
  for (const auto& t : bf16_gather.tasks.tasks())
    if (t.kind == sim::workload::TaskKind::COMPUTE && bf16_gather.tasks.label_text(t.label) == "fp8 weight cast")
      ++casts;
  CHECK(casts == 32 * 2 * 2);                 // each layer, in the forward and the backward pass of both micro-batches
  auto layer_gather = [](const auto& built) { // the most frequent size: a layer's (32 of them, each pass)
    std::map<double, int> sizes;
    for (const auto& c : built.tasks.collectives())
      if (built.tasks.label_text(c.label) == "zero-3 parameter all-gather")
        ++sizes[c.bytes];
    return std::max_element(sizes.begin(), sizes.end(), [](auto a, auto b) { return a.second < b.second; })->first;
  };
  const double h = 4096, f = 11008;
  CHECK(layer_gather(bf16_gather) == Approx(2.0 * (4 * h * h + 3 * h * f + 2 * h))); // a layer, norms included
  CHECK(layer_gather(zero3(true)) == Approx(layer_gather(bf16_gather) / 2.0));

  // The FP8 copies are not kept across micro-batches: only the gathered layer's.
  auto plan = llama({{"precision", "fp8"}, {"zero_stage", 3}})["plan"];
  plan.erase("distributed_optimizer");
  auto bf16_plan = plan;
  bf16_plan.erase("precision");
  const auto fp8 = load(scenario_json("llama2-7b", plan, "dgx-h100"));
  const auto bf16 = load(scenario_json("llama2-7b", bf16_plan, "dgx-h100"));
  const auto m8 = sim::memory::estimate_memory(fp8.model, fp8.plan, fp8.cluster.gpu).per_stage[0];
  const auto m16 = sim::memory::estimate_memory(bf16.model, bf16.plan, bf16.cluster.gpu).per_stage[0];
  CHECK(m8.weights_bytes == Approx(m16.weights_bytes));
  CHECK(m8.buffers_bytes - m16.buffers_bytes == Approx(2.0 * m16.layer_params / 32));
}
