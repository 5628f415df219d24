#include "validation/software_choice.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <regex>

namespace sim::validation {
namespace {

std::string lower(std::string s)
{
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool mentions(const std::string& lowered, std::string_view what)
{
  return lowered.find(what) != std::string::npos;
}

std::string format_date(const std::optional<YearMonth>& d)
{
  return d ? fmt::format("{}-{:02}", d->year, d->month) : "unknown";
}

bool before(const std::optional<YearMonth>& d, int year, int month)
{
  return d && d->value() < YearMonth{year, month}.value();
}

} // namespace

std::optional<YearMonth> latest_date(const std::string& text)
{
  std::optional<YearMonth> latest;
  const auto keep = [&latest](YearMonth d) {
    if (d.year >= 2015 && d.year <= 2039 && d.month >= 1 && d.month <= 12 && (!latest || d.value() > latest->value()))
      latest = d;
  };
  static const std::regex full(R"((?:^|[^0-9])(20[1-3][0-9])-([01][0-9])(?:-[0-3][0-9])?(?=[^0-9]|$))");
  static const std::regex arxiv(R"((?:^|[^0-9.])([1-3][0-9])([01][0-9])\.[0-9]{4,5}(?=[^0-9]|$))");
  static const std::regex sc(R"(\bSC ?'?([1-3][0-9])\b)");
  static const std::regex year(R"((?:^|[^0-9])(20[1-3][0-9])(?=[^0-9]|$))");
  // A release named by year and month: "NeMo 25.02 container", "Container: NeMo 26.04.01", "tag v24.11.1".
  static const std::regex release(R"(\b(?:nemo|container:?|tag) v?([1-3][0-9])\.([01][0-9])(?:\.[0-9]+)*(?=[^0-9.]|$))",
                                  std::regex::icase);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), full); it != std::sregex_iterator(); ++it)
    keep({std::stoi((*it)[1].str()), std::stoi((*it)[2].str())});
  for (auto it = std::sregex_iterator(text.begin(), text.end(), arxiv); it != std::sregex_iterator(); ++it)
    keep({2000 + std::stoi((*it)[1].str()), std::stoi((*it)[2].str())});
  for (auto it = std::sregex_iterator(text.begin(), text.end(), sc); it != std::sregex_iterator(); ++it)
    keep({2000 + std::stoi((*it)[1].str()), 6});
  for (auto it = std::sregex_iterator(text.begin(), text.end(), release); it != std::sregex_iterator(); ++it)
    keep({2000 + std::stoi((*it)[1].str()), std::stoi((*it)[2].str())});
  if (!latest) // a bare year only when nothing more precise is given
    for (auto it = std::sregex_iterator(text.begin(), text.end(), year); it != std::sregex_iterator(); ++it)
      keep({std::stoi((*it)[1].str()), 6});
  return latest;
}

