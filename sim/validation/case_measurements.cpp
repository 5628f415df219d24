#include "validation/case_measurements.hpp"

#include "core/units.hpp"
#include "scenario/document_tree.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

namespace sim::validation {
namespace {

using core::Json;

// Rank of a measured key: the best-ranked kind present is the case's primary comparison.
int rank_of(Quantity q)
{
  switch (q) {
    case Quantity::LAYER_FORWARD:
    case Quantity::LAYER_BACKWARD:
    case Quantity::STATE_MEMORY:
    case Quantity::ACTIVATION_MEMORY:
    case Quantity::ACTIVATION_SHARE:
      return 0;
    case Quantity::STEP_TIME:
      return 1;
    case Quantity::MFU:
      return 2;
    case Quantity::HARDWARE_FLOPS:
    case Quantity::MODEL_FLOPS:
      return 3;
    case Quantity::TOKENS_PER_GPU:
      return 4;
    case Quantity::LAYER_TOTAL:
    case Quantity::HFU:
      return 9;
    case Quantity::PEAK_MEMORY: // ranked on its own: a case's peak memory counts beside its time
      return 0;
  }
  return 9;
}

std::string why_ignored(const std::string& key)
{
  if (key == "pct_of_peak" || key == "aggregate_pflops")
    return "restates tflops_per_gpu";
  if (key.starts_with("training_days"))
    return "an estimate from the paper's Eq. 4, not a measurement";
  if (key == "overhead_pct")
    return "derived from the layer times";
  if (key == "tokens_per_s")
    return "restates tokens_per_s_per_gpu";
  if (key.starts_with("mfu_palm"))
    return "PaLM's FLOP count; the iteration time is compared instead";
  return "not a quantity simtrain predicts";
}

// Measurements keyed by a variant: activation memory of other recomputation / SP settings relative to this
// case's, or throughput per global batch with and without the pipeline scatter/gather optimisation.
void dictionary(Conversion& conv, const std::string& key, const Json& values, const Json& scenario, Quantity tflops,
                std::vector<SimulationRun>& variants)
{
  if (key == "fig7_activation_pct_of_tp_baseline") {
    // Percentages of the tensor-parallel baseline: no sequence parallelism, no recomputation.
    Json baseline = scenario;
    baseline["plan"]["sequence_parallel"] = false;
    baseline["plan"]["recompute"] = "none";
    baseline["name"] = fmt::format("{}/tp-baseline", conv.id());
    variants.push_back({.name = baseline["name"].get<std::string>(), .scenario = baseline, .simulate = false});
    for (const auto& [variant, value] : values.items()) {
      Json s = scenario;
      auto& p = s["plan"];
      if (variant == "sequence_parallel") {
        p["sequence_parallel"] = true;
        p["recompute"] = "none";
      } else if (variant == "selective") {
        p["sequence_parallel"] = false;
        p["recompute"] = "selective";
      } else if (variant == "seq_plus_selective") {
        p["sequence_parallel"] = true;
        p["recompute"] = "selective";
      } else if (variant == "full_recompute") {
        p["sequence_parallel"] = false;
        p["recompute"] = "full";
      } else {
        conv.out().ignored.push_back(fmt::format("{}/{}: unknown variant", key, variant));
        continue;
      }
      if (!value.is_number())
        continue;
      s["name"] = fmt::format("{}/{}", conv.id(), variant);
      variants.push_back({.name = s["name"].get<std::string>(),
                          .scenario = s,
                          .simulate = false,
                          .baseline = baseline["name"].get<std::string>(),
                          .expectations = {{.quantity = Quantity::ACTIVATION_SHARE,
                                            .measured = value.get<double>() / 100.0,
                                            .key = fmt::format("/measured/{}/{}", key, variant)}}});
    }
    return;
  }
  const bool sg = key.ends_with("_scatter_gather");
  const bool unoptimized = key.ends_with("_unoptimized");
  if (key.starts_with("tflops_per_gpu") && (sg || unoptimized)) {
    for (const auto& [batch, value] : values.items()) {
      if (!value.is_number() || batch.empty() || !std::all_of(batch.begin(), batch.end(), ::isdigit))
        continue;
      Json s = scenario;
      s["plan"]["global_batch"] = std::stoll(batch);
      s["plan"]["pp_scatter_gather"] = sg;
      s["name"] = fmt::format("{}/batch-{}{}", conv.id(), batch, sg ? "" : "-no-scatter-gather");
      variants.push_back({.name = s["name"].get<std::string>(),
                          .scenario = s,
                          .expectations = {{.quantity = tflops,
                                            .measured = value.get<double>() * 1e12,
                                            .key = fmt::format("/measured/{}/{}", key, batch)}}});
    }
    return;
  }
  conv.out().ignored.push_back(fmt::format("{}: {}", key, "a table simtrain does not know how to read"));
}

// The peak a source's MFU divides by, as simtrain's MFU's factor. simtrain divides an FP8 run's FLOP/s by the BF16
// peak; a case whose notes say its source divides by the FP8 peak ("peak ... 1979 (H100 FP8)", "against FP8 peak")
// is scored against the FP8 peak of its GPU preset. Each FP8 case with an MFU lists the convention used.
double peak_scale(Conversion& conv, const Json& scenario)
{
  const Json& measured = section(conv.case_json(), "measured");
  if (scenario["plan"].value("precision", "") != "fp8" || (!member(measured, "mfu") && !member(measured, "hfu")))
    return 1.0;
  const std::string notes = lower(text(conv.case_json(), "notes"));
  if (!mentions(notes, "fp8 peak") && !mentions(notes, "(h100 fp8)")) {
    conv.assume("MFU against the BF16 peak (simtrain's convention for FP8 runs; the case does not say its source "
                "divides by the FP8 peak)");
    return 1.0;
  }
  const auto preset = scenario::preset_path(conv.data_dir(), scenario::ReferenceKind::GPU, conv.out().gpu);
  const Json gpu = core::read_json_file(preset);
  const auto peak = [&gpu](const char* precision) {
    const Json* p = member(section(gpu, "peak_flops"), precision);
    return p && p->is_string() ? core::parse_quantity(p->get<std::string>(), core::Dimension::FLOP_RATE)
                               : std::optional<double>();
  };
  const auto bf16 = peak("bf16");
  const auto fp8 = peak("fp8");
  if (!bf16 || !fp8 || *fp8 <= 0)
    return 1.0;
  conv.assume(fmt::format("MFU against the FP8 peak, as the source divides ({} / {} of the BF16 peak's MFU)",
                          core::format_flop_rate(*bf16), core::format_flop_rate(*fp8)));
  return *bf16 / *fp8;
}

} // namespace

void add_runs(Conversion& conv, const Json& scenario)
{
  const Json& measured = section(conv.case_json(), "measured");
  const bool recomputes = scenario["plan"]["recompute"] != "none";
  const bool has_mfu = number(measured, "mfu").has_value();
  const double gpus = static_cast<double>(integer(section(conv.case_json(), "hardware"), "num_gpus").value_or(1));
  // TFLOP/s per GPU count the recomputation (Eq. 3 of Narayanan et al.) unless the source gives MFU beside it.
  const Quantity tflops = recomputes && !has_mfu ? Quantity::HARDWARE_FLOPS : Quantity::MODEL_FLOPS;

  SimulationRun base{.name = conv.id(), .scenario = scenario};
  std::vector<SimulationRun> variants;
  const auto add = [&base](Quantity q, double value, const std::string& key) {
    base.expectations.push_back({.quantity = q, .measured = value, .key = "/measured/" + key});
  };
  for (const auto& [key, value] : measured.items()) {
    if (value.is_null())
      continue;
    if (value.is_object()) {
      dictionary(conv, key, value, scenario, tflops, variants);
      continue;
    }
    if (!value.is_number()) {
      conv.out().ignored.push_back(fmt::format("{}: not a number", key));
      continue;
    }
    const double v = value.get<double>();
    if (key == "layer_forward_ms")
      add(Quantity::LAYER_FORWARD, v / 1e3, key);
    else if (key == "layer_backward_ms")
      add(Quantity::LAYER_BACKWARD, v / 1e3, key);
    else if (key == "layer_total_ms")
      add(Quantity::LAYER_TOTAL, v / 1e3, key);
    else if (key == "memory_gib_params_grads_optimizer")
      add(Quantity::STATE_MEMORY, v * 1073741824.0, key);
    else if (key == "memory_gib_activations")
      add(Quantity::ACTIVATION_MEMORY, v * 1073741824.0, key);
    else if (key == "iteration_time_s")
      add(Quantity::STEP_TIME, v, key);
    else if (key == "mfu")
      add(Quantity::MFU, v, key);
    else if (key == "hfu")
      add(Quantity::HFU, v, key);
    else if (key == "tflops_per_gpu")
      add(tflops, v * 1e12, key);
    else if (key == "model_tflops_per_gpu")
      add(Quantity::MODEL_FLOPS, v * 1e12, key);
    else if (key == "tokens_per_s_per_gpu")
      add(Quantity::TOKENS_PER_GPU, v, key);
    else if (key == "peak_memory_gib")
      add(Quantity::PEAK_MEMORY, v * 1073741824.0, key);
    else if (key == "peak_memory_gb")
      add(Quantity::PEAK_MEMORY, v * 1e9, key);
    else if (key == "tokens_per_s" && !number(measured, "tokens_per_s_per_gpu"))
      add(Quantity::TOKENS_PER_GPU, v / gpus, key);
    else
      conv.out().ignored.push_back(fmt::format("{}: {}", key, why_ignored(key)));
  }

  // Only the best-ranked kind of measurement counts in the statistics; the rest restate it. A MoE model's FLOPs
  // per token follow each framework's own counting (which experts, the router, the attention), so its tokens per
  // second, which need no convention, come first.
  const bool moe = scenario["model"].is_object() && scenario["model"].contains("moe");
  const auto rank = [moe](Quantity q) { return moe && q == Quantity::TOKENS_PER_GPU ? 2 : rank_of(q); };
  // A peak memory is its own comparison, counted beside the best-ranked of the others.
  int best = 9;
  for (const auto& e : base.expectations)
    if (e.quantity != Quantity::PEAK_MEMORY)
      best = std::min(best, rank(e.quantity));
  for (const auto& run : variants)
    for (const auto& e : run.expectations)
      if (e.quantity != Quantity::PEAK_MEMORY)
        best = std::min(best, rank(e.quantity));
  const auto mark = [best, &rank](SimulationRun& run) {
    for (auto& e : run.expectations)
      e.primary = e.quantity == Quantity::PEAK_MEMORY || rank(e.quantity) == best;
    run.simulate = std::any_of(run.expectations.begin(), run.expectations.end(),
                               [](const Expectation& e) { return aspect_of(e.quantity) == Aspect::TIME; });
  };
  mark(base);
  for (auto& run : variants)
    mark(run);
  const double scale = peak_scale(conv, scenario);
  const auto count_peak_as_source = [scale](SimulationRun& run) {
    for (auto& e : run.expectations)
      e.peak_scale = scale;
  };
  count_peak_as_source(base);
  for (auto& run : variants)
    count_peak_as_source(run);
  // The source's own FLOP count (case schema v2), for MFU and model FLOP/s.
  const Json& model = section(conv.case_json(), "model");
  const auto per_seq = number(model, "model_flops_per_seq");
  const auto seq = integer(model, "seq_len");
  if (per_seq && *per_seq > 0 && seq && *seq > 0) {
    bool used = false;
    const auto count_as_source = [&](SimulationRun& run) {
      for (auto& e : run.expectations)
        if (e.quantity == Quantity::MFU || e.quantity == Quantity::MODEL_FLOPS) {
          e.source_flops_per_token = *per_seq / static_cast<double>(*seq);
          used = true;
        }
    };
    count_as_source(base);
    for (auto& run : variants)
      count_as_source(run);
    if (used)
      conv.assume(
          fmt::format("MFU and model FLOP/s counted as the source counts: {:.4g} FLOPs per sequence", *per_seq));
  }
  if (!base.expectations.empty())
    conv.out().runs.push_back(std::move(base));
  for (auto& run : variants)
    conv.out().runs.push_back(std::move(run));
}

} // namespace sim::validation
