// Tests that run the simtrain binary: comparisons between simulations (one SimGrid engine per process), output files.
#include "../unit/support.hpp"
#include "run_simtrain.hpp"

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace {

using test::Result;

// What a run's output holds: standard output, or standard error too.
enum class Streams { STDOUT, WITH_ERRORS };

// `simtrain ARGS`: its exit status and its standard output (or both streams).
Result run(const std::string& args, Streams streams = Streams::STDOUT)
{
  return test::run_shell(std::string(SIMTRAIN_BINARY) + " --log-level off " + args +
                         (streams == Streams::WITH_ERRORS ? " 2>&1" : " 2>/dev/null"));
}

nlohmann::json run_json(const std::string& args)
{
  const auto r = run("run " + args + " --format json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

std::string scenario(const std::string& name)
{
  return (test::source_dir() / "scenarios" / name).string();
}

} // namespace

TEST_CASE("a TP-heavy step slows on A800, and its exposed TP time grows by the NVLink ratio")
{
  const std::string plan = scenario("default.json") +
                           " --set plan.pp=1 --set plan.micro_batch=4 --set plan.global_batch=4"
                           " --set plan.sequence_parallel=false";
  const auto a100 = run_json(plan + " --set topology=dgx-a100");
  const auto a800 = run_json(plan + " --set topology=hgx-a800");
  CHECK(a800["step_time_s"].get<double>() > a100["step_time_s"].get<double>());
  // The collectives take 1.5x as long (their latency terms are the same on both, hence the tolerance)...
  const double ratio = a800["comm_s"]["tp"].get<double>() / a100["comm_s"]["tp"].get<double>();
  CHECK(ratio == Approx(300.0 / 200.0).epsilon(0.05));
  // ... and the exposed part grows at least as much: the backward overlap with weight gradients hides a fixed amount.
  const double exposed =
      a800["breakdown_s"]["tp_exposed"].get<double>() / a100["breakdown_s"]["tp_exposed"].get<double>();
  CHECK(exposed >= ratio);
  // The same kernels, slowed a little longer by the SMs the longer collectives hold while they overlap compute.
  const double compute_a100 = a100["breakdown_s"]["compute"].get<double>();
  const double compute_a800 = a800["breakdown_s"]["compute"].get<double>();
  CHECK(compute_a800 >= compute_a100);
  CHECK(compute_a800 < 1.02 * compute_a100);
}

TEST_CASE("the same input gives byte-identical reports, but for simtrain's own wall time and memory")
{
  auto first = run_json(scenario("default.json"));
  auto second = run_json(scenario("default.json"));
  for (auto* j : {&first, &second}) {
    j->erase("sim_wall_s");
    j->erase("sim_peak_rss_bytes");
  }
  CHECK(first.dump() == second.dump());
}

TEST_CASE("folding identical GPUs changes nothing but the work of simulating")
{
  const std::string s = scenario("default.json") + " --set plan.pp=2 --set plan.tp=4 --set plan.dp=2"
                                                   " --set plan.global_batch=8";
  const auto folded = run_json(s);
  const auto full = run_json(s + " --no-fold");
  REQUIRE(folded["folded"].get<bool>());
  REQUIRE_FALSE(full["folded"].get<bool>());
  CHECK(folded["tasks"].get<double>() < full["tasks"].get<double>());
  for (const char* key : {"step_time_s", "tokens_per_s", "mfu"})
    CHECK(folded[key].get<double>() == Approx(full[key].get<double>()).epsilon(1e-9));
  for (const char* part : {"compute", "tp_exposed", "pp_exposed", "dp_exposed", "bubble", "optimizer"})
    CHECK(folded["breakdown_s"][part].get<double>() ==
          Approx(full["breakdown_s"][part].get<double>()).epsilon(1e-6).margin(1e-9));
  for (const char* cls : {"nvlink", "ib"}) {
    CHECK(folded["links"][cls]["bytes"].get<double>() ==
          Approx(full["links"][cls]["bytes"].get<double>()).epsilon(1e-9));
    CHECK(folded["links"][cls]["peak_util"].get<double>() ==
          Approx(full["links"][cls]["peak_util"].get<double>()).epsilon(1e-9));
  }
}

// A scenario run folded and with --no-fold: the same step, breakdown, bubbles and link traffic, with at most
// `tasks_ratio` of the tasks.
void check_folds_exactly(const std::string& args, double tasks_ratio = 0.5)
{
  INFO(args);
  const auto folded = run_json(args);
  const auto full = run_json(args + " --no-fold");
  REQUIRE(folded["folded"].get<bool>());
  CHECK(folded["tasks"].get<double>() < tasks_ratio * full["tasks"].get<double>());
  CHECK(folded["step_time_s"].get<double>() == Approx(full["step_time_s"].get<double>()).epsilon(1e-12));
  for (const auto& [part, seconds] : full["breakdown_s"].items())
    CHECK(folded["breakdown_s"][part].get<double>() == Approx(seconds.get<double>()).epsilon(1e-9).margin(1e-12));
  const auto& bubbles = full["bubble"]["per_stage"];
  for (std::size_t s = 0; s < bubbles.size(); ++s)
    CHECK(folded["bubble"]["per_stage"][s].get<double>() ==
          Approx(bubbles[s].get<double>()).epsilon(1e-9).margin(1e-12));
  for (const auto& [cls, link] : full["links"].items()) {
    const auto& mine = folded["links"][cls];
    CHECK(mine["bytes"].get<double>() == Approx(link["bytes"].get<double>()).epsilon(1e-12));
    CHECK(mine["avg_util"].get<double>() == Approx(link["avg_util"].get<double>()).epsilon(1e-12));
    REQUIRE(mine["busiest"].size() == link["busiest"].size());
    if (!link["busiest"].empty())
      CHECK(mine["busiest"][0]["bytes"].get<double>() ==
            Approx(link["busiest"][0]["bytes"].get<double>()).epsilon(1e-12));
    if (link["peak_util"].is_null())
      CHECK(mine["peak_util"].is_null());
    else
      CHECK(mine["peak_util"].get<double>() == Approx(link["peak_util"].get<double>()).epsilon(1e-12));
    REQUIRE(mine["utilization_over_time"].size() == link["utilization_over_time"].size());
    for (std::size_t i = 0; i < link["utilization_over_time"].size(); ++i)
      CHECK(mine["utilization_over_time"][i].get<double>() ==
            Approx(link["utilization_over_time"][i].get<double>()).epsilon(1e-9).margin(1e-12));
  }
}

TEST_CASE("flows timed in closed form while alone on their links change no result (--no-lone-flows)")
{
  // Tensor-parallel flows alone on their NVLink, data-parallel and pipeline flows that share NICs and leaf uplinks,
  // expert all-to-alls: every flow through SimGrid gives the same step, breakdown and link traffic.
  for (const std::string& s :
       {scenario("default.json") + " --set topology.network.nodes_per_leaf=1 --set topology.network.oversubscription=2",
        scenario("moe/qwen3-30b-a3b-h100.json") + " --set gpus=32 --set plan.pp=2 --set plan.global_batch=32" +
            " --set plan.ep=16"}) {
    INFO(s);
    const auto lone = run_json(s);
    const auto shared = run_json(s + " --no-lone-flows");
    CHECK(lone["step_time_s"].get<double>() == Approx(shared["step_time_s"].get<double>()).epsilon(1e-9));
    for (const auto& [part, seconds] : shared["breakdown_s"].items())
      CHECK(lone["breakdown_s"][part].get<double>() == Approx(seconds.get<double>()).epsilon(1e-6).margin(1e-9));
    for (const auto& [cls, link] : shared["links"].items()) {
      CHECK(lone["links"][cls]["bytes"].get<double>() == link["bytes"].get<double>());
      if (!link["peak_util"].is_null())
        CHECK(lone["links"][cls]["peak_util"].get<double>() == Approx(link["peak_util"].get<double>()).epsilon(1e-9));
    }
  }
}

TEST_CASE("NCCL's tree and SHARP all-reduces across nodes fold exactly and change the step")
{
  // Data-parallel groups of one GPU on each of 4 nodes: the tree (forced) and SHARP both apply to their all-reduces.
  const std::string s =
      scenario("default.json") + " --set gpus=64 --set plan.global_batch=32 --set plan.pp=2 --set plan.dp=4";
  const double ring = run_json(s)["step_time_s"].get<double>();
  const std::string tree = s + " --set plan.collective_algorithm=tree";
  const std::string sharp = s + " --set topology.network.sharp=true";
  CHECK(run_json(tree)["step_time_s"].get<double>() > ring);  // twice the share on each NIC at 0.92
  CHECK(run_json(sharp)["step_time_s"].get<double>() < ring); // the share once each way
  for (const std::string& c : {tree, sharp})
    check_folds_exactly(c);
}

TEST_CASE("NVLS-Tree all-reduces across DGX H100 nodes fold exactly and differ from the hierarchical ring")
{
  // Data-parallel groups of all 8 GPUs of each of 4 nodes: their gradient buckets take NVLS-Tree (by its latency).
  const std::string s =
      scenario("default.json") +
      " --set model=sc21-gpt-1.7b --set topology=dgx-h100 --set gpus=32 --set plan.tp=1"
      " --set plan.pp=1 --set plan.dp=32 --set plan.global_batch=32 --set plan.sequence_parallel=false"
      " --set plan.seq_length=2048";
  const double ring = run_json(s + " --set plan.collective_algorithm=hierarchical")["step_time_s"].get<double>();
  CHECK(run_json(s)["step_time_s"].get<double>() != Approx(ring).epsilon(1e-6));
  check_folds_exactly(s);
}

TEST_CASE("offload folds exactly: copies to host memory and the drives, CPU updates, activation offload")
{
  // Each copy crosses its GPU's PCIe path to its socket's memory (and on to the node's drives) as the classes of the
  // fold those links fall in, weighted like any flow: the step, its exposed offload and every link's traffic as
  // unfolded.
  const std::string a100 = scenario("finetune/full-8xa100.json");
  for (const std::string& c :
       {scenario("finetune/offload-8x4090-zero2.json"), scenario("finetune/infinity-8x4090-70b.json"),
        a100 + " --set gpus=16 --set plan.dp=16 --set plan.zero_stage=2 --set plan.offload_optimizer=cpu"
               " --set plan.global_batch=64",
        a100 + " --set plan.zero_stage=0 --set plan.tp=2 --set plan.pp=2 --set plan.dp=2 --set plan.micro_batch=1"
               " --set plan.offload_activations=true --set plan.recompute=none",
        a100 + " --set plan.zero_stage=0 --set plan.distributed_optimizer=true --set plan.offload_optimizer=cpu"
               " --set plan.offload_fraction=0.5 --set plan.tp=2 --set plan.dp=4"})
    check_folds_exactly(c, 0.55); // the host side has fewer symmetries than the GPUs' links
}

TEST_CASE("context-parallel pairs inside a node fold by a rotation of two, exactly")
{
  // TP 1 or 2 with CP 2: a node holds 4 or 8 data-parallel-and-context ranks, its gradient ring runs over them in rank
  // order and each context-parallel pair sits side by side. A rotation by one breaks the pairs and a swap of each pair
  // breaks the ring; a rotation by two inside the node keeps both: two classes per stage (the pairs' two halves).
  const std::string s = scenario("default.json") + " --set gpus=32 --set plan.global_batch=32 --set plan.cp=2" +
                        " --set plan.pp=2 --allow-oom";
  for (const char* layout :
       {" --set plan.tp=2 --set plan.dp=4", " --set plan.tp=1 --set plan.dp=8 --set plan.sequence_parallel=false"}) {
    INFO(layout);
    CHECK(run_json(s + layout)["simulated_gpus"].get<int>() == 4);
    check_folds_exactly(s + layout, 0.2);
  }
}

TEST_CASE("hybrid sharding (shard groups within the data-parallel ranks) folds exactly")
{
  // ZeRO-3 in shard groups of 16 over 64 GPUs of 2-node leaf groups (each group over two leaves), and the distributed
  // optimizer in groups of 4 with a pipeline: each shard group's reduce-scatter, then the all-reduce across groups.
  const std::string s = scenario("default.json") +
                        " --set model=sc21-gpt-1.7b --set gpus=64 --set plan.tp=1 --set plan.pp=1 --set plan.dp=64"
                        " --set plan.global_batch=64 --set plan.sequence_parallel=false --set plan.seq_length=2048"
                        " --set topology.network.nodes_per_leaf=2 --set topology.network.oversubscription=2";
  const double full = run_json(s + " --set plan.zero_stage=3")["step_time_s"].get<double>();
  const std::string hybrid = s + " --set plan.zero_stage=3 --set plan.shard_group=16";
  CHECK(run_json(hybrid)["step_time_s"].get<double>() != Approx(full).epsilon(1e-6));
  check_folds_exactly(hybrid);
  check_folds_exactly(s + " --set plan.pp=2 --set plan.dp=32 --set plan.distributed_optimizer=true"
                          " --set plan.shard_group=4");
}

TEST_CASE("a multi-token-prediction module lengthens the last stage's passes and folds exactly")
{
  const std::string s = scenario("default.json") + " --set gpus=32 --set plan.dp=2";
  const auto plain = run_json(s);
  const auto with = run_json(s + " --set model.mtp_layers=1");
  CHECK(with["step_time_s"].get<double>() > plain["step_time_s"].get<double>());
  CHECK(with["model_flops_per_step"].get<double>() > plain["model_flops_per_step"].get<double>());
  check_folds_exactly(s + " --set model.mtp_layers=1");
}

TEST_CASE("folding by symmetry classes is exact where the cluster is not symmetric as a whole")
{
  // Oversubscribed trees (stages aligned with the leaves, spread over two, straddling them; a core above pods),
  // non-blocking trees of several leaves and pods (their switch links not simulated, their traffic counted per class
  // of flows), a straggler node, a slow uplink of a leaf group or of a pod's spine on a non-blocking tree, GPUs sharing
  // PCIe switches and NICs (L40S), a hybrid cube mesh (DGX-1 V100).
  const std::string s = scenario("default.json") + " --set gpus=64 --set plan.global_batch=32";
  const std::string tree = " --set topology.network.nodes_per_leaf=2 --set topology.network.oversubscription=";
  const std::string small = scenario("default.json") + " --set gpus=32 --set plan.tp=4 --set plan.pp=2 --set plan.dp=4"
                                                       " --set plan.global_batch=32 --set plan.precision=fp16";
  for (const std::string& c :
       {s + " --set plan.pp=4 --set plan.dp=2" + tree + "2", s + " --set plan.pp=2 --set plan.dp=4" + tree + "4",
        s + " --set plan.tp=2 --set plan.pp=4 --set plan.dp=8" + tree + "2",
        s + " --set plan.pp=2 --set plan.dp=4 --set topology.network.nodes_per_leaf=3"
            " --set topology.network.oversubscription=2",
        s + " --set plan.pp=2 --set plan.dp=4 --set topology.network.kind=fat_tree" +
            " --set topology.network.leaves_per_pod=2 --set topology.network.core_oversubscription=2" + tree + "2",
        s + " --set plan.pp=2 --set plan.dp=4 --set topology.network.nodes_per_leaf=2",
        s + " --set plan.tp=2 --set plan.pp=4 --set plan.dp=8 --set topology.network.nodes_per_leaf=3",
        s + " --set plan.pp=2 --set plan.dp=4 --set topology.network.kind=fat_tree" +
            " --set topology.network.leaves_per_pod=2 --set topology.network.nodes_per_leaf=2",
        s + " --set plan.pp=4 --set plan.dp=2" + R"( --set 'stragglers=[{"node": 3, "compute": 0.9}]')",
        s + " --set plan.pp=2 --set plan.dp=4 --set topology.network.nodes_per_leaf=2" +
            R"( --set 'stragglers=[{"leaf": 1, "bandwidth": 0.5}]')",
        s + " --set plan.pp=2 --set plan.dp=4 --set topology.network.kind=fat_tree" +
            " --set topology.network.leaves_per_pod=2 --set topology.network.nodes_per_leaf=2" +
            R"( --set 'stragglers=[{"spine": 0, "bandwidth": 0.3}]')",
        s + " --set plan.pp=4 --set plan.dp=2" + R"( --set 'node_gpus=[{"nodes": [3, 3], "gpu": "a100-sxm4-40gb"}]')",
        s + " --set plan.pp=4 --set plan.dp=2" + R"( --set 'node_gpus=[{"nodes": [3, 3], "gpu": "a800-sxm4-80gb"}]')",
        small + " --set topology=l40s-pcie", small + " --set topology=dgx-v100",
        // Expert all-to-alls between two nodes, each its own leaf of a non-blocking tree.
        scenario("moe/qwen3-30b-a3b-h100.json") + " --set gpus=32 --set plan.pp=2 --set plan.global_batch=32" +
            " --set plan.ep=16 --set topology.network.nodes_per_leaf=1"})
    check_folds_exactly(c);
}

TEST_CASE("nodes of another GPU kind run at their part's speed and memory")
{
  // A100 40 GB nodes beside 80 GB ones (the same DGX design): the mixed step lies between the two pure ones, every
  // node of the other kind is the same as a topology of it, and each stage's memory is judged on its smaller part.
  const std::string s = scenario("default.json") + " --set gpus=64 --set plan.global_batch=32 --set plan.pp=4"
                                                   " --set plan.dp=2";
  auto kinds = [](const std::string& nodes) {
    return R"( --set 'node_gpus=[{"nodes": )" + nodes + R"(, "gpu": "a100-sxm4-40gb"}]')";
  };
  const double all80 = run_json(s)["step_time_s"].get<double>();
  const auto mixed = run_json(s + kinds("[2, 3]"));
  const double all40 = run_json(s + " --set topology.node.gpu=a100-sxm4-40gb")["step_time_s"].get<double>();
  CHECK(all80 < mixed["step_time_s"].get<double>());
  CHECK(mixed["step_time_s"].get<double>() < all40);
  CHECK(mixed["cluster"]["node_gpus"][0]["gpu"] == "A100-SXM4-40GB");
  // Each part says how sure it is: its own validation entry.
  CHECK(mixed["validation"]["gpu"] == "A100-SXM4-80GB");
  CHECK(mixed["cluster"]["node_gpus"][0]["validation"]["gpu"] == "A100-SXM4-40GB");
  CHECK(mixed["cluster"]["node_gpus"][0]["validation"]["runs"].get<int>() > 0);
  const auto swept = nlohmann::json::parse(
      run("sweep " + s + kinds("[2, 3]") + " --vary plan.micro_batch=1,2 --format json 2>/dev/null").out);
  REQUIRE(swept["validation"].size() == 2);
  CHECK(swept["validation"][0]["gpu"] == "A100-SXM4-40GB");
  CHECK(swept["validation"][1]["gpu"] == "A100-SXM4-80GB");
  // The critical path's kernels split by part: each GPU's counted once, on its own part.
  const auto& path = mixed["critical_path"];
  REQUIRE(path["compute_by_gpu_s"].size() == 2);
  CHECK(path["compute_by_gpu_s"]["A100-SXM4-80GB"].get<double>() +
            path["compute_by_gpu_s"]["A100-SXM4-40GB"].get<double>() ==
        Approx(path["compute_s"].get<double>()).epsilon(1e-12));
  CHECK(path["compute_by_gpu_s"]["A100-SXM4-40GB"].get<double>() > 0);
  CHECK(!run_json(s)["critical_path"].contains("compute_by_gpu_s"));
  CHECK(mixed["memory"]["capacity_bytes"].get<double>() == Approx(40.0 * (1ULL << 30) - 400e6));
  CHECK(run_json(s + kinds("[0, 7]"))["step_time_s"].get<double>() == Approx(all40).epsilon(1e-12));
  // Memory is judged per stage on its own parts: 1F1B's first stage holds four micro-batches' activations (58 GiB),
  // the last one (21 GiB); a 40 GB node fits on the last stage, not on the first.
  const std::string heavy = scenario("default.json") + " --set gpus=32 --set plan.pp=4 --set plan.recompute=none" +
                            " --set plan.micro_batch=16 --set plan.global_batch=64";
  CHECK(run("run " + heavy + " --quiet").status == 0);
  const auto last = run_json(heavy + kinds("[3, 3]"));
  CHECK(last["memory"]["oom"] == false);
  // (What a plan may use: the HBM less the CUDA context, 400 MB.)
  CHECK(last["memory"]["capacity_bytes"].get<double>() == Approx(40.0 * (1ULL << 30) - 400e6));
  CHECK(last["memory"]["per_stage"][0]["capacity_bytes"].get<double>() == Approx(80.0 * (1ULL << 30) - 400e6));
  CHECK(last["memory"]["per_stage"][3]["capacity_bytes"].get<double>() == Approx(40.0 * (1ULL << 30) - 400e6));
  const auto refused = run("run " + heavy + kinds("[0, 0]"), Streams::WITH_ERRORS);
  CHECK(refused.status == 1);
  CHECK(refused.out.find("does not fit in GPU memory: stage 0 needs 57.67 GiB of 39.63 GiB") != std::string::npos);
  const auto table = run("memory " + heavy + kinds("[3, 3]")).out;
  CHECK(table.find("fits: the GPU with the least room (stage 3) uses 21.52 GiB of 39.63 GiB") != std::string::npos);
}

TEST_CASE("an export-capped node among full ones runs its NVSwitch ports at its own NVLink")
{
  // H800 nodes (NVLink 200 GB/s per direction, no NVLink SHARP) in a DGX H100 cluster: all of them is the H800
  // topology itself; one of them slows its stage's tensor-parallel rings, and the synchronous step waits for it.
  const std::string s = scenario("default.json") + " --set topology=dgx-h100 --set gpus=32 --set plan.pp=4" +
                        " --set plan.global_batch=32";
  auto h800 = [](const std::string& nodes) {
    return R"( --set 'node_gpus=[{"nodes": )" + nodes + R"(, "gpu": "h800-sxm5-80gb"}]')";
  };
  const auto full = run_json(s);
  const auto one = run_json(s + h800("[1, 1]"));
  const auto all = run_json(s + " --set topology.node.gpu=h800-sxm5-80gb");
  CHECK(run_json(s + h800("[0, 3]"))["step_time_s"].get<double>() ==
        Approx(all["step_time_s"].get<double>()).epsilon(1e-12));
  CHECK(full["step_time_s"].get<double>() < one["step_time_s"].get<double>());
  CHECK(one["step_time_s"].get<double>() <= all["step_time_s"].get<double>());
  CHECK(one["critical_path"]["compute_by_gpu_s"]["H800-SXM5-80GB"].get<double>() > 0);
  // The kernels of both parts, step for step: the H800's at the H100's times (the same GH100 die and HBM3).
  const auto kernels =
      nlohmann::json::parse(run("kernels " + scenario("whatif/h100-tp-heavy-one-h800.json") + " --format json").out);
  REQUIRE(kernels["node_gpus"].size() == 1);
  CHECK(kernels["node_gpus"][0]["gpu"] == "H800-SXM5-80GB");
  REQUIRE(kernels["node_gpus"][0]["kernels"].size() == kernels["kernels"].size());
  for (std::size_t i = 0; i < kernels["kernels"].size(); ++i)
    CHECK(kernels["node_gpus"][0]["kernels"][i]["kernel"] == kernels["kernels"][i]["kernel"]);
  // A comparison says which nodes hold the other part.
  const auto compared =
      run("compare " + scenario("whatif/h100-tp-heavy.json") + " " + scenario("whatif/h100-tp-heavy-one-h800.json"));
  CHECK(compared.out.find("128 x H100-SXM5-80GB (nodes 0-0: H800-SXM5-80GB), Llama-3 70B") != std::string::npos);
  // A cap written in the topology holds for every node, whatever its part.
  const std::string capped = s + " --set topology.node.nvlink.bandwidth=100GBps";
  CHECK(run_json(capped + h800("[0, 3]"))["step_time_s"].get<double>() ==
        Approx(run_json(capped)["step_time_s"].get<double>()).epsilon(0.02));
}

TEST_CASE("on a full Infinity Fabric mesh (MI300X) folding is exact for tensor, context, expert and pipeline traffic")
{
  // Each folded GPU's peers in its node stand in over its own direct links; the interleaved schedule's pipeline
  // transfers overlap the mesh traffic, so the contention both put on the GPU must be counted both ways too.
  const std::string dense = scenario("whatif/llama3-70b-bf16-h100.json") +
                            " --set topology=mi300x --set gpus=16 --set plan.pp=2 --set plan.dp=1 --set plan.cp=2"
                            " --set plan.global_batch=16";
  const std::string moe = scenario("moe/qwen3-30b-a3b-h100.json") +
                          " --set topology=mi300x --set gpus=32 --set plan.pp=2 --set plan.global_batch=32";
  for (const std::string& s :
       {dense, dense + " --set plan.tp=2 --set plan.dp=2 --set plan.sequence_parallel=false --set plan.recompute=full",
        moe + " --set plan.ep=8", moe + " --set plan.ep=16"})
    check_folds_exactly(s);
}

TEST_CASE("the out folder gets the report, a Perfetto trace and the pipeline picture")
{
  const auto dir = test::scratch_dir() / "out";
  const auto r = run("run " + scenario("default.json") + " --out " + dir.string());
  REQUIRE(r.status == 0);
  const auto report = nlohmann::json::parse(std::ifstream(dir / "report.json"));
  CHECK(report["step_time_s"].get<double>() > 0);
  const auto trace = nlohmann::json::parse(std::ifstream(dir / "trace.json"));
  std::size_t complete = 0;
  for (const auto& e : trace["traceEvents"])
    complete += e["ph"] == "X";
  CHECK(complete > 100);
  std::ifstream svg(dir / "timeline.svg");
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  CHECK(text.rfind("<svg", 0) == 0);
  CHECK(text.find("stage 1") != std::string::npos);
}

TEST_CASE("the text view draws every stage's passes")
{
  const auto r = run("run " + scenario("default.json") + " --view pipeline");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("stage   0 |F0") != std::string::npos);
  CHECK(r.out.find("stage   1 |") != std::string::npos);
}

TEST_CASE("the text view keeps to its width and lists each stage's passes by the schedule's phases")
{
  const std::string four = " --set plan.pp=4 --set plan.tp=4 --set plan.global_batch=8 --view pipeline";
  const auto r = run("run " + scenario("default.json") + four + " --width 72");
  REQUIRE(r.status == 0);
  std::istringstream lines(r.out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("stage ", 0) == 0 && line.find('|') == 10) {
      CHECK(line.size() == 10 + 1 + 72 + 1);
      ++rows;
    }
  CHECK(rows == 4);
  // 1F1B with p=4, m=8 (Megatron-LM): stage s warms up with p-s-1 forwards, then m-(p-s-1) pairs, then cools down.
  CHECK(r.out.find("stage   0  3 forward | 5 pairs | 3 backward\n           F0 F1 F2 | F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 "
                   "| B5 B6 B7") != std::string::npos);
  CHECK(r.out.find("stage   3  0 forward | 8 pairs | 0 backward\n           - | F0 B0") != std::string::npos);
  const auto gpipe = run("run " + scenario("default.json") + four + " --set plan.schedule=gpipe");
  CHECK(gpipe.out.find("stage   0  8 forward | no steady state | 8 backward") != std::string::npos);
  const auto narrow = run("run " + scenario("default.json") + " --view pipeline --width 39");
  CHECK(narrow.status != 0);
}

TEST_CASE("tasks says whether the graph is folded, and --no-fold lists every GPU")
{
  const auto folded = run("tasks " + scenario("default.json"));
  REQUIRE(folded.status == 0);
  CHECK(folded.out.find("folded: 2 simulated GPUs, each standing for its class of 8 interchangeable GPUs") !=
        std::string::npos);
  const auto full = run("tasks " + scenario("default.json") + " --no-fold");
  REQUIRE(full.status == 0);
  CHECK(full.out.find("every GPU simulated (not folded)") != std::string::npos);
}

TEST_CASE("validate runs each published case and reports its error, per source and per GPU")
{
  const auto cases = (test::source_dir() / "tests" / "data" / "validation" / "quick.json").string();
  const auto summary = test::scratch_dir() / "gpus" / "summary.json";
  const auto r = run("validate " + cases + " --jobs 2 --format json --summary " + summary.string());
  INFO(r.out);
  REQUIRE(r.status == 0);
  // The summary of each GPU's accuracy, which reports quote; only a full run writes it.
  const auto written = nlohmann::json::parse(std::ifstream(summary));
  CHECK(written["cases_file"] == "quick.json");
  CHECK(written["gpus"]["A100-SXM4-80GB"]["preset"] == "a100-sxm4-80gb");
  CHECK(written["gpus"]["A100-SXM4-80GB"]["time"]["runs"].get<int>() > 0);
  CHECK(run("check " + summary.string()).status == 0);
  CHECK(run("validate " + cases + " --only sc21 --summary " + summary.string()).status == 1);
  // Several cases files run together: the project's own MoE cases beside these.
  const auto own = (test::source_dir() / "tests" / "data" / "validation" / "cases.json").string();
  const auto both = run("validate " + cases + " " + own + " --only qwen3-30b-a3b-fp8cs --format json");
  REQUIRE(both.status == 0);
  const auto moe = nlohmann::json::parse(both.out);
  CHECK(moe["comparisons"].dump().find("mbridge-25.11-h100-qwen3-30b-a3b-fp8cs-16gpu") != std::string::npos);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["failed"].empty());
  CHECK(j["unsupported"].empty()); // the FP8 case with context parallelism simulates too
  CHECK(std::any_of(j["comparisons"].begin(), j["comparisons"].end(), [](const auto& c) {
    return c.dump().find("megatron-examples-llama-fp8-LLAMA3-8B") != std::string::npos;
  }));
  CHECK(j["comparisons"].size() > 20);
  std::set<std::string> sources;
  for (const auto& s : j["by_source"])
    sources.insert(s["group"].get<std::string>());
  CHECK(sources.count("SC21 Table 1") == 1);
  CHECK(sources.count("MosaicML A100") == 1);
  for (const auto& c : j["comparisons"])
    CHECK(c["error"].get<double>() ==
          Approx(c["predicted"].get<double>() / c["measured"].get<double>() - 1.0).margin(1e-12));
}

