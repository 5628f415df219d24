#include "importer/hf_trainer.hpp"

#include "core/document.hpp"
#include "importer/deepspeed.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace sim::importer {
namespace {

// TrainingArguments that change nothing in one step's time or memory: evaluation, logging, saving, the learning-rate
// schedule and the optimizer's hyper-parameters, data loading, hub and run bookkeeping (transformers'
// training_args.py).
const std::set<std::string, std::less<>>& no_effect_keys()
{
  static const std::set<std::string, std::less<>> keys{"output_dir",
                                                       "overwrite_output_dir",
                                                       "do_train",
                                                       "do_eval",
                                                       "do_predict",
                                                       "eval_strategy",
                                                       "evaluation_strategy",
                                                       "prediction_loss_only",
                                                       "per_device_eval_batch_size",
                                                       "per_gpu_eval_batch_size",
                                                       "eval_accumulation_steps",
                                                       "eval_delay",
                                                       "eval_steps",
                                                       "eval_on_start",
                                                       "eval_do_concat_batches",
                                                       "eval_use_gather_object",
                                                       "batch_eval_metrics",
                                                       "learning_rate",
                                                       "weight_decay",
                                                       "adam_beta1",
                                                       "adam_beta2",
                                                       "adam_epsilon",
                                                       "max_grad_norm",
                                                       "num_train_epochs",
                                                       "max_steps",
                                                       "lr_scheduler_type",
                                                       "lr_scheduler_kwargs",
                                                       "warmup_ratio",
                                                       "warmup_steps",
                                                       "log_level",
                                                       "log_level_replica",
                                                       "log_on_each_node",
                                                       "logging_dir",
                                                       "logging_strategy",
                                                       "logging_first_step",
                                                       "logging_steps",
                                                       "logging_nan_inf_filter",
                                                       "save_strategy",
                                                       "save_steps",
                                                       "save_total_limit",
                                                       "save_safetensors",
                                                       "save_on_each_node",
                                                       "save_only_model",
                                                       "seed",
                                                       "data_seed",
                                                       "jit_mode_eval",
                                                       "local_rank",
                                                       "ddp_backend",
                                                       "tpu_num_cores",
                                                       "debug",
                                                       "dataloader_drop_last",
                                                       "dataloader_num_workers",
                                                       "dataloader_prefetch_factor",
                                                       "dataloader_pin_memory",
                                                       "dataloader_persistent_workers",
                                                       "past_index",
                                                       "run_name",
                                                       "disable_tqdm",
                                                       "remove_unused_columns",
                                                       "label_names",
                                                       "load_best_model_at_end",
                                                       "metric_for_best_model",
                                                       "greater_is_better",
                                                       "ignore_data_skip",
                                                       "report_to",
                                                       "ddp_timeout",
                                                       "skip_memory_metrics",
                                                       "push_to_hub",
                                                       "resume_from_checkpoint",
                                                       "hub_model_id",
                                                       "hub_strategy",
                                                       "hub_token",
                                                       "hub_private_repo",
                                                       "hub_always_push",
                                                       "hub_revision",
                                                       "include_inputs_for_metrics",
                                                       "include_for_metrics",
                                                       "full_determinism",
                                                       "ray_scope",
                                                       "group_by_length",
                                                       "length_column_name",
                                                       "label_smoothing_factor",
                                                       "neftune_noise_alpha",
                                                       "restore_callback_states_from_checkpoint",
                                                       "average_tokens_across_devices",
                                                       "include_tokens_per_second",
                                                       "include_num_input_tokens_seen",
                                                       "bf16_full_eval",
                                                       "fp16_full_eval",
                                                       "fp16_opt_level",
                                                       "half_precision_backend",
                                                       "fp16_backend",
                                                       "mp_parameters",
                                                       "ddp_find_unused_parameters",
                                                       "ddp_broadcast_buffers",
                                                       "fsdp_transformer_layer_cls_to_wrap",
                                                       "fsdp_min_num_params",
                                                       "accelerator_config",
                                                       "dispatch_batches",
                                                       "split_batches",
                                                       "gradient_checkpointing_kwargs",
                                                       "torch_empty_cache_steps",
                                                       "use_mps_device",
                                                       "use_cpu",
                                                       "no_cuda",
                                                       "use_ipex",
                                                       "optim_target_modules",
                                                       "push_to_hub_model_id",
                                                       "push_to_hub_organization",
                                                       "push_to_hub_token",
                                                       "use_legacy_prediction_loop",
                                                       "predict_with_generate",
                                                       "generation_max_length",
                                                       "generation_num_beams",
                                                       "generation_config",
                                                       "sortish_sampler",
                                                       "optim_args",
                                                       "torch_compile_backend",
                                                       "torch_compile_mode",
                                                       "model_init_kwargs",
                                                       "dataset_text_field",
                                                       "packing"};
  return keys;
}

// transformers' OptimizerNames by the algorithm simtrain runs; the paged variants page their state to host memory
// only under memory pressure (bitsandbytes), which is not simulated.
const std::map<std::string, std::string, std::less<>>& optimizers()
{
  static const std::map<std::string, std::string, std::less<>> names{
      {"adamw_torch", "adam"},         {"adamw_torch_fused", "adam"},     {"adamw_hf", "adam"},
      {"adamw_apex_fused", "adam"},    {"adamw_torch_npu_fused", "adam"}, {"paged_adamw_32bit", "adam"},
      {"adamw_bnb_8bit", "adam_8bit"}, {"adamw_8bit", "adam_8bit"},       {"paged_adamw_8bit", "adam_8bit"},
      {"lion_32bit", "lion"},          {"paged_lion_32bit", "lion"},      {"sgd", "sgd"},
      {"adafactor", "adafactor"}};
  return names;
}

class HfImport {
 public:
  HfImport(Imported& out, const Target& target, const HfTrainerOptions& o) : out_(out), target_(target), o_(o) {}

