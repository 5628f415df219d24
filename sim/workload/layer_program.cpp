#include "workload/layer_program.hpp"

#include "memory/memory_model.hpp"

#include <algorithm>

namespace sim::workload {
namespace {

using hardware::gemm;
using hardware::GemmLayout;
using hardware::Kernel;
using hardware::memory_bound;
using hardware::MemoryKernel;

constexpr double e = 2.0; // bytes per 16-bit element

// Shapes of one layer on one tensor-parallel rank for one micro-batch.
struct Shape {
  double b, s, T, Tsp; // micro-batch, sequence, tokens on this GPU (b s / cp), tokens outside the TP region (T / t, SP)
  double cp;           // context-parallel ranks sharing each sequence
  plan::CpKind cp_kind;
  double h, q, kv, v, f, f1, a, d, t, vocab; // v: the values' width (MLA's differ from its keys')
  bool sp, flash, dropout, rope, gated;
  bool fp8;                // the linear layers' GEMMs take FP8 operands (Transformer Engine)
  plan::Fp8Recipe recipe;  // and how their inputs are scaled
  double gathered_element; // bytes per element of a GEMM input all-gathered over the TP group (FP8: gathered cast)
  bool comm_overlap;       // sequence-parallel collectives pipelined with the GEMM beside them
  bool backward_overlap;   // the backward's TP communication runs beside the weight-gradient GEMM
  MemoryKernel norm;       // the norm kernels' class (kind and implementation)
  hardware::AttentionImpl attention;
  double keys; // keys each query attends to: s, or the sliding window
  double o;    // the attention output's width (MLA: heads x value head size)
  // A MoE layer: the expert-tensor-parallel size, experts, experts per token, their FFN (f1: its first matrix's
  // width), the shared expert's, the experts on this GPU, the token-expert pairs this GPU sends and those its experts
  // take (its expert-tensor-parallel group's, with the load imbalance).
  // The GEMMs from the hidden state to queries, keys and values: outputs, inputs, split over TP or not (MLA's
  // down-projections are replicated, as in Megatron-core).
  struct Projection {
    double out, in;
    bool split;
  };
  std::vector<Projection> qkv;
  bool qk_norm, post_norms;
  bool moe;
  double et, experts, topk, fe, fe1, fs, fs1, local_experts, pairs_sent, pairs_taken;
  double per_expert;      // tokens each local expert takes
  double dispatched;      // bytes each GPU's all-to-all sends (the busiest rank's share)
  double expert_gathered; // bytes of the routed tokens' all-gather and reduce-scatter over the expert-TP group
  double shared_gathered; // bytes of the shared expert's all-gather and reduce-scatter over the TP group
  bool deepep;            // dispatch and combine deduplicated per node and GPU
  double fp8_sent;        // the bytes per value of the all-to-alls to the experts, over 2 (moe_fp8_dispatch: 1 + 4/128)
};

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

Shape shape_of(const model::ModelSpec& m, const plan::ParallelPlan& p, const hardware::GpuSpec& gpu, LayerKind kind)
{
  Shape x{};
  x.b = p.micro_batch;
  x.s = static_cast<double>(p.seq_length);
  x.cp = p.cp;
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
  x.gathered_element = x.fp8 ? 1.0 : e;
  x.norm = norm_kernel(m.norm, p.software.norm);
  x.attention = attention_impl(p.software.attention, gpu);
  x.keys = is_windowed(kind) ? std::min(x.s, static_cast<double>(m.sliding_window)) : x.s;
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
    x.fp8_sent = p.moe_fp8_dispatch ? (1.0 + 4.0 / 128.0) / e : 1.0; // an FP8 byte, an fp32 scale per 128
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
    x.dispatched = x.pairs_taken / x.et * x.h * e;
    x.expert_gathered = x.pairs_taken * x.h * e;
    x.shared_gathered = x.T * x.h * e;
  }
  return x;
}

class Costing {
 public:
  Costing(const hardware::GpuSpec& gpu, hardware::Precision precision, std::vector<KernelCost>* log = nullptr)
      : gpu_(gpu), precision_(precision), log_(log)
  {}

  Step compute(std::string label, const std::vector<Kernel>& kernels, bool recompute = false) const
  {
    Step s;
    s.kind = Step::Kind::COMPUTE;
    s.label = std::move(label);
    s.recompute = recompute;
    for (const auto& k : kernels) {
      if (deferred_ != nullptr && k.weight_gradient) {
        deferred_->push_back(k);
        continue;
      }
      const double time = hardware::kernel_time(k, gpu_, precision_);
      s.duration_s += time;
      s.memory_s += hardware::memory_bound_time(k, gpu_, precision_);
      s.flops += k.flops;
      if (log_ != nullptr)
        log_->push_back(KernelCost{program_, s.label, k, time, recompute});
    }
    return s;
  }

  void set_program(std::string name) { program_ = std::move(name); }
  // Weight-gradient kernels left out of the steps and collected in `into` (a zero-bubble backward pass's split).
  void defer_weight_gradients(std::vector<Kernel>* into) { deferred_ = into; }

