#include "workload/task_graph.hpp"

#include <algorithm>

namespace sim::workload {

void TaskGraph::reserve(std::size_t tasks, std::size_t dependencies)
{
  tasks_.reserve(tasks);
  edges_.reserve(dependencies);
  collectives_.reserve(tasks); // each has a task at least
}

TaskId TaskGraph::add(const Task& task)
{
  tasks_.push_back(task);
  return static_cast<TaskId>(tasks_.size() - 1);
}

std::uint32_t TaskGraph::label(const std::string& text)
{
  const auto [it, inserted] = label_index_.try_emplace(text, static_cast<std::uint32_t>(labels_.size()));
  if (inserted)
    labels_.push_back(text);
  return it->second;
}

std::uint32_t TaskGraph::add_collective(CollectiveInfo info)
{
  collectives_.push_back(info);
  return static_cast<std::uint32_t>(collectives_.size() - 1);
}

void TaskGraph::finalize()
{
  const std::size_t n = tasks_.size();
  // A counting sort that keeps each list in the order its edges were added: offsets[k] counts up to the end of k's
  // list, and the edges, placed from the last, count it down to its start (no second array of positions).
  auto build = [&](bool by_target, core::BigVector<std::uint32_t>& offsets, core::BigVector<TaskId>& ids) {
    offsets.assign(n + 1, 0);
    for (const auto& [from, to] : edges_)
      ++offsets[by_target ? to : from];
    for (std::size_t i = 1; i < n; ++i)
      offsets[i] += offsets[i - 1];
    offsets[n] = static_cast<std::uint32_t>(edges_.size());
    ids.resize(edges_.size());
    for (std::size_t e = edges_.size(); e-- > 0;) {
      const auto [from, to] = edges_[e];
      ids[--offsets[by_target ? to : from]] = by_target ? from : to;
    }
  };
  build(true, dep_offsets_, dep_ids_);
  build(false, succ_offsets_, succ_ids_);
  edges_.clear();
  edges_.shrink_to_fit();
}

std::span<const TaskId> TaskGraph::dependencies(TaskId id) const
{
  return {dep_ids_.data() + dep_offsets_[id], dep_offsets_[id + 1] - dep_offsets_[id]};
}

std::span<const TaskId> TaskGraph::successors(TaskId id) const
{
  return {succ_ids_.data() + succ_offsets_[id], succ_offsets_[id + 1] - succ_offsets_[id]};
}

} // namespace sim::workload