  OrderedJson read(const core::Node& args)
  {
    if (!args.json().is_object())
      args.fail("TrainingArguments are a JSON object", R"({"per_device_train_batch_size": 4, "bf16": true, ...})");
    for (const auto& [key, value] : args.json().items()) {
      const core::Node n = args.element_of(key);
      if (key == "per_device_train_batch_size" || key == "per_gpu_train_batch_size")
        micro_batch_ = n.as_integer(1, 1 << 16);
      else if (key == "gradient_accumulation_steps")
        accumulation_ = n.as_integer(1, 1 << 20);
      else if (key == "bf16" || key == "fp16")
        precision_flag(n, key);
      else if (key == "tf32")
        tf32_ = n.json().is_null() ? std::optional<core::Node>{} : std::optional<core::Node>{n};
      else if (key == "gradient_checkpointing")
        checkpointing_ = n.as_bool();
      else if (key == "optim")
        optimizer(n);
      else if (key == "deepspeed")
        deepspeed_ = n;
      else if (key == "fsdp")
        fsdp(n);
      else if (key == "fsdp_config")
        fsdp_config(n);
      else if (key == "ddp_bucket_cap_mb")
        bucket_mb_ = n.json().is_null() ? bucket_mb_ : n.as_number(1.0, 1e6);
      else if (key == "max_seq_length" || key == "max_length" || key == "model_max_length")
        seq_length_ = n.as_integer(1, 1 << 24);
      else if (key == "torch_compile" || key == "use_liger_kernel")
        fusing(n, key == "use_liger_kernel");
      else if (key == "auto_find_batch_size")
        not_simulated_if_true(n, "the batch Trainer would settle on is not searched for: the given one is simulated");
      else if (no_effect_keys().count(key) != 0)
        out_.no_effect.push_back(Setting{spelt(n), ""});
      else
        out_.not_simulated.push_back(Setting{spelt(n), "not understood, left out of the scenario"});
    }
    return deepspeed_ ? with_deepspeed(args) : plain(args);
  }

