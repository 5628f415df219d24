#include "validation/case_conversion.hpp"

#include "scenario/document_tree.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <regex>

namespace sim::validation {
namespace {

using core::Json;

std::string lower(std::string s)
{
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool mentions(const std::string& text, std::string_view what)
{
  return lower(text).find(what) != std::string::npos;
}

const Json& section(const Json& c, std::string_view key)
{
  static const Json empty = Json::object();
  const auto it = c.is_object() ? c.find(key) : c.end();
  return it != c.end() && it->is_object() ? *it : empty;
}

const Json* member(const Json& j, std::string_view key)
{
  if (!j.is_object())
    return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const Json& j, std::string_view key)
{
  const Json* m = member(j, key);
  return m && m->is_number() ? std::optional<double>(m->get<double>()) : std::nullopt;
}

std::optional<std::int64_t> integer(const Json& j, std::string_view key)
{
  const auto n = number(j, key);
  return n && *n == std::floor(*n) && *n >= 0 ? std::optional<std::int64_t>(static_cast<std::int64_t>(*n))
                                              : std::nullopt;
}

std::string text(const Json& j, std::string_view key)
{
  const Json* m = member(j, key);
  if (!m)
    return "";
  return m->is_string() ? m->get<std::string>() : m->dump();
}

std::optional<bool> flag(const Json& j, std::string_view key)
{
  const Json* m = member(j, key);
  return m && m->is_boolean() ? std::optional<bool>(m->get<bool>()) : std::nullopt;
}

// The latest year 20xx the source names (papers, README commits): which software generation ran the case.
std::optional<int> publication_year(const std::string& source)
{
  static const std::regex year(R"((?:^|[^0-9])(20[1-3][0-9])(?=[^0-9]|$))");
  std::optional<int> latest;
  for (auto it = std::sregex_iterator(source.begin(), source.end(), year); it != std::sregex_iterator(); ++it)
    latest = std::max(latest.value_or(0), std::stoi((*it)[1].str()));
  return latest;
}

struct Hardware {
  std::string gpu;      // GPU preset
  std::string topology; // topology preset with that kind of node
};

std::optional<Hardware> match_gpu(const std::string& name)
{
  const std::string n = lower(name);
  const bool has_40gb = std::regex_search(n, std::regex(R"((^|[^0-9])40 ?gb)"));
  if (mentions(n, "a100"))
    return Hardware{has_40gb ? "a100-sxm4-40gb" : "a100-sxm4-80gb", "dgx-a100"};
  if (mentions(n, "a800"))
    return Hardware{"a800-sxm4-80gb", "hgx-a800"};
  if (mentions(n, "h100"))
    return mentions(n, "pcie") ? std::nullopt : std::optional<Hardware>(Hardware{"h100-sxm5-80gb", "dgx-h100"});
  if (mentions(n, "h800"))
    return Hardware{"h800-sxm5-80gb", "hgx-h800"};
  if (mentions(n, "h200"))
    return Hardware{"h200-sxm-141gb", "dgx-h100"};
  if (mentions(n, "h20"))
    return Hardware{"h20", "hgx-h20"};
  if (mentions(n, "v100"))
    return Hardware{"v100-sxm2-32gb", "dgx-v100"};
  if (mentions(n, "4090"))
    return Hardware{"rtx-4090", "pcie-4090"};
  return std::nullopt;
}

class Converter {
 public:
  Converter(const Json& c, std::filesystem::path data_dir) : c_(c), data_dir_(std::move(data_dir))
  {
    out_.id = text(c, "id");
    out_.source = short_source(text(c, "source"));
    year_ = publication_year(text(c, "source"));
  }

  CaseConversion convert()
  {
    const Json& model = section(c_, "model");
    const Json& hardware = section(c_, "hardware");
    const Json& plan = section(c_, "plan");

    const auto hw = match_gpu(text(hardware, "gpu"));
    if (!hw)
      return unsupported(fmt::format("GPU \"{}\" is not in the catalogue", text(hardware, "gpu")));
    out_.gpu = hw->gpu;
    if (const std::string why = refusal(plan); !why.empty())
      return unsupported(why);

    auto model_json = model_of(model, plan);
    if (!model_json)
      return out_;
    auto topology = topology_of(*hw, hardware);
    if (!topology)
      return out_;
    auto base_plan = plan_of(plan, hardware);
    if (!base_plan)
      return out_;

    Json scenario{{"schema", "scenario/v1"},
                  {"name", out_.id},
                  {"description", fmt::format("{} ({}), converted by simtrain validate", out_.id, out_.source)},
                  {"model", *model_json},
                  {"topology", *topology},
                  {"plan", *base_plan}};
    expectations(section(c_, "measured"), scenario);
    if (out_.runs.empty() && out_.unsupported.empty())
      return unsupported("nothing measured that simtrain predicts");
    return out_;
  }

 private:
  CaseConversion unsupported(std::string why)
  {
    out_.unsupported = std::move(why);
    out_.runs.clear();
    return out_;
  }

  void assume(std::string what) { out_.assumptions.push_back(std::move(what)); }

  // Plans and precisions simtrain does not model.
  std::string refusal(const Json& plan) const
  {
    if (mentions(text(plan, "precision"), "fp8"))
      return fmt::format("FP8 training is not modelled (precision \"{}\")", text(plan, "precision"));
    if (integer(plan, "cp").value_or(1) > 1)
      return fmt::format("context parallelism (cp={}) is not modelled", text(plan, "cp"));
    if (integer(plan, "ep").value_or(1) > 1)
      return fmt::format("expert parallelism (ep={}) is not modelled", text(plan, "ep"));
    if (flag(plan, "activation_cpu_offload").value_or(false))
      return "activation offloading to the CPU is not modelled";
    if (!integer(plan, "tp") || !integer(plan, "pp"))
      return "the source does not give the tensor- and pipeline-parallel sizes";
    return "";
  }

  std::optional<Json> model_of(const Json& model, const Json& plan)
  {
    const auto layers = integer(model, "layers");
    const auto hidden = integer(model, "hidden");
    const auto heads = integer(model, "heads");
    const auto vocab = integer(model, "vocab");
    const auto seq = integer(model, "seq_len");
    if (!layers || !hidden || !heads || !vocab || !seq) {
      unsupported("the model's architecture is not given (layers, hidden, heads, vocab, seq_len)");
      return std::nullopt;
    }
    Json m{{"schema", "model/v1"},
           {"name", text(model, "name").empty() ? out_.id : text(model, "name")},
           {"num_layers", *layers},
           {"hidden_size", *hidden},
           {"num_attention_heads", *heads},
           {"vocab_size", *vocab},
           {"seq_length", *seq}};
    if (const auto ffn = integer(model, "ffn_hidden"))
      m["ffn_hidden_size"] = *ffn;
    else
      assume("FFN size not given: 4 x hidden");
    if (mentions(text(model, "name"), "mpt") || mentions(text(plan, "framework"), "llm-foundry")) {
      // llm-foundry's benchmark models: their parameter counts grow with the sequence length, so learned positions.
      m["qkv_bias"] = false;
      m["linear_bias"] = false;
      m["dropout"] = false;
      assume("MPT architecture: no biases, no dropout, tied embeddings (llm-foundry)");
    }
    return m;
  }

  std::optional<Json> topology_of(const Hardware& hw, const Json& hardware)
  {
    const auto path = scenario::preset_path(data_dir_, scenario::ReferenceKind::TOPOLOGY, hw.topology);
    Json topology = core::read_json_file(path);
    bool changed = false;
    if (topology["node"]["gpu"] != hw.gpu) {
      topology["node"]["gpu"] = hw.gpu;
      changed = true;
    }
    const auto per_node = integer(hardware, "gpus_per_node");
    if (per_node && *per_node != topology["node"]["gpus"].get<std::int64_t>()) {
      unsupported(fmt::format("{} GPUs per node: no such node among the topology presets", *per_node));
      return std::nullopt;
    }
    const std::string link = lower(text(hardware, "interconnect"));
    std::smatch total;
    if (std::regex_search(link, total, std::regex(R"(([0-9]+(\.[0-9]+)?) ?gbps node)"))) {
      const double per_nic = std::stod(total[1].str()) / topology["node"]["nics"]["count"].get<double>();
      topology["node"]["nics"]["bandwidth"] = fmt::format("{}Gbps", per_nic);
      if (mentions(link, "roce"))
        topology["node"]["nics"]["kind"] = "ethernet";
      changed = true;
    } else if (link.empty() || mentions(link, "not stated")) {
      assume(fmt::format("interconnect not stated: the {} preset", hw.topology));
    }
    if (!changed)
      return Json(hw.topology);
    topology["name"] = fmt::format("{} ({})", hw.topology, out_.id);
    return topology;
  }

  std::optional<Json> plan_of(const Json& plan, const Json& hardware)
  {
    const std::int64_t tp = *integer(plan, "tp");
    const std::int64_t pp = *integer(plan, "pp");
    const auto gpus = integer(hardware, "num_gpus");
    auto dp = integer(plan, "dp");
    if (!dp && gpus && *gpus % (tp * pp) == 0)
      dp = *gpus / (tp * pp);
    if (!dp || (gpus && tp * pp * *dp != *gpus)) {
      unsupported(fmt::format("tp x pp x dp does not match the {} GPUs", text(hardware, "num_gpus")));
      return std::nullopt;
    }
    Json p{{"tp", tp}, {"pp", pp}, {"dp", *dp}};

    const auto micro = integer(plan, "micro_batch");
    if (!micro)
      assume("micro-batch not given: 1");
    p["micro_batch"] = micro.value_or(1);
    if (const auto global = integer(plan, "global_batch")) {
      if (*global % (micro.value_or(1) * *dp) != 0) {
        unsupported(fmt::format("global batch {} is not a multiple of micro-batch x dp = {}", *global,
                                micro.value_or(1) * *dp));
        return std::nullopt;
      }
      p["global_batch"] = *global;
    }

    if (const auto v = integer(plan, "vpp"); v && *v > 1) {
      p["schedule"] = "interleaved";
      p["virtual_stages"] = *v;
    }

    const std::string recompute = lower(text(plan, "recompute"));
    if (recompute.starts_with("full"))
      p["recompute"] = "full";
    else if (recompute.starts_with("selective"))
      p["recompute"] = "selective";
    else if (recompute.starts_with("none"))
      p["recompute"] = "none";
    else {
      p["recompute"] = "none";
      assume("recomputation not given: none");
    }

    if (const auto sp = flag(plan, "sequence_parallel")) {
      p["sequence_parallel"] = *sp;
    } else {
      const bool modern = year_.value_or(0) >= 2023 && tp > 1;
      p["sequence_parallel"] = modern;
      if (tp > 1)
        assume(modern ? "sequence parallelism not given: on with TP (Megatron-core practice)"
                      : "sequence parallelism not given: off");
    }

    const std::string precision = lower(text(plan, "precision"));
    if (mentions(precision, "fp16"))
      p["precision"] = "fp16";
    else {
      p["precision"] = "bf16";
      if (!mentions(precision, "bf16"))
        assume("precision not given: bf16");
    }

    // FlashAttention (mid-2022) reached Megatron-LM and llm-foundry in 2023; earlier runs used unfused attention.
    const bool flash = mentions(text(plan, "framework"), "flashattention") || year_.value_or(0) >= 2023;
    p["flash_attention"] = flash;
    if (!mentions(text(plan, "framework"), "flashattention"))
      assume(flash ? "fused (flash) attention, as in 2023+ software" : "unfused attention, as in 2021-22 software");

    const std::string sharding = lower(text(plan, "fsdp_sharding"));
    if (!sharding.empty()) {
      p["zero_stage"] = sharding == "full_shard" ? 3 : sharding == "shard_grad_op" ? 2 : 0;
      // Composer's FSDP reduces gradients in fp32 with autocast ("DEFAULT" mixed precision), else in 16 bits ("PURE").
      p["fp32_grad_accumulation"] = precision.starts_with("amp");
    } else if (const auto zero = integer(plan, "zero_stage")) {
      p["zero_stage"] = *zero;
    } else if (mentions(text(plan, "overlap"), "overlap-param-gather")) {
      p["distributed_optimizer"] = true;
      p["overlap_param_gather"] = true;
      assume("distributed optimizer (implied by --overlap-param-gather)");
    }

    if (mentions(text(plan, "overlap"), "tp-comm-overlap") && p["sequence_parallel"] == true)
      p["tp_comm_overlap"] = true;

    const std::string ddp = lower(text(plan, "ddp_impl"));
    if (ddp == "local") {
      p["overlap_grad_reduce"] = false;
    } else if (ddp == "torch") {
      p["overlap_grad_reduce"] = true;
      p["dp_bucket_size"] = "25MB";
    }
    if (const auto sg = flag(plan, "scatter_gather_p2p"))
      p["pp_scatter_gather"] = *sg;
    return p;
  }

  // Rank of a measured key: the best-ranked kind present is the case's primary comparison.
  static int rank_of(Quantity q)
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
    }
    return 9;
  }

