#include "plan/software.hpp"

#include <algorithm>

namespace sim::plan {

Framework framework_of(Generation generation)
{
  switch (generation) {
    case Generation::MEGATRON_CORE:
    case Generation::MEGATRON_LM_2021:
    case Generation::MEGATRON_LM_2022:
      return Framework::MEGATRON;
    case Generation::MEGATRON_DEEPSPEED: // Megatron's model code on DeepSpeed's engine
    case Generation::DEEPSPEED_ZERO3:
    case Generation::DEEPSPEED:
      return Framework::DEEPSPEED;
    case Generation::COMPOSER_FSDP:
    case Generation::FSDP:
      return Framework::FSDP;
    case Generation::TORCHTITAN:
      return Framework::TORCHTITAN;
  }
  return Framework::MEGATRON;
}

Generation current_generation(Framework framework)
{
  switch (framework) {
    case Framework::MEGATRON:
      return Generation::MEGATRON_CORE;
    case Framework::DEEPSPEED:
      return Generation::DEEPSPEED;
    case Framework::FSDP:
      return Generation::FSDP;
    case Framework::TORCHTITAN:
      return Generation::TORCHTITAN;
  }
  return Generation::MEGATRON_CORE;
}

std::string_view generation_summary(Generation generation)
{
  switch (generation) {
    case Generation::MEGATRON_CORE:
      return "Megatron-core with Transformer Engine, core_r0.8.0";
    case Generation::MEGATRON_LM_2021:
      return "Megatron-LM of 2021-08 (SC21)";
    case Generation::MEGATRON_LM_2022:
      return "Megatron-LM's sequence-parallel branch of 2022-05";
    case Generation::MEGATRON_DEEPSPEED:
      return "Megatron-DeepSpeed on DeepSpeed v0.5's pipeline engine";
    case Generation::DEEPSPEED_ZERO3:
      return "DeepSpeed ZeRO-3 v0.3.13-v0.5.10";
    case Generation::DEEPSPEED:
      return "DeepSpeed v0.12-v0.17 under a PyTorch model";
    case Generation::COMPOSER_FSDP:
      return "MosaicML Composer on PyTorch FSDP, 2023";
    case Generation::FSDP:
      return "PyTorch FSDP under torch.autocast, as Trainer and Accelerate run it";
    case Generation::TORCHTITAN:
      return "torchtitan on FSDP2, 2025";
  }
  return "";
}

bool framework_fp32_gradients(Framework framework, hardware::Precision precision, int zero_stage)
{
  const bool full_precision = precision == hardware::Precision::FP32 || precision == hardware::Precision::TF32;
  switch (framework) {
    case Framework::MEGATRON: // bf16 forces fp32 main_grad (--accumulate-allreduce-grads-in-fp32); fp16 keeps 16 bits
      return precision != hardware::Precision::FP16;
    case Framework::DEEPSPEED:
      // engine.get_data_types (v0.12-v0.17): without ZeRO, bf16 accumulates in fp32 (BF16_Optimizer); ZeRO and fp16
      // keep the model's 16-bit type (data_types.grad_accum_dtype unset).
      return full_precision || (precision != hardware::Precision::FP16 && zero_stage == 0);
    case Framework::FSDP:
      // DDP under torch.autocast: fp32 parameters, so fp32 gradients. Sharded: the MixedPrecision policy that
      // Accelerate and Trainer build (set_mixed_precision: param, reduce and buffer dtype all the 16-bit type).
      return full_precision || zero_stage == 0;
    case Framework::TORCHTITAN: // training.mixed_precision_reduce = "float32"
      return true;
  }
  return true;
}

double framework_bucket_bytes(Framework framework, int zero_stage, int dp, double grad_bytes)
{
  constexpr double ddp_bucket_bytes = 25.0 * 1024 * 1024; // torch DDP's bucket_cap_mb = 25
  switch (framework) {
    case Framework::DEEPSPEED:
      // zero_optimization.reduce_bucket_size = 5e8 elements; without ZeRO, allreduce_gradients' bucket_size
      // (MEMORY_OPT_ALLREDUCE_SIZE, 5e8).
      return 5e8 * grad_bytes;
    case Framework::FSDP:
    case Framework::TORCHTITAN:
      // DDP's 25 MiB buckets; sharded, each unit's gradients as its backward ends (a bucket of
      // Megatron's size holds about one layer).
      if (zero_stage == 0)
        return ddp_bucket_bytes;
      [[fallthrough]];
    case Framework::MEGATRON: // Megatron-core's bucket: max(40M, 1M x dp) elements
      return grad_bytes * std::max(40e6, 1e6 * static_cast<double>(dp));
  }
  return grad_bytes * 40e6;
}

bool framework_overlaps_grad_reduce(Framework framework, int zero_stage)
{
  // DeepSpeed: zero_optimization.overlap_comm defaults to stage == 3 (config.py's overlap_comm_valid); without ZeRO
  // the engine all-reduces at the accumulation boundary, after the backward pass. The others reduce as buckets
  // (or FSDP units) finish.
  return framework != Framework::DEEPSPEED || zero_stage == 3;
}

Software software_of(Generation generation, const SoftwareContext& c)
{
  Software s;
  s.generation = generation;
  s.framework = framework_of(generation);
  switch (generation) {
    case Generation::MEGATRON_CORE:
      // core_r0.8.0: TE LayerNorm-linear and attention, fused wgrad accumulation, async TP communication; the
      // non-interleaved schedule synchronises after each batched p2p (batch_p2p_sync), the interleaved one overlaps.
      s.p2p_sync = !c.interleaved;
      break;
    case Generation::MEGATRON_LM_2021:
      // e269e20064 (Aug 2021): apex FusedLayerNorm, unfused attention, synchronous TP all-reduce in backward, fp16
      // gradients accumulated by autograd (bf16 forces fp32 main_grad and the add_ hook), timers that synchronise
      // around every forward, backward and p2p call (10 per micro-batch with pipelining, 4 without).
      s.norm = NormImpl::APEX;
      s.attention = Attention::UNFUSED;
      s.tp_backward_overlap = false;
      s.grad_accumulation = c.fp32_accumulation ? GradAccumulation::HOOK : GradAccumulation::AUTOGRAD;
      s.host_syncs_per_microbatch = c.pipelined ? 10 : 4;
      break;
    case Generation::MEGATRON_LM_2022:
      // sequence_parallel branch (Feb-May 2022): FastLayerNorm (merged 2021-11-17), async TP communication
      // (2021-09-02), gradient-accumulation fusion for fp32 accumulation only (2022-02-22), timers still synchronising
      // (until 2022-08-10).
      s.norm = NormImpl::APEX_FAST;
      s.attention = Attention::UNFUSED;
      s.grad_accumulation = c.fp32_accumulation ? GradAccumulation::FUSED : GradAccumulation::HOOK;
      s.host_syncs_per_microbatch = c.pipelined ? 10 : 4;
      break;
    case Generation::MEGATRON_DEEPSPEED:
      // Megatron-DeepSpeed (forked mid-2021) on DeepSpeed v0.5's PipelineEngine: blocking p2p, about 5 host syncs per
      // micro-batch (meta tolist, pageable copies), FP16_Optimizer.
      s.norm = NormImpl::APEX;
      s.attention = Attention::UNFUSED;
      s.tp_backward_overlap = false;
      s.grad_accumulation = GradAccumulation::AUTOGRAD;
      s.host_syncs_per_microbatch = 5;
      s.optimizer = OptimizerImpl::DEEPSPEED;
      s.pipeline_engine = PipelineEngine::DEEPSPEED;
      break;
    case Generation::DEEPSPEED_ZERO3:
      // DeepSpeed v0.3.13-v0.5.10 stage 3: one all-gather per parameter tensor after a device sync, gradients
      // reduce-scattered per tensor every micro-batch.
      s.norm = NormImpl::APEX;
      s.attention = Attention::UNFUSED;
      s.tp_backward_overlap = false;
      s.grad_accumulation = GradAccumulation::FUSED;
      s.optimizer = OptimizerImpl::DEEPSPEED;
      s.zero3_per_tensor = true;
      break;
    case Generation::DEEPSPEED:
      // DeepSpeed's engine and ZeRO under a PyTorch model: PyTorch's norms, scaled_dot_product_attention's
      // FlashAttention-2 kernels, the engine's mixed-precision optimizer wrapper.
      s.norm = NormImpl::TORCH;
      s.attention = Attention::FLASH2;
      s.optimizer = OptimizerImpl::DEEPSPEED;
      break;
    case Generation::FSDP:
      // PyTorch FSDP1 (PyTorch 2.x) under torch.autocast: PyTorch's norms, SDPA's FlashAttention-2, autograd
      // accumulating into .grad, torch's fused AdamW, cross entropy in fp32 (autocast's fp32 list), BACKWARD_PRE.
      s.norm = NormImpl::TORCH;
      s.attention = Attention::FLASH2;
      s.grad_accumulation = GradAccumulation::AUTOGRAD;
      s.optimizer = OptimizerImpl::FUSED;
      s.loss = LossImpl::EAGER_FP32;
      break;
    case Generation::TORCHTITAN:
      // torchtitan (2025): PyTorch's norms, SDPA's FlashAttention-2, fused AdamW, cross entropy on the logits cast
      // to fp32 (components/loss.py).
      s.norm = NormImpl::TORCH;
      s.attention = Attention::FLASH2;
      s.optimizer = OptimizerImpl::FUSED;
      s.loss = LossImpl::EAGER_FP32;
      break;
    case Generation::COMPOSER_FSDP:
      // Composer 0.13-0.16 FSDP: PyTorch LayerNorm (llm-foundry's low_precision_layernorm), reduce-scatter every
      // micro-batch (no gradient accumulation pass), BACKWARD_POST prefetch, DecoupledAdamW in a Python loop.
      s.norm = NormImpl::TORCH;
      s.attention = Attention::FLASH2;
      s.grad_accumulation = GradAccumulation::FUSED;
      s.optimizer = OptimizerImpl::COMPOSER;
      s.backward_prefetch = BackwardPrefetch::POST;
      break;
  }
  return s;
}

} // namespace sim::plan