SoftwareChoice choose_software(const CaseText& t)
{
  SoftwareChoice c;
  const std::string all = lower(t.source + " | " + t.framework + " | " + t.notes);
  c.date = latest_date(t.source + " | " + t.framework); // the framework may name its container's release
  auto& plan = c.plan;
  const auto assume = [&c](std::string what) { c.assumptions.push_back(std::move(what)); };

  if (mentions(all, "llm-foundry") || mentions(all, "composer") || mentions(all, "mosaicml"))
    c.framework = Framework::COMPOSER;
  else if (mentions(all, "megatron-deepspeed") || mentions(all, "megatron-turing") || mentions(all, "mt-nlg") ||
           mentions(all, "bigscience") || mentions(all, "bloom"))
    c.framework = Framework::MEGATRON_DEEPSPEED;
  else if (mentions(all, "automodel"))
    c.framework = Framework::AUTOMODEL;
  else if (mentions(all, "torchtune") || mentions(all, "hugging face") || mentions(all, "peft") ||
           mentions(all, "llama-factory") || mentions(all, "litgpt") || mentions(all, "qwenlm/qwen"))
    c.framework = Framework::PYTORCH;
  else if (t.zero_stage == 3 && mentions(all, "deepspeed"))
    c.framework = Framework::DEEPSPEED_ZERO3;
  else if (mentions(all, "megatron") || mentions(all, "nemo") || mentions(all, "narayanan") ||
           mentions(all, "korthikanti"))
    c.framework = Framework::MEGATRON;

  switch (c.framework) {
    case Framework::COMPOSER:
      plan["software"] = "composer-fsdp";
      assume("software: Composer/llm-foundry on PyTorch FSDP (torch LayerNorm, reduce-scatter every micro-batch, "
             "BACKWARD_POST prefetch, DecoupledAdamW)");
      // llm-foundry's benchmark script ran its own attention default whatever the yamls said:
      // scripts/train/benchmarking/submit_benchmarks.py --attn_impl default 'triton' (300cc5c58, b2a43a147), the
      // Triton kernel of flash-attn 0.2.8 whose docstring rates its forward+backward "slightly slower" than
      // FlashAttention-1's CUDA kernel.
      if (mentions(all, "benchmarking")) {
        plan["attention"] = "flash1";
        assume("attention: the benchmark script's attn_impl triton (flash-attn 0.2.8's Triton kernel, \"slightly "
               "slower\" than FlashAttention-1): FlashAttention-1's measured curve");
      }
      return c;
    case Framework::MEGATRON_DEEPSPEED:
      plan["software"] = "megatron-deepspeed";
      assume("software: Megatron-DeepSpeed on DeepSpeed's pipeline engine (2021 Megatron kernels, blocking p2p, "
             "gradients reduced after the flush, FP16_Optimizer)");
      return c;
    case Framework::DEEPSPEED_ZERO3:
      if (before(c.date, 2022, 3)) {
        plan["software"] = "deepspeed-zero3-2021";
        assume(fmt::format("software: DeepSpeed ZeRO-3 before v0.6 (dated {}): one all-gather and one reduce-scatter "
                           "per parameter tensor",
                           format_date(c.date)));
      } else {
        plan["software"] = "megatron-core";
        assume(fmt::format("software: DeepSpeed ZeRO-3 from v0.6 on (dated {}): coalesced gathers per layer",
                           format_date(c.date)));
      }
      return c;
    case Framework::PYTORCH:
      // The Hugging Face Trainer importer's choices (importer/hf_trainer.cpp): PyTorch's norms,
      // scaled_dot_product_attention's FlashAttention-2 kernels, one fused optimizer pass, autograd accumulating the
      // gradients; every kernel launched by the eager host.
      plan["norm_impl"] = "torch";
      plan["attention"] = "flash2";
      plan["optimizer"] = "fused";
      plan["grad_accumulation"] = "autograd";
      assume("software: a PyTorch model in eager mode (scaled_dot_product_attention's FlashAttention-2, a fused "
             "optimizer step, autograd's gradient accumulation, every kernel launched by the host)");
      if (t.compiled) {
        plan["norm_impl"] = "torch";
        plan["rope_impl"] = "fused";
        plan["activation_impl"] = "fused";
        assume("torch.compile: the norms, the rotary embedding and the gated activation each one fused kernel "
               "(Inductor's fusions of their operations)");
      } else if (mentions(all, "qwenlm/qwen")) {
        // modeling_qwen.py imports flash-attn's rotary (in the flash-attn package from 2.1.1 on; the profile ran
        // FlashAttention-2) and its rms_norm only from the separately built csrc/layer_norm, which the README lists
        // as optional and leaves commented out; QWenMLP computes a1 * F.silu(a2).
        plan["norm_impl"] = "eager";
        plan["rope_impl"] = "fused";
        plan["activation_impl"] = "eager";
        assume("Qwen-1's modeling_qwen.py with FlashAttention-2 installed: flash-attn's fused rotary; its own RMSNorm "
               "(flash-attn's fused one needs the optional csrc/layer_norm build) and a1 * F.silu(a2) run eagerly");
      } else {
        plan["norm_impl"] = "eager";
        plan["rope_impl"] = "eager";
        plan["activation_impl"] = "eager";
        assume("the model's own Python code, each operation a kernel (transformers' LlamaRMSNorm: fp32 upcast, "
               "square, mean, rsqrt, scale, downcast, weight; apply_rotary_pos_emb with rotate_half; act_fn(gate) * "
               "up), autograd's backward for each");
      }
      if (mentions(all, "torchtune")) {
        plan["loss_impl"] = "chunked";
        assume("loss: torchtune's CEWithChunkedOutputLoss with its cross entropy compiled (the recipes' loss; the "
               "16-bit logit chunks kept, one chunk upcast at a time)");
      } else if (t.zero_stage >= 1 && mentions(all, "deepspeed")) {
        plan["loss_impl"] = "eager";
        assume("loss: Hugging Face's CrossEntropyLoss on the model's 16-bit logits under DeepSpeed's bf16 (no "
               "autocast: the shifted contiguous copy and log_softmax's 16-bit output)");
      } else {
        plan["loss_impl"] = "eager_fp32";
        assume("loss: Hugging Face's CrossEntropyLoss under Trainer's bf16 autocast, which computes it in fp32 (the "
               "16-bit logits, their shifted copy, its fp32 upcast and log_softmax's fp32 output)");
      }
      return c;
    case Framework::AUTOMODEL:
      // NeMo AutoModel's benchmark recipes (its performance summary's "TE" kernels: Transformer Engine's RMSNorm,
      // Linear and DotProductAttention) run the kernels Megatron-core's Transformer Engine layers run, under FSDP2.
      plan["software"] = "megatron-core";
      assume("software: NeMo AutoModel with Transformer Engine's layers (RMSNorm, Linear, DotProductAttention): "
             "Megatron-core's kernels, under PyTorch FSDP2");
      return c;
    case Framework::MEGATRON:
    case Framework::UNKNOWN:
      break;
  }

  const std::string who = c.framework == Framework::MEGATRON ? "Megatron-LM" : "framework not named; Megatron-LM";
  if (!c.date) {
    plan["software"] = "megatron-core";
    assume(fmt::format("software: {} of unknown date: Megatron-core with Transformer Engine", who));
  } else if (t.fp8) { // --fp8-format needs Transformer Engine (megatron/core/transformer's TE layers), at any date
    plan["software"] = "megatron-core";
    assume(fmt::format("software: {} of {} in FP8: Megatron-core with Transformer Engine, which FP8 needs", who,
                       format_date(c.date)));
  } else if (before(c.date, 2021, 9)) {
    // Asynchronous TP all-reduce arrived 2021-09-02 (6e1bde1e0f).
    plan["software"] = "megatron-lm-2021";
    assume(fmt::format("software: {} of {} (before the asynchronous TP all-reduce of 2021-09): apex LayerNorm, "
                       "unfused attention, blocking TP backward, timers that synchronise the device",
                       who, format_date(c.date)));
  } else if (before(c.date, 2024, 4)) {
    // Transformer Engine became the default implementation on 2024-04-02 (e7b74a4b7e).
    plan["software"] = "megatron-lm-2022";
    std::string what = "FastLayerNorm, asynchronous TP communication, fused gradient accumulation";
    if (!before(c.date, 2022, 8)) { // timers stopped synchronising by default on 2022-08-10 (d20739121e)
      plan["host_syncs_per_microbatch"] = 0;
      what += ", no timer synchronisation";
    }
    if (!before(c.date, 2023, 1)) { // --use-flash-attn, 2023
      plan["attention"] = "flash2";
      what += ", FlashAttention-2";
    } else {
      what += ", unfused attention";
    }
    assume(fmt::format("software: {} of {}: {}", who, format_date(c.date), what));
  } else {
    plan["software"] = "megatron-core";
    assume(fmt::format("software: {} of {}: Megatron-core with Transformer Engine", who, format_date(c.date)));
  }
  return c;
}

} // namespace sim::validation