  void expectations(const Json& measured, const Json& scenario)
  {
    const bool recomputes = scenario["plan"]["recompute"] != "none";
    const bool has_mfu = number(measured, "mfu").has_value();
    const double gpus = static_cast<double>(integer(section(c_, "hardware"), "num_gpus").value_or(1));
    // TFLOP/s per GPU count the recomputation (Eq. 3 of Narayanan et al.) unless the source gives MFU beside it.
    const Quantity tflops = recomputes && !has_mfu ? Quantity::HARDWARE_FLOPS : Quantity::MODEL_FLOPS;

    SimulationRun base{out_.id, scenario, true, "", {}};
    std::vector<SimulationRun> variants;
    const auto add = [&base](Quantity q, double value, const std::string& key) {
      base.expectations.push_back({q, value, "/measured/" + key, true});
    };
    for (const auto& [key, value] : measured.items()) {
      if (value.is_null())
        continue;
      if (value.is_object()) {
        dictionary(key, value, scenario, tflops, variants);
        continue;
      }
      if (!value.is_number()) {
        out_.ignored.push_back(fmt::format("{}: not a number", key));
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
      else if (key == "tokens_per_s" && !number(measured, "tokens_per_s_per_gpu"))
        add(Quantity::TOKENS_PER_GPU, v / gpus, key);
      else
        out_.ignored.push_back(fmt::format("{}: {}", key, why_ignored(key)));
    }

    // Only the best-ranked kind of measurement counts in the statistics; the rest restate it.
    int best = 9;
    for (const auto& e : base.expectations)
      best = std::min(best, rank_of(e.quantity));
    for (const auto& run : variants)
      for (const auto& e : run.expectations)
        best = std::min(best, rank_of(e.quantity));
    const auto mark = [best](SimulationRun& run) {
      for (auto& e : run.expectations)
        e.primary = rank_of(e.quantity) == best;
      run.simulate = std::any_of(run.expectations.begin(), run.expectations.end(), [](const Expectation& e) {
        return e.quantity != Quantity::STATE_MEMORY && e.quantity != Quantity::ACTIVATION_MEMORY &&
               e.quantity != Quantity::ACTIVATION_SHARE;
      });
    };
    mark(base);
    for (auto& run : variants)
      mark(run);
    if (!base.expectations.empty())
      out_.runs.push_back(std::move(base));
    for (auto& run : variants)
      out_.runs.push_back(std::move(run));
  }

  static std::string why_ignored(const std::string& key)
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
  void dictionary(const std::string& key, const Json& values, const Json& scenario, Quantity tflops,
                  std::vector<SimulationRun>& variants)
  {
    if (key == "fig7_activation_pct_of_tp_baseline") {
      // Percentages of the tensor-parallel baseline: no sequence parallelism, no recomputation.
      Json baseline = scenario;
      baseline["plan"]["sequence_parallel"] = false;
      baseline["plan"]["recompute"] = "none";
      baseline["name"] = fmt::format("{}/tp-baseline", out_.id);
      variants.push_back({baseline["name"], baseline, false, "", {}});
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
          out_.ignored.push_back(fmt::format("{}/{}: unknown variant", key, variant));
          continue;
        }
        if (!value.is_number())
          continue;
        s["name"] = fmt::format("{}/{}", out_.id, variant);
        variants.push_back({s["name"],
                            s,
                            false,
                            baseline["name"],
                            {{Quantity::ACTIVATION_SHARE, value.get<double>() / 100.0,
                              fmt::format("/measured/{}/{}", key, variant), true}}});
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
        s["name"] = fmt::format("{}/batch-{}{}", out_.id, batch, sg ? "" : "-no-scatter-gather");
        variants.push_back({s["name"],
                            s,
                            true,
                            "",
                            {{tflops, value.get<double>() * 1e12, fmt::format("/measured/{}/{}", key, batch), true}}});
      }
      return;
    }
    out_.ignored.push_back(fmt::format("{}: {}", key, "a table simtrain does not know how to read"));
  }

