// What `simtrain tasks` prints about a task graph: counts per kind and category per rank, or every task as JSON.
#pragma once

#include "workload/task_graph.hpp"

#include <optional>
#include <ostream>
#include <string>

namespace sim::report {

// A summary: tasks per kind and category, per rank (or for one rank), work and bytes.
std::string task_summary_text(const workload::TaskGraph& g, std::optional<int> rank);

// The graph as JSON, streamed: {"gpus", "folded", "multiplicity", "simulated" (the GPUs that have tasks), "tasks":
// [{id, kind, category, rank, peer, stage, chunk, microbatch, layer, label, duration_s | bytes, ..., deps}]}; with
// `rank`, only tasks on (or sent from / to) that rank.
void write_tasks_json(std::ostream& out, const workload::TaskGraph& g, std::optional<int> rank);

} // namespace sim::report
