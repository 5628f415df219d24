#include "report/chakra_export.hpp"

#include "core/input_error.hpp"
#include "report/chakra_et.pb.h"
#include "workload/layer_program.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace sim::report {
namespace {

using workload::Category;
using workload::TaskGraph;
using workload::TaskId;
using workload::TaskKind;

// What a node of a rank's trace stands for: a compute task, one end of a transfer, or a collective.
enum class Unit : std::uint8_t { COMPUTE, SEND, RECV, COLLECTIVE };

constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();

EtCollective comm_type(workload::CollectiveKind kind)
{
  switch (kind) {
    case workload::CollectiveKind::ALL_REDUCE:
      return EtCollective::ALL_REDUCE;
    case workload::CollectiveKind::ALL_GATHER:
      return EtCollective::ALL_GATHER;
    case workload::CollectiveKind::REDUCE_SCATTER:
      return EtCollective::REDUCE_SCATTER;
    case workload::CollectiveKind::ALL_TO_ALL:
      return EtCollective::ALL_TO_ALL;
  }
  return EtCollective::ALL_REDUCE;
}

std::string category_name(Category c)
{
  return std::string(core::choice_name(c, workload::category_choices));
}

// Every rank's nodes, ordered, kept as indices (about 50 bytes a node); each rank's trace is made when asked.
class Exporter {
 public:
  explicit Exporter(const TaskGraph& g)
      : g_(g), ranks_(static_cast<std::size_t>(g.gpus)), own_(g.size(), none), receiving_(g.size(), none)
  {
    // Collectives whose steps interleave with a rank's kernels would close a cycle as one node: they are written
    // as their transfers, and the traces built again, until none does.
    for (;;) {
      build();
      const auto cyclic = order();
      if (cyclic.empty())
        break;
      split_.insert(cyclic.begin(), cyclic.end());
    }
    // Process groups: one name per distinct set of ranks, numbered as they first appear.
    std::map<std::set<int>, std::string> names;
    for (const auto& [collective, ranks] : members_) {
      auto [it, added] = names.emplace(ranks, "");
      if (added) {
        it->second = std::to_string(names.size());
        groups_[it->second] = std::vector<int>(ranks.begin(), ranks.end());
      }
      group_of_[collective] = it->second;
    }
  }

  const std::map<std::string, std::vector<int>>& groups() const { return groups_; }
  std::size_t collectives() const { return members_.size(); }
  std::size_t split_collectives() const { return split_.size(); }
  std::size_t ranks() const { return ranks_.size(); }

  EtTrace trace(std::size_t r) const
  {
    const auto& rank = ranks_[r];
    EtTrace trace;
    trace.version = "0.0.4";
    std::vector<std::uint64_t> id_of(rank.pending.size());
    trace.nodes.reserve(rank.order.size());
    for (std::uint32_t i : rank.order) {
      const Pending& p = rank.pending[i];
      EtNode node;
      node.id = trace.nodes.size();
      id_of[i] = node.id;
      for (std::uint32_t d : p.deps)
        node.deps.push_back(id_of[d]);
      std::sort(node.deps.begin(), node.deps.end());
      describe(p, node);
      trace.nodes.push_back(std::move(node));
    }
    return trace;
  }

 private:
  struct Pending {
    Unit unit;
    std::uint32_t what;              // task id, or collective id
    std::uint32_t position;          // the smallest task id it stands for: the order among ready nodes
    std::vector<std::uint32_t> deps; // pending indices on the same rank
  };
  struct Rank {
    std::vector<Pending> pending;
    std::unordered_map<std::uint32_t, std::uint32_t> collective; // collective id -> pending index
    std::vector<std::uint32_t> order;
  };

  bool merged(std::uint32_t collective) const
  {
    return collective != workload::no_task && !split_.contains(collective);
  }

  std::uint32_t add(int r, Unit u, std::uint32_t what, std::uint32_t position)
  {
    auto& pending = ranks_[static_cast<std::size_t>(r)].pending;
    pending.push_back(Pending{u, what, position, {}});
    return static_cast<std::uint32_t>(pending.size() - 1);
  }

