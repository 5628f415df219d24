// The sweep's lower bound as a property: over random valid layouts of every schedule and feature, the bound a sweep
// prunes with never exceeds the step the replay simulates (else a sweep could skip its own winner).
#include "../unit/support.hpp"
#include "run_simtrain.hpp"

#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <map>
#include <random>
#include <vector>

namespace {

// A small dense model and a small MoE one: 16 GPUs simulate in a fraction of a second.
nlohmann::json small_model(bool moe)
{
  nlohmann::json m{{"schema", "model/v1"},
                   {"name", moe ? "small-moe" : "small-dense"},
                   {"num_layers", 8},
                   {"hidden_size", 1024},
                   {"num_attention_heads", 16},
                   {"num_kv_heads", 8},
                   {"vocab_size", 32000},
                   {"seq_length", 2048},
                   {"ffn_kind", "swiglu"},
                   {"norm", "rmsnorm"},
                   {"position_embedding", "rope"}};
  if (moe)
    m["moe"] = {{"num_experts", 16}, {"experts_per_token", 2}, {"expert_ffn_hidden_size", 512}};
  return m;
}

// Random layouts of 16 GPUs, as --vary's composite values (one path list, one value list per layout). Not every draw
// is valid (the sweep says why, and the test counts those it simulated); the generator is std::mt19937 with a fixed
// seed and plain modulo picks, so every platform draws the same layouts.
class Draws {
 public:
  Draws(bool moe, std::uint32_t seed) : moe_(moe), rng_(seed) {}

  std::string paths() const
  {
    std::string p =
        "topology:plan.tp:plan.pp:plan.dp:plan.cp:plan.cp_kind:plan.schedule:plan.virtual_stages:"
        "plan.micro_batch:plan.global_batch:plan.recompute:plan.zero_stage:plan.distributed_optimizer:"
        "plan.sequence_parallel:plan.precision:plan.offload_optimizer:plan.offload_activations:plan.framework";
    if (moe_)
      p += ":plan.ep:plan.etp:plan.moe_dispatcher:plan.moe_a2a_overlap:plan.expert_load_imbalance";
    return p;
  }

  std::string layout()
  {
    const bool pcie = pick(5) == 0; // a box of RTX 4090s (no NVLink, PCIe and host memory) now and then
    const int tp = pcie ? one_of({1, 2}) : one_of({1, 2, 4, 8});
    const int pp = tp == 8 ? one_of({1, 2}) : one_of({1, 2, 4});
    const int cp = moe_ || tp * pp == 16 ? 1 : one_of({1, 1, 2});
    const int dp = 16 / (tp * pp * cp);
    std::string schedule = "1f1b";
    int v = 1;
    if (pp > 1) {
      schedule = one_of<std::string>({"gpipe", "1f1b", "interleaved", "dualpipe", "dualpipev"});
      v = schedule == "gpipe" || schedule == "1f1b" ? 1 : 2;
    }
    const int micro_batch = one_of({1, 2});
    const int m = pp > 1 ? one_of({2 * pp, 3 * pp, 4 * pp}) : one_of({1, 2, 4});
    const int zero = pp > 1 || cp > 1 ? one_of({0, 1}) : one_of({0, 1, 2, 3});
    const bool distributed = zero == 0 && pick(2) == 0;
    const std::string offload = (zero > 0 || distributed) && pick(4) == 0 ? "cpu" : "none";
    std::string l = fmt::format("{}:{}:{}:{}:{}:{}:{}:{}:{}:{}:{}:{}:{}:{}:{}:{}:{}", pcie ? "pcie-4090" : "dgx-h100",
                                tp, pp, dp, cp, one_of<std::string>({"ring", "all_to_all"}), schedule, v, micro_batch,
                                micro_batch * dp * m, one_of<std::string>({"none", "selective", "full"}), zero,
                                distributed, tp > 1 && (moe_ || pick(2) == 0),
                                pcie ? "bf16" : one_of<std::string>({"bf16", "bf16", "fp8"}), offload, pick(6) == 0);
    // The framework's gradient defaults (16-bit or fp32, bucket size, overlap) and its kernels.
    l += ":" + one_of<std::string>({"megatron", "megatron", "deepspeed", "fsdp", "torchtitan"});
    if (moe_) {
      // Whole experts or split like the attention; ep divides the experts and the stage's GPUs over etp.
      const int etp = one_of({1, tp});
      int ep = one_of({1, 2, 4, 8, 16});
      while ((tp * dp) % (etp * ep) != 0)
        ep /= 2;
      l += fmt::format(":{}:{}:{}:{}:{}", ep, etp, etp == 1 ? one_of<std::string>({"alltoall", "deepep"}) : "alltoall",
                       schedule != "gpipe" && pick(3) == 0, ep > 1 ? one_of<std::string>({"1", "1", "1.5"}) : "1");
    }
    return l;
  }

