#include "validation/ablation.hpp"

#include <fmt/format.h>
#include <map>
#include <set>

namespace sim::validation {

const std::vector<Effect>& effects()
{
  static const std::vector<Effect> list{
      {"kernel tables", "GEMMs and fused attention at the catalogue's flat efficiencies instead of the measured tables",
       {"topology.node.gpu.kernel_tables=null"}},
      {"memory kernels", "every memory-bound kernel at the STREAM bandwidth instead of its class's",
       {"topology.node.gpu.memory_kernels={}"}},
      {"sustained clock", "tensor cores at the benchmarks' clock", {"topology.node.gpu.sustained_compute_ratio=1"}},
      {"slowest GPU", "every GPU at the mean sustained rate", {"topology.node.gpu.sustained_spread=0"}},
      {"contention", "collectives take no SMs and no HBM bandwidth from compute",
       {"topology.node.collective_sms=0", "topology.node.nccl_memory_traffic=0"}},
      {"norm kernels", "Transformer Engine's norms whatever the software", {"plan.norm_impl=te"}},
      {"attention kernel", "Transformer Engine's attention whatever the software", {"plan.attention=te"}},
      {"TP backward", "the backward's TP communication always beside the weight-gradient GEMM",
       {"plan.tp_backward_overlap=true"}},
      {"grad accumulation", "gradients always accumulated inside the GEMM", {"plan.grad_accumulation=fused"}},
      {"host syncs", "no device synchronisation after pipeline sends or by timers",
       {"plan.p2p_sync=false", "plan.host_syncs_per_microbatch=0"}},
      {"optimizer", "one fused Adam pass whatever the software", {"plan.optimizer=fused"}},
      {"pipeline engine", "Megatron's pipeline schedule whatever the software", {"plan.pipeline_engine=megatron"}},
      {"sharded DP", "ZeRO-3/FSDP gathers prefetched before each layer, one collective per layer",
       {"plan.backward_prefetch=pre", "plan.zero3_per_tensor=false"}},
  };
  return list;
}

std::string render_ablation_markdown(const std::vector<AblationRow>& rows)
{
  // source (quantity) -> effect -> stats
  std::map<std::string, std::map<std::string, const ErrorStats*>> table;
  std::set<std::string> timed;
  for (const auto& row : rows)
    for (const auto& s : row.result.by_source) {
      const std::string key = fmt::format("{} ({})", s.group, s.quantity);
      table[key][row.effect] = &s;
    }
  std::string out = "| source | with every effect |";
  std::string rule = "| --- | ---: |";
  for (const auto& row : rows)
    if (!row.effect.empty()) {
      out += fmt::format(" without {} |", row.effect);
      rule += " ---: |";
    }
  out += "\n" + rule + "\n";
  for (const auto& [source, by_effect] : table) {
    // Memory comparisons do not depend on any timing effect: leave them out.
    if (source.find("memory") != std::string::npos || source.find("activations") != std::string::npos)
      continue;
    const auto cell = [&by_effect](const std::string& effect) {
      const auto it = by_effect.find(effect);
      if (it == by_effect.end())
        return std::string("");
      return fmt::format("{:+.1f}% ({:.1f}%)", 100.0 * it->second->bias, 100.0 * it->second->median);
    };
    out += fmt::format("| {} | {} |", source, cell(""));
    for (const auto& row : rows)
      if (!row.effect.empty())
        out += fmt::format(" {} |", cell(row.effect));
    out += "\n";
  }
  return out;
}

} // namespace sim::validation
