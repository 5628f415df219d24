#include "report/kernel_report.hpp"

#include "core/units.hpp"

#include <fmt/format.h>
#include <map>

namespace sim::report {
namespace {

using hardware::KernelKind;

std::string kind_of(const hardware::Kernel& k)
{
  switch (k.kind) {
    case KernelKind::GEMM:
      return fmt::format("gemm {}", core::choice_name(k.layout, hardware::gemm_layout_choices));
    case KernelKind::ATTENTION:
    case KernelKind::ATTENTION_BACKWARD:
      return fmt::format("attention {}", core::choice_name(k.attention, hardware::attention_impl_choices));
    case KernelKind::MEMORY:
      return std::string(core::choice_name(k.memory, hardware::memory_kernel_choices)) +
             (k.pass == hardware::KernelPass::BACKWARD ? " bwd" : "");
  }
  return "?";
}

std::string shape_of(const hardware::Kernel& k)
{
  switch (k.kind) {
    case KernelKind::GEMM:
      return k.batch > 1 ? fmt::format("{:.0f}x{:.0f}x{:.0f} x{:.0f}", k.m, k.n, k.k, k.batch)
                         : fmt::format("{:.0f}x{:.0f}x{:.0f}", k.m, k.n, k.k);
    case KernelKind::ATTENTION:
    case KernelKind::ATTENTION_BACKWARD:
      return fmt::format("s {:.0f}, d {:.0f}", k.seq, k.head_dim);
    case KernelKind::MEMORY:
      return core::format_bytes(k.bytes);
  }
  return "";
}

// What the kernel achieved: FLOP/s for arithmetic kernels, bytes/s for memory-bound ones.
std::string rate_of(const workload::KernelCost& c)
{
  if (c.time_s <= 0)
    return "";
  if (c.kernel.kind == KernelKind::MEMORY)
    return core::format_bandwidth(c.kernel.bytes / c.time_s);
  return core::format_flop_rate(c.kernel.flops / c.time_s);
}

} // namespace

std::string kernels_text(const std::vector<workload::KernelCost>& costs)
{
  std::map<std::string, double> totals;
  std::map<std::string, double> launches;
  for (const auto& c : costs) {
    totals[c.program] += c.time_s;
    launches[c.program] += c.launch_s;
  }
  std::string out;
  std::string program;
  for (const auto& c : costs) {
    if (c.program != program) {
      program = c.program;
      out += fmt::format("{}{} ({}, launched by the host in {}; one micro-batch on one tensor-parallel rank)\n",
                         out.empty() ? "" : "\n", program, core::format_time(totals[program]),
                         core::format_time(launches[program]));
      out += fmt::format("  {:<28} {:<24} {:<26} {:>12} {:>13} {:>6}\n", "kernel", "class", "shape", "time", "rate",
                         "share");
    }
    out += fmt::format("  {:<28} {:<24} {:<26} {:>12} {:>13} {:>5.1f}%\n",
                       std::string(c.kernel.name) + (c.recompute ? " (recompute)" : ""), kind_of(c.kernel),
                       shape_of(c.kernel), core::format_time(c.time_s), rate_of(c), 100.0 * c.time_s / totals[program]);
  }
  return out;
}

core::Json kernels_json(const std::vector<workload::KernelCost>& costs)
{
  core::Json list = core::Json::array();
  for (const auto& c : costs) {
    const auto& k = c.kernel;
    core::Json j{{"program", c.program}, {"step", c.step},           {"kernel", std::string(k.name)},
                 {"class", kind_of(k)},  {"time_s", c.time_s},       {"flops", k.flops},
                 {"bytes", k.bytes},     {"recompute", c.recompute}, {"launch_s", c.launch_s}};
    if (k.kind == KernelKind::GEMM)
      j["shape"] = {{"m", k.m}, {"n", k.n}, {"k", k.k}, {"batch", k.batch}};
    if (k.kind == KernelKind::ATTENTION || k.kind == KernelKind::ATTENTION_BACKWARD)
      j["shape"] = {{"seq", k.seq}, {"head_dim", k.head_dim}};
    list.push_back(std::move(j));
  }
  return {{"kernels", list}};
}

} // namespace sim::report
