// Layout search without simulating: enumeration (--vary, --auto), ranking, shards merged, CSV and JSON.
#include "memory/memory_model.hpp"
#include "study/sweep.hpp"
#include "support.hpp"

#include <set>

using namespace sim::study;

namespace {

SweepRow ranked(int index, double tokens_per_s, std::vector<std::string> overrides)
{
  SweepRow r;
  r.index = index;
  r.layout.overrides = std::move(overrides);
  r.outcome = Outcome::RANKED;
  r.tokens_per_s = tokens_per_s;
  r.step_time_s = 1e6 / tokens_per_s;
  return r;
}

SweepRow skipped(int index, Outcome outcome, std::string reason)
{
  SweepRow r;
  r.index = index;
  r.outcome = outcome;
  r.reason = std::move(reason);
  return r;
}

SweepResult result(std::vector<SweepRow> rows, int total)
{
  SweepResult r;
  r.scenario = "s.json";
  r.layouts_total = total;
  r.columns = {"plan.tp"};
  r.rows = std::move(rows);
  return r;
}

std::vector<int> indices(const SweepResult& r)
{
  std::vector<int> out;
  for (const auto& row : r.rows)
    out.push_back(row.index);
  return out;
}

} // namespace

TEST_CASE("varying paths takes the cross product, the last path varying fastest")
{
  const auto layouts = vary_layouts({"plan.tp=2,4", "plan.schedule=1f1b,gpipe,interleaved"});
  REQUIRE(layouts.size() == 6);
  CHECK(layouts[0].overrides == std::vector<std::string>{"plan.tp=2", "plan.schedule=1f1b"});
  CHECK(layouts[1].overrides == std::vector<std::string>{"plan.tp=2", "plan.schedule=gpipe"});
  CHECK(layouts[5].overrides == std::vector<std::string>{"plan.tp=4", "plan.schedule=interleaved"});
  CHECK(layout_label(layouts[5]) == "tp=4 schedule=interleaved");
  // Commas inside a JSON value do not split it.
  const auto lists = vary_layouts({"plan.layers_per_stage=[20,20],[16,24]"});
  REQUIRE(lists.size() == 2);
  CHECK(lists[1].overrides.front() == "plan.layers_per_stage=[16,24]");
  CHECK(vary_layouts({}).size() == 1);
  // Linked paths vary together.
  const auto linked = vary_layouts({"plan.schedule:plan.virtual_stages=1f1b:1,interleaved:2", "plan.tp=2,4"});
  REQUIRE(linked.size() == 4);
  CHECK(linked[2].overrides ==
        std::vector<std::string>{"plan.schedule=interleaved", "plan.virtual_stages=2", "plan.tp=2"});
}

TEST_CASE("a malformed variation names itself")
{
  CHECK(test::error_of([] { vary_layouts({"plan.tp"}); }).find("--vary plan.tp") != std::string::npos);
  CHECK(test::error_of([] { vary_layouts({"plan.tp=2,,4"}); }).find("not a variation") != std::string::npos);
  CHECK(test::error_of([] { vary_layouts({"=2,4"}); }).find("PATH=V1,V2") != std::string::npos);
  CHECK(test::error_of([] {
          vary_layouts({"plan.schedule:plan.virtual_stages=1f1b:1,interleaved"});
        }).find("linked paths") != std::string::npos);
}

TEST_CASE("combining two lists of layouts pairs each with each, an empty list being neutral")
{
  const auto a = vary_layouts({"plan.tp=2,4"});
  const auto b = vary_layouts({"plan.micro_batch=1,2,4"});
  CHECK(combine(a, b).size() == 6);
  CHECK(combine(a, {}).size() == 2);
  CHECK(combine({}, b).size() == 3);
  CHECK(combine(a, b)[1].overrides == std::vector<std::string>{"plan.tp=2", "plan.micro_batch=2"});
  // A path both sides set keeps the pairs that agree on it, once.
  const auto c = vary_layouts({"plan.tp=2,4,8", "plan.pp=2"});
  const auto kept = combine(vary_layouts({"plan.tp=4,8,16", "topology=dgx-h100"}), c);
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].overrides == std::vector<std::string>{"topology=dgx-h100", "plan.tp=4", "plan.pp=2"});
  CHECK(kept[1].overrides == std::vector<std::string>{"topology=dgx-h100", "plan.tp=8", "plan.pp=2"});
  CHECK(combine(vary_layouts({"plan.tp=16"}), c).empty());
}