 private:
  const hardware::GpuSpec& gpu_;
  hardware::Precision precision_;
  std::vector<KernelCost>* log_;
  std::vector<Kernel>* deferred_ = nullptr;
  std::string program_;
};

Step collective(std::string label, CollectiveKind kind, double bytes, Group group = Group::TP)
{
  Step s;
  s.kind = Step::Kind::COLLECTIVE;
  s.label = std::move(label);
  s.collective = kind;
  s.bytes = bytes;
  s.group = group;
  return s;
}

Step overlap(Step compute, CollectiveKind kind, double bytes)
{
  compute.kind = Step::Kind::OVERLAP;
  compute.collective = kind;
  compute.bytes = bytes;
  return compute;
}

// A backward GEMM and the tensor-parallel collective that may run beside it: overlapped (Megatron-LM's asynchronous
// communication, 2021-09 on), or the collective after the GEMM, blocking (the 2021 code's autograd order).
void backward_overlap(Program& p, const Shape& x, Step compute, CollectiveKind kind, double bytes,
                      bool collective_first = false)
{
  if (x.backward_overlap) {
    p.push_back(overlap(std::move(compute), kind, bytes));
    return;
  }
  const std::string label = compute.label + (kind == CollectiveKind::ALL_GATHER       ? " input all-gather"
                                             : kind == CollectiveKind::REDUCE_SCATTER ? " reduce-scatter"
                                                                                      : " all-reduce");
  if (collective_first)
    p.push_back(collective(label, kind, bytes));
  p.push_back(std::move(compute));
  if (!collective_first)
    p.push_back(collective(label, kind, bytes));
}

Kernel weight_gradient(Kernel k)
{
  k.weight_gradient = true;
  return k;
}

// A linear layer's GEMM: FP8 operands under fp8 (Transformer Engine), 16-bit otherwise. Attention, the router and
// the output layer stay in 16 bits, as Megatron-core keeps them.
Kernel linear(const Shape& x, std::string_view name, double m, double n, double k, double batch = 1,
              GemmLayout layout = GemmLayout::FORWARD)
{
  Kernel g = gemm(name, m, n, k, batch, layout);
  g.weight_gradient = layout == GemmLayout::WGRAD;
  return x.fp8 ? hardware::fp8_gemm(g) : g;
}

// Transformer Engine's quantisation of a 16-bit tensor of `elements` for FP8 GEMMs: one kernel writes the FP8 tensor
// and its transpose (the other GEMM's operand layout), after a pass for the tensor's amax under current scaling.
// `after_norm`: with delayed scaling the norm before the GEMM writes FP8 itself (TE's LayerNormLinear), no extra
// pass. Nothing without FP8.
void quantize(std::vector<Kernel>& ks, const Shape& x, std::string_view name, double elements, bool after_norm = false)
{
  if (!x.fp8)
    return;
  if (x.recipe == plan::Fp8Recipe::CURRENT)
    ks.push_back(memory_bound("amax", e * elements));
  if (!(after_norm && x.recipe == plan::Fp8Recipe::DELAYED))
    ks.push_back(memory_bound(name, (e + 2.0) * elements));
}
std::vector<Kernel> quantized(const Shape& x, std::string_view name, double elements, bool after_norm = false)
{
  std::vector<Kernel> ks;
  quantize(ks, x, name, elements, after_norm);
  return ks;
}

// Attention core, forward: fused (FlashAttention: the causal mask skips half the score tiles) or unfused
// (two batched GEMMs over the full s x s scores, softmax and dropout in between).
std::vector<Kernel> core_forward(const Shape& x)
{
  const double heads = x.a / x.t;
  if (x.flash) {
    Kernel k;
    k.name = "flash attention";
    k.kind = hardware::KernelKind::ATTENTION;
    k.seq = x.s;
    k.head_dim = x.d;
    k.heads = x.b * heads / x.cp; // all-to-all context parallelism splits the heads
    k.causal = true;
    k.attention = x.attention;
    // Causal: each query sees half the keys on average, or its window (a window's diagonal block is half masked).
    const double causal_keys = x.keys < x.s ? x.keys - 0.5 * x.keys * x.keys / x.s : 0.5 * x.s;
    // With context parallelism a GPU holds 1/cp of the work (all-to-all: the heads; ring: see ring_attention).
    k.flops = 2.0 * x.b * x.s * causal_keys * (x.q + x.o) / x.t / x.cp;
    k.bytes = e * x.T * (2.0 * x.q + 2.0 * x.kv) / x.t;
    return {k};
  }
  const double scores = x.b * heads * x.s * x.s;
  const double value_dim = x.o / x.a;
  std::vector<Kernel> ks{gemm("attention scores", x.s, x.s, x.d, x.b * heads),
                         memory_bound("softmax", 2.0 * e * scores, MemoryKernel::SOFTMAX)};
  if (x.dropout)
    ks.push_back(memory_bound("attention dropout", (e + 1.0 + e) * scores, MemoryKernel::DROPOUT));
  ks.push_back(gemm("attention context", x.s, value_dim, x.s, x.b * heads));
  return ks;
}

// Ring attention over a context-parallel group (Megatron-core / Transformer Engine, causal balance): each GPU holds
// two chunks of s / (2 cp) tokens, one from each end of the sequence, and runs cp attention kernels as key/value
// blocks come round: its own chunks with the causal mask, then cp - 1 blocks of which the mask leaves half (its
// first chunk's queries against an earlier block, or its later chunk's queries against a whole block). Each kernel
// does two chunk-by-chunk blocks of work, 1/cp of the whole causal attention in all.
std::vector<Kernel> ring_attention(const Shape& x, bool backward)
{
  const double chunk = x.s / (2.0 * x.cp);
  std::vector<Kernel> ks;
  for (int step = 0; step < static_cast<int>(x.cp); ++step) {
    Kernel k;
    k.name = backward ? "ring attention backward" : "ring attention";
    k.kind = backward ? hardware::KernelKind::ATTENTION_BACKWARD : hardware::KernelKind::ATTENTION;
    k.seq = 2.0 * chunk;
    k.head_dim = x.d;
    k.heads = x.b * x.a / x.t;
    k.causal = step == 0;
    k.attention = x.attention;
    k.flops = 2.0 * x.b * 2.0 * chunk * chunk * (x.q + x.o) / x.t * (backward ? 2.5 : 1.0);
    k.bytes = e * x.T * (2.0 * x.q + 2.0 * x.kv) / x.t * (backward ? 2.0 : 1.0);
    ks.push_back(k);
  }
  return ks;
}

std::vector<Kernel> core_backward(const Shape& x)
{
  const double heads = x.a / x.t;
  if (x.flash) {
    Kernel k = core_forward(x).front();
    k.name = "flash attention backward";
    k.kind = hardware::KernelKind::ATTENTION_BACKWARD;
    k.flops *= 2.5; // recomputes the scores: five matmuls to the forward's two
    k.bytes *= 2.0;
    return {k};
  }
  const double scores = x.b * heads * x.s * x.s;
  std::vector<Kernel> ks{gemm("context dgrad", x.s, x.s, x.d, x.b * heads, GemmLayout::DGRAD),
                         gemm("context wgrad", x.s, x.d, x.s, x.b * heads, GemmLayout::WGRAD)};
  if (x.dropout)
    ks.push_back(memory_bound("attention dropout backward", (e + 1.0 + e) * scores, MemoryKernel::DROPOUT, true));
  ks.push_back(memory_bound("softmax backward", 3.0 * e * scores, MemoryKernel::SOFTMAX, true));
  ks.push_back(gemm("scores dgrad q", x.s, x.d, x.s, x.b * heads, GemmLayout::DGRAD));
  ks.push_back(gemm("scores dgrad k", x.s, x.d, x.s, x.b * heads, GemmLayout::WGRAD));
  return ks;
}

Kernel norm(const Shape& x, const char* name)
{
  return memory_bound(name, 2.0 * e * x.Tsp * x.h, x.norm);
}
Kernel norm_backward(const Shape& x, const char* name)
{
  return memory_bound(name, 3.0 * e * x.Tsp * x.h, x.norm, true);
}

// The residual add after attention and after the FFN: Megatron's fused bias-dropout-add with dropout; after the
// block's own norm where the model has post-norms (Gemma).
std::vector<Kernel> residual(const Shape& x, const char* name)
{
  std::vector<Kernel> ks;
  if (x.post_norms)
    ks.push_back(norm(x, "post norm"));
  if (x.dropout)
    ks.push_back(memory_bound(name, 3.0 * e * x.Tsp * x.h + x.Tsp * x.h, MemoryKernel::BIAS_DROPOUT_ADD));
  else
    ks.push_back(memory_bound(name, 3.0 * e * x.Tsp * x.h, MemoryKernel::RESIDUAL_ADD));
  return ks;
}

// Its backward: the dropout mask applied to the incoming gradient (without dropout, the two gradient branches
// added).
Kernel residual_backward(const Shape& x)
{
  if (x.dropout)
    return memory_bound("residual backward", 2.0 * e * x.Tsp * x.h + x.Tsp * x.h, MemoryKernel::DROPOUT, true);
  return memory_bound("residual backward", 3.0 * e * x.Tsp * x.h, MemoryKernel::RESIDUAL_ADD, true);
}

// The QKV projection's GEMMs in one layout (forward: out = in x W; dgrad; wgrad).
std::vector<Kernel> qkv_gemms(const Shape& x, GemmLayout layout)
{
  std::vector<Kernel> ks;
  for (const auto& p : x.qkv) {
    const double out = p.split ? p.out / x.t : p.out;
    switch (layout) {
      case GemmLayout::FORWARD:
        ks.push_back(linear(x, "qkv", x.T, out, p.in));
        break;
      case GemmLayout::DGRAD:
        ks.push_back(linear(x, "qkv dgrad", x.T, p.in, out, 1, GemmLayout::DGRAD));
        break;
      case GemmLayout::WGRAD:
        ks.push_back(linear(x, "qkv wgrad", p.in, out, x.T, 1, GemmLayout::WGRAD));
        break;
    }
  }
  return ks;
}

// Elements of the QKV projections' outputs on one TP rank: their output gradients are quantised for the backward.
double qkv_outputs(const Shape& x)
{
  double out = 0;
  for (const auto& p : x.qkv)
    out += x.T * (p.split ? p.out / x.t : p.out);
  return out;
}

// The QKV projections' GEMMs with the FP8 casts of their inputs other than the hidden state (MLA's latents, each
// after its own norm); the hidden state's is cast by the input norm's step.
std::vector<Kernel> qkv_forward(const Shape& x)
{
  std::vector<Kernel> ks;
  for (const auto& p : x.qkv)
    if (p.in != x.h)
      quantize(ks, x, "latent cast", x.T * p.in, true);
  for (const Kernel& k : qkv_gemms(x, GemmLayout::FORWARD))
    ks.push_back(k);
  return ks;
}

// The query/key norms and rotary embedding between the QKV projection and the attention core.
std::vector<Kernel> before_core(const Shape& x)
{
  std::vector<Kernel> ks;
  if (x.qk_norm)
    ks.push_back(memory_bound("qk norm", 2.0 * e * x.T * (x.q + x.kv) / x.t, x.norm));
  if (x.rope)
    ks.push_back(memory_bound("rotary embedding", 2.0 * e * x.T * (x.q + x.kv) / x.t, MemoryKernel::ROPE));
  return ks;
}

// From the projected queries, keys and values to the attention projection's input (cast to FP8 under fp8).
std::vector<Kernel> attention_core(const Shape& x)
{
  std::vector<Kernel> ks = before_core(x);
  for (auto& k : core_forward(x))
    ks.push_back(k);
  quantize(ks, x, "projection input cast", x.T * x.o / x.t);
  return ks;
}

// Kernels as a compute step at the end of `p` (merged with a compute step before it); nothing when there are none.
void add_compute(Program& p, const Costing& c, std::string label, const std::vector<Kernel>& kernels, bool recompute)
{
  if (!kernels.empty())
    append(p, Program{c.compute(std::move(label), kernels, recompute)});
}

// The attention core over a context-parallel group, forward or backward. Ring: the attention kernels beside the
// key/value blocks passed round the group (cp - 1 hops of this GPU's block, as a ring all-gather moves them; the
// backward pass sends the blocks and their gradients). All-to-all: queries, keys and values go from sequence to
// head sharding before the core, its output back after (the backward mirrors it).
Program context_parallel_core(const Shape& x, const Costing& c, bool backward, bool recompute)
{
  if (x.cp_kind == plan::CpKind::RING) {
    const double kv = e * x.T * (x.kv + x.v) / x.t; // this GPU's keys and values
    Step ring =
        c.compute(backward ? "ring attention backward" : "ring attention", ring_attention(x, backward), recompute);
    ring = overlap(std::move(ring), CollectiveKind::ALL_GATHER, x.cp * kv * (backward ? 2.0 : 1.0));
    ring.group = Group::CP;
    return {ring};
  }
  const double qkv = e * x.T * (x.q + x.kv + x.v) / x.t;
  const double out = e * x.T * x.o / x.t;
  return {collective(backward ? "cp output-grad all-to-all" : "cp qkv all-to-all", CollectiveKind::ALL_TO_ALL,
                     backward ? out : qkv, Group::CP),
          c.compute(backward ? "attention core backward" : "attention core",
                    backward ? core_backward(x) : core_forward(x), recompute),
          collective(backward ? "cp qkv-grad all-to-all" : "cp output all-to-all", CollectiveKind::ALL_TO_ALL,
                     backward ? qkv : out, Group::CP)};
}

Kernel attention_projection(const Shape& x)
{
  return linear(x, "attention projection", x.T, x.h, x.o / x.t);
}

std::vector<Kernel> qkv_to_projection(const Shape& x)
{
  std::vector<Kernel> ks = qkv_forward(x);
  for (auto& k : attention_core(x))
    ks.push_back(k);
  ks.push_back(attention_projection(x));
  return ks;
}

// fc1, the activation, the cast of fc2's input (fp8) and fc2: fc2 is the last kernel.
std::vector<Kernel> ffn_forward(const Shape& x)
{
  std::vector<Kernel> ks{linear(x, "fc1", x.T, x.f1 / x.t, x.h),
                         memory_bound(x.gated ? "gated activation" : "activation",
                                      (x.gated ? 3.0 : 2.0) * e * x.T * x.f / x.t,
                                      x.gated ? MemoryKernel::SWIGLU : MemoryKernel::GELU)};
  quantize(ks, x, "fc2 input cast", x.T * x.f / x.t);
  ks.push_back(linear(x, "fc2", x.T, x.h, x.f / x.t));
  return ks;
}

// The attention half of a layer's forward pass, up to its output's tensor-parallel reduction. With
// tp_comm_overlap (Megatron-core / Transformer Engine, sequence parallelism) each all-gather is pipelined with the
// GEMM that consumes it and each reduce-scatter with the GEMM that produces its input, chunk by chunk.
Program attention_forward(const Shape& x, const Costing& c, bool recompute)
{
  const double act = x.T * x.h * e;                       // one hidden-state tensor, whole
  const double gathered = x.T * x.h * x.gathered_element; // the QKV GEMMs' input, gathered
  std::vector<Kernel> norms{norm(x, "input norm")};
  quantize(norms, x, "qkv input cast", x.Tsp * x.h, true);
  if (x.cp > 1) {
    Program p{c.compute("norm", norms, recompute)};
    if (x.comm_overlap) {
      p.push_back(overlap(c.compute("qkv", qkv_forward(x), recompute), CollectiveKind::ALL_GATHER, gathered));
    } else {
      if (x.sp)
        p.push_back(collective("attention all-gather", CollectiveKind::ALL_GATHER, gathered));
      p.push_back(c.compute("qkv", qkv_forward(x), recompute));
    }
    add_compute(p, c, "attention core", before_core(x), recompute);
    append(p, context_parallel_core(x, c, false, recompute));
    add_compute(p, c, "attention core", quantized(x, "projection input cast", x.T * x.o / x.t), recompute);
    const Step projection = c.compute("attention projection", {attention_projection(x)}, recompute);
    if (x.comm_overlap) {
      p.push_back(overlap(projection, CollectiveKind::REDUCE_SCATTER, act));
    } else {
      p.push_back(projection);
      if (x.sp)
        p.push_back(collective("attention reduce-scatter", CollectiveKind::REDUCE_SCATTER, act));
      else if (x.t > 1)
        p.push_back(collective("attention all-reduce", CollectiveKind::ALL_REDUCE, act));
    }
    return p;
  }
  if (x.comm_overlap)
    return {c.compute("norm", norms, recompute),
            overlap(c.compute("qkv", qkv_forward(x), recompute), CollectiveKind::ALL_GATHER, gathered),
            c.compute("attention core", attention_core(x), recompute),
            overlap(c.compute("attention projection", {attention_projection(x)}, recompute),
                    CollectiveKind::REDUCE_SCATTER, act)};
  if (x.sp)
    return {c.compute("norm", norms, recompute),
            collective("attention all-gather", CollectiveKind::ALL_GATHER, gathered),
            c.compute("attention", qkv_to_projection(x), recompute),
            collective("attention reduce-scatter", CollectiveKind::REDUCE_SCATTER, act)};
  auto attn = norms;
  for (auto& k : qkv_to_projection(x))
    attn.push_back(k);
  Program p{c.compute("attention", attn, recompute)};
  if (x.t > 1)
    p.push_back(collective("attention all-reduce", CollectiveKind::ALL_REDUCE, act));
  return p;
}

// A MoE layer's all-to-all over its expert-parallel group: one copy per token and expert (Megatron-core's
// dispatcher), or per token and destination node and GPU (DeepEP); `to_experts`: it carries activations or output
// gradients to the experts (in FP8 under moe_fp8_dispatch).
Step token_all_to_all(const Shape& x, std::string label, bool to_experts)
{
  const double bytes = x.dispatched * (to_experts ? x.fp8_sent : 1.0);
  if (!x.deepep)
    return collective(std::move(label), CollectiveKind::ALL_TO_ALL, bytes, Group::EP);
  Step s = collective(std::move(label), CollectiveKind::ALL_TO_ALL, bytes / x.topk, Group::EP);
  s.deduplicated = true;
  return s;
}

// A MoE layer's FFN half, forward, as Megatron-core's all-to-all token dispatcher runs it: route and permute the
// GPU's tokens, send them to their experts' GPUs (all-to-all over the expert-parallel group), gather them over the
// expert-tensor-parallel group (each expert is split over it), run the local experts as grouped GEMMs, reduce-
// scatter, send the outputs back, unpermute and weigh them. The shared expert is a dense FFN over the attention's
// tensor-parallel group, on the hidden states gathered over it.
Program moe_forward(const Shape& x, const Costing& c, bool recompute)
{
  const double per_expert = x.per_expert;
  std::vector<Kernel> route{gemm("router", x.Tsp, x.experts, x.h),
                            memory_bound("router softmax and top-k", 3.0 * 4.0 * x.Tsp * x.experts),
                            memory_bound("permute", 2.0 * e * x.pairs_sent * x.h)};
  std::vector<Kernel> experts = quantized(x, "expert input cast", x.pairs_taken * x.h);
  experts.push_back(linear(x, "expert fc1", per_expert, x.fe1 / x.et, x.h, x.local_experts));
  experts.push_back(memory_bound(x.gated ? "expert gated activation" : "expert activation",
                                 (x.gated ? 3.0 : 2.0) * e * x.pairs_taken * x.fe / x.et,
                                 x.gated ? MemoryKernel::SWIGLU : MemoryKernel::GELU));
  quantize(experts, x, "expert fc2 input cast", x.pairs_taken * x.fe / x.et);
  experts.push_back(linear(x, "expert fc2", per_expert, x.h, x.fe / x.et, x.local_experts));
  if (x.fs > 0) {
    quantize(experts, x, "shared expert input cast", x.T * x.h);
    experts.push_back(linear(x, "shared expert fc1", x.T, x.fs1 / x.t, x.h));
    experts.push_back(memory_bound("shared expert activation", (x.gated ? 3.0 : 2.0) * e * x.T * x.fs / x.t,
                                   x.gated ? MemoryKernel::SWIGLU : MemoryKernel::GELU));
    quantize(experts, x, "shared expert fc2 input cast", x.T * x.fs / x.t);
    experts.push_back(linear(x, "shared expert fc2", x.T, x.h, x.fs / x.t));
  }
  const bool shared_gather = x.fs > 0 && x.t > 1;
  Program p{c.compute("router", route, recompute)};
  if (shared_gather)
    p.push_back(collective("shared expert all-gather", CollectiveKind::ALL_GATHER, x.shared_gathered));
  p.push_back(token_all_to_all(x, "moe dispatch all-to-all", true));
  if (x.et > 1)
    p.push_back(collective("moe all-gather", CollectiveKind::ALL_GATHER, x.expert_gathered, Group::ETP));
  p.push_back(c.compute("experts", experts, recompute));
  if (x.et > 1)
    p.push_back(collective("moe reduce-scatter", CollectiveKind::REDUCE_SCATTER, x.expert_gathered, Group::ETP));
  p.push_back(token_all_to_all(x, "moe combine all-to-all", false));
  if (shared_gather)
    p.push_back(collective("shared expert reduce-scatter", CollectiveKind::REDUCE_SCATTER, x.shared_gathered));
  p.push_back(c.compute("unpermute", {memory_bound("unpermute", 3.0 * e * x.pairs_sent * x.h)}, recompute));
  return p;
}

Program moe_backward(const Shape& x, const Costing& c)
{
  const double per_expert = x.per_expert;
  const double ek = x.local_experts;
  std::vector<Kernel> experts = quantized(x, "expert output-grad cast", x.pairs_taken * x.h);
  for (const Kernel& k :
       {linear(x, "expert fc2 dgrad", per_expert, x.fe / x.et, x.h, ek, GemmLayout::DGRAD),
        linear(x, "expert fc2 wgrad", x.fe / x.et, x.h, per_expert, ek, GemmLayout::WGRAD),
        memory_bound("expert activation backward", (x.gated ? 5.0 : 3.0) * e * x.pairs_taken * x.fe / x.et,
                     x.gated ? MemoryKernel::SWIGLU : MemoryKernel::GELU, true)})
    experts.push_back(k);
  quantize(experts, x, "expert fc1 output-grad cast", x.pairs_taken * x.fe1 / x.et);
  experts.push_back(linear(x, "expert fc1 dgrad", per_expert, x.h, x.fe1 / x.et, ek, GemmLayout::DGRAD));
  experts.push_back(linear(x, "expert fc1 wgrad", x.h, x.fe1 / x.et, per_expert, ek, GemmLayout::WGRAD));
  if (x.fs > 0) {
    quantize(experts, x, "shared expert output-grad cast", x.T * x.h);
    for (const Kernel& k :
         {linear(x, "shared expert fc2 dgrad", x.T, x.fs / x.t, x.h, 1, GemmLayout::DGRAD),
          linear(x, "shared expert fc2 wgrad", x.fs / x.t, x.h, x.T, 1, GemmLayout::WGRAD),
          memory_bound("shared expert activation backward", (x.gated ? 5.0 : 3.0) * e * x.T * x.fs / x.t,
                       x.gated ? MemoryKernel::SWIGLU : MemoryKernel::GELU, true)})
      experts.push_back(k);
    quantize(experts, x, "shared expert fc1 output-grad cast", x.T * x.fs1 / x.t);
    experts.push_back(linear(x, "shared expert fc1 dgrad", x.T, x.h, x.fs1 / x.t, 1, GemmLayout::DGRAD));
    experts.push_back(linear(x, "shared expert fc1 wgrad", x.h, x.fs1 / x.t, x.T, 1, GemmLayout::WGRAD));
  }
  const bool shared_gather = x.fs > 0 && x.t > 1;
  Program p{c.compute("unpermute backward", {memory_bound("unpermute backward", 3.0 * e * x.pairs_sent * x.h)})};
  if (shared_gather)
    p.push_back(collective("shared expert output-grad all-gather", CollectiveKind::ALL_GATHER, x.shared_gathered));
  p.push_back(token_all_to_all(x, "moe combine backward all-to-all", true));
  if (x.et > 1)
    p.push_back(collective("moe output-grad all-gather", CollectiveKind::ALL_GATHER, x.expert_gathered, Group::ETP));
  p.push_back(c.compute("experts backward", experts));
  if (x.et > 1)
    p.push_back(
        collective("moe input-grad reduce-scatter", CollectiveKind::REDUCE_SCATTER, x.expert_gathered, Group::ETP));
  p.push_back(token_all_to_all(x, "moe dispatch backward all-to-all", false));
  if (shared_gather)
    p.push_back(
        collective("shared expert input-grad reduce-scatter", CollectiveKind::REDUCE_SCATTER, x.shared_gathered));
  p.push_back(c.compute("router backward",
                        {memory_bound("permute backward", 2.0 * e * x.pairs_sent * x.h),
                         memory_bound("router softmax backward", 3.0 * 4.0 * x.Tsp * x.experts),
                         gemm("router dgrad", x.Tsp, x.h, x.experts, 1, GemmLayout::DGRAD),
                         weight_gradient(gemm("router wgrad", x.h, x.experts, x.Tsp, 1, GemmLayout::WGRAD))}));
  return p;
}

Program layer_forward(const Shape& x, const Costing& c, bool recompute)
{
  const double act = x.T * x.h * e;                       // one hidden-state tensor, whole
  const double gathered = x.T * x.h * x.gathered_element; // fc1's input, gathered
  Program p = attention_forward(x, c, recompute);
  auto norms = residual(x, "attention residual");
  norms.push_back(norm(x, "ffn norm"));
  if (x.moe) {
    p.push_back(c.compute("norm", norms, recompute));
    append(p, moe_forward(x, c, recompute));
    p.push_back(c.compute("residual", residual(x, "ffn residual"), recompute));
    return p;
  }
  quantize(norms, x, "fc1 input cast", x.Tsp * x.h, true);
  if (x.comm_overlap) {
    const auto ffn = ffn_forward(x);
    p.push_back(c.compute("norm", norms, recompute));
    p.push_back(overlap(c.compute("fc1", std::vector<Kernel>(ffn.begin(), ffn.end() - 1), recompute),
                        CollectiveKind::ALL_GATHER, gathered));
    p.push_back(overlap(c.compute("fc2", {ffn.back()}, recompute), CollectiveKind::REDUCE_SCATTER, act));
  } else if (x.sp) {
    p.push_back(c.compute("norm", norms, recompute));
    p.push_back(collective("ffn all-gather", CollectiveKind::ALL_GATHER, gathered));
    p.push_back(c.compute("ffn", ffn_forward(x), recompute));
    p.push_back(collective("ffn reduce-scatter", CollectiveKind::REDUCE_SCATTER, act));
  } else {
    for (auto& k : ffn_forward(x))
      norms.push_back(k);
    p.push_back(c.compute("ffn", norms, recompute));
    if (x.t > 1)
      p.push_back(collective("ffn all-reduce", CollectiveKind::ALL_REDUCE, act));
  }
  p.push_back(c.compute("residual", residual(x, "ffn residual"), recompute));
  return p;
}

// The FFN half of a dense layer's backward pass, from the layer's output gradient to the FFN norm's.
Program ffn_backward(const Shape& x, const Costing& c)
{
  const double act = x.T * x.h * e;
  const double gathered = x.T * x.h * x.gathered_element; // an output gradient or fc1's input, gathered
  // fc2's dgrad first; then its wgrad, the activation's backward and the cast of fc1's output gradient (fp8).
  const Kernel fc2_dgrad = linear(x, "fc2 dgrad", x.T, x.f / x.t, x.h, 1, GemmLayout::DGRAD);
  std::vector<Kernel> fc2_rest{linear(x, "fc2 wgrad", x.f / x.t, x.h, x.T, 1, GemmLayout::WGRAD),
                               memory_bound("activation backward", (x.gated ? 5.0 : 3.0) * e * x.T * x.f / x.t,
                                            x.gated ? MemoryKernel::SWIGLU : MemoryKernel::GELU, true)};
  quantize(fc2_rest, x, "fc1 output-grad cast", x.T * x.f1 / x.t);
  const Kernel fc1_dgrad = linear(x, "fc1 dgrad", x.T, x.h, x.f1 / x.t, 1, GemmLayout::DGRAD);
  const Kernel fc1_wgrad = linear(x, "fc1 wgrad", x.h, x.f1 / x.t, x.T, 1, GemmLayout::WGRAD);
  std::vector<Kernel> residual_back{residual_backward(x)};
  quantize(residual_back, x, "fc2 output-grad cast", x.Tsp * x.h);
  Program p;
  if (x.sp) {
    p.push_back(c.compute("residual", residual_back));
    if (x.comm_overlap) {
      p.push_back(overlap(c.compute("fc2 dgrad", {fc2_dgrad}), CollectiveKind::ALL_GATHER, gathered));
      p.push_back(c.compute("ffn dgrad", fc2_rest));
    } else {
      p.push_back(collective("ffn output-grad all-gather", CollectiveKind::ALL_GATHER, gathered));
      fc2_rest.insert(fc2_rest.begin(), fc2_dgrad);
      p.push_back(c.compute("ffn dgrad", fc2_rest));
    }
    backward_overlap(p, x, c.compute("fc1 dgrad", {fc1_dgrad}), CollectiveKind::ALL_GATHER, gathered, true);
    backward_overlap(p, x, c.compute("fc1 wgrad", {fc1_wgrad}), CollectiveKind::REDUCE_SCATTER, act);
    return p;
  }
  std::vector<Kernel> ffn = residual_back;
  ffn.push_back(fc2_dgrad);
  for (const auto& k : fc2_rest)
    ffn.push_back(k);
  ffn.push_back(fc1_dgrad);
  p.push_back(c.compute("ffn dgrad", ffn));
  if (x.t > 1)
    backward_overlap(p, x, c.compute("fc1 wgrad", {fc1_wgrad}), CollectiveKind::ALL_REDUCE, act);
  else
    p.push_back(c.compute("fc1 wgrad", {fc1_wgrad}));
  return p;
}

// attention_backward with context parallelism: the attention core's backward over the CP group (attn_back holds
// the projection's wgrad, the core's kernels, which are replaced, and what follows the core).
Program attention_backward_cp(const Shape& x, const Costing& c, const std::vector<Kernel>& output_grad_cast,
                              const Kernel& projection_dgrad, const std::vector<Kernel>& attn_back,
                              const std::vector<Kernel>& qkv_dgrad, const std::vector<Kernel>& qkv_wgrad)
{
  const double act = x.T * x.h * e;
  const double gathered = x.T * x.h * x.gathered_element;
  const auto core_kernels = static_cast<std::ptrdiff_t>(core_backward(x).size());
  Program p;
  add_compute(p, c, "output-grad cast", output_grad_cast, false);
  if (x.comm_overlap) {
    p.push_back(overlap(c.compute("projection dgrad", {projection_dgrad}), CollectiveKind::ALL_GATHER, gathered));
  } else {
    if (x.sp)
      p.push_back(collective("attention output-grad all-gather", CollectiveKind::ALL_GATHER, gathered));
    add_compute(p, c, "projection dgrad", {projection_dgrad}, false);
  }
  add_compute(p, c, "projection wgrad", {attn_back.front()}, false);
  append(p, context_parallel_core(x, c, true, false));
  add_compute(p, c, "attention dgrad", std::vector<Kernel>(attn_back.begin() + 1 + core_kernels, attn_back.end()),
              false);
  if (x.sp) {
    backward_overlap(p, x, c.compute("qkv dgrad", qkv_dgrad), CollectiveKind::ALL_GATHER, gathered, true);
    backward_overlap(p, x, c.compute("qkv wgrad", qkv_wgrad), CollectiveKind::REDUCE_SCATTER, act);
  } else {
    add_compute(p, c, "qkv dgrad", qkv_dgrad, false);
    if (x.t > 1)
      backward_overlap(p, x, c.compute("qkv wgrad", qkv_wgrad), CollectiveKind::ALL_REDUCE, act);
    else
      add_compute(p, c, "qkv wgrad", qkv_wgrad, false);
  }
  p.push_back(c.compute("norm backward", {norm_backward(x, "input norm backward")}));
  return p;
}

// The attention half of a layer's backward pass, from the attention residual's gradient to the input norm's input.
Program attention_backward(const Shape& x, const Costing& c)
{
  const double act = x.T * x.h * e;
  const double gathered = x.T * x.h * x.gathered_element; // an output gradient or the QKV input, gathered
  const std::vector<Kernel> output_grad_cast = quantized(x, "projection output-grad cast", x.Tsp * x.h);
  const Kernel projection_dgrad = linear(x, "projection dgrad", x.T, x.o / x.t, x.h, 1, GemmLayout::DGRAD);
  std::vector<Kernel> attn_back{linear(x, "projection wgrad", x.o / x.t, x.h, x.T, 1, GemmLayout::WGRAD)};
  for (auto& k : core_backward(x))
    attn_back.push_back(k);
  if (x.rope)
    attn_back.push_back(memory_bound("rotary backward", 2.0 * e * x.T * (x.q + x.kv) / x.t, MemoryKernel::ROPE, true));
  if (x.qk_norm)
    attn_back.push_back(memory_bound("qk norm backward", 3.0 * e * x.T * (x.q + x.kv) / x.t, x.norm, true));
  quantize(attn_back, x, "qkv output-grad cast", qkv_outputs(x));
  const std::vector<Kernel> qkv_dgrad = qkv_gemms(x, GemmLayout::DGRAD);
  const std::vector<Kernel> qkv_wgrad = qkv_gemms(x, GemmLayout::WGRAD);
  if (x.cp > 1)
    return attention_backward_cp(x, c, output_grad_cast, projection_dgrad, attn_back, qkv_dgrad, qkv_wgrad);
  Program p;
  if (x.sp) {
    if (x.fp8)
      p.push_back(c.compute("output-grad cast", output_grad_cast));
    if (x.comm_overlap) {
      p.push_back(overlap(c.compute("projection dgrad", {projection_dgrad}), CollectiveKind::ALL_GATHER, gathered));
    } else {
      p.push_back(collective("attention output-grad all-gather", CollectiveKind::ALL_GATHER, gathered));
      attn_back.insert(attn_back.begin(), projection_dgrad);
    }
    p.push_back(c.compute("attention dgrad", attn_back));
    backward_overlap(p, x, c.compute("qkv dgrad", qkv_dgrad), CollectiveKind::ALL_GATHER, gathered, true);
    backward_overlap(p, x, c.compute("qkv wgrad", qkv_wgrad), CollectiveKind::REDUCE_SCATTER, act);
  } else {
    attn_back.insert(attn_back.begin(), projection_dgrad);
    attn_back.insert(attn_back.begin(), output_grad_cast.begin(), output_grad_cast.end());
    attn_back.insert(attn_back.end(), qkv_dgrad.begin(), qkv_dgrad.end());
    p.push_back(c.compute("attention dgrad", attn_back));
    if (x.t > 1)
      backward_overlap(p, x, c.compute("qkv wgrad", qkv_wgrad), CollectiveKind::ALL_REDUCE, act);
    else
      p.push_back(c.compute("qkv wgrad", qkv_wgrad));
  }
  p.push_back(c.compute("norm backward", {norm_backward(x, "input norm backward")}));
  return p;
}

Program layer_backward(const Shape& x, const Costing& c, model::Recompute recompute)
{
  Program p;
  if (recompute == model::Recompute::FULL)
    p = layer_forward(x, c, true);
  if (x.moe) { // with tp > 1, sequence parallelism (the plan requires it)
    p.push_back(c.compute("residual", {residual_backward(x)}));
    append(p, moe_backward(x, c));
  } else {
    for (const Step& s : ffn_backward(x, c))
      p.push_back(s);
  }
  std::vector<Kernel> norms{norm_backward(x, "ffn norm backward"), residual_backward(x)};
  if (x.post_norms) // the attention's and the FFN's post-norms
    norms.insert(norms.end(), 2, norm_backward(x, "post norm backward"));
  p.push_back(c.compute("norm backward", norms));
  if (recompute == model::Recompute::SELECTIVE) {
    if (x.cp > 1)
      append(p, context_parallel_core(x, c, false, true));
    else
      p.push_back(c.compute("attention core recompute", core_forward(x), true));
  }
  for (const Step& s : attention_backward(x, c))
    p.push_back(s);
  return p;
}

Program embedding_forward(const Shape& x, const Costing& c)
{
  const double act = x.T * x.h * e;
  Program p{c.compute("embedding", {memory_bound("embedding lookup", 2.0 * e * x.T * x.h, MemoryKernel::EMBEDDING)})};
  if (x.t > 1)
    p.push_back(collective("embedding " + std::string(x.sp ? "reduce-scatter" : "all-reduce"),
                           x.sp ? CollectiveKind::REDUCE_SCATTER : CollectiveKind::ALL_REDUCE, act));
  if (x.dropout)
    p.push_back(c.compute("embedding dropout",
                          {memory_bound("embedding dropout", (2.0 * e + 1.0) * x.Tsp * x.h, MemoryKernel::DROPOUT)}));
  return p;
}

Program embedding_backward(const Shape& x, const Costing& c)
{
  Program p;
  if (x.sp)
    p.push_back(collective("embedding grad all-gather", CollectiveKind::ALL_GATHER, x.T * x.h * e));
  p.push_back(c.compute("embedding backward", {memory_bound("embedding grad scatter-add", 2.0 * e * x.T * x.h,
                                                            MemoryKernel::EMBEDDING, true)}));
  return p;
}

Program head_forward(const Shape& x, const Costing& c)
{
  const double logits = x.T * x.vocab / x.t;
  Program p{c.compute("final norm", {norm(x, "final norm")})};
  if (x.sp)
    p.push_back(collective("output all-gather", CollectiveKind::ALL_GATHER, x.T * x.h * e));
  // Megatron-LM's vocabulary-parallel cross entropy on fp32 logits: upcast, max, subtract, exp, sum, normalise (the
  // softmax is kept for the backward pass).
  p.push_back(
      c.compute("logits", {gemm("logits", x.T, x.vocab / x.t, x.h), memory_bound("logits to fp32", (e + 4.0) * logits),
                           memory_bound("logit max", 4.0 * logits), memory_bound("subtract max", 8.0 * logits),
                           memory_bound("exp", 8.0 * logits), memory_bound("sum of exp", 4.0 * logits),
                           memory_bound("softmax", 8.0 * logits)}));
  if (x.t > 1) // the vocabulary-parallel cross entropy's max, sum and target logit
    p.push_back(collective("cross-entropy all-reduce", CollectiveKind::ALL_REDUCE, 3.0 * 4.0 * x.T));
  return p;
}

Program head_backward(const Shape& x, const Costing& c)
{
  const double logits = x.T * x.vocab / x.t;
  Program p{c.compute("logits dgrad", {memory_bound("cross entropy backward", 8.0 * logits),
                                       memory_bound("logit gradient to 16 bits", (4.0 + e) * logits),
                                       gemm("logits dgrad", x.T, x.h, x.vocab / x.t, 1, GemmLayout::DGRAD)})};
  const Step wgrad =
      c.compute("logits wgrad", {weight_gradient(gemm("logits wgrad", x.h, x.vocab / x.t, x.T, 1, GemmLayout::WGRAD))});
  if (x.t > 1)
    backward_overlap(p, x, wgrad, x.sp ? CollectiveKind::REDUCE_SCATTER : CollectiveKind::ALL_REDUCE, x.T * x.h * e);
  else
    p.push_back(wgrad);
  p.push_back(c.compute("final norm backward", {norm_backward(x, "final norm backward")}));
  return p;
}

// Every GPU of a step waits for the others (collectives in each layer, the gradient reduction every step): its
// tensor cores run at the pace of the slowest of them.
hardware::GpuSpec paced_by_slowest(const hardware::GpuSpec& gpu, const plan::ParallelPlan& p)
{
  hardware::GpuSpec paced = gpu;
  paced.sustained_compute_ratio *= hardware::slowest_of(gpu.sustained_spread, p.gpus());
  return paced;
}

// The kinds of layer the model has, in order of their first layer, and their names in kernel tables.
std::vector<LayerKind> kinds_of(const model::ModelSpec& m)
{
  std::vector<LayerKind> kinds;
  for (std::int64_t l = 0; l < m.num_layers; ++l)
    if (std::find(kinds.begin(), kinds.end(), layer_kind(m, l)) == kinds.end())
      kinds.push_back(layer_kind(m, l));
  return kinds;
}
std::string name_of(LayerKind kind)
{
  switch (kind) {
    case LayerKind::DENSE:
      return "layer";
    case LayerKind::MOE:
      return "moe layer";
    case LayerKind::WINDOWED:
      return "windowed layer";
    case LayerKind::WINDOWED_MOE:
      return "windowed moe layer";
  }
  return "layer";
}

} // namespace

