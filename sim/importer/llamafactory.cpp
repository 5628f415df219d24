#include "importer/llamafactory.hpp"

#include "core/document.hpp"

#include <fmt/format.h>
#include <map>
#include <set>
#include <sstream>

namespace sim::importer {
namespace {

// LLaMA-Factory's own arguments (hparams/model_args.py, data_args.py, finetuning_args.py) that change nothing in one
// step's time or memory: the model's and data's sources, templates, caching, evaluation and export.
const std::set<std::string, std::less<>>& no_effect_keys()
{
  static const std::set<std::string, std::less<>> keys{"model_name_or_path",
                                                       "adapter_name_or_path",
                                                       "trust_remote_code",
                                                       "cache_dir",
                                                       "hf_hub_token",
                                                       "dataset",
                                                       "eval_dataset",
                                                       "dataset_dir",
                                                       "template",
                                                       "max_samples",
                                                       "overwrite_cache",
                                                       "preprocessing_num_workers",
                                                       "val_size",
                                                       "tokenized_path",
                                                       "streaming",
                                                       "buffer_size",
                                                       "mix_strategy",
                                                       "interleave_probs",
                                                       "plot_loss",
                                                       "lora_alpha",
                                                       "create_new_adapter",
                                                       "export_dir",
                                                       "export_size",
                                                       "infer_backend",
                                                       "ignore_pad_token_for_loss",
                                                       "train_on_prompt",
                                                       "mask_history",
                                                       "default_system",
                                                       "enable_thinking",
                                                       "media_dir",
                                                       "image_max_pixels",
                                                       "video_max_pixels",
                                                       "new_special_tokens",
                                                       "resize_vocab",
                                                       "use_fast_tokenizer",
                                                       "split_special_tokens",
                                                       "quantization_type",
                                                       "double_quantization",
                                                       "upcast_layernorm",
                                                       "upcast_lmhead_output",
                                                       "print_param_status",
                                                       "include_effective_tokens_per_second",
                                                       "compute_accuracy"};
  return keys;
}

class LlamaFactoryImport {
 public:
  LlamaFactoryImport(Imported& out) : out_(out) {}

  // Reads its own keys; the rest (Trainer's) goes into `trainer`.
  void read(const core::Node& config, core::Json& trainer)
  {
    if (!config.json().is_object())
      config.fail("a LLaMA-Factory configuration is a mapping", "keys such as finetuning_type: lora");
    for (const auto& [key, value] : config.json().items()) {
      const core::Node n = config.element_of(key);
      if (key == "finetuning_type")
        method_ = n.as_choice<Method>(std::span<const core::Choice<Method>>(method_choices));
      else if (key == "lora_rank")
        rank_ = n.as_integer(1, 1 << 16);
      else if (key == "lora_dropout")
        dropout_ = n.as_number(0.0, 0.99);
      else if (key == "lora_target")
        targets(n);
      else if (key == "quantization_bit")
        quantization(n);
      else if (key == "quantization_method")
        bitsandbytes_ = n.as_string() == "bitsandbytes" || n.as_string() == "bnb";
      else if (key == "cutoff_len")
        cutoff_ = n.as_integer(1, 1 << 24);
      else if (key == "disable_gradient_checkpointing")
        checkpointing_ = !n.as_bool();
      else if (key == "flash_attn")
        attention(n);
      else if (key == "stage")
        stage(n);
      else if (key == "enable_liger_kernel")
        liger(n);
      else if (key == "use_dora" || key == "pissa_init" || key == "use_rslora" || key == "use_unsloth" ||
               key == "use_galore" || key == "use_badam" || key == "use_apollo")
        not_simulated_if_true(n, fmt::format("{} is not simulated", key));
      else if (key == "additional_target" || key == "freeze_trainable_layers" || key == "freeze_trainable_modules")
        out_.not_simulated.push_back(Setting{spelt(n), "not simulated: only the LoRA targets (or every weight) train"});
      else if (no_effect_keys().count(key) != 0)
        out_.no_effect.push_back(Setting{spelt(n), ""});
      else
        trainer[key] = value;
    }
  }

  // What LLaMA-Factory sets over the plan Trainer's arguments gave.
  void apply(OrderedJson& plan) const
  {
    if (!plan.contains("seq_length"))
      plan["seq_length"] = cutoff_;
    if (checkpointing_)
      plan["recompute"] = "full";
    if (attention_)
      plan["attention"] = *attention_;
    if (!liger_origin_.empty()) {
      plan["norm_impl"] = "torch";
      plan["rope_impl"] = "fused";
      plan["activation_impl"] = "fused";
    }
    if (method_ == Method::LORA) {
      plan["lora_rank"] = rank_;
      if (dropout_ > 0)
        plan["lora_dropout"] = dropout_;
      if (!all_targets_)
        plan["lora_targets"] = target_names_;
      if (quantized_ && bitsandbytes_)
        plan["base_quantization"] = "nf4";
    }
  }

