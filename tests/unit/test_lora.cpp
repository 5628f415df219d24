// LoRA and QLoRA fine-tuning: the adapters' sizes, the frozen base's memory, the kernels that replace a frozen linear
// layer's, and what trains in the step (gradient reduction, optimizer).
#include "memory/memory_model.hpp"
#include "model/flops.hpp"
#include "model/param_count.hpp"
#include "plan/lora.hpp"
#include "scenario/scenario.hpp"
#include "workload/lora_kernels.hpp"

#include "build_support.hpp"
#include "support.hpp"

#include <algorithm>

namespace {

using sim::hardware::GemmLayout;
using sim::hardware::Kernel;

sim::scenario::Scenario llama7b(nlohmann::json plan)
{
  plan["tp"] = 1;
  plan["pp"] = 1;
  plan["dp"] = 1;
  plan["sequence_parallel"] = false;
  nlohmann::json doc = {
      {"schema", "scenario/v1"}, {"model", "llama2-7b"}, {"topology", "dgx-a100"}, {"gpus", 1}, {"plan", plan}};
  const auto file = test::write_json(test::scratch_dir() / "lora.json", doc);
  return sim::scenario::load_scenario(file, test::options());
}

std::vector<std::string> names(const std::vector<Kernel>& ks)
{
  std::vector<std::string> out;
  for (const auto& k : ks)
    out.emplace_back(k.name);
  return out;
}

} // namespace

TEST_CASE("rank-16 adapters on every projection of Llama-2 7B are PEFT's 39,976,960 trainable parameters")
{
  const auto s = llama7b({{"lora_rank", 16}});
  // q, k, v, o: 16 x (4096 + 4096) each; gate, up: 16 x (4096 + 11008); down: 16 x (11008 + 4096); 32 layers.
  CHECK(sim::plan::lora_layer_params(s.model, s.plan) * 32 == 39976960.0);
  const auto qv = llama7b({{"lora_rank", 8}, {"lora_targets", {"q_proj", "v_proj"}}});
  CHECK(sim::plan::lora_layer_params(qv.model, qv.plan) * 32 == 4194304.0); // PEFT's Llama default: 4.19M
}

TEST_CASE("QLoRA's frozen base weighs 4.127 bits a weight and only the adapters carry gradients and Adam")
{
  CHECK(sim::plan::base_weight_bytes(sim::plan::BaseQuantization::NF4, 2.0) == Approx(4.127 / 8).epsilon(1e-3));
  const auto s = llama7b({{"lora_rank", 16}, {"base_quantization", "nf4"}});
  const auto e = sim::memory::estimate_memory(s.model, s.plan, s.cluster.gpu);
  const auto& st = e.per_stage.at(0);
  const double adapters = 39976960.0;
  const double linear = 32 * (4.0 * 4096 * 4096 + 3.0 * 4096 * 11008);
  CHECK(st.trainable_params == adapters);
  CHECK(st.weights_bytes == Approx(linear * sim::plan::base_weight_bytes(sim::plan::BaseQuantization::NF4, 2.0) +
                                   2.0 * (st.params - linear) + 2.0 * adapters));
  CHECK(st.grads_bytes == Approx(4.0 * adapters));      // fp32 gradients (bf16 training)
  CHECK(st.optimizer_bytes == Approx(12.0 * adapters)); // Adam's master weights and moments
}