double optimizer_bytes_per_param(const plan::ParallelPlan& p)
{
  switch (p.software.optimizer) {
    case plan::OptimizerImpl::FUSED:
      // One pass: read the gradient and the fp32 weight, momentum and variance; write them and the 16-bit weight.
      return (p.fp32_grad_accumulation ? 4.0 : 2.0) + 3.0 * 8.0 + e;
    case plan::OptimizerImpl::MEGATRON:
      // Float16OptimizerWithFloat16Params: cast to fp32 (fp16 only), unscale and inf check (fp16 only), grad norm,
      // FusedAdam, copy back to 16 bits (Megatron-LM optimizer/optimizer.py, 2021-24).
      return p.precision == hardware::Precision::FP16 ? 52.0 : 38.0;
    case plan::OptimizerImpl::DEEPSPEED:
      // FP16_Optimizer: per-tensor overflow check, cast and flatten, norm, unscale, FusedAdam, copy back (v0.5).
      return 70.0;
    case plan::OptimizerImpl::COMPOSER:
      // DecoupledAdamW's per-tensor Python loop: about nine elementwise kernels (composer/optim, 2023).
      return 92.0;
  }
  return 30.0;
}

double grad_accumulation_bytes_per_param(const plan::ParallelPlan& p)
{
  if (p.zero_stage >= 2) // gradients are reduce-scattered every micro-batch: nothing accumulates in full
    return 0.0;
  switch (p.software.grad_accumulation) {
    case plan::GradAccumulation::FUSED:
      return 0.0;
    case plan::GradAccumulation::HOOK: // main_grad.add_(grad): read main_grad and grad, write main_grad
      return p.fp32_grad_accumulation ? 4.0 + e + 4.0 : 3.0 * e;
    case plan::GradAccumulation::AUTOGRAD: // AccumulateGrad: grad += new, in 16 bits
      return 3.0 * e;
  }
  return 0.0;
}