TEST_CASE("validate --check exits with 4 when a source misses its target, and --readme rewrites only its section")
{
  const auto dir = test::scratch_dir();
  auto quick =
      nlohmann::json::parse(std::ifstream(test::source_dir() / "tests" / "data" / "validation" / "quick.json"));
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& c : quick["cases"])
    if (c["id"].get<std::string>().starts_with("korthikanti-22B-layer"))
      cases.push_back(c);
  const auto tight = test::write_json(
      dir / "tight.json", {{"cases", cases}, {"targets", {{{"source", "Korthikanti Table 4"}, {"median", 0.001}}}}});
  const auto loose = test::write_json(
      dir / "loose.json", {{"cases", cases}, {"targets", {{{"source", "Korthikanti Table 4"}, {"worst", 0.9}}}}});
  CHECK(run("validate " + tight.string() + " --check").status == 4);
  CHECK(run("validate " + loose.string() + " --check").status == 0);

  const auto readme = dir / "README.md";
  std::ofstream(readme) << "before\n<!-- validation:begin -->\nold\n<!-- validation:end -->\nafter\n";
  REQUIRE(run("validate " + loose.string() + " --readme " + readme.string()).status == 0);
  std::ifstream in(readme);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.starts_with("before\n<!-- validation:begin -->\n| source |"));
  CHECK(text.ends_with("<!-- validation:end -->\nafter\n"));
  CHECK(text.find("old") == std::string::npos);
  CHECK(text.find("Korthikanti Table 4") != std::string::npos);
}