TEST_CASE("the automatic layouts are valid plans, with the scenario's own layout among them")
{
  const auto path = test::source_dir() / "scenarios" / "default.json";
  const auto base = sim::scenario::load_scenario(path, test::options());
  const auto layouts = auto_layouts(base);
  REQUIRE(layouts.size() > 100);
  std::set<std::string> labels;
  int fits = 0;
  for (const auto& l : layouts) {
    INFO(layout_label(l));
    CHECK(labels.insert(layout_label(l)).second); // no layout twice
    CHECK(layout_label(l).find("gpipe") == std::string::npos);
    const auto s = sim::scenario::load_scenario(path, test::options(l.overrides)); // throws if not a valid plan
    CHECK(s.plan.tp * s.plan.pp * s.plan.dp == base.gpus);
    CHECK(s.plan.tp <= base.cluster.node.gpus);
    fits += sim::memory::estimate_memory(s.model, s.plan, s.cluster.gpu).oom ? 0 : 1;
  }
  CHECK(fits > 0);
  CHECK(fits < static_cast<int>(layouts.size())); // some do not fit: the screen has work to do
  CHECK(labels.count("tp=8 pp=2 dp=1 micro_batch=1 schedule=1f1b virtual_stages=1 zero_stage=0 recompute=selective "
                     "sequence_parallel=true") == 1);
  CHECK(labels.count("tp=2 pp=4 dp=2 micro_batch=2 schedule=interleaved virtual_stages=2 zero_stage=1 "
                     "recompute=full sequence_parallel=false") == 1);
  CHECK(labels.count("tp=1 pp=1 dp=16 micro_batch=1 schedule=1f1b virtual_stages=1 zero_stage=3 recompute=none "
                     "sequence_parallel=false") == 1);
}

TEST_CASE("auto layouts keep the scenario's hybrid shard groups where they shard and the groups split their ranks")
{
  const auto path = test::source_dir() / "scenarios" / "default.json";
  const std::vector<std::string> hybrid{"gpus=64",           "plan.tp=1",           "plan.pp=1",           "plan.dp=64",
                                        "plan.zero_stage=1", "plan.shard_group=16", "plan.global_batch=64"};
  const auto base = sim::scenario::load_scenario(path, test::options(hybrid));
  std::size_t kept = 0;
  std::size_t checked = 0;
  for (const auto& l : auto_layouts(base)) {
    INFO(layout_label(l));
    auto overrides = hybrid;
    overrides.insert(overrides.end(), l.overrides.begin(), l.overrides.end());
    if (++checked % 5 != 0) // a sample: loading them all takes a while
      continue;
    const auto s = sim::scenario::load_scenario(path, test::options(overrides)); // throws if not a valid plan
    kept += s.plan.shard_group == 16 ? 1 : 0;
    CHECK((s.plan.shard_group == 0 || s.plan.zero_stage > 0));
  }
  CHECK(kept > 0);
}

TEST_CASE("auto layouts also enumerate expert parallelism for a MoE model, experts split like the attention or "
          "whole, every layout valid")
{
  const auto path = test::source_dir() / "scenarios/moe/qwen3-30b-a3b-h100.json";
  const auto base = sim::scenario::load_scenario(path, test::options());
  std::set<int> eps;
  std::set<std::pair<int, int>> tp_etp;
  std::size_t checked = 0;
  auto value = [](const Layout& l, std::string_view key) {
    for (const auto& o : l.overrides)
      if (o.rfind(key, 0) == 0)
        return std::stoi(o.substr(key.size()));
    return -1;
  };
  for (const auto& l : auto_layouts(base)) {
    INFO(layout_label(l));
    const int ep = value(l, "plan.ep=");
    const int etp = value(l, "plan.etp=");
    const int tp = value(l, "plan.tp=");
    REQUIRE(ep > 0);
    REQUIRE((etp == tp || etp == 1));
    eps.insert(ep);
    tp_etp.insert({tp, etp});
    if (++checked % 7 == 0) { // a sample: loading them all takes a while
      const auto s = sim::scenario::load_scenario(path, test::options(l.overrides)); // throws if not a valid plan
      CHECK(s.plan.tp * s.plan.dp % (s.plan.etp * s.plan.ep) == 0);
    }
  }
  CHECK(eps == std::set<int>{1, 2, 4, 8, 16, 32, 64});
  CHECK(tp_etp.count({4, 4}) == 1);
  CHECK(tp_etp.count({4, 1}) == 1);
}

TEST_CASE("ranking orders the simulated layouts by the metric, ties by enumeration order, the rest after")
{
  auto r = result({skipped(0, Outcome::OUT_OF_MEMORY, "needs more"), ranked(1, 100, {"plan.tp=1"}),
                   ranked(2, 300, {"plan.tp=2"}), skipped(3, Outcome::PRUNED, "slow"), ranked(4, 300, {"plan.tp=4"})},
                  5);
  rank_rows(r);
  CHECK(indices(r) == std::vector<int>{2, 4, 1, 0, 3});
  CHECK(r.rows[0].rank == 1);
  CHECK(r.rows[1].rank == 2);
  CHECK(r.rows[2].rank == 3);
  CHECK(r.rows[3].rank == 0);
  // By tokens per dollar instead.
  r.rank_by = RankBy::TOKENS_PER_USD;
  r.rows[2].tokens_per_usd = 5;
  rank_rows(r);
  CHECK(r.rows[0].index == 1);
}

