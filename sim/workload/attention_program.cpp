#include "workload/attention_program.hpp"

namespace sim::workload {
namespace {

using hardware::GemmLayout;
using hardware::Kernel;
using hardware::KernelPass;
using hardware::memory_bound;
using hardware::MemoryKernel;

// Ring attention over a context-parallel group (Megatron-core / Transformer Engine, causal balance): each GPU holds
// two chunks of s / (2 cp) tokens, one from each end of the sequence, and runs cp attention kernels as key/value
// blocks come round: its own chunks with the causal mask, then cp - 1 blocks of which the mask leaves half (its
// first chunk's queries against an earlier block, or its later chunk's queries against a whole block). Each kernel
// does two chunk-by-chunk blocks of work, 1/cp of the whole causal attention in all.
std::vector<Kernel> ring_attention(const Shape& x, bool backward)
{
  // Each document (the sequence, unless packed: Transformer Engine's THD layout) is split into 2 x cp chunks, a GPU
  // holding chunks i and 2 cp - 1 - i of every one; each step pairs its queries with one GPU's keys, document by
  // document.
  const double documents = x.s / x.span;
  const double chunk = x.span / (2.0 * x.cp);
  std::vector<Kernel> ks;
  for (int step = 0; step < static_cast<int>(x.cp); ++step) {
    Kernel k;
    k.name = backward ? "ring attention backward" : "ring attention";
    k.kind = backward ? hardware::KernelKind::ATTENTION_BACKWARD : hardware::KernelKind::ATTENTION;
    k.seq = 2.0 * chunk;
    k.head_dim = x.d;
    k.heads = x.b * x.a / x.t * documents;
    k.causal = step == 0;
    k.attention = x.attention;
    k.flops = 2.0 * x.b * documents * 2.0 * chunk * chunk * (x.q + x.o) / x.t * (backward ? 2.5 : 1.0);
    k.bytes = x.e * x.T * (2.0 * x.q + 2.0 * x.kv) / x.t * (backward ? 2.0 : 1.0);
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
  std::vector<Kernel> ks{matmul(x, "context dgrad", x.s, x.s, x.d, x.b * heads, GemmLayout::DGRAD),
                         matmul(x, "context wgrad", x.s, x.d, x.s, x.b * heads, GemmLayout::WGRAD)};
  if (x.dropout)
    ks.push_back(memory_bound("attention dropout backward", (x.e + 1.0 + x.e) * scores, MemoryKernel::DROPOUT,
                              KernelPass::BACKWARD));
  ks.push_back(memory_bound("softmax backward", 3.0 * x.e * scores, MemoryKernel::SOFTMAX, KernelPass::BACKWARD));
  ks.push_back(matmul(x, "scores dgrad q", x.s, x.d, x.s, x.b * heads, GemmLayout::DGRAD));
  ks.push_back(matmul(x, "scores dgrad k", x.s, x.d, x.s, x.b * heads, GemmLayout::WGRAD));
  return ks;
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
        ks.push_back(linear(x, "qkv wgrad", out, p.in, x.T, 1, GemmLayout::WGRAD));
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
      quantize(ks, x, "latent cast", x.T * p.in, {.after_norm = true});
  append_kernels(ks, qkv_gemms(x, GemmLayout::FORWARD));
  return ks;
}

// The query/key norms and rotary embedding between the QKV projection and the attention core.
std::vector<Kernel> before_core(const Shape& x)
{
  std::vector<Kernel> ks;
  if (x.qk_norm)
    ks = norm(x, "qk norm", x.T * (x.q + x.kv) / x.t, x.T * (x.q + x.kv) / (x.t * x.d));
  append_kernels(ks, rotary(x));
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

// attention_backward with context parallelism: the attention core's backward over the CP group (attn_back holds
// the projection's wgrad, the core's kernels, which are replaced, and what follows the core).
Program attention_backward_cp(const Shape& x, const Costing& c, const std::vector<Kernel>& output_grad_cast,
                              const Kernel& projection_dgrad, const std::vector<Kernel>& attn_back,
                              const std::vector<Kernel>& qkv_dgrad, const std::vector<Kernel>& qkv_wgrad)
{
  const double act = x.T * x.h * x.e;
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
  append(p, context_parallel_core(x, c, {.backward = true}));
  add_compute(p, c, "attention dgrad", std::vector<Kernel>(attn_back.begin() + 1 + core_kernels, attn_back.end()),
              false);
  if (x.sp) {
    backward_overlap(p, x, c.compute("qkv dgrad", qkv_dgrad), CollectiveKind::ALL_GATHER, gathered,
                     {.collective_first = true});
    backward_overlap(p, x, c.compute("qkv wgrad", qkv_wgrad), CollectiveKind::REDUCE_SCATTER, act);
  } else {
    add_compute(p, c, "qkv dgrad", qkv_dgrad, false);
    if (x.t > 1)
      backward_overlap(p, x, c.compute("qkv wgrad", qkv_wgrad), CollectiveKind::ALL_REDUCE, act);
    else
      add_compute(p, c, "qkv wgrad", qkv_wgrad, false);
  }
  p.push_back(c.compute("norm backward", norm_backward(x, "input norm backward")));
  return p;
}

} // namespace

std::vector<Kernel> core_forward(const Shape& x)
{
  const double heads = x.a / x.t;
  if (x.flash) {
    Kernel k;
    k.name = "flash attention";
    k.kind = hardware::KernelKind::ATTENTION;
    // Packed documents run as a variable-length kernel over s / span sequences of the document's length each.
    k.seq = x.span;
    k.head_dim = x.d;
    k.heads = x.b * heads / x.cp * (x.s / x.span); // all-to-all context parallelism splits the heads
    k.causal = true;
    k.attention = x.attention;
    // Causal: each query sees half the keys on average, or its window (a window's diagonal block is half masked).
    const double causal_keys = x.keys < x.span ? x.keys - 0.5 * x.keys * x.keys / x.span : 0.5 * x.span;
    // With context parallelism a GPU holds 1/cp of the work (all-to-all: the heads; ring: see ring_attention).
    k.flops = 2.0 * x.b * x.s * causal_keys * (x.q + x.o) / x.t / x.cp;
    k.bytes = x.e * x.T * (2.0 * x.q + 2.0 * x.kv) / x.t;
    return {k};
  }
  const double scores = x.b * heads * x.s * x.s;
  const double value_dim = x.o / x.a;
  std::vector<Kernel> ks{matmul(x, "attention scores", x.s, x.s, x.d, x.b * heads),
                         memory_bound("softmax", 2.0 * x.e * scores, MemoryKernel::SOFTMAX)};
  if (x.dropout)
    ks.push_back(memory_bound("attention dropout", (x.e + 1.0 + x.e) * scores, MemoryKernel::DROPOUT));
  ks.push_back(matmul(x, "attention context", x.s, value_dim, x.s, x.b * heads));
  return ks;
}

Program context_parallel_core(const Shape& x, const Costing& c, const CoreOptions& options)
{
  const bool backward = options.backward;
  const bool recompute = options.recompute;
  if (x.cp_kind == plan::CpKind::RING) {
    const double kv = x.e * x.T * (x.kv + x.v) / x.t; // this GPU's keys and values
    Step ring =
        c.compute(backward ? "ring attention backward" : "ring attention", ring_attention(x, backward), recompute);
    ring = overlap(std::move(ring), CollectiveKind::ALL_GATHER, x.cp * kv * (backward ? 2.0 : 1.0));
    ring.group = Group::CP;
    return {ring};
  }
  const double qkv = x.e * x.T * (x.q + x.kv + x.v) / x.t;
  const double out = x.e * x.T * x.o / x.t;
  return {collective(backward ? "cp output-grad all-to-all" : "cp qkv all-to-all", CollectiveKind::ALL_TO_ALL,
                     backward ? out : qkv, Group::CP),
          c.compute(backward ? "attention core backward" : "attention core",
                    backward ? core_backward(x) : core_forward(x), recompute),
          collective(backward ? "cp qkv-grad all-to-all" : "cp output all-to-all", CollectiveKind::ALL_TO_ALL,
                     backward ? qkv : out, Group::CP)};
}

Program attention_forward(const Shape& x, const Costing& c, bool recompute)
{
  const double act = x.T * x.h * x.e;                     // one hidden-state tensor, whole
  const double gathered = x.T * x.h * x.gathered_element; // the QKV GEMMs' input, gathered
  std::vector<Kernel> norms = norm(x, "input norm");
  quantize(norms, x, "qkv input cast", x.Tsp * x.h, {.after_norm = true});
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
    append(p, context_parallel_core(x, c, {.recompute = recompute}));
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

Program attention_backward(const Shape& x, const Costing& c)
{
  const double act = x.T * x.h * x.e;
  const double gathered = x.T * x.h * x.gathered_element; // an output gradient or the QKV input, gathered
  const std::vector<Kernel> output_grad_cast = quantized(x, "projection output-grad cast", x.Tsp * x.h);
  const Kernel projection_dgrad = linear(x, "projection dgrad", x.T, x.o / x.t, x.h, 1, GemmLayout::DGRAD);
  std::vector<Kernel> attn_back{linear(x, "projection wgrad", x.h, x.o / x.t, x.T, 1, GemmLayout::WGRAD)};
  for (auto& k : core_backward(x))
    attn_back.push_back(k);
  append_kernels(attn_back, rotary_backward(x));
  if (x.qk_norm)
    append_kernels(attn_back,
                   norm_backward(x, "qk norm backward", x.T * (x.q + x.kv) / x.t, x.T * (x.q + x.kv) / (x.t * x.d)));
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
    backward_overlap(p, x, c.compute("qkv dgrad", qkv_dgrad), CollectiveKind::ALL_GATHER, gathered,
                     {.collective_first = true});
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
  p.push_back(c.compute("norm backward", norm_backward(x, "input norm backward")));
  return p;
}

} // namespace sim::workload