TEST_CASE("a report says how close simtrain came to published runs on its GPU, or that none validates it")
{
  const auto covered = run("run " + scenario("default.json")); // dgx-a100
  INFO(covered.out);
  REQUIRE(covered.status == 0);
  CHECK(covered.out.find("\naccuracy: A100-SXM4-80GB step times ") != std::string::npos);
  CHECK(covered.out.find(" published runs") != std::string::npos);
  const auto json = run_json(scenario("default.json"));
  CHECK(json["validation"]["covered"] == true);
  CHECK(json["validation"]["gpu"] == "A100-SXM4-80GB");
  CHECK(json["validation"]["runs"].get<int>() > 0);
  CHECK(json["validation"]["worst_abs_error"].get<double>() >= json["validation"]["median_abs_error"].get<double>());
  CHECK(json["validation"]["memory"].is_object());

  const auto h20 = run("run " + scenario("default.json") + " --set topology=hgx-h20");
  REQUIRE(h20.status == 0);
  CHECK(h20.out.find("\naccuracy: H20-96GB: no published run validates this GPU; treat step times as estimates\n") !=
        std::string::npos);
  CHECK(run_json(scenario("default.json") + " --set topology=hgx-h20")["validation"]["covered"] == false);

  // A data folder without the summary, or with a broken one, still gives a report: it says so.
  const auto dir = test::scratch_dir();
  std::filesystem::create_directory_symlink(test::source_dir() / "models", dir / "models");
  std::filesystem::copy(test::source_dir() / "topologies", dir / "topologies",
                        std::filesystem::copy_options::recursive);
  std::filesystem::remove(dir / "topologies" / "gpus" / "validation" / "summary.json");
  const std::string elsewhere = " --data-dir " + dir.string();
  const auto missing = run("run " + scenario("default.json") + elsewhere);
  REQUIRE(missing.status == 0);
  CHECK(missing.out.find("\naccuracy: A100-SXM4-80GB: no validation summary") != std::string::npos);
  test::write_text(dir / "topologies" / "gpus" / "validation" / "summary.json", "{\"schema\": 1}");
  const auto broken = run_json(scenario("default.json") + elsewhere);
  CHECK(broken["validation"]["covered"] == false);
  CHECK(broken["validation"]["reason"].get<std::string>().starts_with("the validation summary is unreadable"));
  CHECK(run("check " + (dir / "topologies" / "gpus" / "validation" / "summary.json").string()).status == 1);
  CHECK(run("check " + (test::source_dir() / "topologies" / "gpus" / "validation" / "summary.json").string()).status ==
        0);
}