TEST_CASE("a frozen linear layer keeps its forward and data-gradient GEMMs and gets its adapters' beside them")
{
  const auto s = llama7b({{"lora_rank", 16}, {"base_quantization", "nf4"}});
  const auto lora = sim::workload::lora_kernels(s.model, s.plan).value();
  const double tokens = 4096;
  // The fused QKV (q, k and v adapters): dequantize, the base GEMM, then A, B and the scale-and-add for each.
  const auto fwd = sim::workload::with_adapters(sim::hardware::gemm("qkv", tokens, 3 * 4096, 4096), lora);
  CHECK(names(fwd) == std::vector<std::string>{"nf4 dequantize", "qkv", "lora A", "lora B", "lora scale and add",
                                               "lora A", "lora B", "lora scale and add", "lora A", "lora B",
                                               "lora scale and add"});
  CHECK(fwd.front().bytes == Approx(3 * 4096.0 * 4096 * (4.127 / 8 + 2)).epsilon(1e-3));
  CHECK(fwd[2].flops == 2.0 * tokens * 16 * 4096); // x A
  CHECK(fwd[3].flops == 2.0 * tokens * 4096 * 16); // (x A) B
  // The weight gradient: the base's is gone, the adapters' two each take its place (and are weight gradients, which a
  // zero-bubble schedule defers).
  Kernel wgrad = sim::hardware::gemm("fc2 wgrad", 4096, 11008, tokens, 1, GemmLayout::WGRAD);
  wgrad.weight_gradient = true;
  const auto dw = sim::workload::with_adapters(wgrad, lora);
  CHECK(names(dw) == std::vector<std::string>{"lora B wgrad", "lora A wgrad"});
  CHECK(std::all_of(dw.begin(), dw.end(), [](const Kernel& k) { return k.weight_gradient; }));
  CHECK(dw[0].flops + dw[1].flops == 2.0 * tokens * 16 * (4096 + 11008));
  // Frozen weights outside the blocks: the output layer's gradient and the embedding's scatter-add are not computed.
  Kernel logits = sim::hardware::gemm("logits wgrad", 32000, 4096, tokens, 1, GemmLayout::WGRAD);
  logits.weight_gradient = true;
  CHECK(sim::workload::with_adapters(logits, lora).empty());
  CHECK(sim::workload::with_adapters(sim::hardware::memory_bound("embedding grad scatter-add", 1e6,
                                                                 sim::hardware::MemoryKernel::EMBEDDING,
                                                                 sim::hardware::KernelPass::BACKWARD),
                                     lora)
            .empty());
  // A data gradient on a projection no adapter targets: the base GEMM alone (after its dequantization).
  const auto qv = llama7b({{"lora_rank", 16}, {"lora_targets", {"q_proj", "v_proj"}}});
  const auto few = sim::workload::lora_kernels(qv.model, qv.plan).value();
  const auto down =
      sim::workload::with_adapters(sim::hardware::gemm("fc2 dgrad", tokens, 11008, 4096, 1, GemmLayout::DGRAD), few);
  CHECK(names(down) == std::vector<std::string>{"fc2 dgrad"});
}

TEST_CASE("under LoRA the step reduces and updates the adapters alone")
{
  const nlohmann::json tiny = {
      {"schema", "model/v1"},      {"name", "tiny"},      {"num_layers", 4},   {"hidden_size", 1024},
      {"num_attention_heads", 16}, {"vocab_size", 32000}, {"seq_length", 1024}};
  const auto full = test::build({{"dp", 2}, {"global_batch", 2}}, tiny, "dgx-a100", false);
  const auto lora = test::build({{"dp", 2}, {"global_batch", 2}, {"lora_rank", 8}}, tiny, "dgx-a100", false);
  const auto dp_bytes = [](const test::Built& b) {
    double bytes = 0;
    for (const auto& c : b.tasks.collectives())
      if (c.category == sim::workload::Category::DP)
        bytes += c.bytes;
    return bytes;
  };
  // fp32 gradients of each layer's adapters (a GPT: q, k, v, o, up and down), all-reduced over the two replicas.
  const auto& m = lora.scenario.model;
  const double per_layer = sim::plan::lora_layer_params(m, lora.scenario.plan);
  const auto h = static_cast<double>(m.hidden_size);
  const auto f = static_cast<double>(m.ffn_hidden_size);
  CHECK(per_layer == 8 * (4 * 2 * h + 2 * (h + f)));
  CHECK(dp_bytes(lora) == Approx(4.0 * per_layer * static_cast<double>(m.num_layers)));
  CHECK(dp_bytes(full) > 100 * dp_bytes(lora));
}

