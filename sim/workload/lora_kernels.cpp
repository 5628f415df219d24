#include "workload/lora_kernels.hpp"

namespace sim::workload {
namespace {

using hardware::gemm;
using hardware::GemmLayout;
using hardware::Kernel;
using hardware::memory_bound;

bool starts_with(std::string_view name, std::string_view prefix)
{
  return name.substr(0, prefix.size()) == prefix;
}

// Megatron's column-parallel layers (split by output: QKV, fc1) against its row-parallel ones (split by input).
bool is_column(plan::LinearSite site)
{
  return site == plan::LinearSite::QKV || site == plan::LinearSite::FC1;
}

} // namespace

std::optional<LoraKernels> lora_kernels(const model::ModelSpec& m, const plan::ParallelPlan& p)
{
  if (!p.lora())
    return std::nullopt;
  LoraKernels out;
  out.rank = p.lora_rank;
  out.tp = static_cast<double>(p.tp);
  out.e = p.value_bytes();
  out.sp = p.tp > 1 && p.sequence_parallel;
  out.quantized = p.base_quantization == plan::BaseQuantization::NF4;
  out.dropout = p.lora_dropout > 0;
  out.dropout_on_output = p.lora_dropout_position == plan::LoraDropoutAt::OUTPUT;
  out.scale_rank = p.lora_scale_position == plan::LoraScaleAt::RANK;
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
  const double t = lora.tp;
  // Column-parallel layers (QKV, fc1) see the whole input: A is split by rank. Row-parallel ones (projection, fc2)
  // see 1/t of it: A is split by input. B is split by output either way.
  const bool column = is_column(*site);
  const double a_rank = column ? r / t : r;
  auto a_in = [&](const plan::Adapter& a) { return column ? a.in : a.in / t; };
  std::vector<Kernel> out;
  if (k.layout == GemmLayout::WGRAD) { // dW = dY^T X: m = out, n = in, k = tokens; the base's is not computed
    for (const auto& a : adapters) {
      Kernel b = gemm("lora B wgrad", a.out / t, r, k.k, 1, GemmLayout::WGRAD, lora.e);
      Kernel ak = gemm("lora A wgrad", a_rank, a_in(a), k.k, 1, GemmLayout::WGRAD, lora.e);
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
    out.push_back(memory_bound("nf4 dequantize",
                               k.n * k.k * (plan::base_weight_bytes(plan::BaseQuantization::NF4, lora.e) + lora.e)));
  out.push_back(k);
  for (const auto& a : adapters) {
    // The dropout (16-bit values in and out, a one-byte mask) on each adapter's input (PEFT's, peft/tuners/lora/
    // layer.py) or on B's output (Megatron-core's and AutoModel's "post"); the gradient through the mask backward.
    const double dropped = lora.dropout_on_output ? a.out / t : a_in(a);
    const double dropout = lora.dropout ? (2.0 * lora.e + 1.0) * tokens * dropped : 0.0;
    const double before = lora.dropout_on_output ? 0.0 : dropout;
    const double after = lora.dropout_on_output ? dropout : 0.0;
    // The output the scale and add cover: this GPU's 1/t of it (a row adapter's gathered output is scattered over
    // the sequence under sequence parallelism; without it every GPU adds the whole).
    const double added = column || lora.sp ? a.out / t : a.out;
    if (k.layout == GemmLayout::FORWARD) {
      // lora_B(lora_A(x)) * scaling, added to the base's output: two GEMMs, a scale and an add over the output.
      if (before > 0)
        out.push_back(memory_bound("lora dropout", before));
      out.push_back(gemm("lora A", tokens, a_rank, a_in(a), 1, GemmLayout::FORWARD, lora.e));
      if (lora.scale_rank) // AutoModel's LinearLoRA: lora_B(lora_A(x) * scale)
        out.push_back(memory_bound("lora scale", 2.0 * lora.e * tokens * a_rank));
      out.push_back(gemm("lora B", tokens, a.out / t, r, 1, GemmLayout::FORWARD, lora.e));
      if (after > 0)
        out.push_back(memory_bound("lora dropout", after));
      if (lora.scale_rank)
        out.push_back(memory_bound("lora add", 3.0 * lora.e * tokens * added));
      else // PEFT's and Megatron-core's lora_B(lora_A(x)) * scale: the scale over the output, then the add
        out.push_back(memory_bound("lora scale and add", 5.0 * lora.e * tokens * added));
    } else {
      // The output gradient scaled (or, scaled on the rank, B's input gradient), through B and A, added to the input
      // gradient.
      if (!lora.scale_rank)
        out.push_back(memory_bound("lora gradient scale", 2.0 * lora.e * tokens * added));
      if (after > 0)
        out.push_back(memory_bound("lora dropout backward", after));
      out.push_back(gemm("lora B dgrad", tokens, r, a.out / t, 1, GemmLayout::DGRAD, lora.e));
      if (lora.scale_rank)
        out.push_back(memory_bound("lora gradient scale", 2.0 * lora.e * tokens * r));
      out.push_back(gemm("lora A dgrad", tokens, a_in(a), a_rank, 1, GemmLayout::DGRAD, lora.e));
      if (before > 0)
        out.push_back(memory_bound("lora dropout backward", before));
      out.push_back(memory_bound("lora input-gradient add", 3.0 * lora.e * tokens * a_in(a)));
    }
  }
  return out;
}

std::vector<AdapterCollective> adapter_collectives(const Kernel& k, const LoraKernels& lora)
{
  const auto site = k.kind == hardware::KernelKind::GEMM ? linear_site(k.name) : std::nullopt;
  if (lora.tp <= 1 || !site || k.layout == GemmLayout::WGRAD || starts_with(k.name, "lora "))
    return {};
  const bool column = is_column(*site);
  const double tokens = k.m;
  const double r = lora.rank;
  std::vector<AdapterCollective> out;
  for (const auto& a : lora.adapters[static_cast<std::size_t>(*site)]) {
    if (k.layout == GemmLayout::FORWARD) {
      if (column) {
        out.push_back({"lora A output all-gather", CollectiveKind::ALL_GATHER, lora.e * tokens * r});
      } else {
        out.push_back({"lora A output all-reduce", CollectiveKind::ALL_REDUCE, lora.e * tokens * r});
        out.push_back({"lora B output all-gather", CollectiveKind::ALL_GATHER, lora.e * tokens * a.out});
      }
      continue;
    }
    if (!column && lora.sp)
      out.push_back({"lora output-grad all-gather", CollectiveKind::ALL_GATHER, lora.e * tokens * a.out});
    out.push_back({"lora B input-grad all-reduce", CollectiveKind::ALL_REDUCE, lora.e * tokens * r});
    if (column && !lora.sp)
      out.push_back({"lora A input-grad all-reduce", CollectiveKind::ALL_REDUCE, lora.e * tokens * a.in});
  }
  return out;
}

} // namespace sim::workload
