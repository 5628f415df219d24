#include "plan/software.hpp"

namespace sim::plan {

Software software_of(Generation generation, const SoftwareContext& c)
{
  Software s;
  s.generation = generation;
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