TEST_CASE("merging shards gives the whole sweep's ranking, and refuses parts of different sweeps")
{
  auto odd = result({ranked(1, 100, {"plan.tp=1"}), ranked(3, 400, {"plan.tp=4"})}, 4);
  odd.shard = "2/2";
  auto even = result({ranked(0, 200, {"plan.tp=8"}), skipped(2, Outcome::INVALID, "heads")}, 4);
  even.shard = "1/2";
  const auto merged = merge_sweeps({odd, even});
  CHECK(indices(merged) == std::vector<int>{3, 0, 1, 2});
  CHECK(merged.rows[0].rank == 1);
  CHECK(merged.shard.empty());
  // Each shard may mark its first layout equal to the scenario's own: the merged sweep keeps the first of them.
  odd.rows[0].baseline = true;
  even.rows[1].baseline = true;
  const auto marked = merge_sweeps({odd, even});
  CHECK(std::count_if(marked.rows.begin(), marked.rows.end(), [](const SweepRow& x) { return x.baseline; }) == 1);
  CHECK(std::find_if(marked.rows.begin(), marked.rows.end(), [](const SweepRow& x) { return x.baseline; })->index == 1);
  // The same row twice (a shard given twice) counts once.
  CHECK(merge_sweeps({odd, odd, even}).rows.size() == 4);
  // Each GPU's accuracy once, by name, whichever shard saw it.
  odd.validation = {{{"gpu", "H800"}, {"covered", false}}, {{"gpu", "A100"}, {"covered", true}}};
  even.validation = {{{"gpu", "A100"}, {"covered", true}}};
  const auto gpus = merge_sweeps({even, odd}).validation;
  REQUIRE(gpus.size() == 2);
  CHECK(gpus[0]["gpu"] == "A100");
  CHECK(gpus[1]["gpu"] == "H800");
  auto other = result({ranked(0, 1, {})}, 7);
  CHECK(test::error_of([&] { merge_sweeps({odd, other}); }).find("not shards of one sweep") != std::string::npos);
}

TEST_CASE("sweep.json reads back as it was written, and the CSV has a row per layout")
{
  auto r = result({ranked(0, 250, {"plan.tp=8"}),
                   skipped(1, Outcome::OUT_OF_MEMORY, "needs 90 GiB of 80 GiB per GPU, over by 10 GiB")},
                  2);
  r.rows[1].layout.overrides = {"plan.tp=1"};
  r.rows[1].memory_over_bytes = 10.0 * (1 << 30);
  rank_rows(r);
  r.validation = {{{"gpu", "H20-96GB"}, {"covered", false}, {"reason", "no published run validates this GPU"}}};
  const auto j = sweep_json(r);
  const auto back = sweep_from_json(j, "sweep.json");
  CHECK(sweep_json(back) == j);
  CHECK(sweep_text(r, {.top = 10}).find("  accuracy: H20-96GB: no published run validates this GPU") !=
        std::string::npos);
  auto before = j; // a sweep.json written before sweeps quoted the accuracy still reads
  before.erase("validation");
  CHECK(sweep_from_json(before, "sweep.json").validation.empty());
  const auto csv = sweep_csv(r);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);
  CHECK(csv.starts_with("index,label,plan.tp,outcome,rank,"));
  CHECK(csv.find("1,tp=1,1,out_of_memory,0,false,,0,0,") != std::string::npos);
  CHECK(csv.find("\"needs 90 GiB of 80 GiB per GPU, over by 10 GiB\"") != std::string::npos);
  CHECK(test::error_of([] { sweep_from_json(nlohmann::json::object(), "x.json"); }).find("not a sweep.json") !=
        std::string::npos);
  CHECK(csv.find(",ranked,1,false,") != std::string::npos); // no baseline marked
  r.rows[0].baseline = true;
  CHECK(sweep_from_json(sweep_json(r), "sweep.json").rows[0].baseline);
  const auto text = sweep_text(r, {.top = 10});
  CHECK(text.find("the scenario's own layout (tp=8) is the best (marked *)") != std::string::npos);
  CHECK(text.find("  1*   8") != std::string::npos);
  CHECK(text.find("1 does not fit in GPU memory (closest: tp=1, over by 10.00 GiB)") != std::string::npos);
}

TEST_CASE("auto layouts enumerate context parallelism where each GPU keeps 4K tokens or more, every layout valid")
{
  const auto path = test::source_dir() / "scenarios/whatif/llama3-70b-fp8-h100.json"; // 8K sequences
  const auto base = sim::scenario::load_scenario(path, test::options());
  std::set<int> cps;
  std::size_t checked = 0;
  for (const auto& l : auto_layouts(base)) {
    INFO(layout_label(l));
    int cp = 1;
    if (l.overrides.back().rfind("plan.cp=", 0) == 0)
      cp = std::stoi(l.overrides.back().substr(8));
    cps.insert(cp);
    if (cp > 1 && ++checked % 11 == 0) {
      const auto s = sim::scenario::load_scenario(path, test::options(l.overrides)); // throws if not a valid plan
      CHECK(s.plan.gpus() == base.gpus);
    }
  }
  CHECK(checked > 0);
  CHECK(cps == std::set<int>{1, 2});
  // 2K sequences: none.
  const auto short_seq = sim::scenario::load_scenario(path, test::options({"plan.seq_length=2048"}));
  for (const auto& l : auto_layouts(short_seq))
    CHECK(l.overrides.back().rfind("plan.cp=", 0) == std::string::npos);
}