TEST_CASE("lora_dropout adds a dropout on each adapter's input (PEFT) or output, forward and backward")
{
  const double tokens = 4096;
  // fc1 (gate and up) forward and data gradient, with the adapters of a plan on gate and up.
  const auto fc1 = [&](const std::string& position) {
    nlohmann::json plan{{"lora_rank", 16}, {"lora_dropout", 0.1}, {"lora_targets", {"gate_proj", "up_proj"}}};
    if (!position.empty())
      plan["lora_dropout_position"] = position;
    const auto s = llama7b(plan);
    const auto lora = sim::workload::lora_kernels(s.model, s.plan).value();
    return std::pair{sim::workload::with_adapters(sim::hardware::gemm("fc1", tokens, 2 * 11008, 4096), lora),
                     sim::workload::with_adapters(
                         sim::hardware::gemm("fc1 dgrad", tokens, 4096, 2 * 11008, 1, GemmLayout::DGRAD), lora)};
  };
  // PEFT's: each adapter drops its own copy of the input (16 bits read and written, a one-byte mask); backward the
  // gradient goes through the mask after A's data gradient.
  const auto [fwd, bwd] = fc1("");
  CHECK(names(fwd) == std::vector<std::string>{"fc1", "lora dropout", "lora A", "lora B", "lora scale and add",
                                               "lora dropout", "lora A", "lora B", "lora scale and add"});
  CHECK(fwd[1].bytes == 5.0 * tokens * 4096);
  CHECK(names(bwd)[4] == "lora dropout backward");
  CHECK(bwd[4].bytes == 5.0 * tokens * 4096);
  // On the output (Megatron-core's and AutoModel's "post"): after B over its output, its gradient before B's.
  const auto [post_fwd, post_bwd] = fc1("output");
  CHECK(names(post_fwd) == std::vector<std::string>{"fc1", "lora A", "lora B", "lora dropout", "lora scale and add",
                                                    "lora A", "lora B", "lora dropout", "lora scale and add"});
  CHECK(post_fwd[3].bytes == 5.0 * tokens * 11008);
  CHECK(names(post_bwd)[2] == "lora dropout backward");
  CHECK(post_bwd[2].bytes == 5.0 * tokens * 11008);
  // Without it (PEFT's default 0: nn.Identity) no kernel; a dropout without adapters is refused.
  const auto none = llama7b({{"lora_rank", 16}});
  CHECK(names(sim::workload::with_adapters(sim::hardware::gemm("fc1", tokens, 2 * 11008, 4096),
                                           sim::workload::lora_kernels(none.model, none.plan).value()))
            .size() == 7);
  CHECK_THAT(test::error_of([] { llama7b({{"lora_dropout", 0.1}}); }), Catch::Contains("a dropout needs adapters"));
  CHECK_THAT(test::error_of([] {
               llama7b({{"lora_rank", 8}, {"lora_dropout_position", "output"}});
             }),
             Catch::Contains("a dropout position needs a dropout"));
  CHECK_THAT(test::error_of([] {
               llama7b({{"lora_rank", 8}, {"lora_dropout", 1.5}});
             }),
             Catch::Contains("/plan/lora_dropout"));
}

TEST_CASE("LoRA's scale over B's output (PEFT, Megatron-core) or on A's rank-r output (AutoModel)")
{
  const double tokens = 4096, r = 16, out = 4096, e = 2;
  const auto kernels = [&](const nlohmann::json& plan, GemmLayout layout) {
    const auto s = llama7b(plan);
    const auto lora = sim::workload::lora_kernels(s.model, s.plan).value();
    const auto base = layout == GemmLayout::FORWARD
                          ? sim::hardware::gemm("attention projection", tokens, out, 4096)
                          : sim::hardware::gemm("projection dgrad", tokens, 4096, out, 1, GemmLayout::DGRAD);
    return sim::workload::with_adapters(base, lora);
  };
  const nlohmann::json o_proj{{"lora_rank", 16}, {"lora_targets", {"o_proj"}}};
  auto rank = o_proj;
  rank["lora_scale_position"] = "rank";
  const auto peft = kernels(o_proj, GemmLayout::FORWARD);
  CHECK(names(peft) == std::vector<std::string>{"attention projection", "lora A", "lora B", "lora scale and add"});
  CHECK(peft[3].bytes == 5 * e * tokens * out); // the scale reads and writes the output, the add reads two, writes one
  const auto automodel = kernels(rank, GemmLayout::FORWARD);
  CHECK(names(automodel) ==
        std::vector<std::string>{"attention projection", "lora A", "lora scale", "lora B", "lora add"});
  CHECK(automodel[2].bytes == 2 * e * tokens * r);
  CHECK(automodel[4].bytes == 3 * e * tokens * out);
  const auto back = kernels(rank, GemmLayout::DGRAD);
  CHECK(names(back) == std::vector<std::string>{"projection dgrad", "lora B dgrad", "lora gradient scale",
                                                "lora A dgrad", "lora input-gradient add"});
  CHECK(back[2].bytes == 2 * e * tokens * r);
  CHECK(names(kernels(o_proj, GemmLayout::DGRAD))[1] == "lora gradient scale"); // over the output gradient
  CHECK_THAT(test::error_of([] {
               llama7b({{"lora_scale_position", "rank"}});
             }),
             Catch::Contains("a scale position needs adapters"));
}

