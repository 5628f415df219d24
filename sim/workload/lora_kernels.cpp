#include "workload/lora_kernels.hpp"

namespace sim::workload {
namespace {

using hardware::gemm;
using hardware::GemmLayout;
using hardware::Kernel;
using hardware::memory_bound;

constexpr double e = 2.0; // bytes per 16-bit element

bool starts_with(std::string_view name, std::string_view prefix)
{
  return name.substr(0, prefix.size()) == prefix;
}

} // namespace

std::optional<LoraKernels> lora_kernels(const model::ModelSpec& m, const plan::ParallelPlan& p)
{
  if (!p.lora())
    return std::nullopt;
  LoraKernels out;
  out.rank = p.lora_rank;
  out.quantized = p.base_quantization == plan::BaseQuantization::NF4;
  out.dropout = p.lora_dropout > 0;
  for (auto site : {plan::LinearSite::QKV, plan::LinearSite::PROJ, plan::LinearSite::FC1, plan::LinearSite::FC2})
    out.adapters[static_cast<std::size_t>(site)] = plan::lora_adapters(m, p, site);
  return out;
}

std::optional<plan::LinearSite> linear_site(std::string_view name)
{
  if (starts_with(name, "qkv"))
    return plan::LinearSite::QKV;
  if (starts_with(name, "attention projection") || starts_with(name, "projection "))
    return plan::LinearSite::PROJ;
  if (starts_with(name, "fc1"))
    return plan::LinearSite::FC1;
  if (starts_with(name, "fc2"))
    return plan::LinearSite::FC2;
  return std::nullopt;
}

std::vector<Kernel> with_adapters(const Kernel& k, const LoraKernels& lora)
{
  if (starts_with(k.name, "lora ") || starts_with(k.name, "nf4 "))
    return {k}; // already in place (a zero-bubble split costs the deferred adapter gradients again)
  if (k.kind == hardware::KernelKind::MEMORY && k.memory == hardware::MemoryKernel::EMBEDDING &&
      k.pass == hardware::KernelPass::BACKWARD)
    return {}; // the frozen embedding needs no gradient
  const auto site = k.kind == hardware::KernelKind::GEMM ? linear_site(k.name) : std::nullopt;
  if (!site)
    return k.weight_gradient ? std::vector<Kernel>{} : std::vector<Kernel>{k}; // the output layer's, frozen
  const auto& adapters = lora.adapters[static_cast<std::size_t>(*site)];
  const double r = lora.rank;
  std::vector<Kernel> out;
  if (k.layout == GemmLayout::WGRAD) { // dW = dY^T X: m = out, n = in, k = tokens; the base's is not computed
    for (const auto& a : adapters) {
      Kernel b = gemm("lora B wgrad", a.out, r, k.k, 1, GemmLayout::WGRAD);
      Kernel ak = gemm("lora A wgrad", r, a.in, k.k, 1, GemmLayout::WGRAD);
      b.weight_gradient = ak.weight_gradient = true;
      out.push_back(b);
      out.push_back(ak);
    }
    return out;
  }
  // Forward: m = tokens, n = out, k = in; data gradient: m = tokens, n = in, k = out. Either way the weight has
  // n x k elements, which a 4-bit base reads at 4.127 bits and writes back in 16 (bitsandbytes' dequantize_4bit).
  const double tokens = k.m;
  if (lora.quantized)
    out.push_back(
        memory_bound("nf4 dequantize", k.n * k.k * (plan::base_weight_bytes(plan::BaseQuantization::NF4) + e)));
  out.push_back(k);
  for (const auto& a : adapters) {
    // PEFT's dropout on each adapter's input (peft/tuners/lora/layer.py): a 16-bit copy and a one-byte mask forward,
    // the gradient through the mask backward.
    const double dropout = lora.dropout ? (2.0 * e + 1.0) * tokens * a.in : 0.0;
    if (k.layout == GemmLayout::FORWARD) {
      // lora_B(lora_A(x)) * scaling, added to the base's output: two GEMMs, a scale and an add over the output.
      if (dropout > 0)
        out.push_back(memory_bound("lora dropout", dropout));
      out.push_back(gemm("lora A", tokens, r, a.in));
      out.push_back(gemm("lora B", tokens, a.out, r));
      out.push_back(memory_bound("lora scale and add", 5.0 * e * tokens * a.out));
    } else {
      // The output gradient scaled, through B and A, added to the input gradient.
      out.push_back(memory_bound("lora gradient scale", 2.0 * e * tokens * a.out));
      out.push_back(gemm("lora B dgrad", tokens, r, a.out, 1, GemmLayout::DGRAD));
      out.push_back(gemm("lora A dgrad", tokens, a.in, r, 1, GemmLayout::DGRAD));
      if (dropout > 0)
        out.push_back(memory_bound("lora dropout backward", dropout));
      out.push_back(memory_bound("lora input-gradient add", 3.0 * e * tokens * a.in));
    }
  }
  return out;
}

} // namespace sim::workload