 private:
  void precision_flag(const core::Node& n, const std::string& key)
  {
    if (!n.as_bool())
      return;
    if (!precision_.empty() && precision_ != key)
      n.fail("bf16 and fp16 are both on", "one of them");
    precision_ = key;
  }

  // `tf32: true` (torch.backends.cuda.matmul.allow_tf32) puts an fp32 training's matmuls on TF32 tensor cores; they
  // run on the CUDA cores otherwise (PyTorch's default since 1.12).
  void tf32(OrderedJson& plan)
  {
    if (!tf32_ || !tf32_->as_bool())
      return;
    if (plan.value("precision", "") != "fp32") {
      out_.no_effect.push_back(Setting{spelt(*tf32_), "TF32 changes fp32 matmuls; the plan's are 16-bit"});
      return;
    }
    plan["precision"] = "tf32";
    out_.origins.emplace_back("/plan/precision", tf32_->pointer());
  }

  void optimizer(const core::Node& n)
  {
    const std::string name = n.as_string();
    if (const auto it = optimizers().find(name); it != optimizers().end()) {
      algorithm_ = it->second;
      optimizer_origin_ = n.pointer();
      if (name.starts_with("paged_"))
        out_.assumptions.push_back(fmt::format("{} \"{}\": bitsandbytes pages the state to host memory only when GPU "
                                               "memory runs out; simulated as kept on the GPU",
                                               n.pointer(), name));
    } else {
      out_.not_simulated.push_back(Setting{spelt(n), fmt::format("the '{}' optimizer is simulated as Adam", name)});
    }
  }

  // torch.compile (Inductor fuses the model's pointwise operations) or Liger's kernels (fused RMSNorm, RoPE and
  // SwiGLU): one kernel each instead of transformers' eager operations.
  void fusing(const core::Node& n, bool liger)
  {
    if (!n.as_bool()) {
      out_.no_effect.push_back(Setting{spelt(n), ""});
      return;
    }
    fused_origin_ = n.pointer();
    if (liger)
      out_.not_simulated.push_back(Setting{spelt(n), "Liger's fused linear cross entropy is not simulated: the loss "
                                                     "is Trainer's, on the whole logits (its fused RMSNorm, RoPE "
                                                     "and SwiGLU are)"});
  }

  void not_simulated_if_true(const core::Node& n, const std::string& why)
  {
    if (n.as_bool())
      out_.not_simulated.push_back(Setting{spelt(n), why});
    else
      out_.no_effect.push_back(Setting{spelt(n), ""});
  }

  // "full_shard auto_wrap", or a list of the same words (transformers' FSDPOption).
  void fsdp(const core::Node& n)
  {
    std::vector<std::string> words;
    if (n.json().is_string()) {
      std::istringstream in(n.as_string());
      for (std::string w; in >> w;)
        words.push_back(w);
    } else if (n.json().is_array()) {
      for (std::size_t i = 0; i < n.array_size(); ++i)
        words.push_back(n.element(i).as_string());
    } else if (!(n.json().is_boolean() && !n.json().get<bool>()) && !n.json().is_null()) {
      n.fail("fsdp is a string of options", "\"full_shard auto_wrap\"");
    }
    for (const auto& w : words) {
      if (w == "full_shard" || w == "hybrid_shard")
        zero_stage_ = 3;
      else if (w == "shard_grad_op" || w == "hybrid_shard_zero2")
        zero_stage_ = 2;
      else if (w == "no_shard")
        zero_stage_ = 0;
      else if (w == "offload")
        offload_origin_ = n.pointer();
      else if (w != "auto_wrap")
        n.fail_found("unknown FSDP option", w, "full_shard, shard_grad_op, hybrid_shard, no_shard, offload, auto_wrap");
      if (w.starts_with("hybrid_shard"))
        out_.not_simulated.push_back(Setting{spelt(n),
                                             "hybrid sharding within a node: simulated as sharding over every GPU (set "
                                             "plan.shard_group to the GPUs per node)"});
    }
    fsdp_origin_ = n.pointer();
  }

