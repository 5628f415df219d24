#include "core/document.hpp"
#include "model/flops.hpp"
#include "model/model_spec.hpp"
#include "model/param_count.hpp"

#include "support.hpp"

#include <cmath>

using sim::model::ModelSpec;

namespace {

ModelSpec load_model(const std::filesystem::path& file)
{
  sim::core::Provenance prov;
  prov.add_source("", file.string());
  const auto json = sim::core::read_json_file(file);
  return sim::model::read_model(sim::core::Node(json, "", prov));
}

// Half a unit of the last significant digit of a published figure: "1.7B" is exact to +-0.05B.
double rounding_of(double published)
{
  double unit = std::pow(10.0, std::floor(std::log10(published)));
  while (std::fabs(std::round(published / unit) * unit - published) > 1e-6 * unit)
    unit /= 10.0;
  return unit / 2.0;
}

std::vector<std::filesystem::path> model_presets()
{
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(test::source_dir() / "models"))
    if (e.path().extension() == ".json")
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

} // namespace

TEST_CASE("every model preset's parameter count is within 1% of the published one (or of its printed precision)")
{
  const auto files = model_presets();
  REQUIRE(files.size() >= 19);
  for (const auto& file : files) {
    const ModelSpec m = load_model(file);
    INFO(file.filename().string());
    REQUIRE(m.published_params);
    const double published = *m.published_params;
    const double computed = sim::model::count_params(m).total;
    const double tolerance = std::max(0.01 * published, rounding_of(published));
    CHECK(std::fabs(computed - published) <= tolerance);
    if (m.published_active_params) { // counted with the word embedding, or without it (DeepSeek, gpt-oss)
      const auto p = sim::model::count_params(m);
      const double active = *m.published_active_params;
      const double slack = std::max(0.02 * active, rounding_of(active));
      CHECK(std::min(std::fabs(p.active - active), std::fabs(p.active - p.word_embedding - active)) <= slack);
    }
  }
}

TEST_CASE("the rounding of a published figure follows its digits")
{
  CHECK(rounding_of(1.7e9) == Approx(0.05e9));
  CHECK(rounding_of(145.6e9) == Approx(0.05e9));
  CHECK(rounding_of(1008e9) == Approx(0.5e9));
  CHECK(rounding_of(6738415616.0) == Approx(0.5));
}

TEST_CASE("Llama-2 7B has exactly the checkpoint's 6,738,415,616 parameters")
{
  const auto p = sim::model::count_params(load_model(test::source_dir() / "models/llama2-7b.json"));
  CHECK(p.total == 6738415616.0);
  CHECK(p.lm_head == 32000.0 * 4096.0);
}

TEST_CASE("step FLOPs equal Narayanan et al.'s closed form for dense GPTs, with and without recomputation")
{
  for (const char* name : {"sc21-gpt-1.7b", "sc21-gpt-145.6b", "sc21-gpt-1008b", "gpt3-175b", "mt-nlg-530b"}) {
    INFO(name);
    const ModelSpec m = load_model(test::source_dir() / "models" / (std::string(name) + ".json"));
    const double B = 1536;
    const auto s = static_cast<double>(m.seq_length);
    const auto L = static_cast<double>(m.num_layers);
    const auto h = static_cast<double>(m.hidden_size);
    const auto V = static_cast<double>(m.vocab_size);
    const double with_recompute = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
    const double without = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
    CHECK(sim::model::step_flops(m, s, B, sim::model::Recompute::FULL).hardware() ==
          Approx(with_recompute).epsilon(0.01));
    CHECK(sim::model::step_flops(m, s, B, sim::model::Recompute::NONE).hardware() == Approx(without).epsilon(0.01));
  }
}

TEST_CASE("model FLOPs per token are 6 x matmul parameters plus the attention term")
{
  const ModelSpec m = load_model(test::source_dir() / "models/llama3-8b.json");
  const auto p = sim::model::count_params(m);
  const double s = 8192;
  const double matmul_params = static_cast<double>(m.num_layers) * (p.layer.attention + p.layer.ffn) + p.lm_head;
  const double attention = 12.0 * s * static_cast<double>(m.q_width()) * static_cast<double>(m.num_layers);
  const auto step = sim::model::step_flops(m, s, 1, sim::model::Recompute::NONE);
  CHECK(step.model() / s == Approx(6 * matmul_params + attention).epsilon(1e-9));
}