 private:
  std::uint32_t pick(std::uint32_t n) { return static_cast<std::uint32_t>(rng_() % n); }
  template <typename T>
  T one_of(std::initializer_list<T> values)
  {
    return *(values.begin() + pick(static_cast<std::uint32_t>(values.size())));
  }

  bool moe_;
  std::mt19937 rng_;
};

// The rows a sweep simulated, and why it simulated no more (each reason with its count, for a failure's message).
struct Swept {
  nlohmann::json ranked = nlohmann::json::array();
  std::string others;
};

// Sweeps `draws` random layouts of the model with every layout simulated.
Swept sweep_random_layouts(bool moe, int draws, std::uint32_t seed)
{
  auto doc = test::scenario_json("x", {{"tp", 1}, {"pp", 1}, {"dp", 16}, {"global_batch", 16}}, "dgx-h100");
  doc["model"] = small_model(moe);
  doc["gpus"] = 16;
  const auto file = test::write_json(test::scratch_dir() / fmt::format("bound-{}.json", moe ? "moe" : "dense"), doc);
  Draws d(moe, seed);
  std::string values;
  for (int i = 0; i < draws; ++i)
    values += (i ? "," : "") + d.layout();
  const auto r = test::run_shell(fmt::format("{} --log-level off sweep {} --vary {}={} --all --jobs 2 --top 1 "
                                             "--format json -q 2>&1",
                                             SIMTRAIN_BINARY, file.string(), d.paths(), values));
  INFO(r.out.substr(0, 2000));
  REQUIRE(r.status == 0);
  Swept swept;
  std::map<std::string, int> others;
  auto report = nlohmann::json::parse(r.out);
  for (auto& row : report["rows"])
    if (row["outcome"] == "ranked")
      swept.ranked.push_back(std::move(row));
    else
      ++others[row.value("reason", "")];
  for (const auto& [reason, n] : others)
    swept.others += fmt::format("{} x {}\n", n, reason);
  return swept;
}

void check_bounds(const nlohmann::json& rows)
{
  for (const auto& row : rows) {
    INFO(row["label"].get<std::string>());
    INFO("step " << row["step_time_s"].get<double>() << " s, bound " << row["bound_s"].get<double>() << " s");
    CHECK(row["bound_s"].get<double>() > 0);
    CHECK(row["bound_s"].get<double>() <= row["step_time_s"].get<double>());
    CHECK(row["estimate_s"].get<double>() >= row["bound_s"].get<double>());
  }
}

// The median of how far the rows' estimates fall from their simulated steps.
double median_estimate_error(const nlohmann::json& rows)
{
  std::vector<double> errors;
  for (const auto& row : rows)
    errors.push_back(std::abs(row["estimate_s"].get<double>() / row["step_time_s"].get<double>() - 1.0));
  std::sort(errors.begin(), errors.end());
  return errors.empty() ? 1.0 : errors[errors.size() / 2];
}

} // namespace

TEST_CASE("a sweep's bound never exceeds the simulated step in hundreds of random layouts of every schedule and "
          "feature")
{
#ifdef SIMTRAIN_SANITIZED
  constexpr int share = 4; // a quarter of the draws under the sanitizers: the release suite runs them all
#else
  constexpr int share = 1;
#endif
  const auto dense = sweep_random_layouts(false, 400 / share, 20261129);
  const auto moe = sweep_random_layouts(true, 260 / share, 38);
  INFO(dense.others << moe.others);
  CHECK(dense.ranked.size() + moe.ranked.size() >= 500 / share);
  check_bounds(dense.ranked);
  check_bounds(moe.ranked);
  // The estimate beside each row: on these draws (2026-12-07) a median 9.6% off the simulated step (dense) and 16.7%
  // (MoE), shortest under activation offload and on the PCIe box (sim/study/README.md says what it leaves out).
  CHECK(median_estimate_error(dense.ranked) < 0.15);
  CHECK(median_estimate_error(moe.ranked) < 0.25);
}

TEST_CASE("a sweep keeps DualPipe, whose micro-batches each cross half of a GPU's chunks, when it is the best")
{
  // The bound once counted every micro-batch through both of a GPU's chunks (1.7 to 1.9 times DualPipe's step) and
  // pruned its best layout as "at most 17,101 tokens/s" behind 1F1B's 29,558.
  const auto r = test::run_shell(fmt::format(
      "{} --log-level off sweep {}/scenarios/teaching/1f1b.json --vary plan.schedule:plan.virtual_stages=1f1b:1,"
      "dualpipe:2 --vary plan.global_batch=8,16,32 --jobs 1 --top 1 --format json -q",
      SIMTRAIN_BINARY, test::source_dir().string()));
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  std::vector<std::string> first;
  for (const auto& row : j["rows"])
    if (row["rank"] == 1)
      first.push_back(row["label"]);
  CHECK(first == std::vector<std::string>{"schedule=dualpipe virtual_stages=2 global_batch=32"});
}