TEST_CASE("QLoRA under ZeRO-3 (FSDP with bitsandbytes' quant storage) gathers the packed 4-bit weights")
{
  const nlohmann::json tiny = {
      {"schema", "model/v1"},      {"name", "tiny"},      {"num_layers", 4},   {"hidden_size", 1024},
      {"num_attention_heads", 16}, {"vocab_size", 32000}, {"seq_length", 1024}};
  const auto gathered = [&](const std::string& base) {
    const auto b = test::build({{"dp", 2},
                                {"global_batch", 2},
                                {"zero_stage", 3},
                                {"lora_rank", 8},
                                {"base_quantization", base},
                                {"recompute", "full"}},
                               tiny, "dgx-a100", false);
    double bytes = 0;
    for (const auto& c : b.tasks.collectives())
      if (c.kind == sim::workload::CollectiveKind::ALL_GATHER && c.category == sim::workload::Category::DP &&
          b.tasks.label_text(c.label).find("zero-3 parameter all-gather") != std::string::npos)
        bytes += c.bytes;
    return std::pair{bytes, b};
  };
  const auto [nf4, q] = gathered("nf4");
  const auto [bf16, l] = gathered("none");
  const auto& m = q.scenario.model;
  const auto lp = sim::model::layer_params(m, sim::model::FfnPart::DENSE);
  const double linear = lp.attention + lp.ffn;
  const double adapters = sim::plan::lora_layer_params(m, q.scenario.plan);
  // Per layer and pass, the 16-bit gather less what 4.127-bit storage saves on the linear weights.
  const double saved_per_layer = (2.0 - sim::plan::base_weight_bytes(sim::plan::BaseQuantization::NF4, 2.0)) * linear;
  const double per_layer = 2.0 * (lp.total() + adapters);
  // Each layer is gathered for its forward and for its backward (which its recomputation runs in): twice.
  const double layer_gathers = (bf16 - nf4) / saved_per_layer;
  CHECK(layer_gathers == Approx(2.0 * static_cast<double>(m.num_layers)));
  CHECK(per_layer > saved_per_layer); // the norms and adapters still travel in 16 bits
}

TEST_CASE("LoRA's model FLOPs leave out the weight gradients: the backward pass is one forward plus the attention core")
{
  const auto s = llama7b({});
  const auto full = sim::model::step_flops(s.model, 4096, 1, sim::model::Recompute::NONE);
  const auto lora = sim::model::step_flops(s.model, 4096, 1, sim::model::Recompute::NONE, {}, true);
  double core = 0;
  for (std::int64_t l = 0; l < s.model.num_layers; ++l)
    core += sim::model::layer_forward_flops(s.model, 4096, 1, l).attention_core();
  CHECK(lora.forward == full.forward);
  CHECK(lora.backward == Approx(full.forward + core));
}

TEST_CASE("LoRA plans outside what is simulated are refused with the reason")
{
  const auto refused = [](nlohmann::json plan) { return test::error_of([&] { llama7b(std::move(plan)); }); };
  CHECK_THAT(refused({{"base_quantization", "nf4"}}), Catch::Contains("a 4-bit base is QLoRA's"));
  CHECK_THAT(refused({{"lora_targets", {"q_proj"}}}), Catch::Contains("adapters need a rank"));
  CHECK_THAT(refused({{"lora_rank", 16}, {"lora_targets", {"qkv"}}}), Catch::Contains("q_proj, k_proj"));
  CHECK_THAT(refused({{"lora_rank", 8192}}), Catch::Contains("exceeds hidden_size=4096"));
  CHECK_THAT(refused({{"lora_rank", 16}, {"lora_targets", {"linear_qkvo"}}}), Catch::Contains("linear_qkv"));
}

