#include "workload/program_steps.hpp"

#include "hardware/host_launch.hpp"

namespace sim::workload {
namespace {

using hardware::gemm;
using hardware::GemmLayout;
using hardware::Kernel;
using hardware::KernelPass;
using hardware::memory_bound;
using hardware::MemoryKernel;

} // namespace

Step Costing::compute(std::string label, const std::vector<Kernel>& kernels, bool recompute) const
{
  Step s;
  s.kind = Step::Kind::COMPUTE;
  s.label = std::move(label);
  s.recompute = recompute;
  std::vector<Kernel> replaced;
  if (lora_)
    for (const auto& k : kernels) {
      for (auto& r : with_adapters(k, *lora_))
        replaced.push_back(r);
      for (auto& a : adapter_collectives(k, *lora_))
        s.adapter_collectives.push_back(std::move(a));
    }
  for (const auto& k : lora_ ? replaced : kernels) {
    if (deferred_ != nullptr && k.weight_gradient) {
      deferred_->push_back(k);
      continue;
    }
    const double time = hardware::kernel_time(k, gpu_, precision_);
    s.duration_s += time;
    s.memory_s += hardware::memory_bound_time(k, gpu_, precision_);
    s.flops += k.flops;
    const double launch = host_launch_ ? hardware::host_launch_time(k) : 0.0;
    s.host_s += launch;
    if (log_ != nullptr)
      log_->push_back(KernelCost{program_, s.label, k, time, recompute, launch});
  }
  return s;
}

Step collective(std::string label, CollectiveKind kind, double bytes, Group group)
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

void backward_overlap(Program& p, const Shape& x, Step compute, CollectiveKind kind, double bytes,
                      const BackwardOverlapOptions& options)
{
  if (x.backward_overlap) {
    p.push_back(overlap(std::move(compute), kind, bytes));
    return;
  }
  const std::string label = compute.label + (kind == CollectiveKind::ALL_GATHER       ? " input all-gather"
                                             : kind == CollectiveKind::REDUCE_SCATTER ? " reduce-scatter"
                                                                                      : " all-reduce");
  if (options.collective_first)
    p.push_back(collective(label, kind, bytes));
  p.push_back(std::move(compute));
  if (!options.collective_first)
    p.push_back(collective(label, kind, bytes));
}

Kernel weight_gradient(Kernel k)
{
  k.weight_gradient = true;
  return k;
}

Kernel matmul(const Shape& x, std::string_view name, double m, double n, double k, double batch, GemmLayout layout)
{
  return gemm(name, m, n, k, batch, layout, x.e);
}

Kernel linear(const Shape& x, std::string_view name, double m, double n, double k, double batch, GemmLayout layout)
{
  Kernel g = matmul(x, name, m, n, k, batch, layout);
  g.weight_gradient = layout == GemmLayout::WGRAD;
  g.launches = batch; // a linear layer per local expert (Transformer Engine's GroupedLinear: one GEMM each)
  return x.fp8 ? hardware::fp8_gemm(g) : g;
}

void quantize(std::vector<Kernel>& ks, const Shape& x, std::string_view name, double elements,
              const CastOptions& options)
{
  if (!x.fp8)
    return;
  if (x.recipe == plan::Fp8Recipe::CURRENT)
    ks.push_back(memory_bound("amax", x.e * elements));
  if (!(options.after_norm && x.recipe == plan::Fp8Recipe::DELAYED))
    ks.push_back(memory_bound(name, (x.e + 2.0) * elements));
}

std::vector<Kernel> quantized(const Shape& x, std::string_view name, double elements, const CastOptions& options)
{
  std::vector<Kernel> ks;
  quantize(ks, x, name, elements, options);
  return ks;
}

void add_compute(Program& p, const Costing& c, std::string label, const std::vector<Kernel>& kernels, bool recompute)
{
  if (!kernels.empty())
    append(p, Program{c.compute(std::move(label), kernels, recompute)});
}

namespace {

// An RMSNorm written as PyTorch operations (transformers' LlamaRMSNorm of 2023-24, torchtune's and LitGPT's RMSNorm:
// upcast to fp32, square, mean, add epsilon, rsqrt, scale, downcast, times the weight), each a kernel over `n`
// values of `rows` rows; the bytes each reads and writes per value.
std::vector<Kernel> eager_rmsnorm(double n, double rows, double e)
{
  // In full precision the casts return their input: no kernel.
  const bool casts = e < 4.0;
  std::vector<Kernel> ks;
  if (casts)
    ks.push_back(memory_bound("rmsnorm: to fp32", (e + 4.0) * n));
  for (const Kernel& k : {memory_bound("rmsnorm: square", 8.0 * n), memory_bound("rmsnorm: mean", 4.0 * n + 4.0 * rows),
                          memory_bound("rmsnorm: add eps", 8.0 * rows), memory_bound("rmsnorm: rsqrt", 8.0 * rows),
                          memory_bound("rmsnorm: scale", 8.0 * n + 4.0 * rows)})
    ks.push_back(k);
  if (casts)
    ks.push_back(memory_bound("rmsnorm: to 16 bits", (4.0 + e) * n));
  ks.push_back(memory_bound("rmsnorm: weight", 2.0 * e * n));
  return ks;
}

// Autograd's backward of it, operation by operation (torch's derivatives.yaml): the weight's product (and, when the
// norm's weight trains, its gradient and the sum over rows), both casts, the scale's two products and the sum for
// rsqrt's input, rsqrt's and the mean's backward, pow's (self.pow(1) copied, times 2, times the gradient), and the
// fp32 gradient's two paths added.
std::vector<Kernel> eager_rmsnorm_backward(double n, double rows, bool weight_trains, double e)
{
  const bool casts = e < 4.0;
  std::vector<Kernel> ks{memory_bound("rmsnorm backward: weight", 2.0 * e * n)};
  if (weight_trains) {
    ks.push_back(memory_bound("rmsnorm backward: weight gradient", 3.0 * e * n));
    ks.push_back(memory_bound("rmsnorm backward: weight gradient sum", e * n));
  }
  if (casts)
    ks.push_back(memory_bound("rmsnorm backward: to fp32", (e + 4.0) * n));
  for (const Kernel& k :
       {memory_bound("rmsnorm backward: scale", 8.0 * n + 4.0 * rows),
        memory_bound("rmsnorm backward: rsqrt input", 12.0 * n + 4.0 * rows),
        memory_bound("rmsnorm backward: rsqrt input sum", 4.0 * n),
        memory_bound("rmsnorm backward: rsqrt", 24.0 * rows),
        memory_bound("rmsnorm backward: mean", 4.0 * n + 4.0 * rows), memory_bound("rmsnorm backward: pow", 8.0 * n),
        memory_bound("rmsnorm backward: times 2", 8.0 * n), memory_bound("rmsnorm backward: times gradient", 12.0 * n),
        memory_bound("rmsnorm backward: add paths", 12.0 * n)})
    ks.push_back(k);
  if (casts)
    ks.push_back(memory_bound("rmsnorm backward: to 16 bits", (4.0 + e) * n));
  return ks;
}

// transformers' apply_rotary_pos_emb on one tensor of `n` values: q * cos, rotate_half's negation of one half and
// the concatenation, times sin, the sum (cos and sin broadcast over the heads, read from cache).
void eager_rotary(std::vector<Kernel>& ks, double n, double e)
{
  for (const Kernel& k : {memory_bound("rotary: times cos", 2.0 * e * n), memory_bound("rotary: negate half", e * n),
                          memory_bound("rotary: concatenate", 2.0 * e * n),
                          memory_bound("rotary: times sin", 2.0 * e * n), memory_bound("rotary: add", 3.0 * e * n)})
    ks.push_back(k);
}

// Its backward: the gradient times sin, negated on one half, each half's slice backward (zeros and a copy into
// them), times cos, and the three paths added.
void eager_rotary_backward(std::vector<Kernel>& ks, double n, double e)
{
  Kernel slices = memory_bound("rotary backward: slices", 4.0 * e * n);
  slices.launches = 4;
  for (const Kernel& k :
       {memory_bound("rotary backward: times sin", 2.0 * e * n), memory_bound("rotary backward: negate half", e * n),
        slices, memory_bound("rotary backward: times cos", 2.0 * e * n),
        memory_bound("rotary backward: add paths", 6.0 * e * n)})
    ks.push_back(k);
}

} // namespace

std::vector<Kernel> norm(const Shape& x, const char* name, double elements, double rows)
{
  if (x.eager_norm)
    return eager_rmsnorm(elements, rows, x.e);
  return {memory_bound(name, 2.0 * x.e * elements, x.norm)};
}

std::vector<Kernel> norm_backward(const Shape& x, const char* name, double elements, double rows)
{
  if (x.eager_norm)
    return eager_rmsnorm_backward(elements, rows, x.norm_weights_train, x.e);
  return {memory_bound(name, 3.0 * x.e * elements, x.norm, KernelPass::BACKWARD)};
}

std::vector<Kernel> norm(const Shape& x, const char* name)
{
  return norm(x, name, x.Tsp * x.h, x.Tsp);
}

std::vector<Kernel> norm_backward(const Shape& x, const char* name)
{
  return norm_backward(x, name, x.Tsp * x.h, x.Tsp);
}

std::vector<Kernel> rotary(const Shape& x)
{
  if (!x.rope)
    return {};
  if (!x.eager_rope)
    return {memory_bound("rotary embedding", 2.0 * x.e * x.T * (x.q + x.kv) / x.t, MemoryKernel::ROPE)};
  std::vector<Kernel> ks;
  eager_rotary(ks, x.T * x.q / x.t, x.e);
  eager_rotary(ks, x.T * x.kv / x.t, x.e);
  return ks;
}

std::vector<Kernel> rotary_backward(const Shape& x)
{
  if (!x.rope)
    return {};
  if (!x.eager_rope)
    return {memory_bound("rotary backward", 2.0 * x.e * x.T * (x.q + x.kv) / x.t, MemoryKernel::ROPE,
                         KernelPass::BACKWARD)};
  std::vector<Kernel> ks;
  eager_rotary_backward(ks, x.T * x.q / x.t, x.e);
  eager_rotary_backward(ks, x.T * x.kv / x.t, x.e);
  return ks;
}

std::vector<Kernel> activation(const Shape& x, const char* name, double n)
{
  if (!x.gated)
    return {memory_bound(name, 2.0 * x.e * n, MemoryKernel::GELU)};
  if (!x.eager_activation)
    return {memory_bound(name, 3.0 * x.e * n, MemoryKernel::SWIGLU)};
  return {memory_bound("silu", 2.0 * x.e * n), memory_bound("silu times up", 3.0 * x.e * n)};
}

std::vector<Kernel> activation_backward(const Shape& x, const char* name, double n)
{
  if (!x.gated)
    return {memory_bound(name, 3.0 * x.e * n, MemoryKernel::GELU, KernelPass::BACKWARD)};
  if (!x.eager_activation)
    return {memory_bound(name, 5.0 * x.e * n, MemoryKernel::SWIGLU, KernelPass::BACKWARD)};
  return {memory_bound("silu times up backward: up", 3.0 * x.e * n),
          memory_bound("silu times up backward: silu", 3.0 * x.e * n), memory_bound("silu backward", 3.0 * x.e * n)};
}

std::vector<Kernel> residual(const Shape& x, const char* name)
{
  std::vector<Kernel> ks;
  if (x.post_norms)
    ks = norm(x, "post norm");
  if (x.dropout)
    ks.push_back(memory_bound(name, 3.0 * x.e * x.Tsp * x.h + x.Tsp * x.h, MemoryKernel::BIAS_DROPOUT_ADD));
  else
    ks.push_back(memory_bound(name, 3.0 * x.e * x.Tsp * x.h, MemoryKernel::RESIDUAL_ADD));
  return ks;
}

Kernel residual_backward(const Shape& x)
{
  if (x.dropout)
    return memory_bound("residual backward", 2.0 * x.e * x.Tsp * x.h + x.Tsp * x.h, MemoryKernel::DROPOUT,
                        KernelPass::BACKWARD);
  return memory_bound("residual backward", 3.0 * x.e * x.Tsp * x.h, MemoryKernel::RESIDUAL_ADD, KernelPass::BACKWARD);
}

} // namespace sim::workload