  void notes() const
  {
    if (quantized_ && !bitsandbytes_)
      out_.not_simulated.push_back(Setting{"/quantization_method", "only bitsandbytes' 4-bit NF4 base is simulated: "
                                                                   "simulated over the 16-bit base"});
    if (checkpointing_)
      out_.assumptions.emplace_back("gradient checkpointing, LLaMA-Factory's default (disable_gradient_checkpointing: "
                                    "false): full recomputation");
    if (method_ == Method::FREEZE)
      out_.not_simulated.push_back(
          Setting{"/finetuning_type \"freeze\"", "freeze tuning (the last layers train) is simulated as full"});
  }

 private:
  enum class Method { FULL, LORA, FREEZE };
  static constexpr std::array<core::Choice<Method>, 3> method_choices{
      {{"full", Method::FULL}, {"lora", Method::LORA}, {"freeze", Method::FREEZE}}};

  // "all", or module names separated by commas (Llama's: q_proj, ..., down_proj).
  void targets(const core::Node& n)
  {
    std::stringstream in(n.as_string());
    static const std::set<std::string, std::less<>> known{"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                          "gate_proj", "up_proj", "down_proj"};
    all_targets_ = false;
    target_names_ = OrderedJson::array();
    for (std::string name; std::getline(in, name, ',');) {
      name.erase(0, name.find_first_not_of(' '));
      name.erase(name.find_last_not_of(' ') + 1);
      if (name == "all") {
        all_targets_ = true;
        return;
      }
      if (known.count(name) == 0) {
        out_.not_simulated.push_back(
            Setting{spelt(n), fmt::format("module '{}' is not one of Llama's projections: no adapter there", name)});
        continue;
      }
      target_names_.push_back(name);
    }
    if (target_names_.empty())
      n.fail("no projection simtrain knows", "all, or some of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
                                             "down_proj");
  }

  void quantization(const core::Node& n)
  {
    if (n.json().is_null())
      return;
    const auto bits = n.as_integer(2, 8);
    if (bits == 4)
      quantized_ = true;
    else
      out_.not_simulated.push_back(
          Setting{spelt(n), fmt::format("a {}-bit base is not simulated: simulated over the 16-bit base", bits)});
  }

  void attention(const core::Node& n)
  {
    const std::string impl = n.as_string();
    if (impl == "fa2" || impl == "sdpa" || impl == "auto")
      attention_ = "flash2";
    else if (impl == "disabled")
      attention_ = "unfused";
    else
      n.fail_found("unknown attention implementation", impl, "auto, fa2, sdpa or disabled");
  }

  // Liger's kernels (LLaMA-Factory's apply_liger_kernel): fused RMSNorm, rotary embedding and SwiGLU in place of
  // transformers' eager operations; its fused linear cross entropy (used unless logits are needed) is not simulated.
  void liger(const core::Node& n)
  {
    if (!n.as_bool()) {
      out_.no_effect.push_back(Setting{spelt(n), ""});
      return;
    }
    liger_origin_ = n.pointer();
    for (const char* key : {"/plan/norm_impl", "/plan/rope_impl", "/plan/activation_impl"})
      out_.origins.emplace_back(key, liger_origin_);
    out_.not_simulated.push_back(Setting{spelt(n), "Liger's fused linear cross entropy is not simulated: the loss is "
                                                   "Trainer's, on the whole logits (its fused RMSNorm, RoPE and "
                                                   "SwiGLU are)"});
  }

  void stage(const core::Node& n)
  {
    const std::string s = n.as_string();
    if (s == "sft" || s == "pt")
      out_.no_effect.push_back(Setting{spelt(n), ""});
    else
      out_.not_simulated.push_back(
          Setting{spelt(n), fmt::format("the '{}' stage (its reference model, rewards or rollouts) is simulated as "
                                        "supervised fine-tuning",
                                        s)});
  }

  void not_simulated_if_true(const core::Node& n, const std::string& why)
  {
    if (n.json().is_boolean() && !n.json().get<bool>())
      out_.no_effect.push_back(Setting{spelt(n), ""});
    else
      out_.not_simulated.push_back(Setting{spelt(n), why});
  }

  Imported& out_;
  Method method_ = Method::LORA; // FinetuningArguments' default
  std::int64_t rank_ = 8;        // its lora_rank default
  double dropout_ = 0.0;         // its lora_dropout default
  bool all_targets_ = true;      // "all"
  OrderedJson target_names_ = OrderedJson::array();
  bool quantized_ = false;
  bool bitsandbytes_ = true;   // quantization_method's default
  std::int64_t cutoff_ = 2048; // DataArguments' cutoff_len default
  bool checkpointing_ = true;
  std::optional<std::string> attention_;
  std::string liger_origin_; // enable_liger_kernel, when true
};

} // namespace

Imported import_llamafactory(const core::Node& config, const Target& target, const HfTrainerOptions& options)
{
  Imported own;
  LlamaFactoryImport lf(own);
  core::Json trainer = core::Json::object();
  lf.read(config, trainer);
  // Trainer's arguments keep their pointers: they are the same keys of the same file.
  const core::Node trainer_node(trainer, config.pointer(), config.provenance());
  Imported out = import_hf_trainer(trainer_node, target, options);
  OrderedJson plan = out.scenario["plan"];
  lf.apply(plan);
  lf.notes();
  out.scenario["plan"] = std::move(plan);
  out.scenario["description"] = fmt::format("Imported by simtrain import llamafactory from {}", config.location().file);
  add_accounts(out, std::move(own));
  return out;
}

} // namespace sim::importer
