// Chakra execution traces: every rank's file read back is what was written; compute, point-to-point transfers and
// collectives are all there, in an order that respects every dependency, and send and receive ends match.
#include "core/document.hpp"
#include "report/chakra_export.hpp"
#include "workload/layer_program.hpp"

#include "build_support.hpp"

#include <fstream>
#include <map>
#include <set>

namespace {

using sim::report::EtNodeType;

nlohmann::json model_of(const std::string& name)
{
  return sim::core::read_json_file(test::source_dir() / "models" / (name + ".json"));
}

template <class T>
T attr(const sim::report::EtNode& n, const std::string& name)
{
  const auto* value = n.attrs.find(name);
  REQUIRE(value != nullptr);
  return std::get<T>(*value);
}

// The checks every export must pass, against the graph it came from.
void check_export(const test::Built& built, const sim::report::EtExport& et)
{
  const auto& g = built.tasks;
  REQUIRE(et.ranks.size() == static_cast<std::size_t>(g.gpus));
  // Compute: one COMP node per compute task of the rank, with its FLOPs and time.
  std::vector<double> flops(et.ranks.size()), seconds(et.ranks.size());
  std::vector<std::size_t> kernels(et.ranks.size());
  for (const auto& t : g.tasks())
    if (t.kind == sim::workload::TaskKind::COMPUTE) {
      flops[static_cast<std::size_t>(t.rank)] += static_cast<double>(std::llround(t.flops));
      seconds[static_cast<std::size_t>(t.rank)] += t.duration_s;
      ++kernels[static_cast<std::size_t>(t.rank)];
    }
  std::map<std::tuple<int, int, int>, std::pair<int, std::int64_t>> sends, receives; // (src, dst, tag) -> count, size
  std::map<std::string, std::map<int, int>> collectives;                             // pg_name -> rank -> nodes
  std::set<std::pair<std::string, long long>> buffers; // each collective's label and buffer
  for (const auto& c : g.collectives())
    buffers.insert({g.label_text(c.label), std::llround(c.bytes)});
  for (std::size_t r = 0; r < et.ranks.size(); ++r) {
    double f = 0, s = 0;
    std::size_t comp = 0;
    const auto& nodes = et.ranks[r].nodes;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const auto& n = nodes[i];
      CHECK(n.id == i);
      for (auto d : n.deps)
        CHECK(d < n.id); // written in a dependency order: no cycle
      if (n.type == EtNodeType::COMP) {
        ++comp;
        f += static_cast<double>(attr<std::int64_t>(n, "num_ops"));
        s += attr<double>(n, "duration_s");
      } else if (n.type == EtNodeType::COLL) {
        const auto group = attr<std::string>(n, "pg_name");
        ++collectives[group][static_cast<int>(r)];
        // ASTRA-sim's sizes: an all-gather's is each rank's input, the others' the whole buffer.
        const auto size = static_cast<double>(attr<std::int64_t>(n, "comm_size"));
        const bool gather = attr<std::int64_t>(n, "comm_type") == 2;
        const auto buffer = std::llround(gather ? size * static_cast<double>(et.groups.at(group).size()) : size);
        CHECK(buffers.count({n.name, buffer}) + buffers.count({n.name, buffer - 1}) +
                  buffers.count({n.name, buffer + 1}) >
              0);
      } else {
        auto& side = n.type == EtNodeType::SEND ? sends : receives;
        auto& [count, size] = side[{attr<std::int32_t>(n, "comm_src"), attr<std::int32_t>(n, "comm_dst"),
                                    attr<std::int32_t>(n, "comm_tag")}];
        ++count;
        size = attr<std::int64_t>(n, "comm_size");
        CHECK(attr<std::int32_t>(n, n.type == EtNodeType::SEND ? "comm_src" : "comm_dst") == static_cast<int>(r));
      }
    }
    CHECK(comp == kernels[r]);
    CHECK(f == Approx(flops[r]));
    CHECK(s == Approx(seconds[r]));
  }
  CHECK(sends == receives); // every send has its receive, of the same size
  // Each collective is one node on every rank of its group, and its group is what comm_group.json says.
  std::size_t coll_nodes = 0;
  for (const auto& [name, per_rank] : collectives) {
    REQUIRE(et.groups.count(name) == 1);
    std::set<int> ranks;
    for (const auto& [r, count] : per_rank) {
      ranks.insert(r);
      coll_nodes += static_cast<std::size_t>(count);
      CHECK(count == per_rank.begin()->second);
    }
    CHECK(std::vector<int>(ranks.begin(), ranks.end()) == et.groups.at(name));
  }
  std::size_t expected = 0;
  for (const auto& [name, ranks] : et.groups)
    expected += collectives.at(name).begin()->second * ranks.size();
  CHECK(coll_nodes == expected);
}

} // namespace

