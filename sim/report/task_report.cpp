#include "report/task_report.hpp"

#include "core/units.hpp"

#include <fmt/format.h>
#include <map>

namespace sim::report {
namespace {

using workload::Category;
using workload::Task;
using workload::TaskKind;

std::string kind_name(TaskKind k)
{
  return std::string(core::choice_name(k, workload::task_kind_choices));
}
std::string category_name(Category c)
{
  return std::string(core::choice_name(c, workload::category_choices));
}

bool involves(const Task& t, int rank)
{
  return t.rank == rank || (t.kind == TaskKind::TRANSFER && t.peer == rank);
}

} // namespace

std::string task_summary_text(const workload::TaskGraph& g, std::optional<int> rank)
{
  struct Totals {
    std::size_t tasks = 0;
    double seconds = 0;
    double bytes = 0;
  };
  std::map<std::pair<TaskKind, Category>, Totals> by_kind;
  struct RankTotals {
    int stage = -1;
    std::size_t compute = 0;
    double compute_s = 0;
    std::size_t sent = 0;
    std::map<Category, double> bytes;
  };
  std::map<int, RankTotals> by_rank;
  for (const Task& t : g.tasks()) {
    if (rank && !involves(t, *rank))
      continue;
    auto& k = by_kind[{t.kind, t.category}];
    ++k.tasks;
    k.seconds += t.duration_s;
    k.bytes += t.bytes;
    if (t.kind == TaskKind::COMPUTE) {
      auto& r = by_rank[t.rank];
      r.stage = t.stage;
      ++r.compute;
      r.compute_s += t.duration_s;
    } else if (t.kind == TaskKind::TRANSFER) {
      auto& r = by_rank[t.rank];
      ++r.sent;
      r.bytes[t.category] += t.bytes;
    }
  }
  std::string out = fmt::format("{} tasks on {} GPUs, {} dependencies{}\n", g.size(), g.gpus, g.dependency_count(),
                                rank ? fmt::format(" (showing rank {})", *rank) : "");
  out += g.folded ? fmt::format("folded: {} simulated GPUs, each standing for its class of {} interchangeable "
                                "GPUs (--no-fold: every GPU)\n\n",
                                g.simulated.size(), g.multiplicity)
                  : "every GPU simulated (not folded)\n\n";
  out += fmt::format("{:<10} {:<10} {:>12} {:>14} {:>14}\n", "kind", "category", "tasks", "compute time", "bytes");
  for (const auto& [key, totals] : by_kind)
    out += fmt::format("{:<10} {:<10} {:>12} {:>14} {:>14}\n", kind_name(key.first), category_name(key.second),
                       totals.tasks, key.first == TaskKind::COMPUTE ? core::format_time(totals.seconds) : "",
                       key.first == TaskKind::TRANSFER ? core::format_bytes(totals.bytes) : "");
  out += fmt::format("\n{:>6} {:>6} {:>9} {:>13} {:>8} {:>12} {:>12} {:>12}\n", "rank", "stage", "compute",
                     "compute time", "sends", "tp bytes", "pp bytes", "dp bytes");
  std::size_t shown = 0;
  for (const auto& [r, totals] : by_rank) {
    if (!rank && shown++ == 32) {
      out += fmt::format("... {} more ranks (--rank R shows one)\n", by_rank.size() - 32);
      break;
    }
    const RankTotals& t = totals;
    auto bytes = [&t](Category c) {
      const auto it = t.bytes.find(c);
      return it == t.bytes.end() ? std::string("-") : core::format_bytes(it->second);
    };
    out += fmt::format("{:>6} {:>6} {:>9} {:>13} {:>8} {:>12} {:>12} {:>12}\n", r, t.stage, t.compute,
                       core::format_time(t.compute_s), t.sent, bytes(Category::TP), bytes(Category::PP),
                       bytes(Category::DP));
  }
  return out;
}

void write_tasks_json(std::ostream& out, const workload::TaskGraph& g, std::optional<int> rank)
{
  out << "{\n  \"gpus\": " << g.gpus << ",\n  \"folded\": " << (g.folded ? "true" : "false")
      << ",\n  \"multiplicity\": " << g.multiplicity << ",\n  \"simulated\": " << core::Json(g.simulated).dump()
      << ",\n  \"tasks\": [";
  bool first = true;
  for (workload::TaskId id = 0; id < g.size(); ++id) {
    const Task& t = g[id];
    if (rank && !involves(t, *rank))
      continue;
    core::Json j;
    j["id"] = id;
    j["kind"] = kind_name(t.kind);
    j["category"] = category_name(t.category);
    if (t.rank >= 0)
      j["rank"] = t.rank;
    if (t.kind == TaskKind::TRANSFER && t.peer >= 0)
      j["peer"] = t.peer;
    if (t.stage >= 0)
      j["stage"] = t.stage;
    if (t.chunk >= 0)
      j["chunk"] = t.chunk;
    if (t.microbatch >= 0)
      j["microbatch"] = t.microbatch;
    if (t.layer >= 0)
      j["layer"] = t.layer;
    if (t.kind != TaskKind::SYNC)
      j["label"] = g.label_text(t.label);
    if (t.collective != workload::no_task)
      j["collective"] = t.collective;
    if (t.kind == TaskKind::COMPUTE) {
      j["duration_s"] = t.duration_s;
      j["flops"] = t.flops;
      if (t.host_s > 0)
        j["host_s"] = t.host_s;
      if (t.host_waits == 1)
        j["host_waits"] = true;
    }
    if (t.kind == TaskKind::TRANSFER) {
      j["bytes"] = t.bytes;
      j["latency_s"] = t.latency_s;
    }
    auto deps = core::Json::array();
    for (workload::TaskId d : g.dependencies(id))
      deps.push_back(d);
    j["deps"] = deps;
    out << (first ? "\n    " : ",\n    ") << j.dump();
    first = false;
  }
  out << "\n  ]\n}\n";
}

} // namespace sim::report