  // The nodes on rank `r` that a dependency on task `t` means (appended to `out`): its own node there, or, through
  // zero-cost joins, the nodes it waits for there. Another rank's work means nothing on `r` (its transfers say when
  // it arrives).
  void resolve(TaskId t, int r, std::vector<std::uint32_t>& out)
  {
    const auto& task = g_[t];
    if (task.kind == TaskKind::COMPUTE) {
      if (task.rank == r)
        out.push_back(own_[t]);
    } else if (task.kind == TaskKind::TRANSFER) {
      const int to = g_.gpu_of(task.peer);
      if (task.rank != r && to != r)
        return;
      if (merged(task.collective))
        out.push_back(ranks_[static_cast<std::size_t>(r)].collective.at(task.collective));
      else
        out.push_back(task.rank == r ? own_[t] : receiving_[t]);
    } else {
      const std::uint64_t memo_key = (static_cast<std::uint64_t>(t) << 24) | static_cast<std::uint64_t>(r);
      auto it = joins_.find(memo_key);
      if (it == joins_.end()) {
        std::vector<std::uint32_t> joined;
        for (TaskId d : g_.dependencies(t))
          resolve(d, r, joined);
        std::sort(joined.begin(), joined.end());
        joined.erase(std::unique(joined.begin(), joined.end()), joined.end());
        it = joins_.emplace(memo_key, std::move(joined)).first;
      }
      out.insert(out.end(), it->second.begin(), it->second.end());
    }
  }

  void depend(int r, std::uint32_t unit, TaskId t)
  {
    auto& deps = ranks_[static_cast<std::size_t>(r)].pending[unit].deps;
    for (TaskId d : g_.dependencies(t))
      resolve(d, r, deps);
  }

  void build()
  {
    joins_.clear();
    members_.clear();
    for (auto& rank : ranks_)
      rank = Rank{};
    // The nodes first, then what each waits for (a task may depend on one added after it).
    for (TaskId t = 0; t < g_.size(); ++t) {
      const auto& task = g_[t];
      if (task.kind == TaskKind::COMPUTE) {
        own_[t] = add(task.rank, Unit::COMPUTE, t, t);
      } else if (task.kind == TaskKind::TRANSFER) {
        const int to = g_.gpu_of(task.peer);
        if (merged(task.collective)) {
          for (int r : {task.rank, to}) {
            auto& rank = ranks_[static_cast<std::size_t>(r)];
            if (!rank.collective.contains(task.collective))
              rank.collective[task.collective] = add(r, Unit::COLLECTIVE, task.collective, t);
            members_[task.collective].insert(r);
          }
        } else {
          own_[t] = add(task.rank, Unit::SEND, t, t);
          receiving_[t] = add(to, Unit::RECV, t, t);
        }
      }
    }
    for (TaskId t = 0; t < g_.size(); ++t) {
      const auto& task = g_[t];
      if (task.kind == TaskKind::COMPUTE) {
        depend(task.rank, own_[t], t);
      } else if (task.kind == TaskKind::TRANSFER) {
        const int to = g_.gpu_of(task.peer);
        if (merged(task.collective)) {
          for (int r : {task.rank, to})
            depend(r, ranks_[static_cast<std::size_t>(r)].collective.at(task.collective), t);
        } else {
          depend(task.rank, own_[t], t);
          depend(to, receiving_[t], t);
        }
      }
    }
    for (auto& rank : ranks_)
      for (std::uint32_t i = 0; i < rank.pending.size(); ++i) {
        auto& deps = rank.pending[i].deps;
        std::sort(deps.begin(), deps.end());
        deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
        deps.erase(std::remove(deps.begin(), deps.end(), i), deps.end()); // a collective's own steps
      }
  }

  // Each rank's nodes in a dependency order (the earliest task first among the ready ones); the collectives left
  // in a cycle, if any.
  std::set<std::uint32_t> order()
  {
    std::set<std::uint32_t> cyclic;
    for (auto& rank : ranks_) {
      const std::size_t n = rank.pending.size();
      std::vector<std::uint32_t> waiting(n, 0);
      std::vector<std::vector<std::uint32_t>> after(n);
      for (std::uint32_t i = 0; i < n; ++i)
        for (std::uint32_t d : rank.pending[i].deps) {
          ++waiting[i];
          after[d].push_back(i);
        }
      using Ready = std::pair<std::uint32_t, std::uint32_t>;
      std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
      for (std::uint32_t i = 0; i < n; ++i)
        if (waiting[i] == 0)
          ready.emplace(rank.pending[i].position, i);
      while (!ready.empty()) {
        const std::uint32_t i = ready.top().second;
        ready.pop();
        rank.order.push_back(i);
        for (std::uint32_t j : after[i])
          if (--waiting[j] == 0)
            ready.emplace(rank.pending[j].position, j);
      }
      if (rank.order.size() < n)
        for (std::uint32_t i = 0; i < n; ++i)
          if (waiting[i] > 0 && rank.pending[i].unit == Unit::COLLECTIVE)
            cyclic.insert(rank.pending[i].what);
      if (rank.order.size() < n && cyclic.empty())
        throw std::logic_error("chakra export: the task graph has a cycle");
    }
    return cyclic;
  }

