#include "validation/case_conversion.hpp"

#include "model/param_count.hpp"
#include "scenario/document_tree.hpp"
#include "validation/software_choice.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <regex>
#include <set>

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

// The fields a case may hold, per section; anything else is a field simtrain would not understand, so the case is
// refused rather than simulated without it.
const std::set<std::string>& known_fields(std::string_view section)
{
  static const std::map<std::string_view, std::set<std::string>> fields{
      {"",
       {"id", "source", "source_type", "model", "hardware", "plan", "measured", "notes", "confidence",
        "inferred_fields", "derived"}},
      {"model",
       {"name", "params_b", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "seq_len",
        "activation", "norm", "position_embedding", "tie_embeddings", "bias", "dropout"}},
      {"hardware", {"gpu", "num_gpus", "gpus_per_node", "interconnect"}},
      {"plan",
       {"tp",
        "pp",
        "dp",
        "cp",
        "ep",
        "etp",
        "moe_dispatcher",
        "moe_a2a_overlap",
        "moe_fp8_dispatch",
        "vpp",
        "micro_batch",
        "global_batch",
        "global_batch_tokens",
        "grad_accum",
        "recompute",
        "sequence_parallel",
        "zero_stage",
        "distributed_optimizer",
        "precision",
        "grad_reduce_dtype",
        "ddp_impl",
        "pipeline_schedule",
        "scatter_gather_p2p",
        "model_parallel_size",
        "overlap",
        "fsdp_sharding",
        "activation_cpu_offload",
        "framework",
        "attention"}},
  };
  return fields.at(section);
}

std::string unknown_field(const Json& section, std::string_view name)
{
  if (!section.is_object())
    return "";
  for (const auto& [key, value] : section.items())
    if (!known_fields(name).contains(key))
      return name.empty() ? key : fmt::format("{}.{}", name, key);
  return "";
}

class Converter {
 public:
  Converter(const Json& c, std::filesystem::path data_dir) : c_(c), data_dir_(std::move(data_dir))
  {
    out_.id = text(c, "id");
    out_.source = short_source(text(c, "source"));
  }

  CaseConversion convert()
  {
    if (!c_.is_object())
      return unsupported("not a JSON object");
    for (std::string_view part : {"", "model", "hardware", "plan"})
      if (const std::string field = unknown_field(part.empty() ? c_ : section(c_, part), part); !field.empty())
        return unsupported(
            fmt::format("field \"{}\" is not one simtrain reads: it cannot tell what it changes", field));
    const Json& model = section(c_, "model");
    const Json& hardware = section(c_, "hardware");
    const Json& plan = section(c_, "plan");

    const auto hw = match_gpu(text(hardware, "gpu"));
    if (!hw)
      return unsupported(fmt::format("GPU \"{}\" is not in the catalogue", text(hardware, "gpu")));
    out_.gpu = hw->gpu;
    if (const std::string why = refusal(plan); !why.empty())
      return unsupported(why);

    auto model_json = model_of(model);
    if (!model_json)
      return out_;
    auto topology = topology_of(*hw, hardware);
    if (!topology)
      return out_;
    auto base_plan = plan_of(plan, hardware, (*model_json)["seq_length"].get<std::int64_t>());
    if (!base_plan)
      return out_;
    software_of(plan, *base_plan);

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
    if (flag(plan, "activation_cpu_offload").value_or(false))
      return "activation offloading to the CPU is not modelled";
    if (!integer(plan, "tp") || !integer(plan, "pp"))
      return "the source does not give the tensor- and pipeline-parallel sizes";
    return "";
  }

  // A field that is present must be understood; `choices` maps its lowered text's prefix to the scenario's value.
  std::optional<std::string> choice(const Json& j, std::string_view key,
                                    const std::vector<std::pair<std::string, std::string>>& choices)
  {
    const std::string value = lower(text(j, key));
    for (const auto& [prefix, chosen] : choices)
      if (value.starts_with(prefix))
        return chosen;
    std::string expected;
    for (const auto& [prefix, chosen] : choices)
      expected += (expected.empty() ? "" : ", ") + prefix;
    unsupported(fmt::format("{} \"{}\" is not understood (expected one of: {})", key, text(j, key), expected));
    return std::nullopt;
  }