TEST_CASE("compare puts A100 and A800 side by side and blames the exposed TP communication")
{
  const auto r = run("compare " + scenario("whatif/a100-tp-heavy.json") + " " + scenario("whatif/a800-tp-heavy.json") +
                     " --format json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["b"]["step_time_s"].get<double>() > j["a"]["step_time_s"].get<double>());
  CHECK(j["contributions"][0]["part"] == "exposed TP communication");
  CHECK(j["explanation"].get<std::string>().starts_with("B is "));
  CHECK(j["validation"]["a"]["covered"] == true);
  CHECK(j["validation"]["b"]["gpu"] == "A800-SXM4-80GB");
  // One scenario under two values of a path.
  const auto same = run("compare " + scenario("default.json") + " --set plan.tp=8 --set plan.tp=4");
  CHECK(same.status == 0);
  CHECK(same.out.find("B - A") != std::string::npos);
  CHECK(same.out.find("\naccuracy: A100-SXM4-80GB ") != std::string::npos); // one line: the same GPU
  CHECK(run("compare " + scenario("default.json")).status == 1);
  // Two saved reports are compared as they are, without simulating again.
  const auto dir = test::scratch_dir();
  REQUIRE(run("run " + scenario("whatif/a100-tp-heavy.json") + " --out " + (dir / "a").string()).status == 0);
  REQUIRE(run("run " + scenario("whatif/a800-tp-heavy.json") + " --out " + (dir / "b").string()).status == 0);
  const auto saved = run("compare " + (dir / "a" / "report.json").string() + " " +
                         (dir / "b" / "report.json").string() + " --format json");
  REQUIRE(saved.status == 0);
  CHECK(nlohmann::json::parse(saved.out)["contributions"] == j["contributions"]);
  CHECK(run("compare " + (dir / "a" / "report.json").string() + " " + scenario("default.json")).status == 1);
}

TEST_CASE("compare keeps the GPU count when a side changes tp or pp, shows each side's setup and warns when they "
          "differ")
{
  const auto kept = run("compare " + scenario("default.json") + " --set plan.tp=4 --set plan.tp=8");
  REQUIRE(kept.status == 0);
  CHECK(kept.out.find("A: " + scenario("default.json") +
                      " --set plan.tp=4 --set plan.dp=2\n   16 x A100-SXM4-80GB, "
                      "Llama-2 13B, TP 4 x PP 2 x DP 2") != std::string::npos);
  CHECK(kept.out.find("WARNING") == std::string::npos);
  const auto grown = run("compare " + scenario("default.json") + " --set plan.dp=1 --set plan.dp=2");
  REQUIRE(grown.status == 0);
  CHECK(grown.out.find("WARNING: A and B differ in GPU count (16 vs 32): per-step numbers are not like for like") !=
        std::string::npos);
  const auto batch =
      run("compare " + scenario("default.json") + " --set plan.global_batch=16 --set plan.global_batch=32");
  CHECK(batch.out.find("WARNING: A and B differ in global batch (16 vs 32)") != std::string::npos);
}

TEST_CASE("a --set model path is read from the working directory, as the shell completes it")
{
  const auto dir = test::scratch_dir();
  test::write_json(dir / "mine.json", {{"schema", "model/v1"},
                                       {"name", "mine"},
                                       {"num_layers", 4},
                                       {"hidden_size", 1024},
                                       {"num_attention_heads", 16},
                                       {"vocab_size", 32000},
                                       {"seq_length", 4096}});
  const std::string command = "cd " + dir.string() + " && " + std::string(SIMTRAIN_BINARY) + " --log-level off run " +
                              scenario("default.json") + " --set model=mine.json --format json 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  std::array<char, 4096> buffer{};
  for (std::size_t n = 0; (n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0;)
    out.append(buffer.data(), n);
  INFO(out);
  REQUIRE(WEXITSTATUS(pclose(pipe)) == 0);
  CHECK(nlohmann::json::parse(out)["model"]["name"] == "mine");
}

TEST_CASE("a link class none of whose links was measured has no peak utilisation, not a zero")
{
  const std::string one_node = scenario("default.json") + " --allow-oom --set topology=pcie-4090 --set plan.pp=1"
                                                          " --set plan.precision=fp16";
  const auto j = run_json(one_node);
  CHECK(j["links"]["cpu"]["bytes"].get<double>() > 0); // carried traffic, but the CPU link is not measured
  CHECK(j["links"]["cpu"]["peak_util"].is_null());
  CHECK(j["links"]["pcie"]["peak_util"].get<double>() > 0);
  const auto text = run("run " + one_node);
  CHECK(text.out.find("     -  n0.cpu0--n0.cpu1") != std::string::npos);
}

TEST_CASE("memory quotes the scenario's description as the file's, before --set changed what it describes")
{
  const auto r = run("memory " + scenario("default.json") + " --set plan.tp=4 --set plan.dp=2");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("(as the file describes it, before --set plan.tp=4 --set plan.dp=2)") != std::string::npos);
  CHECK(run("memory " + scenario("default.json")).out.find("as the file describes it") == std::string::npos);
}

TEST_CASE("memory counts each optimizer algorithm's state and names the algorithms when given another")
{
  const auto state = [](const std::string& algorithm) {
    const auto r =
        run("memory " + scenario("default.json") + " --format json --set plan.optimizer_algorithm=" + algorithm);
    REQUIRE(r.status == 0);
    const auto stage = nlohmann::json::parse(r.out)["memory"]["per_stage"][0];
    return stage["optimizer_bytes"].get<double>() / stage["params"].get<double>();
  };
  CHECK(state("adam") == Approx(12.0));
  CHECK(state("adam_8bit") == Approx(4.0 + 2.0 + 8.0 / 256));
  const auto bad =
      run("memory " + scenario("default.json") + " --set plan.optimizer_algorithm=lamb", Streams::WITH_ERRORS);
  CHECK(bad.status == 1);
  CHECK(bad.out.find("/plan/optimizer_algorithm") != std::string::npos);
  CHECK(bad.out.find("adam, sgd, lion, adam_8bit, adafactor") != std::string::npos);
}

TEST_CASE("a QLoRA plan runs its adapters and dequantizations instead of the base's weight gradients")
{
  const std::string qlora = scenario("default.json") +
                            " --set plan.tp=1 --set plan.pp=1 --set plan.dp=16 --set plan.sequence_parallel=false"
                            " --set plan.lora_rank=16 --set plan.base_quantization=nf4";
  const auto r = run("kernels " + qlora + " --format json");
  REQUIRE(r.status == 0);
  const auto listed = nlohmann::json::parse(r.out);
  std::set<std::string> kernels;
  for (const auto& k : listed["kernels"])
    kernels.insert(k["kernel"].get<std::string>());
  CHECK(kernels.count("nf4 dequantize") == 1);
  CHECK(kernels.count("lora A") == 1);
  CHECK(kernels.count("lora B wgrad") == 1);
  CHECK(kernels.count("qkv wgrad") == 0);
  CHECK(kernels.count("logits wgrad") == 0);
  const auto report = run_json(qlora);
  CHECK(report["plan"]["lora_rank"] == 16);
  CHECK(report["plan"]["lora_targets"].size() == 7);
  const auto memory = run("memory " + qlora + " --format json");
  const auto stage = nlohmann::json::parse(memory.out)["memory"]["per_stage"][0];
  CHECK(stage["trainable_params"].get<double>() < 0.01 * stage["params"].get<double>());
  CHECK(run("memory " + qlora).out.find("LoRA rank 16 on 7 projections over an NF4 base (QLoRA)") != std::string::npos);
}

TEST_CASE("steps fp16's loss scaler skips train no tokens: tokens/s falls by their share and only fp16 skips")
{
  const std::string fp16 = scenario("default.json") + " --set plan.precision=fp16";
  const auto kept = run_json(fp16);
  const auto skipping = run_json(fp16 + " --set plan.skipped_steps=0.1");
  CHECK(skipping["step_time_s"].get<double>() == Approx(kept["step_time_s"].get<double>()));
  CHECK(skipping["tokens_per_s"].get<double>() == Approx(0.9 * kept["tokens_per_s"].get<double>()));
  const auto bf16 = run("run " + scenario("default.json") + " --set plan.skipped_steps=0.1", Streams::WITH_ERRORS);
  CHECK(bf16.status == 1);
  CHECK(bf16.out.find("only fp16's loss scaler skips steps") != std::string::npos);
}

TEST_CASE("fp32 and tf32 runs: full precision's memory and GEMM rates in the report, its missing fp32 table warned")
{
  const std::string fine_tune = scenario("finetune/full-8xa100.json");
  const auto bf16 = run_json(fine_tune);
  const auto fp32 = run_json(fine_tune + " --set plan.precision=fp32");
  const auto tf32 = run_json(fine_tune + " --set plan.precision=tf32");
  // On the CUDA cores a step takes many times the 16-bit one; TF32's tensor cores (8x the fp32 peak) win most back.
  CHECK(fp32["step_time_s"].get<double>() > 5.0 * bf16["step_time_s"].get<double>());
  CHECK(tf32["step_time_s"].get<double>() < fp32["step_time_s"].get<double>() / 4.0);
  CHECK(tf32["step_time_s"].get<double>() > bf16["step_time_s"].get<double>());
  const auto text = run("run " + fine_tune + " --set plan.precision=fp32", Streams::WITH_ERRORS);
  CHECK(text.status == 0);
  CHECK(text.out.find("no measured fp32 GEMM rate") != std::string::npos);
  CHECK(text.out.find("precision: fp32 throughout, GEMMs on the CUDA cores; MFU against the fp32 peak") !=
        std::string::npos);
  const auto tensor_cores = run("run " + fine_tune + " --set plan.precision=tf32 -q");
  CHECK(tensor_cores.out.find("MFU against the tf32 peak") != std::string::npos);
}

TEST_CASE("configurations that expand without end are refused in bounded memory: nested YAML aliases, "
          "interpolations copying interpolations, an alias inside the node it names")
{
  const auto dir = test::scratch_dir() / "expanding";
  std::filesystem::create_directories(dir);
  { // a "billion laughs": ten copies of ten copies ... nine levels deep, 10^10 values from 444 bytes
    std::ofstream aliases(dir / "aliases.yaml");
    aliases << "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
    for (char level = 'b'; level <= 'j'; ++level) {
      aliases << level << ": &" << level << " [";
      for (int k = 0; k < 10; ++k)
        aliases << (k ? ", *" : "*") << static_cast<char>(level - 1);
      aliases << "]\n";
    }
    aliases << "model: {bomb: *j}\n";
  }
  { // 200 values, each 16 copies of a 24 KB value: 77 MB of text from 30 KB
    std::ofstream copies(dir / "copies.yaml");
    copies << "model:\n  big: " << std::string(24000, 'x') << "\n";
    for (int k = 0; k < 200; ++k) {
      copies << "  v" << k << ": \"";
      for (int c = 0; c < 16; ++c)
        copies << "${.big}";
      copies << "\"\n";
    }
  }
  { // a node holding an alias to itself: nested without end (it had overflowed the stack)
    std::ofstream itself(dir / "itself.yaml");
    itself << "trainer:\n  devices: 8\nmodel: &m\n  inner: *m\n";
  }
#ifdef SIMTRAIN_SANITIZED
  const std::string cap;
#else
  const std::string cap = "ulimit -v 2000000; "; // 2 GB: the refusal needs a tenth of it
#endif
  for (const auto& [file, problem] :
       {std::pair{"aliases.yaml", "expands to too many values"}, std::pair{"copies.yaml", "resolves to too much text"},
        std::pair{"itself.yaml", "nests too deeply (an alias inside the node it names?)"}}) {
    const auto r =
        test::run_shell(cap + SIMTRAIN_BINARY + " import nemo " + (dir / file).string() + " --topology dgx-h100 2>&1");
    INFO(r.out);
    CHECK(r.status == 1);
    CHECK(r.out.find(problem) != std::string::npos);
  }
}

TEST_CASE("a folder given as the scenario is named as such")
{
  const auto r = run("run " + (test::source_dir() / "tests").string(), Streams::WITH_ERRORS);
  CHECK(r.status == 1);
  CHECK(r.out.find("cannot read file (found a folder; expected a JSON file)") != std::string::npos);
}

TEST_CASE("a sweep over topologies marks the scenario's own as the baseline, and leaves what it did not compute "
          "empty in CSV")
{
  const auto r = run("sweep " + scenario("default.json") + " --vary topology=hgx-a800,dgx-a100 --format csv");
  REQUIRE(r.status == 0);
  std::istringstream lines(r.out);
  std::string header;
  std::getline(lines, header);
  std::vector<std::string> names;
  std::istringstream header_cells(header);
  for (std::string cell; std::getline(header_cells, cell, ',');)
    names.push_back(cell);
  std::map<std::string, std::map<std::string, std::string>> rows; // topology -> column -> cell
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cells(line);
    std::map<std::string, std::string> row;
    std::string cell;
    for (const auto& name : names) {
      std::getline(cells, cell, ',');
      row[name] = cell;
    }
    rows[row["topology"]] = row;
  }
  REQUIRE(rows.size() == 2);
  CHECK(rows["dgx-a100"]["baseline"] == "true");
  CHECK(rows["hgx-a800"]["baseline"] == "false");
  CHECK(rows["dgx-a100"]["time_to_train_s"].empty()); // no --tokens: nothing to train
  CHECK(rows["dgx-a100"]["cost_to_train_usd"].empty());
  CHECK_FALSE(rows["dgx-a100"]["step_time_s"].empty());
}

TEST_CASE("sweep ranks layouts by tokens/s and reports those that do not fit, with by how much")
{
  const auto dir = test::scratch_dir();
  const auto r = run("sweep " + scenario("default.json") +
                     " --vary plan.tp=1,2,4,8 --vary plan.micro_batch=1,2 --jobs 2 --out " + dir.string());
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("sweep of ") != std::string::npos);
  // Each layout keeps the scenario's 16 GPUs: dp follows tp.
  CHECK(r.out.find("do not fit in GPU memory (closest: tp=2 micro_batch=2 dp=4, over by") != std::string::npos);
  CHECK(r.out.find("\n  accuracy: A100-SXM4-80GB step times ") != std::string::npos);
  const auto j = nlohmann::json::parse(std::ifstream(dir / "sweep.json"));
  REQUIRE(j["validation"].size() == 1); // every layout on the same GPU
  CHECK(j["validation"][0]["gpu"] == "A100-SXM4-80GB");
  REQUIRE(j["rows"].size() == 8);
  double previous = 1e300;
  int ranked = 0;
  for (const auto& row : j["rows"]) {
    if (row["outcome"] == "ranked") {
      ++ranked;
      CHECK(row["rank"] == ranked);
      CHECK(row["tokens_per_s"].get<double>() <= previous);
      previous = row["tokens_per_s"].get<double>();
      // The row's numbers are its own simulation's.
      std::string sets;
      for (const auto& o : row["overrides"])
        sets += " --set " + o.get<std::string>();
      const auto report = run_json(scenario("default.json") + sets);
      CHECK(row["step_time_s"].get<double>() == Approx(report["step_time_s"].get<double>()).epsilon(1e-12));
      CHECK(report["cluster"]["gpus"] == 16);
    } else {
      CHECK(row["outcome"] == "out_of_memory");
      CHECK(row["memory_over_bytes"].get<double>() > 0);
    }
  }
  CHECK(ranked >= 4);
  CHECK(std::filesystem::exists(dir / "sweep.csv"));
  // default.json is TP 8 with micro-batch 1: that row is the scenario's own layout, and the table says where it ranks.
  int baselines = 0;
  for (const auto& row : j["rows"])
    if (row["baseline"].get<bool>()) {
      ++baselines;
      CHECK(row["label"] == "tp=8 micro_batch=1 dp=1");
    }
  CHECK(baselines == 1);
  CHECK(r.out.find("the scenario's own layout (tp=8 micro_batch=1 dp=1)") != std::string::npos);
}

TEST_CASE("sweep --fold-only leaves out a layout whose groups spread unevenly over nodes, and --auto --vary narrows")
{
  // 24 GPUs on three DGX A100s: two stages of 12 GPUs put four of a data-parallel group's six GPUs on one node and
  // two on the next, which cannot fold; tensor parallelism over a whole node can.
  const std::string s = scenario("default.json") + " --set gpus=24 --set plan.pp=1 --set plan.dp=3" +
                        " --set plan.global_batch=12 --vary plan.tp:plan.pp:plan.dp=2:2:6,8:1:3 --format json -q";
  const auto all = nlohmann::json::parse(run("sweep " + s).out);
  const auto folding = nlohmann::json::parse(run("sweep " + s + " --fold-only").out);
  REQUIRE(all["rows"].size() == 2);
  REQUIRE(folding["rows"].size() == 2);
  for (const auto& row : all["rows"])
    CHECK(row["outcome"] == "ranked");
  for (const auto& row : folding["rows"])
    CHECK(row["outcome"] == (row["label"] == "tp=2 pp=2 dp=6" ? "not_folded" : "ranked"));
  // --auto with a --vary path it sets keeps the layouts with those values.
  const auto narrowed = nlohmann::json::parse(
      run("sweep " + scenario("default.json") + " --auto --vary plan.tp=4 --vary plan.pp=2 --format json -q").out);
  REQUIRE_FALSE(narrowed["rows"].empty());
  for (const auto& row : narrowed["rows"])
    CHECK(row["label"].get<std::string>().starts_with("tp=4 pp=2 "));
}