  const Json& c_;
  std::filesystem::path data_dir_;
  CaseConversion out_;
  std::optional<int> year_;
};

} // namespace

std::string_view quantity_name(Quantity q)
{
  switch (q) {
    case Quantity::STEP_TIME:
      return "iteration time";
    case Quantity::MFU:
      return "MFU";
    case Quantity::HFU:
      return "HFU";
    case Quantity::MODEL_FLOPS:
      return "model TFLOP/s per GPU";
    case Quantity::HARDWARE_FLOPS:
      return "TFLOP/s per GPU (with recompute)";
    case Quantity::TOKENS_PER_GPU:
      return "tokens/s per GPU";
    case Quantity::LAYER_FORWARD:
      return "layer forward";
    case Quantity::LAYER_BACKWARD:
      return "layer backward";
    case Quantity::LAYER_TOTAL:
      return "layer forward+backward";
    case Quantity::STATE_MEMORY:
      return "layers' weights+grads+optimizer";
    case Quantity::ACTIVATION_MEMORY:
      return "layers' activation memory";
    case Quantity::ACTIVATION_SHARE:
      return "layers' activations vs baseline";
  }
  return "?";
}

Aspect aspect_of(Quantity q)
{
  const bool memory =
      q == Quantity::STATE_MEMORY || q == Quantity::ACTIVATION_MEMORY || q == Quantity::ACTIVATION_SHARE;
  return memory ? Aspect::MEMORY : Aspect::TIME;
}

