#include "validation/ablation.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>

namespace sim::validation {

const std::vector<Effect>& effects()
{
  static const std::vector<Effect> list{
      {"kernel tables",
       "GEMMs and fused attention at the catalogue's flat efficiencies instead of the measured tables",
       {"topology.node.gpu.kernel_tables=null"}},
      {"memory kernels",
       "every memory-bound kernel at the STREAM bandwidth instead of its class's",
       {"topology.node.gpu.memory_kernels={}"}},
      {"sustained clock", "tensor cores at the benchmarks' clock", {"topology.node.gpu.sustained_compute_ratio=1"}},
      {"slowest GPU", "every GPU at the mean sustained rate", {"topology.node.gpu.sustained_spread=0"}},
      {"contention",
       "collectives take no SMs and no HBM bandwidth from compute",
       {"topology.node.collective_sms=0", "topology.node.nccl_memory_traffic=0"}},
      {"norm kernels", "Transformer Engine's norms whatever the software", {"plan.norm_impl=te"}},
      {"attention kernel", "Transformer Engine's attention whatever the software", {"plan.attention=te"}},
      {"TP backward",
       "the backward's TP communication always beside the weight-gradient GEMM",
       {"plan.tp_backward_overlap=true"}},
      {"grad accumulation", "gradients always accumulated inside the GEMM", {"plan.grad_accumulation=fused"}},
      {"host syncs",
       "no device synchronisation after pipeline sends or by timers",
       {"plan.p2p_sync=false", "plan.host_syncs_per_microbatch=0"}},
      {"optimizer", "one fused Adam pass whatever the software", {"plan.optimizer=fused"}},
      {"pipeline engine", "Megatron's pipeline schedule whatever the software", {"plan.pipeline_engine=megatron"}},
      {"sharded DP",
       "ZeRO-3/FSDP gathers prefetched before each layer, one collective per layer",
       {"plan.backward_prefetch=pre", "plan.zero3_per_tensor=false"}},
  };
  return list;
}

std::string render_ablation_markdown(const std::vector<AblationRow>& rows)
{
  // One column per timed source (memory comparisons depend on no timing effect), one row per run.
  std::vector<std::string> sources;
  for (const auto& row : rows)
    for (const auto& st : row.result.by_source) {
      const std::string key = fmt::format("{} ({})", st.group, st.quantity);
      const bool memory = key.find("memory") != std::string::npos || key.find("activations") != std::string::npos;
      if (!memory && std::find(sources.begin(), sources.end(), key) == sources.end())
        sources.push_back(key);
    }
  std::sort(sources.begin(), sources.end());
  std::string out = "| effect removed |";
  std::string rule = "| --- |";
  for (const auto& source : sources) {
    out += fmt::format(" {} |", source);
    rule += " ---: |";
  }
  out += "\n" + rule + "\n";
  for (const auto& row : rows) {
    std::map<std::string, const ErrorStats*> by_source;
    for (const auto& st : row.result.by_source)
      by_source[fmt::format("{} ({})", st.group, st.quantity)] = &st;
    out += row.effect.empty() ? std::string("| none (every effect modelled) |") : fmt::format("| {} |", row.effect);
    for (const auto& source : sources) {
      const auto it = by_source.find(source);
      out += it == by_source.end()
                 ? std::string(" |")
                 : fmt::format(" {:+.1f}% ({:.1f}%) |", 100.0 * it->second->bias, 100.0 * it->second->median);
    }
    out += "\n";
  }
  return out;
}

} // namespace sim::validation