TEST_CASE("a sweep's bound never exceeds the simulated step and counts the pipeline's fill and drain")
{
  // Four stages and four micro-batches: the textbook bubble is 3/7 of the step, which a bound from the busiest
  // GPU's kernels alone would leave out (it would be under 0.6 of the step).
  const auto j = nlohmann::json::parse(
      run("sweep " + scenario("default.json") +
          " --set gpus=32 --set plan.pp=4 --set plan.dp=1 --set plan.global_batch=4"
          " --vary plan.schedule:plan.virtual_stages=1f1b:1,gpipe:1,interleaved:2 --vary plan.recompute=none,full"
          " --all --format json -q")
          .out);
  REQUIRE(j["rows"].size() == 6);
  for (const auto& row : j["rows"]) {
    INFO(row["label"]);
    REQUIRE(row["outcome"] == "ranked");
    CHECK(row["bound_s"].get<double>() <= row["step_time_s"].get<double>());
    CHECK(row["bound_s"].get<double>() > 0.7 * row["step_time_s"].get<double>());
  }
}

TEST_CASE("a MoE sweep's bound counts the all-to-alls its passes wait for and never exceeds the simulated step")
{
  // Expert-parallel groups of 8 (one node), 16 and 32 (two and four nodes, their all-to-alls over InfiniBand): from
  // kernels alone the bound would be 0.35 to 0.8 of the step.
  const auto j = nlohmann::json::parse(run("sweep " + scenario("moe/qwen3-30b-a3b-h100.json") +
                                           " --vary plan.ep=8,16,32 --set plan.pp=1 --set plan.dp=64 --all"
                                           " --format json -q")
                                           .out);
  REQUIRE(j["rows"].size() == 3);
  for (const auto& row : j["rows"]) {
    INFO(row["label"]);
    REQUIRE(row["outcome"] == "ranked");
    CHECK(row["bound_s"].get<double>() <= row["step_time_s"].get<double>());
    CHECK(row["bound_s"].get<double>() > 0.85 * row["step_time_s"].get<double>());
  }
}

TEST_CASE("a LoRA sweep's bound counts the adapters' optimizer step alone and never exceeds the simulated step")
{
  // Frozen weights: the optimizer updates the adapters only (a bound counting every parameter exceeded the step).
  const auto j = nlohmann::json::parse(run("sweep " + scenario("finetune/lora-1x4090.json") +
                                           " --vary plan.lora_rank=8,64 --vary plan.optimizer_algorithm=adam,adafactor"
                                           " --all --format json -q")
                                           .out);
  REQUIRE(j["rows"].size() == 4);
  for (const auto& row : j["rows"]) {
    INFO(row["label"]);
    REQUIRE(row["outcome"] == "ranked");
    // One GPU and no communication: the bound is the step itself, up to the order of a sum's rounding.
    CHECK(row["bound_s"].get<double>() <= row["step_time_s"].get<double>() * (1 + 1e-12));
    CHECK(row["bound_s"].get<double>() > 0.8 * row["step_time_s"].get<double>());
  }
}

TEST_CASE("a slow uplink above a leaf group slows the flows that leave it, and the critical path finds them")
{
  // Non-blocking tree of four leaf groups, one pipeline stage each: only the pipeline sends between stages climb
  // above the leaves, and those leaving or entering a slow leaf group cross its uplink at a quarter of its bandwidth.
  const std::string base = scenario("default.json") + " --set gpus=64 --set plan.global_batch=32 --set plan.pp=4" +
                           " --set plan.dp=2 --set topology.network.nodes_per_leaf=2";
  const auto even = run_json(base);
  const auto slow = run_json(base + R"( --set 'stragglers=[{"leaf": 1, "bandwidth": 0.25}]')");
  const auto far = run_json(base + R"( --set 'stragglers=[{"leaf": 3, "bandwidth": 0.25}]')");
  CHECK(slow["step_time_s"].get<double>() > even["step_time_s"].get<double>());
  CHECK(slow["folded"] == true); // the stage's GPUs are still interchangeable with each other
  REQUIRE(slow["stragglers"].size() == 1);
  CHECK(slow["stragglers"][0]["leaf"] == 1);
  CHECK(slow["stragglers"][0]["node"].is_null());
  CHECK(slow["stragglers"][0]["critical_path_s"].get<double>() > 0);
  CHECK(slow["stragglers"][0]["critical_path_s"].get<double>() <=
        slow["critical_path"]["transfer_by_category_s"]["pp"].get<double>());
  CHECK(far["step_time_s"].get<double>() > even["step_time_s"].get<double>());
  CHECK(far["stragglers"][0]["critical_path_s"].get<double>() > 0);
  const auto text = run("run " + base + R"( --set 'stragglers=[{"leaf": 1, "bandwidth": 0.25}]')").out;
  CHECK(text.find("straggler leaf group 1's uplink at 25.0% bandwidth") != std::string::npos);
}

TEST_CASE("a straggler GPU, NVLink port or NIC slows the step, turns folding off, and the critical path finds it")
{
  const std::string base = "run " + scenario("default.json") + " --format json";
  const auto even = nlohmann::json::parse(run(base).out);
  const auto slow_gpu =
      nlohmann::json::parse(run(base + R"( --set 'stragglers=[{"node": 1, "gpu": 2, "compute": 0.8}]')").out);
  const auto slow_nic =
      nlohmann::json::parse(run(base + R"( --set 'stragglers=[{"node": 1, "nic": 2, "bandwidth": 0.25}]')").out);
  const auto slow_nvlink =
      nlohmann::json::parse(run(base + R"( --set 'stragglers=[{"node": 1, "gpu": 2, "nvlink": 0.5}]')").out);
  CHECK(even["folded"] == true);
  const double step = even["step_time_s"].get<double>();
  // The path from the step's end back through what each task waited for last: kernels and flows, nothing else.
  const auto& path = even["critical_path"];
  CHECK(path["compute_s"].get<double>() + path["transfer_s"].get<double>() <= step * (1 + 1e-12));
  CHECK(path["compute_s"].get<double>() + path["transfer_s"].get<double>() > 0.95 * step);
  for (const auto* r : {&slow_gpu, &slow_nic, &slow_nvlink}) {
    CHECK((*r)["folded"] == false);
    CHECK((*r)["step_time_s"].get<double>() > step);
    REQUIRE((*r)["stragglers"].size() == 1);
    CHECK((*r)["stragglers"][0]["critical_path_s"].get<double>() > 0);
  }
  // Stage 1's slow GPU holds its tensor-parallel group back: its kernels are most of the path, 1/0.8 as long as an
  // even GPU's there.
  const auto& slowest = slow_gpu["critical_path"]["gpus"][0];
  CHECK(slowest["gpu"] == "n1.gpu2");
  CHECK(slow_gpu["stragglers"][0]["critical_path_s"].get<double>() == slowest["compute_s"].get<double>());
  CHECK(slowest["compute_s"].get<double>() == Approx(path["gpus"][0]["compute_s"].get<double>() / 0.8).epsilon(0.02));
  // Half an NVLink port: stage 1's tensor-parallel rings wait for it, and their flows hold the path longer.
  CHECK(slow_nvlink["critical_path"]["transfer_by_category_s"]["tp"].get<double>() >
        1.5 * path["transfer_by_category_s"]["tp"].get<double>());
  // A NIC at a quarter of its bandwidth: the pipeline sends through it take four times as long.
  CHECK(slow_nic["critical_path"]["transfer_by_category_s"]["pp"].get<double>() >
        3 * path["transfer_by_category_s"]["pp"].get<double>());
}

TEST_CASE("a memory cap on the task graph refuses a run above it, and a sweep runs side by side only what fits")
{
  const auto refused = run("run " + scenario("default.json") + " --memory 2MiB", Streams::WITH_ERRORS);
  CHECK(refused.status == 1);
  CHECK(refused.out.find("with 2.00 MiB available (--memory)") != std::string::npos);
  // Graphs of about 1.6 and 3.2 MiB: with 4 MiB the two cannot run together, so one waits for the other; with 1 MiB
  // neither fits at all.
  const std::string sweep = "sweep " + scenario("default.json") + " --vary plan.tp=4,8 -j 2 --format json -q";
  const auto roomy = nlohmann::json::parse(run(sweep + " --memory 4MiB").out);
  const auto tight = nlohmann::json::parse(run(sweep + " --memory 1MiB").out);
  REQUIRE(roomy["rows"].size() == 2);
  REQUIRE(tight["rows"].size() == 2);
  for (const auto& row : roomy["rows"])
    CHECK(row["outcome"] == "ranked");
  for (const auto& row : tight["rows"]) {
    CHECK(row["outcome"] == "failed");
    CHECK(row["reason"].get<std::string>().find("(--memory)") != std::string::npos);
  }
}

TEST_CASE("the bubble's formula is the schedule's own, and one stage has none")
{
  const std::string teaching = scenario("teaching/1f1b.json");
  CHECK(run_json(teaching)["bubble"]["formula"] == "(p-1)/(m+p-1)");
  const auto dualpipe = run_json(teaching + " --set plan.schedule=dualpipe");
  CHECK(dualpipe["bubble"]["formula"] == "DualPipe's (p-2)/(3m+p-2)");
  const double p = dualpipe["plan"]["pp"].get<double>();
  const double m = dualpipe["plan"]["global_batch"].get<double>() / dualpipe["plan"]["micro_batch"].get<double>() /
                   dualpipe["plan"]["dp"].get<double>();
  CHECK(dualpipe["bubble"]["theory"].get<double>() == Approx((p - 2) / (3 * m + p - 2)));
  const auto one_stage = run("run " + scenario("default.json") + " --set plan.pp=1 -q");
  CHECK(one_stage.out.find("one stage, no pipeline bubble") != std::string::npos);
  CHECK(one_stage.out.find("textbook") == std::string::npos);
}

TEST_CASE("an ideal pipeline's bubble is the textbook formula exactly on every stage")
{
  // Free transfers, no embedding or output layer, four identical stages of 8 layers: (p-1)/(m+p-1), or
  // (p-1)/(v*m+p-1) interleaved, with nothing left over.
  const auto j = nlohmann::json::parse(
      run("sweep " + scenario("teaching/1f1b.json") +
          " --set plan.ideal=true --vary plan.schedule:plan.virtual_stages=gpipe:1,1f1b:1,interleaved:2"
          " --vary plan.global_batch=4,8 --all --format json -q")
          .out);
  REQUIRE(j["rows"].size() == 6);
  for (const auto& row : j["rows"]) {
    INFO(row["label"]);
    REQUIRE(row["outcome"] == "ranked");
    const int m = row["microbatches"].get<int>();
    const int v = row["virtual_stages"].get<int>();
    const double formula = 3.0 / (v * m + 3.0);
    CHECK(row["bubble_theory"].get<double>() == Approx(formula).epsilon(1e-12));
    CHECK(row["bubble"].get<double>() == Approx(formula).epsilon(1e-9));
    // The sweep's bound leaves out what an ideal pipeline does not run (the output layer, any transfer).
    CHECK(row["bound_s"].get<double>() <= row["step_time_s"].get<double>());
  }
  const auto ideal =
      nlohmann::json::parse(run("run " + scenario("teaching/1f1b.json") + " --set plan.ideal=true --format json").out);
  for (const auto& stage : ideal["bubble"]["per_stage"])
    CHECK(stage.get<double>() == Approx(3.0 / 11.0).epsilon(1e-9));
  // Without the switch the same 1F1B step's bubble is larger: the output layer and the sends are not free.
  const auto real = nlohmann::json::parse(run("run " + scenario("teaching/1f1b.json") + " --format json").out);
  CHECK(real["bubble"]["mean"].get<double>() > real["bubble"]["theory"].get<double>() + 0.01);
}