  void describe(const Pending& p, EtNode& node) const
  {
    node.attrs["is_cpu_op"] = false;
    if (p.unit == Unit::COLLECTIVE) {
      const auto& info = g_.collectives()[p.what];
      node.type = EtNodeType::COLL;
      node.name = g_.label_text(info.label);
      node.attrs["comm_type"] = static_cast<std::int64_t>(comm_type(info.kind));
      // ASTRA-sim reads an all-gather's size as each rank's input (its ring gathers n of them); the other kinds' as
      // the whole buffer each rank holds.
      const double ranks = static_cast<double>(std::max<std::uint32_t>(info.ranks, 1));
      const double size = comm_type(info.kind) == EtCollective::ALL_GATHER ? info.bytes / ranks : info.bytes;
      node.attrs["comm_size"] = static_cast<std::int64_t>(std::llround(size));
      node.attrs["pg_name"] = group_of_.at(p.what);
      node.attrs["category"] = category_name(info.category);
      return;
    }
    const auto& task = g_[static_cast<TaskId>(p.what)];
    node.name = g_.label_text(task.label);
    node.attrs["category"] = category_name(task.category);
    if (task.microbatch >= 0)
      node.attrs["microbatch"] = static_cast<std::int64_t>(task.microbatch);
    if (task.stage >= 0)
      node.attrs["stage"] = static_cast<std::int64_t>(task.stage);
    if (p.unit == Unit::COMPUTE) {
      node.type = EtNodeType::COMP;
      node.duration_micros = static_cast<std::uint64_t>(std::llround(task.duration_s * 1e6));
      node.attrs["num_ops"] = static_cast<std::int64_t>(std::llround(task.flops));
      node.attrs["duration_s"] = task.duration_s;
      if (task.layer >= 0)
        node.attrs["layer"] = static_cast<std::int64_t>(task.layer);
      return;
    }
    node.type = p.unit == Unit::SEND ? EtNodeType::SEND : EtNodeType::RECV;
    node.attrs["comm_src"] = static_cast<std::int32_t>(task.rank);
    node.attrs["comm_dst"] = static_cast<std::int32_t>(g_.gpu_of(task.peer));
    node.attrs["comm_size"] = static_cast<std::int64_t>(std::llround(task.bytes));
    node.attrs["comm_tag"] = static_cast<std::int32_t>(p.what % 2147483647);
    if (task.collective != workload::no_task)
      node.attrs["collective"] = g_.label_text(g_.collectives()[task.collective].label);
  }

  const TaskGraph& g_;
  std::vector<Rank> ranks_;
  std::vector<std::uint32_t> own_;       // per task: its compute or send node on its own rank
  std::vector<std::uint32_t> receiving_; // per transfer: its receive node
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> joins_; // (sync, rank) -> the nodes it stands for
  std::map<std::uint32_t, std::set<int>> members_;                      // merged collective -> its ranks
  std::set<std::uint32_t> split_;
  std::map<std::string, std::vector<int>> groups_;
  std::unordered_map<std::uint32_t, std::string> group_of_;
};

void set_attribute(ChakraProtoMsg::AttributeProto& a, const std::string& name, const EtAttribute& value)
{
  a.set_name(name);
  std::visit(
      [&a](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, bool>)
          a.set_bool_val(v);
        else if constexpr (std::is_same_v<V, std::int32_t>)
          a.set_int32_val(v);
        else if constexpr (std::is_same_v<V, std::int64_t>)
          a.set_int64_val(v);
        else if constexpr (std::is_same_v<V, std::uint64_t>)
          a.set_uint64_val(v);
        else if constexpr (std::is_same_v<V, double>)
          a.set_double_val(v);
        else
          a.set_string_val(v);
      },
      value);
}