namespace {

// Llama-2 7B on one DGX H100 with tensor parallelism `tp`, the rest of the plan as given.
sim::scenario::Scenario llama7b_tp(int tp, nlohmann::json plan)
{
  plan["tp"] = tp;
  plan["pp"] = 1;
  plan["dp"] = 1;
  nlohmann::json doc = {
      {"schema", "scenario/v1"}, {"model", "llama2-7b"}, {"topology", "dgx-h100"}, {"gpus", tp}, {"plan", plan}};
  const auto file = test::write_json(test::scratch_dir() / "lora-tp.json", doc);
  return sim::scenario::load_scenario(file, test::options());
}

} // namespace

TEST_CASE("Megatron's fused linear layers take one adapter each: linear_qkv is q + 2 kv wide, linear_fc1 gate and up")
{
  const auto s = llama7b_tp(1, {{"lora_rank", 32}, {"lora_targets", {"linear_qkv", "linear_fc1"}}});
  using sim::plan::LinearSite;
  const auto qkv = sim::plan::lora_adapters(s.model, s.plan, LinearSite::QKV);
  REQUIRE(qkv.size() == 1);
  CHECK(qkv[0].in == 4096);
  CHECK(qkv[0].out == 3 * 4096);
  const auto fc1 = sim::plan::lora_adapters(s.model, s.plan, LinearSite::FC1);
  REQUIRE(fc1.size() == 1);
  CHECK(fc1[0].out == 2 * 11008);
  CHECK(sim::plan::lora_adapters(s.model, s.plan, LinearSite::FC2).empty());
  // NeMo's per layer: 32 x (4096 + 12288) + 32 x (4096 + 22016).
  CHECK(sim::plan::lora_layer_params(s.model, s.plan) == 32.0 * (4096 + 12288) + 32.0 * (4096 + 22016));
}

