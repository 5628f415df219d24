// The task graph as MLCommons Chakra execution traces: one file per rank (`PREFIX.RANK.et`, length-delimited
// protobuf messages: a GlobalMetadata, then Nodes), and `comm_group.json` naming each collective's ranks, as
// ASTRA-sim reads them (--workload-configuration PREFIX, --comm-group-configuration comm_group.json).
#pragma once

#include "workload/task_graph.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace sim::report {

// Chakra's node types and collective kinds (et_def.proto's numbers).
enum class EtNodeType { COMP = 4, SEND = 5, RECV = 6, COLL = 7 };
enum class EtCollective { ALL_REDUCE = 0, ALL_GATHER = 2, ALL_TO_ALL = 6, REDUCE_SCATTER = 7 };

using EtAttribute = std::variant<bool, std::int32_t, std::int64_t, std::uint64_t, double, std::string>;

// A node's attributes, in the order written (a handful each: a list, not a map, keeps the export fast).
struct EtAttributes {
  std::vector<std::pair<std::string, EtAttribute>> items;

  EtAttribute& operator[](std::string_view name) // the attribute, added if missing
  {
    for (auto& [n, v] : items)
      if (n == name)
        return v;
    return items.emplace_back(std::string(name), EtAttribute{}).second;
  }
  const EtAttribute* find(std::string_view name) const
  {
    for (const auto& [n, v] : items)
      if (n == name)
        return &v;
    return nullptr;
  }
  bool operator==(const EtAttributes&) const = default;
};

// One node of a rank's trace, as written and as read back.
struct EtNode {
  std::uint64_t id = 0;
  std::string name;
  EtNodeType type = EtNodeType::COMP;
  std::vector<std::uint64_t> deps; // data dependencies, on nodes of the same rank with smaller ids
  std::uint64_t duration_micros = 0;
  EtAttributes attrs;

  bool operator==(const EtNode&) const = default;
};

struct EtTrace {
  std::string version;
  std::vector<EtNode> nodes;
};

// Every rank's trace. Compute tasks become COMP nodes (duration, FLOPs as num_ops); a collective becomes one COLL
// node per rank it involves (comm_type; comm_size as ASTRA-sim reads it: each rank's buffer, for an all-gather each
// rank's input, 1/n of the gathered buffer; pg_name = its group in `groups`); a pipeline
// transfer a SEND node on its sender and a RECV node on its receiver (the same comm_tag). Zero-cost joins are
// folded into the dependencies. A collective whose steps interleave with a rank's own kernels (communication
// pipelined with its GEMMs) is written as the SEND/RECV pairs it is lowered to. The graph must be unfolded.
struct EtExport {
  std::vector<EtTrace> ranks;
  std::map<std::string, std::vector<int>> groups; // pg_name -> ranks
  std::size_t collectives = 0;                    // written as COLL nodes
  std::size_t split_collectives = 0;              // written as their SEND/RECV pairs
};

EtExport chakra_traces(const workload::TaskGraph& g);

struct EtSummary {
  std::size_t ranks = 0;
  std::size_t nodes = 0;
  std::size_t groups = 0;
  std::size_t collectives = 0;
  std::size_t split_collectives = 0;
};

// Writes DIR/PREFIX.RANK.et for each rank (the same traces as chakra_traces, made one rank at a time) and
// DIR/comm_group.json.
EtSummary write_chakra(const workload::TaskGraph& g, const std::filesystem::path& dir, const std::string& prefix);

// What the export holds in memory besides the task graph, per task of an unfolded graph (measured: see
// sim/report/README.md).
inline constexpr double chakra_bytes_per_task = 160.0;

// One .et file read back; throws core::InputError naming the file if it is not a Chakra trace.
EtTrace read_chakra(const std::filesystem::path& file);

} // namespace sim::report
