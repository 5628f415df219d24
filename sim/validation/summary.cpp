#include "validation/summary.hpp"

#include <array>
#include <set>

namespace sim::validation {
namespace {

using report::Accuracy;
using report::GpuAccuracy;
using report::GroupAccuracy;
using report::Summary;

Accuracy accuracy_of(const std::vector<const Comparison*>& list, Aspect aspect)
{
  std::vector<double> errors;
  std::set<std::string> cases;
  for (const auto* c : list) {
    errors.push_back(aspect == Aspect::TIME ? step_time_error(*c) : c->error);
    cases.insert(c->case_id);
  }
  const ErrorStats s = error_stats(errors);
  return {static_cast<int>(cases.size()), s.count, s.median, s.worst, s.bias};
}

GroupAccuracy group_of(const std::vector<const Comparison*>& list, Aspect aspect)
{
  std::map<std::pair<std::string, std::string>, std::vector<const Comparison*>> by_source;
  for (const auto* c : list)
    by_source[{c->source, std::string(quantity_name(c->quantity))}].push_back(c);
  GroupAccuracy g{accuracy_of(list, aspect), {}};
  for (const auto& [key, comparisons] : by_source)
    g.sources.push_back({key.first, key.second, accuracy_of(comparisons, aspect)});
  return g;
}

} // namespace

Summary summarize(const ValidationResult& result, const std::string& cases_file,
                  const std::map<std::string, std::string>& gpu_names)
{
  Summary s;
  s.cases_file = cases_file;
  s.cases = result.cases;
  s.unsupported = static_cast<int>(result.unsupported.size());
  s.failed = static_cast<int>(result.failed.size());
  // Per GPU preset, its primary comparisons of time [0] and of memory [1].
  std::map<std::string, std::array<std::vector<const Comparison*>, 2>> groups;
  for (const auto& c : result.comparisons)
    if (c.primary) {
      groups[c.gpu][aspect_of(c.quantity) == Aspect::MEMORY ? 1 : 0].push_back(&c);
      ++s.comparisons;
    }
  for (const auto& [preset, group] : groups) {
    GpuAccuracy g;
    g.preset = preset;
    std::set<std::string> cases;
    for (const auto& list : group)
      for (const auto* c : list)
        cases.insert(c->case_id);
    g.runs = static_cast<int>(cases.size());
    g.comparisons = static_cast<int>(group[0].size() + group[1].size());
    if (!group[0].empty())
      g.time = group_of(group[0], Aspect::TIME);
    if (!group[1].empty())
      g.memory = group_of(group[1], Aspect::MEMORY);
    std::map<std::string, std::vector<const Comparison*>> by_kind;
    for (const auto* c : group[0])
      for (const auto& kind : c->kinds)
        by_kind[kind].push_back(c);
    for (const auto& [kind, list] : by_kind)
      g.kinds[kind] = accuracy_of(list, Aspect::TIME);
    const auto name = gpu_names.find(preset);
    s.gpus[name == gpu_names.end() ? preset : name->second] = g;
  }
  return s;
}

} // namespace sim::validation