double fp8_weight_cast_bytes_per_param(const plan::ParallelPlan& p)
{
  if (!p.fp8())
    return 0.0;
  // Transformer Engine casts each 16-bit weight to FP8 and its transpose once per step (on the first micro-batch;
  // later ones reuse them). FP8 parameters (--fp8-param-gather) are written in FP8 by the optimizer: only the
  // transpose is made.
  // Under ZeRO-3 (FSDP2 with torchao's float8) each pass gathers the weights afresh and casts the one it needs: the
  // forward its FP8 copy, the backward the transpose; gathered in FP8 (enable_fsdp_float8_all_gather) the shard was
  // cast before the gather and the pass only lays the FP8 weight out (a one-byte read and write).
  if (p.zero_stage >= 3)
    return p.fp8_param_gather ? 2.0 : e + 1.0;
  return p.fp8_param_gather ? 2.0 : e + 2.0;
}

void append(Program& head, const Program& tail)
{
  for (const Step& s : tail) {
    if (!head.empty() && head.back().kind == Step::Kind::COMPUTE && s.kind == Step::Kind::COMPUTE &&
        head.back().recompute == s.recompute) {
      Step& last = head.back();
      last.duration_s += s.duration_s;
      last.memory_s += s.memory_s;
      last.flops += s.flops;
      if (last.label != s.label && last.label.find(s.label) == std::string::npos)
        last.label += ", " + s.label;
      continue;
    }
    head.push_back(s);
  }
}

