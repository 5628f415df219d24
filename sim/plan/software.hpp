// How the training framework runs a step, where its generations differ in time: which norm and attention kernels,
// whether tensor-parallel backward communication overlaps the weight-gradient GEMM, how gradients accumulate over
// micro-batches, host synchronisation, the optimizer's passes over memory, the pipeline engine and how sharded data
// parallelism prefetches. `framework` names the framework, `software` one generation of its code, whose history sets
// every default; each key overrides.
#pragma once

#include "core/json_reader.hpp"
#include "hardware/gpu_spec.hpp"

#include <array>
#include <string>
#include <string_view>

namespace sim::plan {

// The framework that runs the step: Megatron (Megatron-LM, Megatron-core, NeMo, Megatron-Bridge), DeepSpeed (its
// engine and ZeRO, under a PyTorch script, Hugging Face Trainer or Accelerate), PyTorch FSDP (FSDP1, as Trainer,
// Accelerate and Composer wrap it) or torchtitan (FSDP2 with DTensor parallelism).
enum class Framework { MEGATRON, DEEPSPEED, FSDP, TORCHTITAN };

inline constexpr std::array<core::Choice<Framework>, 4> framework_choices{{{"megatron", Framework::MEGATRON},
                                                                           {"deepspeed", Framework::DEEPSPEED},
                                                                           {"fsdp", Framework::FSDP},
                                                                           {"torchtitan", Framework::TORCHTITAN}}};

enum class Generation {
  MEGATRON_CORE,      // Megatron-core with Transformer Engine (2024 on): the default
  MEGATRON_LM_2021,   // Megatron-LM as in the SC21 paper (examples/sc21, Aug 2021)
  MEGATRON_LM_2022,   // Megatron-LM's sequence-parallel branch (Korthikanti et al., May 2022)
  MEGATRON_DEEPSPEED, // Megatron-DeepSpeed on DeepSpeed's pipeline engine (MT-NLG, BLOOM; 2021-22)
  DEEPSPEED_ZERO3,    // DeepSpeed ZeRO-3 of 2021 (v0.3-v0.5)
  DEEPSPEED,          // DeepSpeed v0.12-v0.17 (2023-11 to 2025-09) under a PyTorch model
  COMPOSER_FSDP,      // MosaicML Composer / llm-foundry on PyTorch FSDP (2023)
  FSDP,               // PyTorch FSDP1 under torch.autocast (Trainer, Accelerate; PyTorch 2.x)
  TORCHTITAN,         // torchtitan on FSDP2 (2025)
};

inline constexpr std::array<core::Choice<Generation>, 9> generation_choices{
    {{"megatron-core", Generation::MEGATRON_CORE},
     {"megatron-lm-2021", Generation::MEGATRON_LM_2021},
     {"megatron-lm-2022", Generation::MEGATRON_LM_2022},
     {"megatron-deepspeed", Generation::MEGATRON_DEEPSPEED},
     {"deepspeed-zero3-2021", Generation::DEEPSPEED_ZERO3},
     {"deepspeed", Generation::DEEPSPEED},
     {"composer-fsdp", Generation::COMPOSER_FSDP},
     {"fsdp", Generation::FSDP},
     {"torchtitan", Generation::TORCHTITAN}}};

// The framework whose code a generation is, and a framework's current generation (a plan naming the framework alone).
Framework framework_of(Generation generation);
Generation current_generation(Framework framework);
// The framework and the code a generation stands for, in a few words ("DeepSpeed v0.12-v0.17").
std::string_view generation_summary(Generation generation);

// LayerNorm / RMSNorm kernels: Transformer Engine's, apex's FusedLayerNorm (vendored by Megatron-LM in 2021), apex's
// FastLayerNorm (Megatron-LM from 2021-11), PyTorch's own, or the model's Python code (eager: an RMSNorm written as
// PyTorch operations, as transformers' LlamaRMSNorm, torchtune's and LitGPT's RMSNorm are, each operation a kernel;
// a LayerNorm is nn.LayerNorm there, PyTorch's own kernel).
enum class NormImpl { TE, APEX, APEX_FAST, TORCH, EAGER };

inline constexpr std::array<core::Choice<NormImpl>, 5> norm_impl_choices{{{"te", NormImpl::TE},
                                                                          {"apex", NormImpl::APEX},
                                                                          {"apex_fast", NormImpl::APEX_FAST},
                                                                          {"torch", NormImpl::TORCH},
                                                                          {"eager", NormImpl::EAGER}}};

// The rotary embedding, and the gated activation, each: one fused kernel (Transformer Engine's, Megatron's, Liger's,
// flash-attn's rotary, or what torch.compile generates), or the model's Python code run eagerly, each PyTorch
// operation its own kernel and autograd's backward for each (transformers' apply_rotary_pos_emb and rotate_half;
// act_fn(gate) * up).
enum class PointwiseImpl { FUSED, EAGER };

inline constexpr std::array<core::Choice<PointwiseImpl>, 2> pointwise_impl_choices{
    {{"fused", PointwiseImpl::FUSED}, {"eager", PointwiseImpl::EAGER}}};

// The attention core: a fused kernel (Transformer Engine's choice: cuDNN where the catalogue has it, else
// FlashAttention-2; or a named one), or unfused (two batched GEMMs with Megatron's fused scale-mask-softmax and a
// separate dropout between them).
enum class Attention { TE, FLASH1, FLASH2, FLASH3, CUDNN, UNFUSED };

inline constexpr std::array<core::Choice<Attention>, 6> attention_choices{{{"te", Attention::TE},
                                                                           {"flash1", Attention::FLASH1},
                                                                           {"flash2", Attention::FLASH2},
                                                                           {"flash3", Attention::FLASH3},
                                                                           {"cudnn", Attention::CUDNN},
                                                                           {"unfused", Attention::UNFUSED}}};

// How a micro-batch's weight gradients join the accumulated ones: inside the weight-gradient GEMM (beta = 1 into the
// fp32 main_grad, Megatron-LM from 2022-02), a main_grad.add_ hook per parameter (10 bytes per parameter in fp32,
// 6 in 16 bits), or autograd's AccumulateGrad into a 16-bit .grad (6 bytes, from the second micro-batch on).
enum class GradAccumulation { FUSED, HOOK, AUTOGRAD };

inline constexpr std::array<core::Choice<GradAccumulation>, 3> grad_accumulation_choices{
    {{"fused", GradAccumulation::FUSED}, {"hook", GradAccumulation::HOOK}, {"autograd", GradAccumulation::AUTOGRAD}}};

// The optimizer step's passes over memory per parameter it updates: one fused Adam (28 bytes), Megatron's mixed
// precision optimizer (cast, unscale and inf check, norm, Adam, copy back: 52 bytes in fp16, 38 in bf16), DeepSpeed's
// FP16_Optimizer (70), Composer's per-tensor DecoupledAdamW (92).
enum class OptimizerImpl { FUSED, MEGATRON, DEEPSPEED, COMPOSER };

inline constexpr std::array<core::Choice<OptimizerImpl>, 4> optimizer_impl_choices{
    {{"fused", OptimizerImpl::FUSED},
     {"megatron", OptimizerImpl::MEGATRON},
     {"deepspeed", OptimizerImpl::DEEPSPEED},
     {"composer", OptimizerImpl::COMPOSER}}};

// Megatron's pipeline schedules, or DeepSpeed's PipelineEngine (non-interleaved 1F1B; activations partitioned over
// the tensor-parallel group and gathered again in backward; gradients reduced after the pipeline flush).
enum class PipelineEngine { MEGATRON, DEEPSPEED };

inline constexpr std::array<core::Choice<PipelineEngine>, 2> pipeline_engine_choices{
    {{"megatron", PipelineEngine::MEGATRON}, {"deepspeed", PipelineEngine::DEEPSPEED}}};

// When sharded data parallelism (ZeRO-3 / FSDP FULL_SHARD) gathers the next layer's parameters in backward: before
// the current layer's gradient computation, overlapping it (FSDP BACKWARD_PRE, DeepSpeed's prefetch), or after it
// (FSDP BACKWARD_POST, Composer's default), overlapping only the reduce-scatter.
enum class BackwardPrefetch { PRE, POST };

inline constexpr std::array<core::Choice<BackwardPrefetch>, 2> backward_prefetch_choices{
    {{"pre", BackwardPrefetch::PRE}, {"post", BackwardPrefetch::POST}}};

// The cross entropy over the vocabulary, by what it keeps from forward to backward and what it holds at its
// busiest moment, per logit (Megatron-core tensor_parallel/cross_entropy.py; Hugging Face's GPT-2-style
// CrossEntropyLoss on the model's 16-bit logits, as Qwen-1's modeling_qwen.py; the same in fp32, under autocast or
// after transformers' Llama `logits.float()`; torchtune's CEWithChunkedOutputLoss with its compute_cross_entropy
// compiled, modules/loss/ce_chunked_output_loss.py).
enum class LossImpl { FUSED, EAGER, EAGER_FP32, CHUNKED };

inline constexpr std::array<core::Choice<LossImpl>, 4> loss_impl_choices{{{"fused", LossImpl::FUSED},
                                                                          {"eager", LossImpl::EAGER},
                                                                          {"eager_fp32", LossImpl::EAGER_FP32},
                                                                          {"chunked", LossImpl::CHUNKED}}};

struct Software {
  Generation generation = Generation::MEGATRON_CORE;
  Framework framework = Framework::MEGATRON; // framework_of(generation)
  NormImpl norm = NormImpl::TE;
  Attention attention = Attention::TE;
  bool tp_backward_overlap = true; // dgrad all-reduce (or SP reduce-scatter) beside the weight-gradient GEMM
  GradAccumulation grad_accumulation = GradAccumulation::FUSED;
  bool p2p_sync = true;              // the device is synchronised after each pipeline send/recv: sends block the sender
  int host_syncs_per_microbatch = 0; // other device synchronisations per micro-batch (timers), each idling the GPU
  OptimizerImpl optimizer = OptimizerImpl::MEGATRON;
  PipelineEngine pipeline_engine = PipelineEngine::MEGATRON;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::PRE;
  bool zero3_per_tensor = false; // ZeRO-3 gathers and reduces each parameter tensor separately (DeepSpeed of 2021)
  bool host_launch = true;       // the host launches each kernel (hardware/host_launch): a GPU may wait for it
  LossImpl loss = LossImpl::FUSED;
  PointwiseImpl rope = PointwiseImpl::FUSED;
  PointwiseImpl activation = PointwiseImpl::FUSED;

  bool operator==(const Software&) const = default;
};

// What a generation's defaults depend on in the rest of the plan.
struct SoftwareContext {
  bool pipelined = false;         // pp > 1
  bool interleaved = false;       // the interleaved schedule (Megatron-core overlaps its sends without a sync)
  bool fp32_accumulation = false; // gradients accumulated in fp32 (bf16 runs): the 2021-22 hook moves 10 bytes
};

// The defaults of a generation, read from its code (see scenarios/README.md: "Software generations").
Software software_of(Generation generation, const SoftwareContext& context);

// What a framework does with gradients unless told otherwise, read from its code: whether they are accumulated and
// reduced in fp32, how many bytes of gradients one data-parallel bucket holds (dp: the data-parallel ranks; gradients
// of grad_bytes each), and whether their reduction overlaps the backward pass.
bool framework_fp32_gradients(Framework framework, hardware::Precision precision, int zero_stage);
double framework_bucket_bytes(Framework framework, int zero_stage, int dp, double grad_bytes);
bool framework_overlaps_grad_reduce(Framework framework, int zero_stage);

} // namespace sim::plan
