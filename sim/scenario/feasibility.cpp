#include "scenario/feasibility.hpp"

#include "core/units.hpp"
#include "memory/memory_model.hpp"
#include "workload/graph_size.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <sys/resource.h>

namespace sim::scenario {
namespace {

core::Location plan_location(const Scenario& s)
{
  return {s.file, "/plan", ""};
}

// A number from the first line of a file (a cgroup's memory.max or memory.current); nothing for "max" or no file.
std::optional<double> read_number(const std::string& path)
{
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max")
    return std::nullopt;
  try {
    return std::stod(word);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

} // namespace

void refuse_out_of_memory(const Scenario& s, const std::string& set_by)
{
  const memory::MemoryEstimate m = memory::estimate_memory(s.model, s.plan, s.cluster);
  // A node's host tier over its capacity (when the GPUs' own memory is not already): refused with its numbers.
  const auto refuse_tier = [&](const char* where_to, const char* verb, double bytes, double capacity, const char* what,
                               const char* remedy) {
    core::Location where = plan_location(s);
    where.set_by = set_by;
    throw core::InfeasiblePlan(where,
                               fmt::format("does not fit {}: a node's GPUs {} {} to its {} of {}, {} over", where_to,
                                           verb, core::format_bytes(bytes), core::format_bytes(capacity), what,
                                           core::format_bytes(bytes - capacity)),
                               {},
                               fmt::format("more nodes, ZeRO over more GPUs, {}; `simtrain memory` shows each stage; "
                                           "--allow-oom simulates it anyway",
                                           remedy));
  };
  if (m.host_oom && !m.oom)
    refuse_tier("in host memory", "offload", m.host_node_bytes, m.host_capacity_bytes, "DRAM",
                "a topology with more host memory, or offload_optimizer none");
  if (m.nvme_oom && !m.oom)
    refuse_tier("on the NVMe drives", "swap", m.nvme_node_bytes, m.nvme_capacity_bytes, "drives",
                "a topology with more NVMe space, or offload to cpu");
  if (!m.oom)
    return;
  const memory::StageMemory& st = m.per_stage.at(static_cast<std::size_t>(m.peak_stage));
  const double over = st.peak_bytes - st.capacity_bytes;
  core::Location where = plan_location(s);
  where.set_by = set_by;
  throw core::InfeasiblePlan(
      where,
      fmt::format("does not fit in GPU memory: stage {} needs {} of {} per GPU (HBM less the CUDA context{}), {} "
                  "({:.0f}%) over (weights {}, gradients {}, optimizer {}, activations {}, buffers {}, working {})",
                  st.stage, core::format_bytes(st.peak_bytes), core::format_bytes(st.capacity_bytes),
                  m.headroom_bytes > 0 ? fmt::format(" and {} of headroom", core::format_bytes(m.headroom_bytes)) : "",
                  core::format_bytes(over), 100.0 * over / st.capacity_bytes, core::format_bytes(st.weights_bytes),
                  core::format_bytes(st.grads_bytes), core::format_bytes(st.optimizer_bytes),
                  core::format_bytes(st.activations_bytes), core::format_bytes(st.buffers_bytes),
                  core::format_bytes(st.working_bytes)),
      {},
      "a plan that fits: recomputation, a smaller micro-batch, more tensor or pipeline stages, ZeRO or the "
      "distributed optimizer; `simtrain memory` shows each stage; --allow-oom simulates it anyway");
}

MachineMemory machine_memory()
{
  MachineMemory m{std::numeric_limits<double>::infinity(), "no limit known"};
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line))
    if (line.starts_with("MemAvailable:")) {
      std::istringstream fields(line.substr(13));
      double kib = 0;
      if (fields >> kib)
        m = {kib * 1024.0, "MemAvailable in /proc/meminfo"};
    }
  const auto limit = read_number("/sys/fs/cgroup/memory.max");
  const auto usage = read_number("/sys/fs/cgroup/memory.current");
  if (limit && usage && *limit - *usage < m.available_bytes)
    m = {std::max(0.0, *limit - *usage), "the cgroup's memory.max less memory.current"};
  rlimit address_space{};
  if (getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY &&
      static_cast<double>(address_space.rlim_cur) < m.available_bytes)
    m = {static_cast<double>(address_space.rlim_cur), "the address-space limit (ulimit -v)"};
  return m;
}

MachineMemory capped(const MachineMemory& machine, double limit, const std::string& source)
{
  return limit < machine.available_bytes ? MachineMemory{limit, source} : machine;
}

void refuse_oversized_graph(const Scenario& s, const workload::BuildOptions& options, const MachineMemory& machine)
{
  const workload::GraphSize size = workload::estimate_graph_size(s.model, s.plan, s.cluster, options);
  if (size.bytes <= machine.available_bytes)
    return;
  std::string folding;
  if (!size.folded) {
    const workload::GraphSize folded = workload::estimate_graph_size(s.model, s.plan, s.cluster, {.fold = true});
    folding = folded.folded ? fmt::format("; folding identical GPUs (without --no-fold) makes it {} tasks, {}",
                                          core::format_count(folded.tasks), core::format_bytes(folded.bytes))
                            : "; folding identical GPUs does not apply to this plan";
  }
  const double microbatches = static_cast<double>(s.plan.microbatches());
  const double fitting = std::floor(microbatches * machine.available_bytes / size.bytes);
  const double sequences_per_microbatch = static_cast<double>(s.plan.micro_batch) * s.plan.dp;
  throw core::InfeasiblePlan(
      plan_location(s),
      fmt::format("the step's task graph would not fit in this machine's memory: about {} tasks ({} micro-batches "
                  "of {} layers on {} simulated GPUs), {}, with {} available ({})",
                  core::format_count(size.tasks), core::format_count(microbatches), s.model.num_layers,
                  size.simulated_gpus, core::format_bytes(size.bytes), core::format_bytes(machine.available_bytes),
                  machine.source),
      {},
      fitting >= 1 ? fmt::format("a step that fits: a global_batch of at most {} sequences (in the steady state every "
                                 "micro-batch adds the same time){}",
                                 core::format_count(fitting * sequences_per_microbatch), folding)
                   : fmt::format("a machine with more memory: even one micro-batch's graph would not fit{}", folding));
}

} // namespace sim::scenario
