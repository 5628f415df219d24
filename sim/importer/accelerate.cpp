#include "importer/accelerate.hpp"

#include "core/document.hpp"

#include <fmt/format.h>
#include <map>
#include <set>

namespace sim::importer {
namespace {

// Accelerate's config keys (accelerate/commands/config/config_args.py, cluster.py) that change nothing in one step's
// time or memory: where the processes run, how they meet, what the launcher calls.
const std::set<std::string, std::less<>>& no_effect_keys()
{
  static const std::set<std::string, std::less<>> keys{
      "compute_environment", "debug",           "downcast_bf16",     "enable_cpu_affinity",
      "machine_rank",        "main_process_ip", "main_process_port", "main_training_function",
      "rdzv_backend",        "same_network",    "tpu_env",           "tpu_use_cluster",
      "tpu_use_sudo",        "tpu_name",        "tpu_zone",          "gpu_ids",
      "num_machines",        "commands",        "command_file",      "ipex_config",
      "mpirun_config",       "fp8_config",      "dynamo_config_file"};
  return keys;
}

// FSDP plugin keys that change nothing simtrain's ZeRO-3 models: wrapping, state dicts, loading.
const std::set<std::string, std::less<>>& fsdp_no_effect_keys()
{
  static const std::set<std::string, std::less<>> keys{"fsdp_auto_wrap_policy",
                                                       "fsdp_transformer_layer_cls_to_wrap",
                                                       "fsdp_min_num_params",
                                                       "fsdp_state_dict_type",
                                                       "fsdp_sync_module_states",
                                                       "fsdp_use_orig_params",
                                                       "fsdp_cpu_ram_efficient_loading",
                                                       "fsdp_forward_prefetch"};
  return keys;
}

// DeepSpeed plugin keys that change nothing in a step: launching, saving, initialisation, gradient clipping.
const std::set<std::string, std::less<>>& deepspeed_no_effect_keys()
{
  static const std::set<std::string, std::less<>> keys{"deepspeed_multinode_launcher",  "deepspeed_hostfile",
                                                       "deepspeed_exclusion_filter",    "deepspeed_inclusion_filter",
                                                       "deepspeed_moe_layer_cls_names", "zero3_init_flag",
                                                       "zero3_save_16bit_model",        "offload_optimizer_nvme_path",
                                                       "offload_param_nvme_path",       "gradient_clipping"};
  return keys;
}

class AccelerateImport {
 public:
  AccelerateImport(Imported& out, const core::Node& trainer) : out_(out), trainer_(trainer.json())
  {
    if (!trainer_.is_object())
      trainer.fail("TrainingArguments are a JSON object", R"({"per_device_train_batch_size": 4, ...})");
    provenance_.add_source("", trainer.location().file, trainer.pointer());
  }

  // Reads the config into Trainer's arguments (`trainer()`), as Trainer takes the launcher's settings.
  void read(const core::Node& config)
  {
    if (!config.json().is_object())
      config.fail("an Accelerate config is a mapping", "keys such as distributed_type: FSDP");
    file_ = config.location().file;
    for (const auto& [key, value] : config.json().items()) {
      const core::Node n = config.element_of(key);
      if (key == "distributed_type")
        distributed_type(n);
      else if (key == "mixed_precision")
        mixed_precision(n);
      else if (key == "num_processes")
        processes_ = static_cast<int>(n.as_integer(1, 1 << 24));
      else if (key == "fsdp_config")
        fsdp_ = n;
      else if (key == "deepspeed_config")
        deepspeed_ = n;
      else if (key == "megatron_lm_config")
        megatron_ = n;
      else if (key == "dynamo_config")
        dynamo(n);
      else if (key == "use_cpu")
        use_cpu(n);
      else if (key == "parallelism_config")
        parallelism(n);
      else if (no_effect_keys().count(key) != 0)
        out_.no_effect.push_back(Setting{spelt(n), ""});
      else
        out_.not_simulated.push_back(Setting{spelt(n), "not understood, left out of the scenario"});
    }
    plugins(config);
  }

  std::optional<int> processes() const { return processes_; }
  std::optional<std::string> fp8_origin() const { return fp8_origin_; }
  const core::Json& trainer() const { return trainer_; }
  const core::Provenance& provenance() const { return provenance_; }

  // An origin recorded by the Trainer import names the config's key for what the config put there.
  std::string origin(const std::string& setting) const
  {
    for (const auto& [tree, from] : placed_)
      if (setting == tree || setting.starts_with(tree + "/"))
        return from + setting.substr(tree.size());
    return setting;
  }