  void fsdp_config(const core::Node& n)
  {
    if (n.json().is_null())
      return;
    if (!n.json().is_object())
      n.fail("fsdp_config is an object", R"({"backward_prefetch": "backward_pre"})");
    for (const auto& [raw, value] : n.json().items()) {
      const core::Node v = n.element_of(raw);
      const std::string key = raw.starts_with("fsdp_") ? raw.substr(5) : raw;
      if (key == "backward_prefetch") {
        const std::string s = v.as_string();
        if (s != "backward_pre" && s != "backward_post")
          v.fail_found("unknown backward prefetch", s, "backward_pre or backward_post");
        backward_prefetch_ = s == "backward_pre" ? "pre" : "post";
      } else if (key == "activation_checkpointing") {
        checkpointing_ = checkpointing_ || v.as_bool();
      } else if (key == "offload_params" || key == "cpu_offload") {
        if (v.as_bool())
          offload_origin_ = v.pointer();
      } else {
        out_.no_effect.push_back(Setting{spelt(v), "an FSDP setting simtrain's ZeRO-3 does not model"});
      }
    }
  }

  std::int64_t global_batch() const { return micro_batch_ * accumulation_ * *target_.gpus; }

  // What every import from Trainer shares: precision, recomputation, the optimizer's algorithm, PyTorch's kernels.
  void common(OrderedJson& plan, bool deepspeed_optimizer, bool deepspeed)
  {
    if (!precision_.empty())
      plan["precision"] = precision_;
    if (checkpointing_)
      plan["recompute"] = "full";
    if (!algorithm_.empty() && !deepspeed_optimizer) {
      if (algorithm_ != "adam")
        plan["optimizer_algorithm"] = algorithm_;
      out_.origins.emplace_back("/plan/optimizer_algorithm", optimizer_origin_);
    }
    // transformers' models run their RMSNorm, rotary embedding and gated activation as PyTorch operations, each a
    // kernel, unless torch.compile or Liger fuses them.
    plan["norm_impl"] = fused_origin_.empty() ? "eager" : "torch";
    plan["rope_impl"] = fused_origin_.empty() ? "eager" : "fused";
    plan["activation_impl"] = fused_origin_.empty() ? "eager" : "fused";
    if (!fused_origin_.empty())
      for (const char* key : {"/plan/norm_impl", "/plan/rope_impl", "/plan/activation_impl"})
        out_.origins.emplace_back(key, fused_origin_);
    plan["attention"] = "flash2";
    // Trainer's bf16/fp16 autocast runs cross_entropy in fp32, as transformers' Llama-family models do themselves
    // (logits.float()) under DeepSpeed.
    plan["loss_impl"] = "eager_fp32";
    const auto seq = o_.seq_length ? o_.seq_length : seq_length_;
    if (seq)
      plan["seq_length"] = *seq;
    else if (!deepspeed) // the DeepSpeed import says so itself
      out_.assumptions.emplace_back("the model's own sequence length (no max_seq_length; --seq-length to change it)");
  }