void write_trace(const EtTrace& trace, const std::filesystem::path& file)
{
  std::ofstream out(file, std::ios::binary);
  ChakraProtoMsg::GlobalMetadata meta;
  meta.set_version(trace.version);
  google::protobuf::util::SerializeDelimitedToOstream(meta, &out);
  ChakraProtoMsg::Node node; // cleared and refilled: its allocations serve every node
  for (const auto& n : trace.nodes) {
    node.Clear();
    node.set_id(n.id);
    node.set_name(n.name);
    node.set_type(static_cast<ChakraProtoMsg::NodeType>(n.type));
    for (auto d : n.deps)
      node.add_data_deps(d);
    node.set_duration_micros(n.duration_micros);
    for (const auto& [name, value] : n.attrs.items)
      set_attribute(*node.add_attr(), name, value);
    google::protobuf::util::SerializeDelimitedToOstream(node, &out);
  }
  if (!out)
    throw core::InputError({file.string(), "", ""}, "cannot be written");
}

} // namespace

EtExport chakra_traces(const TaskGraph& g)
{
  if (g.folded)
    throw std::logic_error("chakra export needs the unfolded task graph");
  const Exporter exporter(g);
  EtExport out;
  for (std::size_t r = 0; r < exporter.ranks(); ++r)
    out.ranks.push_back(exporter.trace(r));
  out.groups = exporter.groups();
  out.collectives = exporter.collectives();
  out.split_collectives = exporter.split_collectives();
  return out;
}

EtSummary write_chakra(const TaskGraph& g, const std::filesystem::path& dir, const std::string& prefix)
{
  if (g.folded)
    throw std::logic_error("chakra export needs the unfolded task graph");
  const Exporter exporter(g);
  EtSummary summary;
  for (std::size_t r = 0; r < exporter.ranks(); ++r) { // one rank's trace in memory at a time
    const EtTrace trace = exporter.trace(r);
    write_trace(trace, dir / fmt::format("{}.{}.et", prefix, r));
    summary.nodes += trace.nodes.size();
  }
  nlohmann::ordered_json groups = nlohmann::ordered_json::object();
  for (const auto& [name, ranks] : exporter.groups())
    groups[name] = ranks;
  std::ofstream(dir / "comm_group.json") << groups.dump(2) << "\n";
  summary.ranks = exporter.ranks();
  summary.groups = exporter.groups().size();
  summary.collectives = exporter.collectives();
  summary.split_collectives = exporter.split_collectives();
  return summary;
}

EtTrace read_chakra(const std::filesystem::path& file)
{
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw core::InputError({file.string(), "", ""}, "cannot be read");
  google::protobuf::io::IstreamInputStream stream(&in);
  EtTrace trace;
  bool clean_eof = false;
  ChakraProtoMsg::GlobalMetadata meta;
  if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&meta, &stream, &clean_eof))
    throw core::InputError({file.string(), "", ""}, "not a Chakra trace (no global metadata)");
  trace.version = meta.version();
  for (;;) {
    ChakraProtoMsg::Node node;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&node, &stream, &clean_eof)) {
      if (clean_eof)
        break;
      throw core::InputError({file.string(), "", ""},
                             fmt::format("not a Chakra trace (node {} cannot be read)", trace.nodes.size()));
    }
    EtNode n;
    n.id = node.id();
    n.name = node.name();
    n.type = static_cast<EtNodeType>(node.type());
    n.deps.assign(node.data_deps().begin(), node.data_deps().end());
    n.duration_micros = node.duration_micros();
    for (const auto& a : node.attr()) {
      using A = ChakraProtoMsg::AttributeProto;
      switch (a.value_case()) {
        case A::kBoolVal:
          n.attrs[a.name()] = a.bool_val();
          break;
        case A::kInt32Val:
          n.attrs[a.name()] = a.int32_val();
          break;
        case A::kInt64Val:
          n.attrs[a.name()] = a.int64_val();
          break;
        case A::kUint64Val:
          n.attrs[a.name()] = a.uint64_val();
          break;
        case A::kDoubleVal:
          n.attrs[a.name()] = a.double_val();
          break;
        default:
          n.attrs[a.name()] = a.string_val();
      }
    }
    trace.nodes.push_back(std::move(n));
  }
  return trace;
}

} // namespace sim::report