std::vector<KernelCost> kernel_costs(const model::ModelSpec& m, const plan::ParallelPlan& p,
                                     const hardware::GpuSpec& gpu)
{
  std::vector<KernelCost> log;
  const hardware::GpuSpec paced = paced_by_slowest(gpu, p);
  Costing c(paced, p.compute_precision(), &log);
  for (LayerKind kind : kinds_of(m)) {
    const Shape layer = shape_of(m, p, paced, kind);
    c.set_program(name_of(kind) + " forward");
    layer_forward(layer, c, false);
    c.set_program(name_of(kind) + " backward");
    layer_backward(layer, c, p.recompute);
  }
  const Shape x = shape_of(m, p, paced, LayerKind::DENSE);
  c.set_program("embedding forward");
  embedding_forward(x, c);
  c.set_program("embedding backward");
  embedding_backward(x, c);
  c.set_program("output layer forward");
  head_forward(x, c);
  c.set_program("output layer backward");
  head_backward(x, c);
  return log;
}

LayerPrograms build_programs(const model::ModelSpec& m, const plan::ParallelPlan& p, const hardware::GpuSpec& gpu_in)
{
  const hardware::GpuSpec gpu = paced_by_slowest(gpu_in, p);
  const Shape x = shape_of(m, p, gpu, LayerKind::DENSE);
  const Costing c(gpu, p.compute_precision());
  // Consecutive compute steps (no collective between them, as with tp = 1) run as one task.
  auto merged = [](const Program& steps) {
    Program out;
    append(out, steps);
    return out;
  };
  LayerPrograms out;
  for (LayerKind kind : kinds_of(m)) {
    const Shape layer = shape_of(m, p, gpu, kind);
    out.layer_forward[kind] = merged(layer_forward(layer, c, false));
    out.layer_backward[kind] = merged(layer_backward(layer, c, p.recompute));
  }
  out.embedding_forward = merged(embedding_forward(x, c));
  out.embedding_backward = merged(embedding_backward(x, c));
  out.head_forward = merged(head_forward(x, c));
  out.head_backward = merged(head_backward(x, c));
  if (p.dualpipe()) {
    std::vector<Kernel> weights;
    Costing split(gpu, p.compute_precision());
    split.defer_weight_gradients(&weights);
    // What is left once the weight gradients are taken out: no empty compute steps, collectives that ran beside a
    // weight-gradient GEMM on their own.
    auto input_part = [&](const Program& steps) {
      Program left;
      for (Step s : steps) {
        if (s.kind != Step::Kind::COLLECTIVE && s.duration_s == 0 && s.flops == 0) {
          if (s.kind == Step::Kind::COMPUTE)
            continue;
          s.kind = Step::Kind::COLLECTIVE;
        }
        append(left, {s});
      }
      return left;
    };
    auto weight_part = [&]() {
      Program w{c.compute("weight gradients", weights)};
      weights.clear();
      return w;
    };
    for (LayerKind kind : kinds_of(m)) {
      const Shape layer = shape_of(m, p, gpu, kind);
      out.layer_backward_input[kind] = input_part(layer_backward(layer, split, p.recompute));
      out.layer_weight[kind] = weight_part();
    }
    out.head_backward_input = input_part(head_backward(x, split));
    out.head_weight = weight_part();
  }
  out.optimizer_s_per_param = hardware::busy_time(
      memory_bound("adam", optimizer_bytes_per_param(p), MemoryKernel::ADAM), gpu, p.compute_precision());
  const double cast = fp8_weight_cast_bytes_per_param(p);
  out.fp8_weight_cast_s_per_param =
      cast > 0 ? hardware::busy_time(memory_bound("fp8 weight cast", cast), gpu, p.compute_precision()) : 0.0;
  const double accumulation = grad_accumulation_bytes_per_param(p);
  out.grad_accumulation_s_per_param = accumulation > 0
                                          ? hardware::busy_time(memory_bound("gradient accumulation", accumulation,
                                                                             MemoryKernel::GRADIENT_ACCUMULATION),
                                                                gpu, p.compute_precision())
                                          : 0.0;
  out.grad_accumulation_from_first = p.software.grad_accumulation != plan::GradAccumulation::AUTOGRAD;
  return out;
}

