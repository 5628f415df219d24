// Plans that are well formed but cannot run as asked, refused before any long work: a GPU whose memory overflows,
// a step whose task graph would not fit in this machine's memory.
#pragma once

#include "scenario/scenario.hpp"
#include "workload/builder.hpp"

#include <string>

namespace sim::scenario {

// Throws core::InfeasiblePlan when a stage's peak exceeds the HBM of its smallest part, with by how much and what would
// help; `set_by` names the command-line values that made this plan (a side of a comparison), if any.
void refuse_out_of_memory(const Scenario& s, const std::string& set_by = {});

// Memory this process may still take: the least of the kernel's MemAvailable, the cgroup's limit less its usage and
// the address-space limit; `source` names the one that binds.
struct MachineMemory {
  double available_bytes = 0;
  std::string source;
};
MachineMemory machine_memory();
// The machine's memory, or `limit` (named by `source`) where that is less.
MachineMemory capped(const MachineMemory& machine, double limit, const std::string& source);

// Throws core::InfeasiblePlan when the step's task graph (estimated before it is built) would take more than the
// machine's available memory, with the numbers and what folding or fewer micro-batches would make of it.
void refuse_oversized_graph(const Scenario& s, const workload::BuildOptions& options, const MachineMemory& machine);

} // namespace sim::scenario