TEST_CASE("a multi-token-prediction module adds a layer like the last, two norms, a final norm and a 2h x h "
          "projection, and one more output layer's FLOPs (Megatron-LM's count)")
{
  ModelSpec m = load_model(test::source_dir() / "models/deepseek-v3.json");
  const auto base = sim::model::count_params(m);
  const auto base_flops = sim::model::step_flops(m, 4096, 1, sim::model::Recompute::NONE);
  m.mtp_layers = 1;
  const auto with = sim::model::count_params(m);
  const double h = 7168;
  CHECK(with.total - base.total == Approx(base.moe_layer.total() + 3 * h + 2 * h * h)); // the last layer is MoE
  CHECK(with.total - base.total == Approx(11.5e9).epsilon(0.01)); // the checkpoint's 14B less its embedding and head
  const auto flops = sim::model::step_flops(m, 4096, 1, sim::model::Recompute::NONE);
  const double projection = 2.0 * 4096 * 2 * h * h;
  CHECK(flops.model() - base_flops.model() ==
        Approx(3 * (projection + sim::model::layer_forward_flops(m, 4096, 1, 60).total() +
                    sim::model::logits_forward_flops(m, 4096, 1))));
}

TEST_CASE("selective recomputation redoes exactly the attention core, full recomputation the whole layer")
{
  const ModelSpec m = load_model(test::source_dir() / "models/gpt3-175b.json");
  const auto layer = sim::model::layer_forward_flops(m, 2048, 8);
  const auto none = sim::model::step_flops(m, 2048, 8, sim::model::Recompute::NONE);
  const auto selective = sim::model::step_flops(m, 2048, 8, sim::model::Recompute::SELECTIVE);
  const auto full = sim::model::step_flops(m, 2048, 8, sim::model::Recompute::FULL);
  CHECK(selective.hardware() - none.hardware() == Approx(96 * layer.attention_core()));
  CHECK(full.hardware() - none.hardware() == Approx(96 * layer.total()));
  CHECK(none.backward == Approx(2 * none.forward));
}

TEST_CASE("grouped-query attention shrinks the K and V projections and gated FFNs have three matrices")
{
  ModelSpec m;
  m.num_layers = 1;
  m.hidden_size = 4096;
  m.num_attention_heads = 32;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.ffn_hidden_size = 14336;
  m.ffn_kind = sim::model::FfnKind::SWIGLU;
  m.vocab_size = 32000;
  m.seq_length = 4096;
  m.qkv_bias = m.linear_bias = false;
  const auto p = sim::model::count_params(m);
  CHECK(p.layer.attention == 4096.0 * (4096 + 2 * 1024) + 4096.0 * 4096);
  CHECK(p.layer.ffn == 3.0 * 4096 * 14336);
  const auto f = sim::model::layer_forward_flops(m, 4096, 1);
  CHECK(f.qkv == Approx(2.0 * 4096 * 4096 * (4096 + 2 * 1024)));
}

TEST_CASE("a model whose heads do not divide evenly is rejected")
{
  const auto dir = test::scratch_dir();
  nlohmann::json doc = {{"schema", "model/v1"},     {"name", "odd"},     {"num_layers", 2},  {"hidden_size", 1000},
                        {"num_attention_heads", 3}, {"vocab_size", 100}, {"seq_length", 128}};
  const auto file = test::write_json(dir / "odd.json", doc);
  CHECK_THAT(test::error_of([&] { load_model(file); }),
             Catch::Contains("/hidden_size: is not divisible by num_attention_heads=3"));
  doc["hidden_size"] = 960;
  doc["num_kv_heads"] = 2;
  test::write_json(file, doc);
  CHECK_THAT(test::error_of([&] { load_model(file); }),
             Catch::Contains("/num_kv_heads: does not divide num_attention_heads=3"));
}