TEST_CASE("with --log-format json every error and warning on stderr is one JSON object naming where it is")
{
  // The diagnostics are the lines that start with {"level": the report itself is pretty-printed JSON.
  const auto diagnostics = [](const std::string& out) {
    std::vector<nlohmann::json> found;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("{\"level\"", 0) == 0)
        found.push_back(nlohmann::json::parse(line));
    return found;
  };
  const auto bad = run("--log-format json run " + scenario("default.json") + " --set plan.tp=3", Streams::WITH_ERRORS);
  CHECK(bad.status == 1);
  const auto errors = diagnostics(bad.out);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0]["level"] == "error");
  CHECK(errors[0]["pointer"] == "/plan/tp");
  CHECK(errors[0]["set_by"] == "plan.tp=3");
  CHECK(errors[0]["message"].get<std::string>().starts_with("3 does not divide num_attention_heads=40"));

  const auto uneven = run("--log-format json run " + scenario("default.json") +
                              " --set plan.pp=3 --set plan.tp=2 --set gpus=48 --set plan.dp=8"
                              " --set plan.global_batch=64 --format json",
                          Streams::WITH_ERRORS);
  CHECK(uneven.status == 0);
  const auto warnings = diagnostics(uneven.out);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0]["level"] == "warning");
  CHECK(warnings[0]["pointer"] == "/plan/pp");

  const auto unknown = run("--log-format json run " + scenario("default.json") + " --bogus", Streams::WITH_ERRORS);
  CHECK(unknown.status == 1);
  REQUIRE(diagnostics(unknown.out).size() == 1);
  CHECK(diagnostics(unknown.out)[0]["message"] == "The following argument was not expected: --bogus");
}

TEST_CASE("a run shows how much of its graph it has replayed, unless it is quick or quiet")
{
  const std::string unfolded = "--log-format json run " + scenario("default.json") + " --no-fold --format json";
  const auto count = [](const std::string& out) {
    std::size_t n = 0;
    for (std::size_t at = out.find(R"({"level":"progress")"); at != std::string::npos;
         at = out.find(R"({"level":"progress")", at + 1))
      ++n;
    return n;
  };
  // 143K tasks: quick, so silent by default (a run shows progress after 3 s).
  CHECK(count(run(unfolded, Streams::WITH_ERRORS).out) == 0);
  setenv("SIMTRAIN_PROGRESS_AFTER", "0", 1);
  const auto shown = run(unfolded, Streams::WITH_ERRORS).out;
  CHECK(count(shown) == 2); // at 65,536 tasks (then at most one line per 10 s), and when done
  CHECK(shown.find("46% of 142.80K tasks replayed") != std::string::npos);
  CHECK(count(run(unfolded + " --quiet", Streams::WITH_ERRORS).out) == 0);
  unsetenv("SIMTRAIN_PROGRESS_AFTER");
}

TEST_CASE("a sweep in shards, merged, ranks as the whole sweep, and pruning keeps the top exact")
{
  const auto dir = test::scratch_dir();
  const std::string sweep = "sweep " + scenario("default.json") +
                            " --vary plan.tp=2,4,8 --vary plan.micro_batch=1,2 --vary plan.recompute=none,full "
                            "--jobs 2 --format json";
  const auto whole = run(sweep + " --top 3 --all");
  REQUIRE(whole.status == 0);
  for (int i = 1; i <= 3; ++i)
    REQUIRE(run(sweep + " --top 3 --shard " + std::to_string(i) + "/3 --out " + (dir / std::to_string(i)).string())
                .status == 0);
  const auto merged =
      run("merge " + (dir / "1" / "sweep.json").string() + " " + (dir / "2" / "sweep.json").string() + " " +
          (dir / "3" / "sweep.json").string() + " --format json --out " + (dir / "merged").string());
  INFO(merged.out);
  REQUIRE(merged.status == 0);
  const auto a = nlohmann::json::parse(whole.out)["rows"];
  const auto b = nlohmann::json::parse(merged.out)["rows"];
  REQUIRE(b.size() == a.size());
  for (int k = 0; k < 3; ++k) {
    CHECK(b[k]["label"] == a[k]["label"]);
    CHECK(b[k]["tokens_per_s"] == a[k]["tokens_per_s"]);
  }
  // With --top 1, layouts whose kernels alone cannot beat the best simulated one are skipped; the winner stays.
  const auto best = run(sweep + " --top 1");
  REQUIRE(best.status == 0);
  const auto c = nlohmann::json::parse(best.out)["rows"];
  CHECK(c[0]["label"] == a[0]["label"]);
  int pruned = 0;
  for (const auto& row : c)
    pruned += row["outcome"] == "not_simulated" ? 1 : 0;
  CHECK(pruned > 0);
  // A missing shard is named; a file that is not a sweep is refused.
  CHECK(run("merge " + (dir / "1" / "sweep.json").string()).status == 0);
  CHECK(run("merge " + scenario("default.json")).status == 1);
}

TEST_CASE("sweep refuses what it cannot do with exit code 1, and reports invalid layouts in its table")
{
  CHECK(run("sweep " + scenario("default.json")).status == 1);                     // nothing to vary
  CHECK(run("sweep " + scenario("default.json") + " --vary plan.tp").status == 1); // no values
  CHECK(run("sweep " + scenario("default.json") + " --vary plan.tp=8 --shard 3/2").status == 1);
  CHECK(run("sweep " + scenario("default.json") + " --vary plan.tp=8 --save-runs").status == 1); // no --out
  CHECK(run("sweep " + scenario("default.json") + " --vary plan.tpp=1,2").status == 1); // no valid layout at all
  const auto r = run("sweep " + scenario("default.json") + " --vary plan.tp=3,8 --format csv");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.find(",invalid,0,") != std::string::npos);
  CHECK(r.out.find(",ranked,1,") != std::string::npos);
}

TEST_CASE("the shipped what-if studies: the NVLink cap hurts TP-heavy layouts, not DP-heavy ones, and a layout wins "
          "most of it back")
{
  const auto tokens = [](const std::string& name) {
    return run_json(scenario("whatif/" + name))["tokens_per_s"].get<double>();
  };
  for (const std::string pair : {"a", "h"}) {
    INFO(pair + "100 vs " + pair + "800");
    const double tp_full = tokens(pair + "100-tp-heavy.json");
    const double tp_capped = tokens(pair + "800-tp-heavy.json");
    const double dp_full = tokens(pair + "100-dp-heavy.json");
    const double dp_capped = tokens(pair + "800-dp-heavy.json");
    const double recovered = tokens(pair + "800-tp-heavy-recovered.json");
    const double tp_loss = 1.0 - tp_capped / tp_full;
    const double dp_loss = 1.0 - dp_capped / dp_full;
    CHECK(tp_loss > 0.03);
    CHECK(dp_loss >= 0.0);
    CHECK(dp_loss < tp_loss / 2.0);
    // The recovered layout runs on the same capped GPUs and regains at least half of what the cap cost.
    CHECK((recovered - tp_capped) / (tp_full - tp_capped) > 0.5);
  }
}

TEST_CASE("the teaching study: bubbles follow the formula, 1F1B caps the activations, interleaving divides the bubble")
{
  const auto r = run("sweep " + scenario("teaching/1f1b.json") +
                     " --vary plan.schedule:plan.virtual_stages=gpipe:1,1f1b:1,interleaved:2"
                     " --vary plan.global_batch=1,4,8,16 --all --jobs 2 --format json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::map<std::string, nlohmann::json> rows; // "1f1b 8" -> row
  const auto sweep = nlohmann::json::parse(r.out);
  for (const auto& row : sweep["rows"]) {
    const auto& o = row["overrides"];
    rows[o[0].get<std::string>().substr(14) + " " + o[2].get<std::string>().substr(18)] = row;
  }
  REQUIRE(rows.size() == 12);
  CHECK(rows["interleaved 1"]["outcome"] == "invalid");
  for (const std::string m : {"1", "4", "8", "16"})
    for (const std::string schedule : {"gpipe", "1f1b"}) {
      const auto& row = rows[schedule + " " + m];
      INFO(schedule + " m=" + m);
      REQUIRE(row["outcome"] == "ranked");
      const double p = 4;
      CHECK(row["bubble_theory"].get<double>() == Approx((p - 1) / (std::stod(m) + p - 1)));
      CHECK(row["bubble"].get<double>() >= row["bubble_theory"].get<double>() - 0.005);
      CHECK(row["bubble"].get<double>() <= row["bubble_theory"].get<double>() + 0.06);
      if (m != "1")
        CHECK(rows["interleaved " + m]["bubble"].get<double>() < row["bubble"].get<double>());
    }
  const auto activations = [&rows](const std::string& key) { return rows[key]["activation_bytes"].get<double>(); };
  CHECK(activations("gpipe 16") / activations("gpipe 4") == Approx(4.0).epsilon(0.01));
  CHECK(activations("1f1b 16") == activations("1f1b 4"));
  CHECK(activations("gpipe 16") > 4.0 * activations("1f1b 16"));
}

TEST_CASE("a sweep ranked by tokens per dollar prefers the cheaper part where the cap costs little")
{
  const std::string sweep = "sweep " + scenario("whatif/a100-dp-heavy.json") +
                            " --vary topology=dgx-a100,hgx-a800 --jobs 2 --format json --rank-by ";
  const auto by_speed = run(sweep + "tokens_per_s");
  const auto by_cost = run(sweep + "tokens_per_usd");
  REQUIRE(by_speed.status == 0);
  REQUIRE(by_cost.status == 0);
  const auto speed = nlohmann::json::parse(by_speed.out);
  const auto cost = nlohmann::json::parse(by_cost.out);
  CHECK(speed["rows"][0]["label"] == "topology=dgx-a100");
  CHECK(cost["rows"][0]["label"] == "topology=hgx-a800");
  CHECK(cost["rows"][0]["tokens_per_usd"].get<double>() > cost["rows"][1]["tokens_per_usd"].get<double>());
}

TEST_CASE("simtrain kernels lists every kernel of a layer with its class, and their times add up to the layer's")
{
  const auto text = run("kernels " + scenario("sc21/table1-1.7b.json"));
  REQUIRE(text.status == 0);
  for (const char* expected : {"layer forward", "layernorm_apex", "softmax", "dropout", "bias_dropout_add",
                               "gemm wgrad", "output layer backward"})
    CHECK(text.out.find(expected) != std::string::npos);
  const auto r = run("kernels " + scenario("sc21/table1-1.7b.json") + " --format json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  double forward = 0;
  for (const auto& k : j["kernels"])
    if (k["program"] == "layer forward")
      forward += k["time_s"].get<double>();
  // The run report's layer forward (stage 0, no TP: no collectives in it) is the same kernels' time.
  const auto report = run_json(scenario("sc21/table1-1.7b.json"));
  CHECK(report["layer_s"]["forward"].get<double>() == Approx(forward).epsilon(1e-6));
  // Each kernel's launch on the host: eager PyTorch's measured cost per call of its class (hardware/host_launch).
  for (const auto& k : j["kernels"]) {
    const std::string cls = k["class"];
    const double launch = k["launch_s"];
    if (cls.rfind("gemm", 0) == 0)
      CHECK(launch == Approx(17.27e-6));
    else if (cls.rfind("layernorm", 0) == 0)
      CHECK(launch == Approx(13.1e-6));
    else if (cls.rfind("attention", 0) != 0)
      CHECK(launch == Approx(8.10e-6));
  }
  const auto free = nlohmann::json::parse(
      run("kernels " + scenario("sc21/table1-1.7b.json") + " --format json --set plan.host_launch=false").out);
  for (const auto& k : free["kernels"])
    CHECK(k["launch_s"] == 0.0);
}

TEST_CASE("validate --set applies to every converted case")
{
  const std::string cases = (test::source_dir() / "tests" / "data" / "validation" / "quick.json").string();
  const auto base = run("validate " + cases + " --only 1.7B --format json");
  const auto slow =
      run("validate " + cases + " --only 1.7B --format json --set topology.node.gpu.sustained_compute_ratio=0.5");
  REQUIRE(base.status == 0);
  REQUIRE(slow.status == 0);
  const auto predicted = [](const std::string& out) {
    const auto report = nlohmann::json::parse(out);
    for (const auto& c : report["comparisons"])
      if (c["primary"] == true)
        return c["predicted"].get<double>();
    return 0.0;
  };
  CHECK(predicted(slow.out) < 0.7 * predicted(base.out));
}

TEST_CASE("an expert-parallel run folds exactly, inside a node and across nodes")
{
  for (const char* ep : {"8", "16"}) {
    INFO("ep " << ep);
    const std::string s = scenario("moe/qwen3-30b-a3b-h100.json") + " --set plan.ep=" + ep;
    const auto folded = run_json(s);
    const auto full = run_json(s + " --no-fold");
    CHECK(folded["step_time_s"].get<double>() == Approx(full["step_time_s"].get<double>()).epsilon(1e-9));
    CHECK(folded["breakdown_s"]["ep_exposed"].get<double>() ==
          Approx(full["breakdown_s"]["ep_exposed"].get<double>()).epsilon(1e-9));
    CHECK(folded["breakdown_s"]["ep_exposed"].get<double>() > 0);
  }
}

TEST_CASE("an all-to-all that leaves the node and a busier expert both lengthen a MoE step")
{
  const std::string s = scenario("moe/qwen3-30b-a3b-h100.json");
  const auto inside = run_json(s);
  const auto across = run_json(s + " --set plan.ep=16");
  CHECK(across["breakdown_s"]["ep_exposed"].get<double>() > 2.0 * inside["breakdown_s"]["ep_exposed"].get<double>());
  const auto busy = run_json(s + " --set plan.expert_load_imbalance=2");
  CHECK(busy["step_time_s"].get<double>() > inside["step_time_s"].get<double>());
  CHECK(busy["breakdown_s"]["compute"].get<double>() > inside["breakdown_s"]["compute"].get<double>());
  // Imbalance costs time, not work: the same model FLOPs, counted on the active parameters.
  CHECK(busy["model_flops_per_step"] == inside["model_flops_per_step"]);
  CHECK(inside["model"]["active_params"].get<double>() < 0.15 * inside["model"]["params"].get<double>());
}

TEST_CASE("a MoE run's trace puts the all-to-alls on their own ep comm thread")
{
  const auto dir = test::scratch_dir() / "out";
  const auto r = run("run " + scenario("moe/qwen3-30b-a3b-h100.json") + " --out " + dir.string());
  REQUIRE(r.status == 0);
  const auto trace = nlohmann::json::parse(std::ifstream(dir / "trace.json"));
  int ep_thread = -1;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "ep comm")
      ep_thread = e["tid"].get<int>();
  REQUIRE(ep_thread >= 0);
  std::size_t all_to_alls = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["tid"] == ep_thread)
      all_to_alls += e["name"].get<std::string>().find("all-to-all") != std::string::npos ? 1 : 0;
  CHECK(all_to_alls > 0);
}