  std::optional<Json> model_of(const Json& model)
  {
    const auto layers = integer(model, "layers");
    const auto hidden = integer(model, "hidden");
    const auto heads = integer(model, "heads");
    const auto vocab = integer(model, "vocab");
    const auto seq = integer(model, "seq_len");
    if (!layers && !hidden && !heads && seq)
      if (auto named = published_model(model, *seq))
        return named;
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
    if (member(model, "kv_heads")) {
      const auto kv = integer(model, "kv_heads");
      if (!kv || *kv == 0 || *heads % *kv != 0) {
        unsupported(fmt::format("kv_heads {} does not divide the {} heads", text(model, "kv_heads"), *heads));
        return std::nullopt;
      }
      m["num_kv_heads"] = *kv;
    }
    if (const auto d = integer(model, "head_dim"))
      m["head_dim"] = *d;
    if (member(model, "activation")) {
      const auto ffn =
          choice(model, "activation",
                 {{"swiglu", "swiglu"}, {"silu", "swiglu"}, {"geglu", "geglu"}, {"gelu", "gelu"}, {"relu", "relu"}});
      if (!ffn)
        return std::nullopt;
      m["ffn_kind"] = *ffn;
    }
    if (member(model, "norm")) {
      const auto norm = choice(model, "norm", {{"rms", "rmsnorm"}, {"layer", "layernorm"}});
      if (!norm)
        return std::nullopt;
      m["norm"] = *norm;
    }
    if (member(model, "position_embedding")) {
      const auto pos = choice(model, "position_embedding",
                              {{"rope", "rope"}, {"rotary", "rope"}, {"alibi", "alibi"}, {"learned", "learned"}});
      if (!pos)
        return std::nullopt;
      m["position_embedding"] = *pos;
    }
    for (const auto& [field, key] :
         {std::pair{"tie_embeddings", "tie_embeddings"}, {"bias", "linear_bias"}, {"dropout", "dropout"}})
      if (member(model, field)) {
        const auto b = flag(model, field);
        if (!b) {
          unsupported(fmt::format("model.{} \"{}\" is not a true/false value", field, text(model, field)));
          return std::nullopt;
        }
        m[key] = *b;
        if (std::string_view(key) == "linear_bias")
          m["qkv_bias"] = *b;
      }
    if (const auto ffn = integer(model, "ffn_hidden"))
      m["ffn_hidden_size"] = *ffn;
    else
      assume(m.contains("ffn_kind") && m["ffn_kind"] == "swiglu" ? "FFN size not given: 8/3 x hidden (SwiGLU)"
                                                                 : "FFN size not given: 4 x hidden");
    if (m.contains("ffn_kind") && m["ffn_kind"] == "swiglu" && !m.contains("ffn_hidden_size"))
      m["ffn_hidden_size"] = (8 * *hidden / 3 + 127) / 128 * 128;
    if (mentions(text(model, "name"), "mpt") || mentions(text(section(c_, "plan"), "framework"), "llm-foundry")) {
      // llm-foundry's benchmark models (scripts/train/yamls/pretrain/mpt-*.yaml): learned positions, biases, no
      // dropout; their published parameter counts reproduce exactly with biases on.
      if (!member(model, "dropout"))
        m["dropout"] = false;
      assume("MPT architecture: learned positions, biases, no dropout, tied embeddings (llm-foundry yamls)");
    }
    if (!check_parameters(model, m))
      return std::nullopt;
    return m;
  }