std::string short_source(const std::string& source)
{
  static const std::vector<std::pair<std::regex, std::string>> known{
      {std::regex("FP8 Performance"), "Megatron-LM FP8"},
      {std::regex("SC21.*Table 1"), "SC21 Table 1"},
      {std::regex("SC21.*Table 2"), "SC21 Table 2"},
      {std::regex("SC21.*Sec\\. ?5\\.1"), "SC21 Sec. 5.1"},
      {std::regex("SC21.*Figure 18"), "SC21 Fig. 18"},
      {std::regex("Korthikanti.*Table 4"), "Korthikanti Table 4"},
      {std::regex("Korthikanti.*Figure"), "Korthikanti memory"},
      {std::regex("Megatron-Turing|MT-NLG"), "MT-NLG"},
      {std::regex("Megatron-LM README"), "Megatron-LM H100"},
      {std::regex("llm-foundry.*A100"), "MosaicML A100"},
      {std::regex("llm-foundry.*H100"), "MosaicML H100"},
      {std::regex("llm-foundry"), "MosaicML"},
  };
  for (const auto& [pattern, name] : known)
    if (std::regex_search(source, pattern))
      return name;
  std::string s = source.substr(0, source.find_first_of(",("));
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s.size() > 40 ? s.substr(0, 40) : s;
}

CaseConversion convert_case(const core::Json& c, const std::filesystem::path& data_dir)
{
  return Converter(c, data_dir).convert();
}

} // namespace sim::validation