TEST_CASE("FP8 shortens a Llama-3 70B step on H100 against bf16, for the same model FLOPs, and folds exactly")
{
  const auto bf16 = run_json(scenario("whatif/llama3-70b-bf16-h100.json"));
  const std::string fp8_scenario = scenario("whatif/llama3-70b-fp8-h100.json") + " --set plan.global_batch=32";
  const auto fp8 = run_json(fp8_scenario);
  const auto fp8_full = run_json(fp8_scenario + " --no-fold");
  CHECK(fp8["step_time_s"].get<double>() == Approx(fp8_full["step_time_s"].get<double>()).epsilon(1e-9));
  const auto fp8_whole = run_json(scenario("whatif/llama3-70b-fp8-h100.json"));
  CHECK(fp8_whole["step_time_s"].get<double>() < bf16["step_time_s"].get<double>());
  CHECK(fp8_whole["breakdown_s"]["compute"].get<double>() < bf16["breakdown_s"]["compute"].get<double>());
  CHECK(fp8_whole["model_flops_per_step"] == bf16["model_flops_per_step"]);
  CHECK(fp8_whole["plan"]["fp8_recipe"] == "delayed");
  // MFU is measured against the bf16 peak for both, so it rises with the step's speed.
  CHECK(fp8_whole["mfu"].get<double>() / bf16["mfu"].get<double>() ==
        Approx(bf16["step_time_s"].get<double>() / fp8_whole["step_time_s"].get<double>()));
}

TEST_CASE("a context-parallel run folds exactly, for the ring and the all-to-all")
{
  for (const char* kind : {"ring", "all_to_all"}) {
    INFO(kind);
    const std::string s = scenario("whatif/llama3-70b-bf16-h100.json") +
                          " --set plan.cp=2 --set plan.dp=1 --set plan.global_batch=16 --set plan.cp_kind=" + kind;
    const auto folded = run_json(s);
    const auto full = run_json(s + " --no-fold");
    CHECK(folded["step_time_s"].get<double>() == Approx(full["step_time_s"].get<double>()).epsilon(1e-9));
    CHECK(folded["comm_s"]["cp"].get<double>() > 0);
    CHECK(folded["plan"]["cp"] == 2);
  }
}

TEST_CASE("overlapping one micro-batch's all-to-alls with another's compute shortens a MoE step whose experts talk "
          "across nodes, and the GPU's busy time grows only by the contention")
{
  // Qwen3-30B-A3B with its 16-way expert-parallel group over two DGX H100s: every dispatch and combine crosses the
  // NICs; no pipeline, so each backward pass runs beside the next micro-batch's forward.
  const auto file = test::write_json(
      test::scratch_dir() / "overlap.json",
      test::scenario_json(
          "qwen3-30b-a3b",
          {{"dp", 16}, {"ep", 16}, {"global_batch", 64}, {"recompute", "full"}, {"distributed_optimizer", true}},
          "dgx-h100"));
  const auto plain = run("run " + file.string() + " --format json");
  const auto overlapped = run("run " + file.string() + " --format json --set plan.moe_a2a_overlap=true");
  REQUIRE(plain.status == 0);
  REQUIRE(overlapped.status == 0);
  const auto a = nlohmann::json::parse(plain.out);
  const auto b = nlohmann::json::parse(overlapped.out);
  CHECK(b["plan"]["moe_a2a_overlap"] == true);
  CHECK(b["step_time_s"].get<double>() < 0.9 * a["step_time_s"].get<double>());
  CHECK(b["breakdown_s"]["ep_exposed"].get<double>() < 0.8 * a["breakdown_s"]["ep_exposed"].get<double>());
  const double busy = a["breakdown_s"]["compute"].get<double>();
  CHECK(b["breakdown_s"]["compute"].get<double>() >= busy);
  CHECK(b["breakdown_s"]["compute"].get<double>() <= 1.2 * busy);
}

TEST_CASE("DualPipe and DualPipeV shrink the teaching pipeline's bubble near their formula and fold exactly")
{
  const std::string s = scenario("teaching/1f1b.json") + " --set plan.global_batch=16";
  const auto one = run_json(s);
  for (const char* schedule : {"dualpipe", "dualpipev"}) {
    INFO(schedule);
    const auto folded = run_json(s + " --set plan.schedule=" + schedule);
    const auto full = run_json(s + " --set plan.schedule=" + schedule + " --no-fold");
    CHECK(folded["step_time_s"].get<double>() == Approx(full["step_time_s"].get<double>()).epsilon(1e-9));
    const double bubble = folded["bubble"]["mean"].get<double>();
    const double theory = folded["bubble"]["theory"].get<double>();
    CHECK(theory == Approx(std::string(schedule) == "dualpipe" ? 2.0 / 50.0 : 3.0 / 51.0));
    CHECK(bubble >= theory - 0.005);
    CHECK(bubble <= theory + 0.06);
    CHECK(bubble < 0.6 * one["bubble"]["mean"].get<double>());
    CHECK(folded["step_time_s"].get<double>() < one["step_time_s"].get<double>());
    // The same layer, measured on passes that ran alone.
    CHECK(folded["layer_s"]["forward"].get<double>() == Approx(one["layer_s"]["forward"].get<double>()));
  }
}

TEST_CASE("ZeRO-Offload: the optimizer's state on the host with its verdict, the GPU waiting for the CPU's update")
{
  const std::string offload = (test::source_dir() / "scenarios/finetune/offload-8x4090-zero2.json").string();
  const auto report = run_json(offload);
  CHECK(report["plan"]["offload_optimizer"] == "cpu");
  CHECK(report["breakdown_s"]["optimizer"].get<double>() == 0); // no optimizer kernel on the GPU
  CHECK(report["breakdown_s"]["offload_exposed"].get<double>() > 0);
  CHECK(report["memory"]["host"]["node_bytes"].get<double>() > 0);
  const auto on_gpu = run_json(offload + " --set plan.offload_optimizer=none --set plan.zero_stage=3");
  CHECK(on_gpu["memory"]["host"]["node_bytes"].get<double>() == 0);
  CHECK(run("memory " + offload).out.find("host     offloaded") != std::string::npos);
  // A host too small for the offloaded state is refused like an HBM that is too small, unless --allow-oom.
  const std::string small = offload + " --set topology.node.host.memory=64GB";
  const auto refused = run("run " + small, Streams::WITH_ERRORS);
  CHECK(refused.status == 1);
  CHECK(refused.out.find("does not fit in host memory") != std::string::npos);
  const auto allowed = run("run " + small + " --allow-oom --quiet");
  CHECK(allowed.status == 0);
  CHECK(allowed.out.find("OUT OF HOST MEMORY") != std::string::npos);
  // The trace shows the host's work on its own track.
  const auto trace_dir = test::scratch_dir() / "offload-trace";
  REQUIRE(run("run " + offload + " --quiet --out " + trace_dir.string()).status == 0);
  std::ifstream in(trace_dir / "trace.json");
  const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(trace.find("\"cpu optimizer\"") != std::string::npos);
  CHECK(trace.find("host (offload)") != std::string::npos);
}

TEST_CASE("ZeRO-Infinity to NVMe: the drives' tier in memory and in the report, the swaps in the exposed offload")
{
  const std::string offload =
      (test::source_dir() / "scenarios/finetune/offload-8x4090-zero2.json").string() + " --set plan.zero_stage=3";
  const auto cpu = run_json(offload);
  // Sub-groups of 1e8 parameters, as DeepSpeed's NVMe examples set them: the swapper's four buffers stay small.
  const auto nvme = run_json(offload + " --set plan.offload_optimizer=nvme --set plan.nvme_sub_group=100000000");
  CHECK(nvme["plan"]["offload_optimizer"] == "nvme");
  CHECK(nvme["memory"]["nvme"]["node_bytes"].get<double>() > 0);
  CHECK(cpu["memory"]["nvme"]["node_bytes"].get<double>() == 0);
  CHECK(nvme["memory"]["host"]["node_bytes"].get<double>() < cpu["memory"]["host"]["node_bytes"].get<double>());
  // The state crosses the drives twice a step: the wait grows by far more than the CPU's update.
  CHECK(nvme["breakdown_s"]["offload_exposed"].get<double>() > 2 * cpu["breakdown_s"]["offload_exposed"].get<double>());
  // And the critical path runs through the drives and the CPUs: the host's share is on it.
  CHECK(nvme["critical_path"]["host_s"].get<double>() > cpu["critical_path"]["host_s"].get<double>());
  CHECK(nvme["critical_path"]["host_s"].get<double>() + nvme["critical_path"]["transfer_s"].get<double>() +
            nvme["critical_path"]["compute_s"].get<double>() <=
        nvme["step_time_s"].get<double>() * (1 + 1e-9));
  CHECK(run("memory " + offload + " --set plan.offload_optimizer=nvme").out.find("nvme     swapped") !=
        std::string::npos);
  // No drives: one line naming them.
  const auto none = run("run " + offload + " --set plan.offload_optimizer=nvme --set topology.node.host.nvme=null",
                        Streams::WITH_ERRORS);
  CHECK(none.status == 1);
  CHECK(none.out.find("has no NVMe drives to offload to") != std::string::npos);
}

TEST_CASE("every cost line says what its price counts, and compare and sweep warn when two prices count different "
          "things")
{
  // The DGX H100 and DGX H800 are priced as whole nodes with their rated power; a box of RTX 4090s as its GPUs alone.
  const auto h800 = run_json(scenario("whatif/h800-tp-heavy.json"));
  CHECK(h800["cost"]["basis"] == "node price, node power");
  const auto box = run_json(scenario("finetune/full-8x4090-zero3.json"));
  CHECK(box["cost"]["basis"] == "GPU price, GPU power");
  const auto text = run("run " + scenario("finetune/full-8x4090-zero3.json"));
  CHECK(text.out.find("host left out") != std::string::npos);

  const std::string basis_warning = "priced on different bases";
  const auto alike =
      run("compare " + scenario("whatif/h100-tp-heavy.json") + " " + scenario("whatif/h800-tp-heavy.json"),
          Streams::WITH_ERRORS);
  CHECK(alike.out.find(basis_warning) == std::string::npos);
  const auto unlike =
      run("compare " + scenario("finetune/full-8xa100.json") + " " + scenario("finetune/full-8x4090-zero3.json"),
          Streams::WITH_ERRORS);
  CHECK(unlike.out.find(basis_warning) != std::string::npos);
  const auto sweep =
      run("sweep " + scenario("finetune/full-8x4090-zero3.json") + " --vary topology=pcie-4090,dgx-a100 -q",
          Streams::WITH_ERRORS);
  CHECK(sweep.out.find(basis_warning) != std::string::npos);
}