TEST_CASE("under tensor parallelism the adapters split as Megatron-core's and add their tensor-parallel collectives")
{
  using sim::workload::CollectiveKind;
  const double tokens = 4096;
  const double r = 32;
  const double t = 2;
  const nlohmann::json targets = {"linear_qkv", "linear_fc2"};
  const auto sp = llama7b_tp(2, {{"lora_rank", 32}, {"lora_targets", targets}, {"sequence_parallel", true}});
  const auto lora = sim::workload::lora_kernels(sp.model, sp.plan).value();
  // Column-parallel QKV: A split by rank (r/t), B by output; A's output all-gathered (T x r, 16 bits).
  const auto qkv = sim::workload::with_adapters(sim::hardware::gemm("qkv", tokens, 3 * 4096 / t, 4096), lora);
  CHECK(names(qkv) == std::vector<std::string>{"qkv", "lora A", "lora B", "lora scale and add"});
  CHECK(qkv[1].flops == 2.0 * tokens * (r / t) * 4096);
  CHECK(qkv[2].flops == 2.0 * tokens * (3 * 4096 / t) * r);
  const auto qkv_comm =
      sim::workload::adapter_collectives(sim::hardware::gemm("qkv", tokens, 3 * 4096 / t, 4096), lora);
  REQUIRE(qkv_comm.size() == 1);
  CHECK(qkv_comm[0].kind == CollectiveKind::ALL_GATHER);
  CHECK(qkv_comm[0].bytes == 2.0 * tokens * r);
  // Row-parallel fc2: A split by input, its partial output all-reduced; B's output gathered whole (T x h).
  const auto fc2 = sim::hardware::gemm("fc2", tokens, 4096, 11008 / t);
  const auto fc2_kernels = sim::workload::with_adapters(fc2, lora);
  CHECK(fc2_kernels[1].flops == 2.0 * tokens * r * (11008 / t));
  CHECK(fc2_kernels[2].flops == 2.0 * tokens * (4096 / t) * r);
  const auto fc2_comm = sim::workload::adapter_collectives(fc2, lora);
  REQUIRE(fc2_comm.size() == 2);
  CHECK(fc2_comm[0].kind == CollectiveKind::ALL_REDUCE);
  CHECK(fc2_comm[0].bytes == 2.0 * tokens * r);
  CHECK(fc2_comm[1].kind == CollectiveKind::ALL_GATHER);
  CHECK(fc2_comm[1].bytes == 2.0 * tokens * 4096);
  // Backward under sequence parallelism: fc2's output gradient gathered back over the sequence, B's input gradient
  // all-reduced; QKV's input gradient joins the layer's reduce-scatter, so only B's.
  const auto fc2_back = sim::workload::adapter_collectives(
      sim::hardware::gemm("fc2 dgrad", tokens, 11008 / t, 4096, 1, GemmLayout::DGRAD), lora);
  REQUIRE(fc2_back.size() == 2);
  CHECK(fc2_back[0].kind == CollectiveKind::ALL_GATHER);
  CHECK(fc2_back[0].bytes == 2.0 * tokens * 4096);
  CHECK(fc2_back[1].bytes == 2.0 * tokens * r);
  const auto qkv_back = sim::workload::adapter_collectives(
      sim::hardware::gemm("qkv dgrad", tokens, 4096, 3 * 4096 / t, 1, GemmLayout::DGRAD), lora);
  REQUIRE(qkv_back.size() == 1);
  CHECK(qkv_back[0].bytes == 2.0 * tokens * r);
  // Without sequence parallelism A's input gradient is a partial sum of its own: all-reduced (T x h).
  const auto no_sp = llama7b_tp(2, {{"lora_rank", 32}, {"lora_targets", targets}});
  const auto plain = sim::workload::lora_kernels(no_sp.model, no_sp.plan).value();
  const auto qkv_back_plain = sim::workload::adapter_collectives(
      sim::hardware::gemm("qkv dgrad", tokens, 4096, 3 * 4096 / t, 1, GemmLayout::DGRAD), plain);
  REQUIRE(qkv_back_plain.size() == 2);
  CHECK(qkv_back_plain[1].bytes == 2.0 * tokens * 4096);
  // Weight gradients and tensor parallelism 1 add none.
  CHECK(sim::workload::adapter_collectives(
            sim::hardware::gemm("fc2 wgrad", 4096, 11008 / t, tokens, 1, GemmLayout::WGRAD), lora)
            .empty());
  const auto one = llama7b_tp(1, {{"lora_rank", 32}, {"lora_targets", targets}});
  CHECK(sim::workload::adapter_collectives(fc2, sim::workload::lora_kernels(one.model, one.plan).value()).empty());
  // Each GPU holds 1/t of the adapters: their gradients and Adam state are split too.
  const auto st = sim::memory::estimate_memory(sp.model, sp.plan, sp.cluster.gpu).per_stage.at(0);
  CHECK(st.trainable_params == Approx(sim::plan::lora_layer_params(sp.model, sp.plan) * 32 / t));
}

TEST_CASE("a step of LoRA under tensor parallelism carries its adapters' collectives on the tensor-parallel group")
{
  const nlohmann::json tiny = {{"schema", "model/v1"},
                               {"name", "tiny"},
                               {"num_layers", 2},
                               {"hidden_size", 1024},
                               {"num_attention_heads", 16},
                               {"vocab_size", 32000},
                               {"seq_length", 1024},
                               {"ffn_hidden_size", 4096},
                               {"ffn_kind", "swiglu"},
                               {"norm", "rmsnorm"},
                               {"position_embedding", "rope"}};
  const auto tp_bytes = [&](const nlohmann::json& targets) {
    nlohmann::json plan = {{"tp", 2}, {"global_batch", 1}, {"sequence_parallel", true}};
    if (!targets.is_null())
      plan.update({{"lora_rank", 16}, {"lora_targets", targets}});
    const auto b = test::build(plan, tiny, "dgx-h100", false);
    double bytes = 0;
    for (const auto& c : b.tasks.collectives())
      if (c.category == sim::workload::Category::TP)
        bytes += c.bytes;
    return bytes;
  };
  const double frozen = tp_bytes(nlohmann::json::array({"linear_qkv"})); // an adapter that talks little
  const double base = tp_bytes(nullptr);
  const double row = tp_bytes(nlohmann::json::array({"linear_qkv", "linear_proj"}));
  // Per layer and micro-batch: QKV's adapter all-gathers T x r forward and all-reduces T x r backward; the
  // projection's all-reduces T x r and gathers T x h forward, gathers T x h and all-reduces T x r backward
  // (16 bits each; the task graph's flows carry each GPU's share, so compare differences).
  const double tokens = 1024;
  const double qkv_adapter = 2 * (2.0 * tokens * 16);
  const double proj_adapter = 2 * (2.0 * tokens * 16) + 2 * (2.0 * tokens * 1024);
  CHECK(frozen > base);
  CHECK((row - frozen) / (frozen - base) == Approx(proj_adapter / qkv_adapter).epsilon(0.01));
}

