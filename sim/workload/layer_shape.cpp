#include "workload/layer_shape.hpp"

#include "memory/memory_model.hpp"

#include <algorithm>

namespace sim::workload {
namespace {

using hardware::MemoryKernel;

MemoryKernel norm_kernel(model::NormKind kind, plan::NormImpl impl)
{
  const bool rms = kind == model::NormKind::RMSNORM;
  switch (impl) {
    case plan::NormImpl::TE:
      return rms ? MemoryKernel::RMSNORM_TE : MemoryKernel::LAYERNORM_TE;
    case plan::NormImpl::APEX:
      return rms ? MemoryKernel::RMSNORM_APEX : MemoryKernel::LAYERNORM_APEX;
    case plan::NormImpl::APEX_FAST: // FastLayerNorm has no RMSNorm; apex's fused RMSNorm is the kernel then
      return rms ? MemoryKernel::RMSNORM_APEX : MemoryKernel::LAYERNORM_FAST;
    case plan::NormImpl::TORCH:
    case plan::NormImpl::EAGER: // the eager RMSNorm's operations are elementwise kernels; nn.LayerNorm is torch's
      return rms ? MemoryKernel::RMSNORM_TORCH : MemoryKernel::LAYERNORM_TORCH;
  }
  return MemoryKernel::ELEMENTWISE;
}

// The fused attention kernel a plan runs: Transformer Engine picks cuDNN's on Hopper and later (its
// get_attention_backend prefers FusedAttention there), FlashAttention-2 before.
hardware::AttentionImpl attention_impl(plan::Attention a, const hardware::GpuSpec& gpu)
{
  switch (a) {
    case plan::Attention::FLASH1:
      return hardware::AttentionImpl::FLASH1;
    case plan::Attention::FLASH3:
      return hardware::AttentionImpl::FLASH3;
    case plan::Attention::CUDNN:
      return hardware::AttentionImpl::CUDNN;
    case plan::Attention::TE:
      if (gpu.kernel_tables && std::any_of(gpu.kernel_tables->attention.begin(), gpu.kernel_tables->attention.end(),
                                           [](const auto& r) { return r.impl == hardware::AttentionImpl::CUDNN; }))
        return hardware::AttentionImpl::CUDNN;
      return hardware::AttentionImpl::FLASH2;
    case plan::Attention::FLASH2:
    case plan::Attention::UNFUSED:
      break;
  }
  return hardware::AttentionImpl::FLASH2;
}

} // namespace

Shape shape_of(const model::ModelSpec& m, const plan::ParallelPlan& p, const hardware::GpuSpec& gpu, LayerKind kind)
{
  Shape x{};
  x.b = p.micro_batch;
  x.s = static_cast<double>(p.seq_length);
  x.cp = p.cp;
  x.e = p.value_bytes();
  x.cp_kind = p.cp_kind;
  x.T = x.b * x.s / x.cp;
  x.t = p.tp;
  x.sp = p.sequence_parallel && p.tp > 1;
  x.comm_overlap = x.sp && p.tp_comm_overlap;
  x.Tsp = x.sp ? x.T / x.t : x.T;
  x.h = static_cast<double>(m.hidden_size);
  x.q = static_cast<double>(m.q_width());
  x.kv = static_cast<double>(m.kv_width());
  x.v = m.mla ? static_cast<double>(m.o_width()) : x.kv;
  x.f = static_cast<double>(m.ffn_hidden_size);
  x.gated = model::is_gated(m.ffn_kind);
  x.f1 = x.gated ? 2.0 * x.f : x.f;
  x.a = static_cast<double>(m.num_attention_heads);
  x.d = static_cast<double>(m.head_dim);
  x.vocab = static_cast<double>(m.vocab_size);
  x.flash = p.fused_attention();
  x.dropout = m.dropout;
  x.rope = m.position_embedding == model::PositionEmbedding::ROPE;
  x.backward_overlap = p.software.tp_backward_overlap;
  x.fp8 = p.fp8();
  x.recipe = p.fp8_recipe;
  x.gathered_element = x.fp8 ? 1.0 : x.e;
  x.norm = norm_kernel(m.norm, p.software.norm);
  x.eager_norm = p.software.norm == plan::NormImpl::EAGER && m.norm == model::NormKind::RMSNORM;
  x.norm_weights_train = !p.lora();
  x.eager_rope = p.software.rope == plan::PointwiseImpl::EAGER;
  x.eager_activation = p.software.activation == plan::PointwiseImpl::EAGER;
  x.attention = attention_impl(p.software.attention, gpu);
  x.span = p.document_length > 0 ? std::min(x.s, static_cast<double>(p.document_length)) : x.s;
  x.keys = is_windowed(kind) ? std::min(x.span, static_cast<double>(m.sliding_window)) : x.span;
  x.o = static_cast<double>(m.o_width());
  if (m.mla) {
    const model::MlaSpec& a = *m.mla;
    const auto q_lora = static_cast<double>(a.q_lora_rank);
    const auto kv_lora = static_cast<double>(a.kv_lora_rank);
    if (q_lora > 0)
      x.qkv = {{q_lora, x.h, false}, {x.q, q_lora, true}};
    else
      x.qkv = {{x.q, x.h, true}};
    x.qkv.push_back({kv_lora + static_cast<double>(a.qk_rope_head_dim), x.h, false});
    x.qkv.push_back({x.a * static_cast<double>(a.qk_nope_head_dim + a.v_head_dim), kv_lora, true});
  } else {
    x.qkv = {{x.q + 2.0 * x.kv, x.h, true}};
  }
  x.qk_norm = m.qk_norm;
  x.post_norms = m.post_norms;
  x.moe = is_moe(kind);
  if (x.moe) {
    const model::MoeSpec& moe = *m.moe;
    x.et = p.etp;
    x.deepep = p.moe_dispatcher == plan::MoeDispatcher::DEEPEP;
    x.fp8_sent = p.moe_fp8_dispatch ? (1.0 + 4.0 / 128.0) / x.e : 1.0; // an FP8 byte, an fp32 scale per 128
    x.experts = static_cast<double>(moe.num_experts);
    x.topk = static_cast<double>(moe.experts_per_token);
    x.fe = static_cast<double>(moe.expert_ffn_hidden_size);
    x.fe1 = x.gated ? 2.0 * x.fe : x.fe;
    x.fs = static_cast<double>(moe.shared_expert_ffn_hidden_size);
    x.fs1 = x.gated ? 2.0 * x.fs : x.fs;
    x.local_experts = x.experts / p.ep;
    x.pairs_sent = x.Tsp * x.topk;
    x.pairs_taken = memory::expert_tokens_per_rank(m, p);
    x.per_expert = x.pairs_taken / x.local_experts;
    x.dispatched = x.pairs_taken / x.et * x.h * x.e;
    x.expert_gathered = x.pairs_taken * x.h * x.e;
    x.shared_gathered = x.T * x.h * x.e;
  }
  return x;
}

} // namespace sim::workload