 private:
  // Puts `value` at Trainer's `key` unless the script's arguments set it, remembering where it came from.
  // An object's members map to the config's keys of the same name after `member_prefix` ("fsdp_").
  void place(const std::string& key, core::Json value, const core::Node& from, const std::string& member_prefix = "")
  {
    if (trainer_.contains(key)) {
      out_.assumptions.push_back(
          fmt::format("the script's {} over the launcher's {} (Trainer's own arguments win)", key, from.pointer()));
      return;
    }
    if (!member_prefix.empty())
      for (const auto& [member, ignored] : value.items()) {
        const std::string tree = fmt::format("/{}/{}", key, member);
        const std::string pointer = fmt::format("{}/{}{}", from.pointer(), member_prefix, member);
        provenance_.add_source(tree, file_, pointer);
        placed_.emplace_back(tree, pointer);
      }
    trainer_[key] = std::move(value);
    provenance_.add_source("/" + key, file_, from.pointer());
    placed_.emplace_back("/" + key, from.pointer());
  }

  void distributed_type(const core::Node& n)
  {
    const std::string type = n.as_string();
    if (type == "NO" || type == "MULTI_GPU" || type == "FSDP" || type == "DEEPSPEED" || type == "MEGATRON_LM")
      type_ = type;
    else
      n.fail_found("not a GPU training launch", type, "NO, MULTI_GPU, FSDP, DEEPSPEED or MEGATRON_LM");
    type_origin_ = n.pointer();
  }

  void mixed_precision(const core::Node& n)
  {
    const std::string precision = n.as_string();
    if (precision != "no" && precision != "bf16" && precision != "fp16" && precision != "fp8")
      n.fail_found("unknown mixed precision", precision, "no, fp16, bf16 or fp8");
    for (const char* key : {"bf16", "fp16"})
      if (trainer_.value(key, false)) { // TrainingArguments set the launcher's precision themselves
        out_.assumptions.push_back(fmt::format("the script's {} over the launcher's {} \"{}\" (Trainer's own "
                                               "arguments win)",
                                               key, n.pointer(), precision));
        return;
      }
    if (precision == "bf16" || precision == "fp16") {
      place(precision, true, n);
    } else if (precision == "fp8") {
      // Transformer Engine's layers under fp8_autocast (Accelerate's default FP8 backend), the rest in bf16.
      place("bf16", true, n);
      fp8_origin_ = n.pointer();
    }
  }

  void dynamo(const core::Node& n)
  {
    const core::Json& j = n.json();
    const auto backend = j.is_object() && j.contains("dynamo_backend") ? j["dynamo_backend"] : core::Json();
    if (backend.is_null() || (backend.is_string() && (backend == "NO" || backend == "no")))
      out_.no_effect.push_back(Setting{spelt(n), ""});
    else // torch.compile of the model: its norms, rotary embedding and gated activation fused (Trainer's torch_compile)
      place("torch_compile", true, n);
  }

  void use_cpu(const core::Node& n)
  {
    if (n.as_bool())
      n.fail("training on the CPU", "use_cpu: false (simtrain simulates GPUs)");
    out_.no_effect.push_back(Setting{spelt(n), ""});
  }

  // Accelerate's ND parallelism (parallelism_config_dp_shard_size, _tp_size, _cp_size, ...): only sharded data
  // parallelism carries over through Trainer's FSDP.
  void parallelism(const core::Node& n)
  {
    if (!n.json().is_object())
      n.fail("parallelism_config is a mapping", "parallelism_config_tp_size: 1, ...");
    for (const auto& [key, value] : n.json().items()) {
      const core::Node v = n.element_of(key);
      if (key.ends_with("dp_shard_size") || (value.is_number_integer() && value.get<std::int64_t>() == 1))
        out_.no_effect.push_back(Setting{spelt(v), ""});
      else
        out_.not_simulated.push_back(
            Setting{spelt(v), "Accelerate's tensor, context and replicated parallelism are not imported: simulated "
                              "as data parallelism (simtrain import torchtitan or megatron for those)"});
    }
  }