TEST_CASE("Chakra traces read back as written, with every kernel, transfer and collective of each rank")
{
  const auto built = test::build(nlohmann::json{{"tp", 4},
                                                {"pp", 2},
                                                {"dp", 2},
                                                {"global_batch", 8},
                                                {"sequence_parallel", true},
                                                {"distributed_optimizer", true}},
                                 model_of("llama2-7b"), "dgx-a100", false);
  const auto et = sim::report::chakra_traces(built.tasks);
  check_export(built, et);
  CHECK(et.collectives > 0);
  CHECK(et.split_collectives == 0);
  for (const auto& [name, ranks] : et.groups)
    INFO(name << ": " << ranks.size() << " ranks from " << ranks.front());
  // TP groups (2 stages x 2 replicas) and DP groups (2 stages x 4 TP ranks), and the pipeline's scatter-gather
  // groups, none of which spans more than a stage.
  CHECK(et.groups.size() >= 8);
  const auto dir = test::scratch_dir() / "chakra";
  std::filesystem::create_directories(dir);
  const auto written = sim::report::write_chakra(built.tasks, dir, "llama");
  CHECK(written.ranks == et.ranks.size());
  CHECK(written.groups == et.groups.size());
  for (std::size_t r = 0; r < et.ranks.size(); ++r) {
    const auto back = sim::report::read_chakra(dir / ("llama." + std::to_string(r) + ".et"));
    CHECK(back.version == et.ranks[r].version);
    CHECK(back.nodes == et.ranks[r].nodes);
  }
  const auto groups = sim::core::read_json_file(dir / "comm_group.json");
  CHECK(groups.size() == et.groups.size());
  CHECK(groups.at("1").get<std::vector<int>>() == et.groups.at("1"));
}

TEST_CASE("a collective whose steps interleave with a rank's kernels is written as its sends and receives")
{
  // Rank 0 sends the first step, computes on what came back, then sends the second: as one node the collective
  // would wait for a kernel that waits for it.
  using namespace sim::workload;
  TaskGraph g;
  g.gpus = g.cluster_gpus = 2;
  CollectiveInfo info;
  info.label = g.label("ring");
  info.kind = CollectiveKind::ALL_GATHER;
  info.ranks = 2;
  info.bytes = 2e6;
  const auto c = g.add_collective(info);
  auto transfer = [&](int from, int to) {
    Task t;
    t.kind = TaskKind::TRANSFER;
    t.category = Category::TP;
    t.rank = from;
    t.peer = to;
    t.bytes = 1e6;
    t.collective = c;
    t.label = info.label;
    return g.add(t);
  };
  auto kernel = [&](int rank) {
    Task t;
    t.kind = TaskKind::COMPUTE;
    t.rank = rank;
    t.duration_s = 1e-3;
    t.flops = 1e9;
    t.label = g.label("gemm");
    return g.add(t);
  };
  const TaskId first = transfer(1, 0);
  const TaskId gemm = kernel(0);
  g.depend(gemm, first);
  const TaskId second = transfer(0, 1);
  g.depend(second, gemm);
  const TaskId other = kernel(1);
  g.depend(other, second);
  g.finalize();
  const auto et = sim::report::chakra_traces(g);
  CHECK(et.split_collectives == 1);
  CHECK(et.collectives == 0);
  REQUIRE(et.ranks[0].nodes.size() == 3); // receive, gemm, send
  CHECK(et.ranks[0].nodes[0].type == EtNodeType::RECV);
  CHECK(et.ranks[0].nodes[1].type == EtNodeType::COMP);
  CHECK(et.ranks[0].nodes[1].deps == std::vector<std::uint64_t>{0});
  CHECK(et.ranks[0].nodes[2].type == EtNodeType::SEND);
  CHECK(et.ranks[0].nodes[2].deps == std::vector<std::uint64_t>{1});
  CHECK(attr<std::string>(et.ranks[0].nodes[2], "collective") == "ring");
  REQUIRE(et.ranks[1].nodes.size() == 3); // send, receive, kernel
  CHECK(et.ranks[1].nodes[2].deps == std::vector<std::uint64_t>{1});
}

TEST_CASE("the MoE all-to-alls and context-parallel exchanges export too")
{
  const auto built = test::build(nlohmann::json{{"tp", 2},
                                                {"dp", 4},
                                                {"ep", 4},
                                                {"cp", 1},
                                                {"global_batch", 4},
                                                {"seq_length", 1024},
                                                {"sequence_parallel", true}},
                                 model_of("qwen3-30b-a3b"), "dgx-h100", false);
  check_export(built, sim::report::chakra_traces(built.tasks));
}

TEST_CASE("a file that is not a Chakra trace is refused")
{
  const auto file = test::scratch_dir() / "not.et";
  {
    std::ofstream out(file, std::ios::binary);
    out << "\xff\xff\xff\xff\xff not a trace";
  }
  CHECK_THAT(test::error_of([&] { sim::report::read_chakra(file); }), Catch::Contains("not a Chakra trace"));
}
