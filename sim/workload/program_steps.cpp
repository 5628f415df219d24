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
    for (const auto& k : kernels)
      for (auto& r : with_adapters(k, *lora_))
        replaced.push_back(r);
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

Kernel linear(const Shape& x, std::string_view name, double m, double n, double k, double batch, GemmLayout layout)
{
  Kernel g = gemm(name, m, n, k, batch, layout);
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
    ks.push_back(memory_bound("amax", e * elements));
  if (!(options.after_norm && x.recipe == plan::Fp8Recipe::DELAYED))
    ks.push_back(memory_bound(name, (e + 2.0) * elements));
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

Kernel norm(const Shape& x, const char* name)
{
  return memory_bound(name, 2.0 * e * x.Tsp * x.h, x.norm);
}

Kernel norm_backward(const Shape& x, const char* name)
{
  return memory_bound(name, 3.0 * e * x.Tsp * x.h, x.norm, KernelPass::BACKWARD);
}

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

Kernel residual_backward(const Shape& x)
{
  if (x.dropout)
    return memory_bound("residual backward", 2.0 * e * x.Tsp * x.h + x.Tsp * x.h, MemoryKernel::DROPOUT,
                        KernelPass::BACKWARD);
  return memory_bound("residual backward", 3.0 * e * x.Tsp * x.h, MemoryKernel::RESIDUAL_ADD, KernelPass::BACKWARD);
}

} // namespace sim::workload