  OrderedJson plain(const core::Node& args)
  {
    OrderedJson plan;
    plan["tp"] = 1;
    plan["pp"] = 1;
    plan["micro_batch"] = micro_batch_;
    plan["global_batch"] = global_batch();
    out_.origins.emplace_back("/plan/global_batch", args.pointer() + "/per_device_train_batch_size");
    if (precision_.empty()) {
      plan["precision"] = "fp32";
      out_.assumptions.emplace_back("neither bf16 nor fp16: fp32 training, its matmuls on the CUDA cores unless tf32 "
                                    "is true");
    }
    plan["zero_stage"] = zero_stage_;
    if (!fsdp_origin_.empty())
      out_.origins.emplace_back("/plan/zero_stage", fsdp_origin_);
    if (zero_stage_ == 3)
      plan["backward_prefetch"] = backward_prefetch_;
    if (!offload_origin_.empty()) { // FSDP's CPUOffload: parameters, gradients and the optimizer's step on the CPU
      for (const char* key : {"offload_params", "offload_optimizer"}) {
        plan[key] = "cpu";
        out_.origins.emplace_back(std::string("/plan/") + key, offload_origin_);
      }
      plan["cpu_optimizer"] = "pytorch";
      out_.assumptions.emplace_back("FSDP's CPU offload: the PyTorch optimizer steps on the CPU at its 2020 pace "
                                    "(ZeRO-Offload's Table 4), and the shards cross PCIe in 16 bits");
    }
    // DDP's buckets (25 MB by default) overlap the backward pass; FSDP reduce-scatters each unit's gradients as its
    // backward ends.
    plan["overlap_grad_reduce"] = true;
    if (zero_stage_ == 0)
      plan["dp_bucket_size"] = fmt::format("{:.0f}B", bucket_mb_ * 1024 * 1024);
    // PyTorch's defaults as Trainer runs them (plan.framework fsdp): torch.autocast's fp32 gradients under DDP, the
    // 16-bit reduction of Accelerate's FSDP MixedPrecision policy, autograd accumulating, one fused optimizer pass.
    plan["framework"] = "fsdp";
    common(plan, false, false);
    tf32(plan);
    if (!precision_.empty())
      out_.assumptions.emplace_back(
          zero_stage_ == 0
              ? "PyTorch's automatic mixed precision keeps fp32 weights and gradients (16 bytes a parameter with "
                "Adam); simulated in Megatron's layout, 16-bit weights beside fp32 gradients and master weights (18)"
              : "FSDP's MixedPrecision policy as Accelerate builds it (set_mixed_precision: parameters, reduction and "
                "buffers in the 16-bit type): gradients reduce-scattered in 16 bits");
    out_.assumptions.emplace_back(
        "a PyTorch model under Trainer: transformers' eager RMSNorm, rotary embedding and "
        "gated activation (fused under torch_compile), scaled_dot_product_attention's "
        "FlashAttention-2 kernels, the optimizer's update in one fused pass, the cross "
        "entropy in fp32 under autocast (plan norm_impl, rope_impl, activation_impl, attention, optimizer, loss_impl)");
    return plan;
  }

  OrderedJson with_deepspeed(const core::Node& args)
  {
    const core::Node& ds = *deepspeed_;
    DeepSpeedOptions options{o_.model, o_.seq_length ? o_.seq_length : seq_length_, micro_batch_, global_batch()};
    Imported inner;
    if (ds.json().is_object()) {
      inner = import_deepspeed(ds, target_, options);
    } else {
      const std::filesystem::path path = o_.base_dir / ds.as_string();
      documents_.push_back(core::read_json_file(path));
      provenance_.add_source("", core::display_path(path));
      inner = import_deepspeed(core::Node(documents_.back(), "", provenance_), target_, options);
    }
    for (auto& s : inner.no_effect)
      out_.no_effect.push_back(std::move(s));
    for (auto& s : inner.not_simulated)
      out_.not_simulated.push_back(std::move(s));
    for (auto& a : inner.assumptions)
      if (!(checkpointing_ && a.starts_with("no activation recomputation")) && // Trainer's gradient_checkpointing
          !a.starts_with("a PyTorch model under DeepSpeed"))                   // said below, for transformers' model
        out_.assumptions.push_back(std::move(a));
    for (auto& o : inner.origins)
      out_.origins.push_back(std::move(o));
    OrderedJson plan = inner.scenario["plan"];
    if (!fsdp_origin_.empty())
      args.element_of("fsdp").fail("fsdp and deepspeed are both given", "one of them");
    common(plan, plan.contains("optimizer_algorithm") || ds_has_optimizer(ds), true);
    tf32(plan);
    out_.assumptions.emplace_back("a transformers model under Trainer and DeepSpeed: its eager RMSNorm, rotary "
                                  "embedding and gated activation (fused under torch_compile), "
                                  "scaled_dot_product_attention's FlashAttention-2 kernels and DeepSpeed's optimizer "
                                  "step (plan norm_impl, rope_impl, activation_impl, attention, optimizer)");
    return plan;
  }