  void plugins(const core::Node& config)
  {
    const auto unused = [this](const std::optional<core::Node>& plugin) {
      if (plugin && !plugin->json().is_null())
        out_.no_effect.push_back(Setting{plugin->pointer(), fmt::format("distributed_type is {}", type_)});
    };
    if (type_ == "FSDP") {
      if (!fsdp_)
        config.fail("distributed_type FSDP without fsdp_config", "an fsdp_config mapping");
      fsdp(*fsdp_);
    } else {
      unused(fsdp_);
    }
    if (type_ == "DEEPSPEED") {
      if (!deepspeed_)
        config.fail("distributed_type DEEPSPEED without deepspeed_config", "a deepspeed_config mapping");
      deepspeed(*deepspeed_);
    } else {
      unused(deepspeed_);
    }
    if (type_ == "MEGATRON_LM")
      out_.not_simulated.push_back(Setting{type_origin_ + " MEGATRON_LM",
                                           "Accelerate's Megatron-LM plugin is not imported: simulated as data "
                                           "parallelism (simtrain import megatron reads Megatron-LM's own "
                                           "arguments)"});
    else
      unused(megatron_);
  }

  // FSDP1's sharding strategy by name or number (torch's ShardingStrategy, 1-based as Accelerate spells it), or
  // FSDP2's reshard_after_forward.
  void fsdp(const core::Node& n)
  {
    if (!n.json().is_object())
      n.fail("fsdp_config is a mapping", "fsdp_sharding_strategy: FULL_SHARD, ...");
    std::string words = "full_shard";
    std::optional<core::Node> strategy_from;
    core::Json config = core::Json::object();
    for (const auto& [key, value] : n.json().items()) {
      const core::Node v = n.element_of(key);
      if (key == "fsdp_sharding_strategy" || (key == "fsdp_reshard_after_forward" && value.is_string())) {
        words = sharding(v);
        strategy_from = v;
      } else if (key == "fsdp_reshard_after_forward") {
        words = v.as_bool() ? "full_shard" : "shard_grad_op";
        strategy_from = v;
      } else if (key == "fsdp_offload_params") {
        config["offload_params"] = v.as_bool();
      } else if (key == "fsdp_activation_checkpointing") {
        config["activation_checkpointing"] = v.as_bool();
      } else if (key == "fsdp_backward_prefetch" || key == "fsdp_backward_prefetch_policy") {
        prefetch(v, config);
      } else if (key == "fsdp_version") {
        const auto version = v.as_integer(1, 2);
        out_.no_effect.push_back(Setting{
            spelt(v), version == 2 ? "FSDP2 shards as FSDP1 with the same strategy does in simtrain's ZeRO" : ""});
      } else if (fsdp_no_effect_keys().count(key) != 0) {
        out_.no_effect.push_back(Setting{spelt(v), ""});
      } else {
        out_.not_simulated.push_back(Setting{spelt(v), "not understood, left out of the scenario"});
      }
    }
    if (words.starts_with("hybrid")) {
      out_.not_simulated.push_back(Setting{spelt(*strategy_from),
                                           "hybrid sharding within a node: simulated as sharding over every GPU (set "
                                           "plan.shard_group to the GPUs per node)"});
      words = words == "hybrid_shard" ? "full_shard" : "shard_grad_op";
    }
    place("fsdp", words + " auto_wrap", strategy_from.value_or(n));
    if (!config.empty())
      place("fsdp_config", config, n, "fsdp_");
  }

  std::string sharding(const core::Node& v)
  {
    static const std::map<std::string, std::string, std::less<>> names{
        {"FULL_SHARD", "full_shard"},     {"1", "full_shard"},      {"SHARD_GRAD_OP", "shard_grad_op"},
        {"2", "shard_grad_op"},           {"NO_SHARD", "no_shard"}, {"3", "no_shard"},
        {"HYBRID_SHARD", "hybrid_shard"}, {"4", "hybrid_shard"},    {"HYBRID_SHARD_ZERO2", "hybrid_shard_zero2"},
        {"5", "hybrid_shard_zero2"}};
    const std::string name =
        v.json().is_number_integer() ? std::to_string(v.json().get<std::int64_t>()) : v.as_string();
    const auto it = names.find(name);
    if (it == names.end())
      v.fail_found("unknown sharding strategy", name,
                   "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or HYBRID_SHARD_ZERO2 (or 1-5)");
    return it->second;
  }

