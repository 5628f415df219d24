#include "hardware/gpu_spec.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace sim::hardware {

std::optional<double> GpuSpec::peak(Precision p) const
{
  const auto it = peak_flops.find(p);
  if (it == peak_flops.end())
    return std::nullopt;
  return it->second;
}

std::optional<double> GpuSpec::fp8_speedup() const
{
  const auto fp8 = peak(Precision::FP8);
  const auto sixteen = peak(Precision::BF16) ? peak(Precision::BF16) : peak(Precision::FP16);
  if (!fp8 || !sixteen)
    return std::nullopt;
  return fp8_gemm_speedup > 0 ? fp8_gemm_speedup : *fp8 / *sixteen;
}

double GpuSpec::memory_kernel_efficiency(MemoryKernel kernel, KernelPass pass) const
{
  const double stream = memory_efficiency > 0 ? memory_efficiency : 1.0;
  const auto it = memory_kernels.find(kernel);
  if (it == memory_kernels.end())
    return stream;
  return pass == KernelPass::BACKWARD && it->second.backward > 0 ? it->second.backward : it->second.forward;
}

namespace {

std::map<MemoryKernel, MemoryKernelRate> read_memory_kernels(const core::Node& node)
{
  core::ObjectReader r(node);
  std::map<MemoryKernel, MemoryKernelRate> out;
  for (const auto& c : memory_kernel_choices) {
    auto entry = r.find(c.name);
    if (!entry)
      continue;
    core::ObjectReader e(*entry);
    MemoryKernelRate rate;
    rate.forward = e.number("forward", 0.05, 1.0);
    rate.backward = e.number_or("backward", 0.0, 0.05, 1.0);
    e.finish();
    out[c.value] = rate;
  }
  r.finish();
  return out;
}

} // namespace

std::vector<std::string> GpuSpec::estimates() const
{
  std::vector<std::string> out;
  for (const auto& [field, source] : sources)
    if (source.find("[datasheet-only estimate]") != std::string::npos)
      out.push_back(field);
  // Efficiencies nobody measured on the part: the nominal rates stand in for them.
  const bool attention_measured = attention_efficiency > 0 || (kernel_tables && !kernel_tables->attention.empty());
  const std::array<std::pair<bool, const char*>, 4> unmeasured{
      {{memory_efficiency == 0, "memory_efficiency"},
       {!attention_measured, "attention_efficiency"},
       {nvlink_bandwidth > 0 && nccl_nvlink_efficiency == 0, "nccl_nvlink_efficiency"},
       {peak(Precision::FP8) && fp8_gemm_speedup == 0, "fp8_gemm_speedup"}}};
  for (const auto& [missing, field] : unmeasured)
    if (missing && std::find(out.begin(), out.end(), field) == out.end())
      out.emplace_back(field);
  return out;
}

GpuSpec read_gpu(const core::Node& node)
{
  core::ObjectReader r(node);
  core::expect_schema(r, "gpu/v1");
  GpuSpec g;
  g.name = r.text("name");
  g.description = r.text_or("description", "");
  g.vendor = r.choice_or<Vendor>("vendor", vendor_choices, Vendor::NVIDIA);

  core::ObjectReader peaks(r.at("peak_flops", "an object of dense FLOP rates per precision"));
  for (const auto& c : precision_choices)
    if (auto q = peaks.optional_quantity(c.name, core::Dimension::FLOP_RATE))
      g.peak_flops[c.value] = *q;
  peaks.finish();
  if (g.peak_flops.empty())
    peaks.node().fail("no precision given", "at least one of bf16, fp16, fp8, tf32, fp32");

  g.memory_bytes = r.quantity("memory", core::Dimension::BYTES);
  g.memory_bandwidth = r.quantity("memory_bandwidth", core::Dimension::BANDWIDTH);
  g.sms = static_cast<int>(r.integer_or("sms", 0, 1, 1024));
  g.nvlink_bandwidth = r.quantity_or("nvlink_bandwidth", core::Dimension::BANDWIDTH, 0.0);
  g.pcie_generation = static_cast<int>(r.integer("pcie_generation", 3, 6));
  g.compute_capability = r.number_or("compute_capability", 0.0, 3.0, 13.0);
  g.peer_to_peer = r.flag_or("peer_to_peer", true);
  g.gemm_efficiency = r.number("gemm_efficiency", 0.05, 1.25);
  // Measured efficiencies lie between 5 % and 100 % (absent: 0, "not measured").
  g.memory_efficiency = r.number_or("memory_efficiency", 0.0, 0.05, 1.0);
  g.nccl_nvlink_efficiency = r.number_or("nccl_nvlink_efficiency", 0.0, 0.05, 1.0);
  g.nccl_nvls_efficiency = r.number_or("nccl_nvls_efficiency", 0.0, 0.05, 1.0);
  g.fp8_gemm_speedup = r.number_or("fp8_gemm_speedup", 0.0, 1.0, 4.0);
  g.attention_efficiency = r.number_or("attention_efficiency", 0.0, 0.05, 1.0);
  g.attention_backward_efficiency = r.number_or("attention_backward_efficiency", 0.0, 0.05, 1.0);
  g.kernel_overhead_s = r.quantity_or("kernel_overhead", core::Dimension::TIME, 0.0);
  g.sustained_compute_ratio = r.number_or("sustained_compute_ratio", 1.0, 0.3, 1.0);
  g.sustained_spread = r.number_or("sustained_spread", 0.0, 0.0, 0.5);
  if (auto kernels = r.find("memory_kernels"))
    g.memory_kernels = read_memory_kernels(*kernels);
  if (auto tables = r.find("kernel_tables"); tables && !tables->json().is_null()) {
    if (!tables->json().is_object())
      tables->fail_found("not resolved", core::describe_type(tables->json()), "a kernels/v1 preset name or object");
    g.kernel_tables = read_kernel_tables(*tables);
    if (g.kernel_tables->sms != g.sms && g.sms > 0)
      tables->fail_found("measured on another chip", fmt::format("{} SMs", g.kernel_tables->sms),
                         fmt::format("tables of a chip with this GPU's {} SMs", g.sms));
  }
  if (auto price = r.find("list_price_usd"))
    g.list_price_usd = price->as_number(100.0, 1e6);
  g.tdp_w = r.quantity_or("tdp", core::Dimension::POWER, 0.0);

  // A source names a field, or a member of one as a path (memory_kernels/dropout): the field must be there (an
  // override may have removed the member).
  core::ObjectReader sources(r.at("sources", "an object: field name -> source"));
  for (const auto& item : sources.node().json().items()) {
    const core::Node field = sources.node().element_of(item.key());
    if (!node.json().contains(item.key().substr(0, item.key().find('/'))))
      field.fail_found("names no field of this GPU", "\"" + item.key() + "\"",
                       "the name of a field given above, or a path to one of its members");
    g.sources[item.key()] = field.as_string();
  }
  r.finish();
  return g;
}

} // namespace sim::hardware