TEST_CASE("LoRA beside FP8 base GEMMs runs its adapters in 16 bits, and a 4-bit base stays out of FP8 and TP")
{
  const auto s = llama7b_tp(1, {{"lora_rank", 16}, {"precision", "fp8"}});
  const auto lora = sim::workload::lora_kernels(s.model, s.plan).value();
  auto base = sim::hardware::fp8_gemm(sim::hardware::gemm("fc1", 4096, 2 * 11008, 4096));
  const auto ks = sim::workload::with_adapters(base, lora);
  CHECK(ks[0].fp8);
  CHECK_FALSE(ks[1].fp8);
  const auto refused = [](int tp, nlohmann::json plan) { return test::error_of([&] { llama7b_tp(tp, plan); }); };
  CHECK_THAT(refused(1, {{"lora_rank", 16}, {"precision", "fp8"}, {"base_quantization", "nf4"}}),
             Catch::Contains("/plan/base_quantization"));
  CHECK_THAT(refused(2, {{"lora_rank", 16}, {"base_quantization", "nf4"}}), Catch::Contains("no tensor-parallel form"));
}

TEST_CASE("a frozen linear layer keeps no input for its backward: only the adapters' inputs stay")
{
  // Transformer Engine saves a linear layer's input only if its weight requires a gradient; PyTorch's autograd
  // guards the save the same way. Llama-2 7B, 4,096 tokens, no recomputation.
  const double sb = 4096, h = 4096, f = 11008, e = 2;
  const auto full = llama7b({});
  const double trained = sim::memory::layer_activation_bytes(full.model, full.plan);
  const auto qv = llama7b({{"lora_rank", 16}, {"lora_targets", {"q_proj", "v_proj"}}});
  // The QKV, fc1 and fc2 inputs go; the QKV adapters' shared input stays.
  CHECK(sim::memory::layer_activation_bytes(qv.model, qv.plan) == Approx(trained - e * sb * (h + h + f) + e * sb * h));
  const auto all = llama7b({{"lora_rank", 16}});
  CHECK(sim::memory::layer_activation_bytes(all.model, all.plan) == Approx(trained));
  // PEFT's dropout: each adapter keeps its own dropped copy and mask (q and v: two of the hidden size).
  const auto dropped = llama7b({{"lora_rank", 16}, {"lora_targets", {"q_proj", "v_proj"}}, {"lora_dropout", 0.1}});
  CHECK(sim::memory::layer_activation_bytes(dropped.model, dropped.plan) ==
        Approx(trained - e * sb * (h + h + f) + 2 * (e + 1) * sb * h));
  // On the output: the shared input once, a one-byte mask over each adapter's output (q: h, v: the KV width, h).
  const auto post = llama7b({{"lora_rank", 16},
                             {"lora_targets", {"q_proj", "v_proj"}},
                             {"lora_dropout", 0.1},
                             {"lora_dropout_position", "output"}});
  CHECK(sim::memory::layer_activation_bytes(post.model, post.plan) ==
        Approx(trained - e * sb * (h + h + f) + e * sb * h + sb * (h + h)));
  // Under sequence parallelism Megatron-core hands the adapters the gathered norm output: whole, not 1/tp.
  const auto sp = llama7b_tp(2, {{"lora_rank", 16}, {"lora_targets", {"linear_qkv"}}, {"sequence_parallel", true}});
  const auto sp_full = llama7b_tp(2, {{"sequence_parallel", true}});
  CHECK(sim::memory::layer_activation_bytes(sp.model, sp.plan) ==
        Approx(sim::memory::layer_activation_bytes(sp_full.model, sp_full.plan) - e * sb * (2 * h / 2 + f / 2) +
               e * sb * h));
}