  void prefetch(const core::Node& v, core::Json& config)
  {
    const std::string s = v.as_string();
    if (s == "BACKWARD_PRE" || s == "BACKWARD_POST") {
      config["backward_prefetch"] = s == "BACKWARD_PRE" ? "backward_pre" : "backward_post";
    } else if (s == "NO_PREFETCH") {
      config["backward_prefetch"] = "backward_post";
      out_.not_simulated.push_back(
          Setting{spelt(v), "no backward prefetch: simulated as BACKWARD_POST (the next gather after the current "
                            "layer's gradients)"});
    } else {
      v.fail_found("unknown backward prefetch", s, "BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH");
    }
  }

  // The DeepSpeed plugin: a config file it names, or the few keys Accelerate turns into one (its DeepSpeedPlugin).
  void deepspeed(const core::Node& n)
  {
    if (!n.json().is_object())
      n.fail("deepspeed_config is a mapping", "zero_stage: 2, ...");
    core::Json ds = {{"train_micro_batch_size_per_gpu", "auto"}, {"train_batch_size", "auto"}};
    core::Json zero = core::Json::object();
    std::optional<core::Node> file;
    for (const auto& [key, value] : n.json().items()) {
      const core::Node v = n.element_of(key);
      if (key == "deepspeed_config_file") {
        file = v;
      } else if (key == "zero_stage") {
        zero["stage"] = v.as_integer(0, 3);
      } else if (key == "offload_optimizer_device" || key == "offload_param_device") {
        const std::string device = v.as_string();
        if (device != "none" && device != "cpu" && device != "nvme")
          v.fail_found("unknown offload device", device, "none, cpu or nvme");
        if (device != "none")
          zero[key == "offload_param_device" ? "offload_param" : "offload_optimizer"] = {{"device", device}};
      } else if (key == "gradient_accumulation_steps") {
        place("gradient_accumulation_steps", v.as_integer(1, 1 << 20), v);
      } else if (deepspeed_no_effect_keys().count(key) != 0) {
        out_.no_effect.push_back(Setting{spelt(v), ""});
      } else {
        out_.not_simulated.push_back(Setting{spelt(v), "not understood, left out of the scenario"});
      }
    }
    if (file) { // Accelerate takes the file's settings over its own keys
      if (!zero.empty())
        out_.not_simulated.push_back(
            Setting{n.pointer(), "zero_stage and offload devices beside deepspeed_config_file: the file's are used"});
      place("deepspeed", file->as_string(), *file);
      return;
    }
    ds["zero_optimization"] = zero;
    for (const char* precision : {"bf16", "fp16"})
      if (trainer_.value(precision, false))
        ds[precision] = {{"enabled", true}};
    place("deepspeed", ds, n);
  }

  Imported& out_;
  core::Json trainer_;
  core::Provenance provenance_;
  std::string file_;
  std::string type_ = "NO";
  std::string type_origin_ = "/distributed_type";
  std::optional<int> processes_;
  std::optional<std::string> fp8_origin_;
  std::optional<core::Node> fsdp_;
  std::optional<core::Node> deepspeed_;
  std::optional<core::Node> megatron_;
  std::vector<std::pair<std::string, std::string>> placed_; // Trainer's pointer, the config's
};

} // namespace

Imported import_accelerate(const core::Node& config, const core::Node& trainer, const Target& target,
                           const HfTrainerOptions& options)
{
  Imported own;
  AccelerateImport accelerate(own, trainer);
  accelerate.read(config);
  Target to = target;
  if (!to.gpus)
    to.gpus = accelerate.processes();
  if (!to.gpus)
    throw core::InputError(config.location(), "the GPU count is not known", "no num_processes", "--gpus N");
  const core::Node merged(accelerate.trainer(), "", accelerate.provenance());
  Imported out = import_hf_trainer(merged, to, options);
  for (auto& [pointer, setting] : out.origins)
    setting = accelerate.origin(setting);
  if (!target.gpus)
    for (auto& [pointer, setting] : out.origins)
      if (pointer == "/gpus")
        setting = config.pointer() + "/num_processes";
  OrderedJson plan = out.scenario["plan"];
  if (const auto fp8 = accelerate.fp8_origin()) {
    plan["precision"] = "fp8";
    out.origins.emplace_back("/plan/precision", *fp8);
    out.assumptions.emplace_back("mixed_precision fp8: Transformer Engine's linear layers with delayed scaling "
                                 "(Accelerate's default FP8 backend and recipe), the rest in bf16");
  }
  out.scenario["plan"] = std::move(plan);
  out.scenario["description"] = fmt::format("Imported by simtrain import accelerate from {}", config.location().file);
  add_accounts(out, std::move(own));
  return out;
}

} // namespace sim::importer