  bool ds_has_optimizer(const core::Node& ds) const
  {
    return ds.json().is_object() ? ds.json().contains("optimizer") : documents_.back().contains("optimizer");
  }

  Imported& out_;
  const Target& target_;
  const HfTrainerOptions& o_;
  std::int64_t micro_batch_ = 8; // TrainingArguments' defaults
  std::int64_t accumulation_ = 1;
  std::string precision_;
  std::optional<core::Node> tf32_;
  bool checkpointing_ = false;
  std::string fused_origin_; // torch_compile or use_liger_kernel, when true
  std::string algorithm_;
  std::string optimizer_origin_;
  std::optional<core::Node> deepspeed_;
  int zero_stage_ = 0;
  std::string fsdp_origin_;
  std::string offload_origin_; // FSDP's CPU offload, where it was asked for
  std::string backward_prefetch_ = "pre";
  double bucket_mb_ = 25.0;
  std::optional<std::int64_t> seq_length_;
  core::Provenance provenance_;
  std::vector<core::Json> documents_;
};

core::Json value_of(const std::string& text)
{
  if (text == "True" || text == "true")
    return true;
  if (text == "False" || text == "false")
    return false;
  if (text == "None" || text == "null" || text == "~")
    return nullptr;
  if (!text.empty() && (text.front() == '{' || text.front() == '[' || text.front() == '-' ||
                        std::isdigit(static_cast<unsigned char>(text.front())) != 0)) {
    auto parsed = core::Json::parse(text, nullptr, false);
    if (!parsed.is_discarded())
      return parsed;
  }
  return text;
}

} // namespace

core::Json typed_scalars(const core::Json& j)
{
  if (j.is_object()) {
    core::Json out = core::Json::object();
    for (const auto& [key, value] : j.items())
      out[key] = typed_scalars(value);
    return out;
  }
  if (j.is_array()) {
    core::Json out = core::Json::array();
    for (const auto& value : j)
      out.push_back(typed_scalars(value));
    return out;
  }
  return j.is_string() ? value_of(j.get<std::string>()) : j;
}

core::Json hf_arguments_json(const std::vector<std::string>& arguments)
{
  core::Json out = core::Json::object();
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    std::string key = arguments[i];
    if (!key.starts_with("--"))
      throw core::InputError(core::Location{"Trainer arguments", "", ""}, "not an option", key, "--name value");
    key = key.substr(2);
    std::string value;
    if (const auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      out[key] = value_of(value);
    } else if (i + 1 < arguments.size() && !arguments[i + 1].starts_with("--")) {
      out[key] = value_of(arguments[++i]);
    } else {
      out[key] = true; // a flag: --bf16
    }
  }
  return out;
}

Imported import_hf_trainer(const core::Node& args, const Target& target, const HfTrainerOptions& options)
{
  Imported out;
  if (!target.gpus)
    throw core::InputError(args.location(), "the GPU count is not known",
                           "TrainingArguments, which leave it to the launcher", "--gpus N");
  HfImport hf(out, target, options);
  OrderedJson plan = hf.read(args);
  set_scenario(out, target, "hf", args.location().file, options.model, std::move(plan));
  return out;
}

} // namespace sim::importer