  // A case that names a published model without its architecture (Megatron-LM's "LLAMA3-70B"): the model preset of
  // that name (letters and digits compared), trained at the case's sequence length; the fields the case does give
  // must agree with it.
  std::optional<Json> published_model(const Json& model, std::int64_t seq)
  {
    const auto key = [](const std::string& name) {
      std::string k;
      for (const char ch : name)
        if (std::isalnum(static_cast<unsigned char>(ch)) != 0)
          k += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      return k;
    };
    const std::string wanted = key(text(model, "name"));
    for (const std::string& preset : scenario::presets(data_dir_, scenario::ReferenceKind::MODEL)) {
      if (wanted.empty() || key(preset) != wanted)
        continue;
      Json m = core::read_json_file(scenario::preset_path(data_dir_, scenario::ReferenceKind::MODEL, preset));
      if (const auto vocab = integer(model, "vocab"); vocab && *vocab != m.value("vocab_size", std::int64_t{0}))
        return std::nullopt;
      m["seq_length"] = seq;
      assume(fmt::format("architecture not given: the published {} (model preset {})", text(model, "name"), preset));
      return m;
    }
    return std::nullopt;
  }

  // The stated parameter count against the architecture as read: a gap means the case holds something simtrain did
  // not read (GQA, a gated FFN, an untied head...), and its time would be off by as much.
  bool check_parameters(const Json& model, const Json& m)
  {
    const auto stated = number(model, "params_b");
    if (!stated || *stated <= 0)
      return true;
    double counted = 0;
    try {
      core::Provenance provenance;
      provenance.add_source("", out_.id);
      counted = model::count_params(model::read_model(core::Node(m, "", provenance))).total / 1e9;
    } catch (const core::InputError& e) {
      unsupported(fmt::format("the model does not describe a transformer simtrain can build: {}", e.what()));
      return false;
    }
    const double gap = counted / *stated - 1.0;
    if (std::abs(gap) > 0.15) {
      unsupported(fmt::format("the architecture as given has {:.2f}B parameters, the case states {}B ({:+.0f}%): "
                              "it holds architecture details the case does not state",
                              counted, text(model, "params_b"), 100.0 * gap));
      return false;
    }
    if (std::abs(gap) > 0.03)
      assume(fmt::format("the architecture as given has {:.2f}B parameters against {}B stated ({:+.1f}%)", counted,
                         text(model, "params_b"), 100.0 * gap));
    return true;
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

  // The global batch in sequences: given as such, as tokens (global_batch_tokens, or a string naming tokens such as
  // "4M tokens"), or from micro-batch x dp x gradient-accumulation steps.
  std::optional<std::int64_t> global_batch(const Json& plan, std::int64_t seq, std::optional<std::int64_t> micro,
                                           std::int64_t dp)
  {
    std::optional<double> tokens = number(plan, "global_batch_tokens");
    const Json* g = member(plan, "global_batch");
    if (g && g->is_string()) {
      static const std::regex count(R"(^\s*([0-9]+(\.[0-9]+)?)\s*([kmb]?)\s*(tokens?)?\s*$)");
      std::smatch match;
      const std::string value = lower(g->get<std::string>());
      if (std::regex_match(value, match, count) && match[4].matched) {
        // "4M tokens" is 4 x 2^20 when that makes whole sequences (1024 x 4096), else 4 x 10^6.
        const int power = match[3] == "k" ? 1 : match[3] == "m" ? 2 : match[3] == "b" ? 3 : 0;
        const double n = std::stod(match[1].str());
        const double binary = n * std::pow(1024.0, power);
        const double decimal = n * std::pow(1000.0, power);
        tokens = std::fmod(binary, static_cast<double>(seq)) == 0.0 ? binary : decimal;
      } else if (!std::regex_match(value, match, count)) {
        return std::nullopt; // a range such as "32..64": measured per batch in a table
      }
    }
    if (tokens) {
      const double sequences = *tokens / static_cast<double>(seq);
      if (sequences < 1 || std::abs(sequences - std::round(sequences)) > 1e-6) {
        unsupported(
            fmt::format("a global batch of {} tokens is not a whole number of {}-token sequences", *tokens, seq));
        return std::nullopt;
      }
      assume(fmt::format("global batch of {} tokens: {} sequences of {}", *tokens, std::llround(sequences), seq));
      return std::llround(sequences);
    }
    if (const auto sequences = integer(plan, "global_batch"))
      return sequences;
    if (const auto steps = integer(plan, "grad_accum"); steps && micro)
      return *micro * dp * *steps;
    return std::nullopt;
  }

  // Expert parallelism: sizes, the token dispatcher, and whether dispatch and combine overlap another micro-batch's
  // compute.
  bool experts_of(const Json& plan, Json& p)
  {
    if (const auto ep = integer(plan, "ep"); ep && *ep > 1)
      p["ep"] = *ep;
    if (const auto etp = integer(plan, "etp"))
      p["etp"] = *etp;
    if (member(plan, "moe_dispatcher")) {
      const auto d =
          choice(plan, "moe_dispatcher",
                 {{"alltoall", "alltoall"}, {"deepep", "deepep"}, {"hybridep", "deepep"}, {"flex", "deepep"}});
      if (!d)
        return false;
      p["moe_dispatcher"] = *d;
    }
    if (const auto overlap = flag(plan, "moe_a2a_overlap"))
      p["moe_a2a_overlap"] = *overlap;
    if (const auto fp8 = flag(plan, "moe_fp8_dispatch"))
      p["moe_fp8_dispatch"] = *fp8;
    return true;
  }

  std::optional<Json> plan_of(const Json& plan, const Json& hardware, std::int64_t seq)
  {
    const std::int64_t tp = *integer(plan, "tp");
    const std::int64_t pp = *integer(plan, "pp");
    const std::int64_t cp = integer(plan, "cp").value_or(1);
    const auto gpus = integer(hardware, "num_gpus");
    auto dp = integer(plan, "dp");
    if (!dp && gpus && *gpus % (tp * pp * cp) == 0)
      dp = *gpus / (tp * pp * cp);
    if (!dp || (gpus && tp * pp * cp * *dp != *gpus)) {
      unsupported(fmt::format("tp x pp x cp x dp does not match the {} GPUs", text(hardware, "num_gpus")));
      return std::nullopt;
    }
    if (const auto mp = integer(plan, "model_parallel_size"); mp && *mp != tp * pp) {
      unsupported(fmt::format("model_parallel_size {} is not tp x pp = {}", *mp, tp * pp));
      return std::nullopt;
    }
    Json p{{"tp", tp}, {"pp", pp}, {"dp", *dp}};
    if (cp > 1)
      p["cp"] = cp; // Megatron-core's default kind: the ring (--cp-comm-type p2p)
    if (!experts_of(plan, p))
      return std::nullopt;

    auto micro = integer(plan, "micro_batch");
    const auto global = global_batch(plan, seq, micro, *dp);
    if (!out_.unsupported.empty())
      return std::nullopt;
    if (!micro && global && integer(plan, "grad_accum")) {
      const std::int64_t per_step = *dp * *integer(plan, "grad_accum");
      if (*global % per_step == 0) {
        micro = *global / per_step;
        assume(fmt::format("micro-batch from global batch / (dp x gradient-accumulation steps): {}", *micro));
      }
    }
    if (!micro)
      assume("micro-batch not given: 1");
    p["micro_batch"] = micro.value_or(1);
    if (global) {
      if (*global % (micro.value_or(1) * *dp) != 0) {
        unsupported(fmt::format("global batch {} is not a multiple of micro-batch x dp = {}", *global,
                                micro.value_or(1) * *dp));
        return std::nullopt;
      }
      if (const auto steps = integer(plan, "grad_accum"); steps && *steps * micro.value_or(1) * *dp != *global) {
        unsupported(fmt::format("global batch {} is not micro-batch x dp x grad_accum = {} x {} x {}", *global,
                                micro.value_or(1), *dp, *steps));
        return std::nullopt;
      }
      p["global_batch"] = *global;
    }

    const std::string schedule = lower(text(plan, "pipeline_schedule"));
    if (const auto v = integer(plan, "vpp"); v && *v > 1) {
      p["schedule"] = "interleaved";
      p["virtual_stages"] = *v;
      if (!schedule.empty() && !mentions(schedule, "interleaved")) {
        unsupported(fmt::format("vpp {} contradicts pipeline_schedule \"{}\"", *v, text(plan, "pipeline_schedule")));
        return std::nullopt;
      }
    } else if (mentions(schedule, "gpipe")) {
      p["schedule"] = "gpipe";
    } else if (mentions(schedule, "dualpipev")) {
      p["schedule"] = "dualpipev";
    } else if (mentions(schedule, "dualpipe")) {
      p["schedule"] = "dualpipe";
    } else if (!schedule.empty() && !mentions(schedule, "1f1b")) {
      unsupported(fmt::format("pipeline_schedule \"{}\" is not understood (1F1B, interleaved, GPipe, DualPipe or "
                              "DualPipeV)",
                              text(plan, "pipeline_schedule")));
      return std::nullopt;
    }

    if (!member(plan, "recompute")) {
      p["recompute"] = "none";
      assume("recomputation not given: none");
    } else if (const auto r =
                   choice(plan, "recompute", {{"full", "full"}, {"selective", "selective"}, {"none", "none"}}))
      p["recompute"] = *r;
    else
      return std::nullopt;

    const int year = latest_date(text(c_, "source")).value_or(YearMonth{}).year;
    // Megatron-LM's examples/llama FP8 table ran train_llama3_8b_h100_fp8.sh (core_r0.12.0), whose settings apply.
    const bool llama_example = mentions(lower(text(c_, "source")), "megatron-lm examples/llama");
    if (const auto sp = flag(plan, "sequence_parallel")) {
      p["sequence_parallel"] = *sp;
    } else if (llama_example) {
      p["sequence_parallel"] = tp > 1;
      if (tp > 1)
        assume("sequence parallelism: on (the example script's --sequence-parallel)");
    } else {
      const bool modern = year >= 2023 && tp > 1;
      p["sequence_parallel"] = modern;
      if (tp > 1)
        assume(modern ? "sequence parallelism not given: on with TP (Megatron-core practice)"
                      : "sequence parallelism not given: off");
    }

    const std::string precision = lower(text(plan, "precision"));
    if (mentions(precision, "fp8")) {
      p["precision"] = "fp8";
      if (mentions(precision, "blockwise") || mentions(precision, "block"))
        p["fp8_recipe"] = "blockwise";
      else if (mentions(precision, "current") || mentions(precision, "tensorwise"))
        p["fp8_recipe"] = "current";
      else
        assume("FP8 scaling not given: delayed (Transformer Engine's default recipe)");
    } else if (mentions(precision, "fp16")) {
      p["precision"] = "fp16";
    } else {
      p["precision"] = "bf16";
      if (!mentions(precision, "bf16"))
        assume("precision not given: bf16");
    }

    const std::string sharding = lower(text(plan, "fsdp_sharding"));
    if (!sharding.empty()) {
      const auto stage =
          choice(plan, "fsdp_sharding", {{"full_shard", "3"}, {"shard_grad_op", "2"}, {"no_shard", "0"}});
      if (!stage)
        return std::nullopt;
      p["zero_stage"] = std::stoi(*stage);
      // Composer's FSDP reduces gradients in fp32 with autocast ("DEFAULT" mixed precision), else in 16 bits ("PURE").
      p["fp32_grad_accumulation"] = precision.starts_with("amp");
    } else if (const auto zero = integer(plan, "zero_stage")) {
      p["zero_stage"] = *zero;
    } else if (flag(plan, "distributed_optimizer").value_or(false) ||
               mentions(text(plan, "overlap"), "overlap-param-gather")) {
      p["distributed_optimizer"] = true;
      if (!flag(plan, "distributed_optimizer"))
        assume("distributed optimizer (implied by --overlap-param-gather)");
    }
    // The example script: the distributed optimizer with overlapped gradient reduction and parameter gather, FP8
    // parameters, gradients reduced in bf16.
    if (llama_example && p["precision"] == "fp8") {
      p["distributed_optimizer"] = true;
      p["overlap_grad_reduce"] = true;
      p["fp8_param_gather"] = true;
      p["overlap_param_gather"] = true;
      p["fp32_grad_accumulation"] = false;
      assume("the example script's settings (examples/llama/train_llama3_8b_h100_fp8.sh): distributed optimizer, "
             "overlapped gradient reduce and parameter gather, --fp8-param-gather, --grad-reduce-in-bf16");
    }
    if (member(plan, "grad_reduce_dtype")) { // Megatron-core's grad_reduce_in_fp32: the gradient buffers' type
      const auto dtype = choice(plan, "grad_reduce_dtype", {{"fp32", "fp32"}, {"bf16", "bf16"}});
      if (!dtype)
        return std::nullopt;
      p["fp32_grad_accumulation"] = *dtype == "fp32";
    }
    if (mentions(text(plan, "overlap"), "overlap-param-gather") && p.value("distributed_optimizer", false))
      p["overlap_param_gather"] = true;
    if (mentions(text(plan, "overlap"), "tp-comm-overlap") && p["sequence_parallel"] == true)
      p["tp_comm_overlap"] = true;

    if (member(plan, "ddp_impl")) {
      const auto ddp = choice(plan, "ddp_impl", {{"local", "local"}, {"torch", "torch"}});
      if (!ddp)
        return std::nullopt;
      p["overlap_grad_reduce"] = *ddp == "torch";
      if (*ddp == "torch")
        p["dp_bucket_size"] = "25MB";
    }
    if (const auto sg = flag(plan, "scatter_gather_p2p"))
      p["pp_scatter_gather"] = *sg;
    return p;
  }

  // The software generation and what the case's framework, date, scripts and notes say about it.
  void software_of(const Json& plan, Json& p)
  {
    const auto choice = choose_software(CaseText{
        text(c_, "source"), text(plan, "framework"), text(c_, "notes"), static_cast<int>(p.value("zero_stage", 0)),
        p.value("fp32_grad_accumulation", p["precision"] != "fp16"), p.value("sequence_parallel", false)});
    for (const auto& [key, value] : choice.plan.items())
      p[key] = value;
    for (const auto& a : choice.assumptions)
      assume(a);
    if (member(plan, "attention")) {
      const auto a = this->choice(plan, "attention",
                                  {{"flash3", "flash3"},
                                   {"flash1", "flash1"},
                                   {"flash", "flash2"},
                                   {"cudnn", "cudnn"},
                                   {"unfused", "unfused"},
                                   {"te", "te"}});
      if (a)
        p["attention"] = *a;
    }
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

    // Only the best-ranked kind of measurement counts in the statistics; the rest restate it. A MoE model's FLOPs
    // per token follow each framework's own counting (which experts, the router, the attention), so its tokens per
    // second, which need no convention, come first.
    const bool moe = scenario["model"].is_object() && scenario["model"].contains("moe");
    const auto rank = [moe](Quantity q) { return moe && q == Quantity::TOKENS_PER_GPU ? 2 : rank_of(q); };
    int best = 9;
    for (const auto& e : base.expectations)
      best = std::min(best, rank(e.quantity));
    for (const auto& run : variants)
      for (const auto& e : run.expectations)
        best = std::min(best, rank(e.quantity));
    const auto mark = [best, &rank](SimulationRun& run) {
      for (auto& e : run.expectations)
        e.primary = rank(e.quantity) == best;
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
      {std::regex("Megatron-Bridge"), "Megatron-Bridge"},
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
