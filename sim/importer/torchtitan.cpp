#include "importer/torchtitan.hpp"

#include "core/document.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <string_view>
#include <toml++/toml.h>

namespace sim::importer {
namespace {

core::Json to_json(const toml::node& node)
{
  if (const auto* table = node.as_table()) {
    core::Json object = core::Json::object();
    for (const auto& [key, value] : *table)
      object[std::string(key.str())] = to_json(value);
    return object;
  }
  if (const auto* array = node.as_array()) {
    core::Json list = core::Json::array();
    for (const auto& value : *array)
      list.push_back(to_json(value));
    return list;
  }
  if (const auto v = node.value_exact<std::int64_t>())
    return *v;
  if (const auto v = node.value_exact<double>())
    return *v;
  if (const auto v = node.value_exact<bool>())
    return *v;
  if (const auto v = node.value_exact<std::string>())
    return *v;
  std::ostringstream text; // dates and times: as TOML writes them
  node.visit([&text](const auto& n) { text << n; });
  return text.str();
}

bool member(std::string_view key, std::initializer_list<std::string_view> keys)
{
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// simtrain's presets for torchtitan's model names and flavors.
std::string preset_for(const std::string& name, const std::string& flavor)
{
  static const std::initializer_list<std::array<std::string_view, 3>> presets{
      {"llama3", "8B", "llama3-8b"},         {"llama3", "70B", "llama3-70b"},
      {"llama3", "405B", "llama3-405b"},     {"llama2", "7B", "llama2-7b"},
      {"llama2", "13B", "llama2-13b"},       {"llama2", "70B", "llama2-70b"},
      {"qwen3", "30B-A3B", "qwen3-30b-a3b"}, {"qwen3", "235B-A22B", "qwen3-235b-a22b"},
      {"deepseek_v3", "671B", "deepseek-v3"}};
  for (const auto& p : presets)
    if (p[0] == name && p[1] == flavor)
      return std::string(p[2]);
  return {};
}

class TorchtitanImport {
 public:
  TorchtitanImport(const core::Node& job, Imported& out) : job_(job), out_(out) {}

  // A section's member, if the section and the member are there.
  std::optional<core::Node> find(std::string_view section, std::string_view key) const
  {
    const auto s = job_.json().find(section);
    if (s == job_.json().end() || !s->is_object() || !s->contains(key))
      return std::nullopt;
    return job_.element_of(std::string(section)).element_of(std::string(key));
  }
  std::int64_t integer(std::string_view section, std::string_view key, std::int64_t fallback, std::int64_t min,
                       std::int64_t max) const
  {
    const auto n = find(section, key);
    return n ? n->as_integer(min, max) : fallback;
  }
  std::string text(std::string_view section, std::string_view key, const std::string& fallback) const
  {
    const auto n = find(section, key);
    return n ? n->as_string() : fallback;
  }

  // Every key of the file, in one of three piles; the ones read for the scenario are `used`.
  void sort_out(const std::vector<std::string>& used)
  {
    for (const auto& [section, content] : job_.json().items()) {
      const core::Node s = job_.element_of(section);
      if (member(section, {"job", "profiling", "metrics", "checkpoint", "validation", "comm", "lr_scheduler",
                           "fault_tolerance", "memory_estimation", "debug", "experimental"})) {
        out_.no_effect.push_back(Setting{fmt::format("[{}]", section), ""});
        continue;
      }
      if (section == "compile") {
        out_.no_effect.push_back(Setting{"[compile]", "simtrain's kernels already fuse norms and activations as "
                                                      "Transformer Engine does"});
        continue;
      }
      if (section == "quantize" || section == "float8" || section == "mx") {
        out_.no_effect.push_back(Setting{fmt::format("[{}]", section), "read with [model] converters"});
        continue;
      }
      if (!content.is_object()) {
        out_.not_simulated.push_back(Setting{spelt(s), "not understood, left out of the scenario"});
        continue;
      }
      for (const auto& [key, value] : content.items()) {
        const std::string pointer = core::pointer_append(s.pointer(), key);
        if (std::find(used.begin(), used.end(), pointer) != used.end())
          continue;
        const core::Node n = s.element_of(key);
        if (member(key, {"lr",
                         "eps",
                         "weight_decay",
                         "beta1",
                         "beta2",
                         "steps",
                         "max_norm",
                         "dataset",
                         "dataset_path",
                         "warmup_steps",
                         "seed",
                         "deterministic",
                         "gc_freq",
                         "hf_assets_path",
                         "tokenizer_path",
                         "print_after_conversion",
                         "disable_loss_parallel",
                         "fsdp_reshard_after_forward",
                         "module_fqns_per_model_part",
                         "pipeline_parallel_split_points",
                         "enable_compiled_autograd",
                         "gc_debug",
                         "early_stop",
                         "per_op_sac_force_recompute_mm_shapes_by_fqns",
                         "context_parallel_load_balancer",
                         "mixed_precision_param_dtype"}))
          out_.no_effect.push_back(Setting{spelt(n), ""});
        else
          out_.not_simulated.push_back(Setting{spelt(n), "not understood, left out of the scenario"});
      }
    }
  }

  const core::Node& job() const { return job_; }
  Imported& out() { return out_; }

 private:
  const core::Node& job_;
  Imported& out_;
};

} // namespace

core::Json read_toml_file(const std::filesystem::path& file)
{
  try {
    const toml::table table = toml::parse_file(file.string());
    return to_json(table);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw core::InputError(
        core::Location{core::display_path(file), "", ""},
        fmt::format("line {}, column {}: not valid TOML: {}", where.line, where.column, e.description()));
  }
}

Imported import_torchtitan(const core::Node& job, const Target& target, const std::string& model)
{
  Imported out;
  TorchtitanImport t(job, out);
  std::vector<std::string> used;
  const auto use = [&](std::string_view section, std::string_view key) {
    used.push_back(fmt::format("/{}/{}", section, key));
    return t.find(section, key);
  };
  if (!job.json().is_object())
    job.fail("a torchtitan job file is a TOML table", "[model], [training], [parallelism] ...");

  // The model.
  const std::string name = t.text("model", "name", "");
  const std::string flavor = t.text("model", "flavor", "");
  use("model", "name");
  use("model", "flavor");
  std::string model_ref = model;
  if (model_ref.empty()) {
    model_ref = preset_for(name, flavor);
    if (model_ref.empty()) {
      const auto where = t.find("model", "flavor");
      throw core::InputError(where ? where->location() : job.location(),
                             "simtrain has no preset for this torchtitan model",
                             fmt::format(R"(name "{}", flavor "{}")", name, flavor),
                             "--model (a preset name, a model/v1 file or a HuggingFace config.json)");
    }
  }

  // The parallel dimensions, as torchtitan's ParallelDims sees them.
  if (!target.gpus)
    throw core::InputError(job.location(), "the GPU count is not known", "a job file, which leaves it to the launcher",
                           "--gpus N");
  const int gpus = *target.gpus;
  use("parallelism", "tensor_parallel_degree");
  use("parallelism", "pipeline_parallel_degree");
  use("parallelism", "context_parallel_degree");
  use("parallelism", "data_parallel_replicate_degree");
  use("parallelism", "data_parallel_shard_degree");
  const std::int64_t tp = t.integer("parallelism", "tensor_parallel_degree", 1, 1, 1 << 16);
  const std::int64_t pp = t.integer("parallelism", "pipeline_parallel_degree", 1, 1, 1 << 16);
  const std::int64_t cp = t.integer("parallelism", "context_parallel_degree", 1, 1, 1 << 16);
  const std::int64_t replicate = t.integer("parallelism", "data_parallel_replicate_degree", 1, 1, 1 << 20);
  std::int64_t shard = t.integer("parallelism", "data_parallel_shard_degree", -1, -1, 1 << 20);
  std::int64_t others = 1; // tp x pp x cp x replicate, kept from overflowing: each must divide the GPUs
  for (const std::int64_t degree : {tp, pp, cp, replicate})
    others = degree > gpus || others * degree > gpus ? std::int64_t{gpus} + 1 : others * degree;
  if (shard == -1)
    shard = gpus % others == 0 ? gpus / others : 0;
  if (shard < 1 || others * shard != gpus)
    throw core::InputError(
        t.find("parallelism", "data_parallel_shard_degree")
            ? t.find("parallelism", "data_parallel_shard_degree")->location()
            : job.location(),
        "the parallel degrees do not multiply to the GPU count",
        fmt::format("tp {} x pp {} x cp {} x replicate {} x shard {} for {} GPUs", tp, pp, cp, replicate, shard, gpus),
        "degrees whose product is --gpus (data_parallel_shard_degree -1 takes the rest)");

  OrderedJson plan;
  plan["tp"] = tp;
  plan["pp"] = pp;
  if (cp > 1) {
    plan["cp"] = cp;
    if (const auto rotate = use("parallelism", "context_parallel_rotate_method"))
      out.assumptions.push_back(fmt::format("context_parallel_rotate_method \"{}\": ring attention passing keys and "
                                            "values (plan cp_kind ring)",
                                            rotate->as_string()));
  }
  // FSDP2 shards parameters, gradients and optimizer state over the shard dimension: ZeRO-3. Under pipeline
  // parallelism torchtitan keeps the parameters gathered after forward (fsdp_reshard_after_forward "default":
  // torchtitan/distributed/fsdp.py) and PyTorch's schedules accumulate gradients, reduce-scattering them in the last
  // micro-batch's backward only (torch/distributed/pipelining/stage.py, backward_maybe_with_nosync): one gather and one
  // reduction per step, as Megatron-core's distributed optimizer with its gather overlapped.
  if (shard > 1 && pp > 1) {
    plan["distributed_optimizer"] = true;
    plan["overlap_param_gather"] = true;
    plan["overlap_grad_reduce"] = false;
    out.assumptions.push_back(
        fmt::format("FSDP2 with pipeline parallelism (pp {}): parameters gathered once per step and kept, gradients "
                    "reduce-scattered after the last micro-batch (the distributed optimizer, gather overlapped)",
                    pp));
  } else if (shard > 1) {
    plan["zero_stage"] = 3;
  }
  // HSDP: FSDP within each group of the shard dimension (CP inside it, torchtitan's dp_shard_cp mesh), groups
  // replicated over the outer replicate dimension.
  if (shard > 1 && replicate > 1)
    plan["shard_group"] = shard * cp;
  const std::int64_t ep = t.integer("parallelism", "expert_parallel_degree", 1, 1, 1 << 20);
  use("parallelism", "expert_parallel_degree");
  use("parallelism", "expert_tensor_parallel_degree");
  if (ep > 1) {
    plan["ep"] = ep;
    plan["etp"] = t.integer("parallelism", "expert_tensor_parallel_degree", 1, 1, 1 << 16);
  }

  // Batches: local_batch_size sequences per data-parallel rank per step (gradient accumulation up to the global
  // batch); under pipelining, micro-batches of pipeline_parallel_microbatch_size.
  const bool old_names = t.find("training", "batch_size").has_value();
  const std::int64_t local = t.integer("training", old_names ? "batch_size" : "local_batch_size", 8, 1, 1 << 20);
  use("training", old_names ? "batch_size" : "local_batch_size");
  const std::int64_t dp = replicate * shard;
  std::int64_t global = t.integer("training", "global_batch_size", -1, -1, std::int64_t{1} << 40);
  use("training", "global_batch_size");
  if (global <= 0)
    global = local * dp;
  std::int64_t micro = local;
  if (pp > 1) {
    micro = t.integer("parallelism", "pipeline_parallel_microbatch_size", 1, 1, 1 << 16);
    use("parallelism", "pipeline_parallel_microbatch_size");
  }
  plan["micro_batch"] = micro;
  plan["global_batch"] = global;
  plan["seq_length"] = t.integer("training", "seq_len", 2048, 1, 1 << 24);
  use("training", "seq_len");

  // The pipeline schedule.
  if (pp == 1)
    for (const char* key :
         {"pipeline_parallel_schedule", "pipeline_parallel_microbatch_size", "pipeline_parallel_layers_per_stage"})
      if (const auto n = use("parallelism", key))
        out.no_effect.push_back(Setting{spelt(*n), "no pipeline (pipeline_parallel_degree 1)"});
  if (pp > 1) {
    const std::string schedule = t.text("parallelism", "pipeline_parallel_schedule", "1F1B");
    use("parallelism", "pipeline_parallel_schedule");
    use("parallelism", "pipeline_parallel_layers_per_stage");
    const auto per_stage = t.find("parallelism", "pipeline_parallel_layers_per_stage");
    if (schedule == "1F1B" || schedule == "GPipe") {
      plan["schedule"] = schedule == "GPipe" ? "gpipe" : "1f1b";
    } else if (schedule == "DualPipeV") {
      plan["schedule"] = "dualpipev";
    } else {
      if (schedule != "Interleaved1F1B")
        out.not_simulated.push_back(Setting{"/parallelism/pipeline_parallel_schedule \"" + schedule + "\"",
                                            "simulated as the interleaved 1F1B schedule"});
      plan["schedule"] = "interleaved";
      // torchtitan's default for looped schedules: two stages per GPU.
      if (per_stage)
        out.not_simulated.push_back(Setting{spelt(*per_stage), "simulated with two virtual stages per GPU"});
      plan["virtual_stages"] = 2;
    }
  }

  // Recomputation.
  const std::string mode = t.text("activation_checkpoint", "mode", "selective");
  use("activation_checkpoint", "mode");
  use("activation_checkpoint", "selective_ac_option");
  if (mode == "full" || mode == "none") {
    plan["recompute"] = mode;
  } else if (mode == "selective") {
    const auto option = t.find("activation_checkpoint", "selective_ac_option");
    const std::string op = option ? option->as_string() : "2";
    plan["recompute"] = op == "op" ? "selective" : "full";
    if (op == "op")
      out.assumptions.emplace_back("selective_ac_option \"op\": torchtitan saves the matmul and attention outputs and "
                                   "recomputes the rest; simulated as Megatron's selective recomputation (attention "
                                   "core)");
    else
      out.not_simulated.push_back(
          Setting{"/activation_checkpoint/selective_ac_option \"" + op + "\"", "checkpointing every " + op +
                                                                                   "-th layer is simulated as full "
                                                                                   "recomputation of every layer"});
  } else {
    const auto where = t.find("activation_checkpoint", "mode");
    where->fail("not a recomputation mode simtrain simulates", "none, selective or full");
  }

  // Precision.
  const std::string param = t.text("training", "mixed_precision_param", "bfloat16");
  const std::string reduce = t.text("training", "mixed_precision_reduce", "float32");
  use("training", "mixed_precision_param");
  use("training", "mixed_precision_reduce");
  bool fp8 = false;
  if (const auto converters = use("model", "converters")) {
    for (std::size_t i = 0; i < converters->array_size(); ++i) {
      const std::string c = converters->element(i).as_string();
      if (c.find("float8") != std::string::npos)
        fp8 = true;
      else
        out.not_simulated.push_back(Setting{spelt(converters->element(i)), "not simulated"});
    }
  }
  if (param != "bfloat16")
    out.not_simulated.push_back(
        Setting{"/training/mixed_precision_param \"" + param + "\"", "simulated in bf16 mixed precision"});
  plan["precision"] = fp8 ? "fp8" : "bf16";
  if (fp8) {
    const auto section = [&](std::string_view key) {
      auto n = t.find("float8", key);
      if (!n) {
        const auto q = job.json().find("quantize");
        if (q != job.json().end() && q->is_object() && q->contains("linear") && (*q)["linear"].contains("float8") &&
            (*q)["linear"]["float8"].contains(key))
          n = job.element_of("quantize").element_of("linear").element_of("float8").element_of(std::string(key));
      }
      return n;
    };
    const auto recipe = section("recipe_name");
    const std::string r = recipe ? recipe->as_string() : "tensorwise";
    plan["fp8_recipe"] = r == "tensorwise" ? "current" : "blockwise";
    if (r != "tensorwise")
      out.assumptions.push_back(fmt::format("float8 recipe \"{}\": scales per row, simulated as blockwise scaling", r));
    if (const auto gather = section("enable_fsdp_float8_all_gather"); gather && gather->as_bool())
      plan["fp8_param_gather"] = true;
  }
  plan["fp32_grad_accumulation"] = reduce == "float32";
  // Megatron-style sequence parallelism is how torchtitan's TP plan shards norms and dropout.
  plan["sequence_parallel"] = tp > 1;
  if (const auto async = use("parallelism", "enable_async_tensor_parallel"); async && async->as_bool())
    plan["tp_comm_overlap"] = true;

  // The optimizer, and the kernels PyTorch runs.
  const std::string optimizer = t.text("optimizer", "name", "AdamW");
  use("optimizer", "name");
  use("optimizer", "implementation");
  if (optimizer != "AdamW" && optimizer != "Adam")
    out.not_simulated.push_back(Setting{"/optimizer/name \"" + optimizer + "\"", "simulated as Adam"});
  plan["framework"] = "torchtitan"; // its generation's kernels: PyTorch's norms, SDPA, fused AdamW, fp32 cross entropy
  out.assumptions.emplace_back("PyTorch's kernels: its norms, scaled_dot_product_attention's FlashAttention-2 kernels, "
                               "fused AdamW, and cross_entropy on the logits upcast to fp32 (plan norm_impl, "
                               "attention, optimizer, loss_impl)");
  if (t.text("optimizer", "implementation", "fused") != "fused")
    out.assumptions.emplace_back("optimizer implementation \"" + t.text("optimizer", "implementation", "") +
                                 "\": simulated as fused AdamW");
  if (const auto offload = use("training", "enable_cpu_offload"); offload && offload->as_bool()) {
    // FSDP2's CPUOffloadPolicy: sharded parameters, gradients and the optimizer's step on the CPU.
    plan["offload_params"] = "cpu";
    plan["offload_optimizer"] = "cpu";
    plan["cpu_optimizer"] = "pytorch";
    out.assumptions.emplace_back("enable_cpu_offload: FSDP2's CPU offload, the PyTorch optimizer stepping on the CPU "
                                 "at its 2020 pace (ZeRO-Offload's Table 4)");
  }
  t.sort_out(used);

  OrderedJson s;
  s["schema"] = "scenario/v1";
  s["name"] = target.name;
  s["description"] =
      fmt::format("Imported by simtrain import torchtitan from {} ({} {})", job.location().file, name, flavor);
  s["model"] = model_ref;
  s["topology"] = target.topology;
  s["gpus"] = gpus;
  s["plan"] = std::move(plan);
  out.origins.emplace_back("/plan", job.location().file + " [parallelism]");
  out.scenario = std::move(s);
  return out;
}

} // namespace sim::importer