TEST_CASE("the CUDA context is taken from the HBM, and a memory headroom is honoured by run, check, memory and sweep")
{
  const auto fits = run_json(scenario("default.json"));
  CHECK(fits["memory"]["cuda_context_bytes"].get<double>() == 400e6);
  CHECK(fits["memory"]["capacity_bytes"].get<double>() == Approx(80.0 * (1ULL << 30) - 400e6));
  // The 2021 generation loaded every kernel with the context.
  const auto old = run_json(scenario("default.json") + " --set plan.software=megatron-lm-2021");
  CHECK(old["memory"]["cuda_context_bytes"].get<double>() == 1000e6);
  // Default's busiest GPU peaks at 16.8 GiB: 70 GiB of headroom leaves it 9.6.
  const std::string tight = scenario("default.json") + " --memory-headroom 70GiB";
  const auto refused = run("run " + tight, Streams::WITH_ERRORS);
  CHECK(refused.status == 1);
  CHECK(refused.out.find("(HBM less the CUDA context and 70.00 GiB of headroom)") != std::string::npos);
  CHECK(run("check " + tight, Streams::WITH_ERRORS).status == 1);
  CHECK(run("memory " + tight).out.find("OUT OF MEMORY") != std::string::npos);
  const auto sweep = nlohmann::json::parse(
      run("sweep " + scenario("default.json") + " --vary plan.memory_headroom=1GiB,70GiB --format json -q").out);
  REQUIRE(sweep["rows"].size() == 2);
  for (const auto& row : sweep["rows"])
    CHECK(row["outcome"] == (row["label"] == "memory_headroom=70GiB" ? "out_of_memory" : "ranked"));
}

TEST_CASE("the command line as people type it: one-line option errors, --data-dir before the command, the input "
          "named, a link loop said")
{
  // An option CLI11 refuses: one line, "error:" first, as every other error.
  const auto range = run("sweep " + scenario("default.json") + " --vary plan.tp=1,2 --jobs 0", Streams::WITH_ERRORS);
  CHECK(range.status == 1);
  CHECK(range.out.starts_with("error: --jobs: "));
  CHECK(std::count(range.out.begin(), range.out.end(), '\n') == 1);
  // --data-dir before the command name is the command's.
  const auto before = run("--data-dir " + test::source_dir().string() + " run " + scenario("default.json") + " --quiet",
                          Streams::WITH_ERRORS);
  CHECK(before.status == 0);
  // A clone's own presets: the working directory when it holds models/ and topologies/gpus/.
  const auto clone = test::scratch_dir() / "clone";
  std::filesystem::create_directories(clone / "models");
  std::filesystem::copy(test::source_dir() / "topologies", clone / "topologies",
                        std::filesystem::copy_options::recursive);
  std::filesystem::copy(test::source_dir() / "models" / "llama2-7b.json", clone / "models" / "my-model.json");
  nlohmann::json s = test::scenario_json("my-model", {{"tp", 8}}, "dgx-a100");
  test::write_json(clone / "mine.json", s);
  const auto found =
      test::run_shell("cd " + clone.string() + " && " + SIMTRAIN_BINARY + " --log-level debug check mine.json 2>&1");
  CHECK(found.status == 0);
  CHECK(found.out.find("presets from " + clone.string()) != std::string::npos);
  // A symbolic link to itself cannot be followed: not "no such file".
  const auto loop = test::scratch_dir() / "loop.json";
  std::filesystem::create_symlink(loop, loop);
  const auto looped = run("run " + loop.string(), Streams::WITH_ERRORS);
  CHECK(looped.status == 1);
  CHECK(looped.out.find("too many levels of symbolic links") != std::string::npos);
  // An imported scenario that cannot run is named by the configuration it came from.
  const auto config = test::write_json(
      test::scratch_dir() / "ds.json",
      {{"train_micro_batch_size_per_gpu", 64}, {"zero_optimization", {{"stage", 0}}}, {"bf16", {{"enabled", true}}}});
  const auto imported = run("import deepspeed " + config.string() + " --model llama2-70b --topology dgx-a100 --gpus 8",
                            Streams::WITH_ERRORS);
  CHECK(imported.status == 1);
  CHECK(imported.out.find("error: " + config.string() + ": the scenario imported from it, at /plan") !=
        std::string::npos);
  CHECK(imported.out.find("<standard output>") == std::string::npos);
}

TEST_CASE("sweep --allow-oom simulates the layouts that do not fit, with by how much")
{
  const std::string sweep =
      "sweep " + scenario("default.json") + " --vary plan.memory_headroom=1GiB,70GiB" + " --format json -q";
  const auto refused = nlohmann::json::parse(run(sweep).out);
  const auto allowed = nlohmann::json::parse(run(sweep + " --allow-oom").out);
  REQUIRE(allowed["rows"].size() == 2);
  for (const auto& row : allowed["rows"]) {
    CHECK(row["outcome"] == "ranked");
    if (row["label"] == "memory_headroom=70GiB")
      CHECK(row["reason"].get<std::string>().find("over by") != std::string::npos);
  }
  int oom = 0;
  for (const auto& row : refused["rows"])
    oom += row["outcome"] == "out_of_memory" ? 1 : 0;
  CHECK(oom == 1);
}

TEST_CASE("a sweep stopped by SIGTERM ends its simulations and writes what it has")
{
  // A thousand simulations one at a time (some 30 ms each, forked; the price changes nothing simulated): stopped
  // after a few seconds, the sweep ends the simulation running, marks the rest interrupted, ranks those it finished
  // and writes sweep.json (exit 128 + 15).
  const auto dir = test::scratch_dir() / "stopped";
  std::string prices;
  for (int p = 1; p <= 1000; ++p)
    prices += (p > 1 ? "," : "") + std::to_string(p);
#ifdef SIMTRAIN_SANITIZED
  const std::string wait = "12"; // the sanitized binary starts and simulates several times slower
#else
  const std::string wait = "4";
#endif
  const auto r =
      test::run_shell(std::string("(") + SIMTRAIN_BINARY + " --log-level off sweep " + scenario("default.json") +
                      " --vary cost.usd_per_gpu_hour=" + prices + " --all --jobs 1 -q --out " + dir.string() +
                      " >/dev/null 2>&1 & pid=$!; sleep " + wait + "; kill -TERM $pid; wait $pid; echo $?)");
  CHECK(r.out == "143\n");
  const auto j = nlohmann::json::parse(std::ifstream(dir / "sweep.json"));
  int ranked = 0;
  int interrupted = 0;
  for (const auto& row : j["rows"]) {
    ranked += row["outcome"] == "ranked" ? 1 : 0;
    interrupted += row["outcome"] == "interrupted" ? 1 : 0;
  }
  CHECK(ranked >= 1);
  CHECK(interrupted >= 1);
  CHECK(ranked + interrupted == 1000);
}

TEST_CASE("a bf16 ZeRO-3 plan reduces 16-bit gradients under DeepSpeed, fp32 ones under Megatron, and the report "
          "names the framework")
{
  const std::string plan = scenario("finetune/full-8x4090-zero3.json");
  const auto megatron = run_json(plan + " --set plan.framework=megatron");
  const auto deepspeed = run_json(plan + " --set plan.framework=deepspeed");
  CHECK(megatron["plan"]["software"]["framework"] == "megatron");
  CHECK(deepspeed["plan"]["software"]["framework"] == "deepspeed");
  CHECK(deepspeed["plan"]["software"]["generation"] == "deepspeed");
  // Half the bytes through the host-staged PCIe collectives of eight GeForce cards: a shorter step.
  CHECK(deepspeed["comm_s"]["dp"].get<double>() < 0.75 * megatron["comm_s"]["dp"].get<double>());
  CHECK(deepspeed["step_time_s"].get<double>() < megatron["step_time_s"].get<double>());
  const auto text = run("run " + plan);
  CHECK(text.out.find("software: DeepSpeed v0.12-v0.17 under a PyTorch model (framework deepspeed, software "
                      "deepspeed): gradients in bf16") != std::string::npos);
}

TEST_CASE("sweep finds the scenario's own layout by what it resolves to, a bandwidth spelt out at its default too")
{
  const auto r = run("sweep " + scenario("teaching/1f1b.json") +
                     " --vary topology.node.nvlink.bandwidth=100GBps,300GBps --format json -q");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  int baselines = 0;
  for (const auto& row : j["rows"])
    if (row["baseline"].get<bool>()) {
      ++baselines;
      CHECK(row["label"] == "bandwidth=300GBps");
    }
  CHECK(baselines == 1);
}

TEST_CASE("an AMD cluster's GPU links are Infinity Fabric in the text report and in report.json's label")
{
  const std::string s = scenario("whatif/buy-llama3-405b-mi300x.json");
  const auto text = run("run " + s);
  CHECK(text.out.find("Infinity Fabric") != std::string::npos);
  CHECK(text.out.find("NVLink") == std::string::npos);
  const auto j = run_json(s);
  CHECK(j["links"]["nvlink"]["label"] == "Infinity Fabric");
  CHECK(run_json(scenario("whatif/buy-llama3-405b-h100.json"))["links"]["nvlink"]["label"] == "NVLink");
}

TEST_CASE("a sweep's simulations forked from it give what fresh simtrain processes give")
{
  // Each child a fork of the sweep (the default) or a fresh simtrain (SIMTRAIN_CHILD_EXEC=1): the same rows, whatever
  // the sweep's own settings (its --log-format json is not its children's).
  const std::string sweep = " --log-format json sweep " + scenario("default.json") +
                            " --vary plan.tp=1,2,4 --vary plan.micro_batch=1,2 --all --jobs 2 -q --format json";
  const auto forked = run(sweep);
  const auto fresh = test::run_shell("SIMTRAIN_CHILD_EXEC=1 " + std::string(SIMTRAIN_BINARY) + " --log-level off" +
                                     sweep + " 2>/dev/null");
  REQUIRE(forked.status == 0);
  REQUIRE(fresh.status == 0);
  const auto a = nlohmann::json::parse(forked.out);
  const auto b = nlohmann::json::parse(fresh.out);
  REQUIRE(a["rows"].size() == b["rows"].size());
  int simulated = 0;
  for (std::size_t i = 0; i < a["rows"].size(); ++i) {
    INFO(a["rows"][i]["label"]);
    CHECK(a["rows"][i]["label"] == b["rows"][i]["label"]);
    CHECK(a["rows"][i]["outcome"] == b["rows"][i]["outcome"]);
    CHECK(a["rows"][i]["step_time_s"] == b["rows"][i]["step_time_s"]);
    CHECK(a["rows"][i]["reason"] == b["rows"][i]["reason"]);
    simulated += a["rows"][i]["outcome"] == "ranked" ? 1 : 0;
  }
  CHECK(simulated >= 3);
}

TEST_CASE("a sweep killed outright leaves sweep.json as it stood, and --resume simulates only what it had not")
{
  // SIGKILL cannot be caught: what is left is the sweep.json written once screening was done and every few seconds
  // after. Forty simulations one at a time, killed as soon as the file is there.
  const auto dir = test::scratch_dir() / "killed";
  std::string prices;
  for (int p = 1; p <= 40; ++p)
    prices += (p > 1 ? "," : "") + std::to_string(p);
  const std::string sweep = std::string(SIMTRAIN_BINARY) + " --log-level off sweep " + scenario("default.json") +
                            " --vary cost.usd_per_gpu_hour=" + prices + " --all --jobs 1 -q";
  const auto killed = test::run_shell("(" + sweep + " --out " + dir.string() + " >/dev/null 2>&1 & pid=$!; " +
                                      "for i in $(seq 600); do [ -f " + (dir / "sweep.json").string() +
                                      " ] && break; sleep 0.05; done; kill -KILL $pid; wait $pid; echo $?)");
  CHECK(killed.out == "137\n");
  const auto left = nlohmann::json::parse(std::ifstream(dir / "sweep.json"));
  CHECK(left["digest"].get<std::string>().size() == 16);
  int ranked = 0;
  for (const auto& row : left["rows"]) {
    CHECK((row["outcome"] == "ranked" || row["outcome"] == "interrupted"));
    ranked += row["outcome"] == "ranked" ? 1 : 0;
  }
  CHECK(ranked < 40);
  // Resumed: what was ranked is taken, the rest simulated; the result is the uninterrupted sweep's.
  const auto resumed = run(sweep.substr(sweep.find(" sweep ")) + " --resume " + dir.string() + " --format json");
  REQUIRE(resumed.status == 0);
  const auto whole = run(sweep.substr(sweep.find(" sweep ")) + " --format json");
  REQUIRE(whole.status == 0);
  const auto a = nlohmann::json::parse(resumed.out);
  const auto b = nlohmann::json::parse(whole.out);
  int taken = 0;
  REQUIRE(a["rows"].size() == b["rows"].size());
  for (std::size_t i = 0; i < a["rows"].size(); ++i) {
    CHECK(a["rows"][i]["label"] == b["rows"][i]["label"]);
    CHECK(a["rows"][i]["rank"] == b["rows"][i]["rank"]);
    CHECK(a["rows"][i]["step_time_s"] == b["rows"][i]["step_time_s"]);
    taken += a["rows"][i]["resumed"].get<bool>() ? 1 : 0;
  }
  CHECK(taken == ranked);
  // Another scenario's sweep (here: another --set) is refused, naming the file.
  const auto other = run(sweep.substr(sweep.find(" sweep ")) + " --set plan.micro_batch=2 --resume " + dir.string(),
                         Streams::WITH_ERRORS);
  CHECK(other.status == 1);
  CHECK(other.out.find("killed/sweep.json:/digest: a sweep of another scenario") != std::string::npos);
}