bool same_steps(const LayerPrograms& a, const LayerPrograms& b)
{
  const auto alike = [](const Program& x, const Program& y) {
    return std::equal(x.begin(), x.end(), y.begin(), y.end(), [](const Step& s, const Step& t) {
      return s.kind == t.kind && s.label == t.label && s.recompute == t.recompute &&
             (s.kind == Step::Kind::COMPUTE || (s.collective == t.collective && s.group == t.group &&
                                                s.bytes == t.bytes && s.deduplicated == t.deduplicated));
    });
  };
  const auto all_alike = [&](const auto& xs, const auto& ys) {
    return std::equal(xs.begin(), xs.end(), ys.begin(), ys.end(), alike);
  };
  return all_alike(a.layer_forward.programs, b.layer_forward.programs) &&
         all_alike(a.layer_backward.programs, b.layer_backward.programs) &&
         alike(a.embedding_forward, b.embedding_forward) && alike(a.embedding_backward, b.embedding_backward) &&
         alike(a.head_forward, b.head_forward) && alike(a.head_backward, b.head_backward) &&
         all_alike(a.layer_backward_input.programs, b.layer_backward_input.programs) &&
         all_alike(a.layer_weight.programs, b.layer_weight.programs) &&
         alike(a.head_backward_input, b.head_backward_input) && alike(a.head_weight, b.head_weight) &&
         (a.grad_accumulation_s_per_param > 0) == (b.grad_accumulation_s_per_param > 0) &&
         a.grad_accumulation_from_first == b.grad_accumulation_from_first &&
         (a.fp8_weight_cast_s_per_param > 0) == (b.fp8_weight_cast_s_per_param > 0);
}

} // namespace sim::workload
