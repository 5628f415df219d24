// Mixture-of-experts: parameter, FLOP and memory closed forms, and the expert-parallel task graph.
#include "memory/memory_model.hpp"
#include "model/flops.hpp"
#include "model/param_count.hpp"
#include "model/routing.hpp"
#include "workload/layer_program.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "build_support.hpp"

namespace {

// A small MoE: 8 layers, the first dense, then MoE layers of 16 experts (top-2, SwiGLU FFN 512) and a shared expert.
nlohmann::json moe_model()
{
  return {{"schema", "model/v1"},
          {"name", "moe"},
          {"num_layers", 8},
          {"hidden_size", 1024},
          {"num_attention_heads", 16},
          {"num_kv_heads", 4},
          {"ffn_hidden_size", 4096},
          {"ffn_kind", "swiglu"},
          {"norm", "rmsnorm"},
          {"position_embedding", "rope"},
          {"qkv_bias", false},
          {"tie_embeddings", false},
          {"dropout", false},
          {"vocab_size", 32000},
          {"seq_length", 2048},
          {"moe",
           {{"num_experts", 16},
            {"experts_per_token", 2},
            {"expert_ffn_hidden_size", 512},
            {"shared_expert_ffn_hidden_size", 512},
            {"first_dense_layers", 1}}}};
}

sim::model::ModelSpec read(const nlohmann::json& j)
{
  sim::core::Provenance prov;
  prov.add_source("", "moe.json");
  return sim::model::read_model(sim::core::Node(j, "", prov));
}

test::Built build(nlohmann::json plan, bool fold, nlohmann::json model = moe_model())
{
  return test::build(std::move(plan), std::move(model), "dgx-h100", fold);
}

} // namespace

TEST_CASE("a MoE layer has routed experts, a shared expert and a router, and fewer active parameters per token")
{
  const auto m = read(moe_model());
  const double h = 1024;
  const double expert = 3.0 * h * 512;
  const auto p = sim::model::count_params(m);
  CHECK(m.moe_layers() == 7);
  CHECK(p.moe_layer.experts == 16 * expert);
  CHECK(p.moe_layer.active_experts == 2 * expert);
  CHECK(p.moe_layer.ffn == expert); // the shared expert
  CHECK(p.moe_layer.router == 16 * h);
  CHECK(p.layer.ffn == 3.0 * h * 4096);
  CHECK(p.total - p.active == 7 * 14 * expert);
}

TEST_CASE("MoE FLOPs count the experts a token goes to: 6 x active matrix parameters per token")
{
  const auto m = read(moe_model());
  const auto p = sim::model::count_params(m);
  const double tokens = 2048.0 * 4;
  const auto step = sim::model::step_flops(m, 2048, 4, sim::model::Recompute::NONE);
  // Matrix parameters a token uses (all but norms and the word embedding, which is a lookup), and the attention core.
  const double matrices = p.active - p.word_embedding - p.final_norm - 8.0 * p.layer.norms;
  // Per layer and sequence, two attention matmuls of 2 s^2 q FLOPs; forward and backward 3x.
  const double attention = 8.0 * 4.0 * 2.0 * 2.0 * 2048.0 * 2048.0 * 1024.0 * 3.0;
  CHECK(step.model() == Approx(6.0 * tokens * matrices + attention));
}

TEST_CASE("multi-head latent attention counts its low-rank projections")
{
  auto j = moe_model();
  j.erase("num_kv_heads");
  j["mla"] = {{"q_lora_rank", 256},
              {"kv_lora_rank", 128},
              {"qk_nope_head_dim", 64},
              {"qk_rope_head_dim", 32},
              {"v_head_dim", 64}};
  const auto m = read(j);
  CHECK(m.head_dim == 96);
  CHECK(m.num_kv_heads == 16);
  const double h = 1024;
  const double q = 256 * h + 256 + 256 * 16 * 96;                // down, norm, up
  const double kv = h * (128 + 32) + 128 + 128 * 16 * (64 + 64); // down (+ shared rotary key), norm, up
  const double o = 16 * 64 * h;
  CHECK(sim::model::count_params(m).layer.attention == q + kv + o);
}

TEST_CASE("expert parallelism shards the experts' weights and optimizer state over EP, the rest over DP")
{
  const auto b = build({{"ep", 8}, {"dp", 16}, {"global_batch", 16}, {"distributed_optimizer", true}}, true);
  const auto& m = b.scenario.model;
  const auto mem = sim::memory::estimate_memory(m, b.scenario.plan, b.scenario.cluster.gpu);
  const auto p = sim::model::count_params(m);
  const double experts_per_gpu = 7 * p.moe_layer.experts / 8;
  const auto& st = mem.per_stage[0];
  CHECK(st.expert_params == Approx(experts_per_gpu));
  CHECK(st.params == Approx(p.total - 7 * p.moe_layer.experts + experts_per_gpu));
  // Adam's 12 bytes per parameter: the dense ones over 16 replicas, each expert over its 2.
  CHECK(st.optimizer_bytes == Approx(12.0 * (st.params - experts_per_gpu) / 16 + 12.0 * experts_per_gpu / 2));
  CHECK(mem.active_params == Approx(p.active));
}

TEST_CASE("expert plans Megatron-core cannot run, or simtrain does not simulate yet, are refused")
{
  auto err = [](nlohmann::json plan) { return test::error_of([&] { build(std::move(plan), true); }); };
  CHECK_THAT(err({{"ep", 3}, {"dp", 3}}), Catch::Contains("3 does not divide num_experts=16"));
  CHECK_THAT(err({{"ep", 4}, {"dp", 6}}), Catch::Contains("etp*ep = 1*4 does not divide tp*cp*dp = 1*1*6"));
  CHECK_THAT(err({{"tp", 2}, {"dp", 2}}), Catch::Contains("need sequence parallelism"));
  CHECK_THAT(err({{"tp", 2}, {"etp", 1}, {"ep", 4}, {"sequence_parallel", true}}),
             Catch::Contains("etp*ep = 1*4 does not divide tp*cp*dp = 2*1*1"));
  CHECK_THAT(err({{"etp", 3}, {"dp", 4}}), Catch::Contains("etp*ep = 3*1 does not divide tp*cp*dp = 1*1*4"));
  CHECK_THAT(err({{"tp", 2}, {"etp", 3}, {"dp", 3}, {"sequence_parallel", true}}),
             Catch::Contains("3 does not divide expert_ffn_hidden_size=512"));
  CHECK_THAT(err({{"cp", 2}, {"ep", 4}}), Catch::Contains("etp*ep = 1*4 does not divide tp*cp*dp = 1*2*1"));
  auto dense = moe_model();
  dense.erase("moe");
  CHECK_THAT(test::error_of([&] { build({{"ep", 2}, {"dp", 2}}, true, dense); }), Catch::Contains("has no experts"));
  CHECK_THAT(test::error_of([&] { build({{"tp", 2}, {"etp", 1}}, true, dense); }), Catch::Contains("has no experts"));
  CHECK_THAT(test::error_of([&] {
               build({{"moe_a2a_overlap", true}}, true, dense);
             }),
             Catch::Contains("has no experts"));
  CHECK_THAT(err({{"pp", 2}, {"schedule", "gpipe"}, {"moe_a2a_overlap", true}}), Catch::Contains("GPipe"));
}

namespace {

// The GPUs rank 0 exchanges traffic with in one category, and the bytes it sends in it.
struct Peers {
  std::set<int> peers;
  double bytes = 0;
};

Peers peers_of_rank0(const test::Built& b, sim::workload::Category category, std::string_view label)
{
  Peers out;
  for (const auto& t : b.tasks.tasks())
    if (t.kind == sim::workload::TaskKind::TRANSFER && t.category == category && t.rank == 0 &&
        b.tasks.label_text(t.label) == label && t.microbatch == 0 && t.layer == 1) {
      out.peers.insert(t.peer);
      out.bytes += t.bytes;
    }
  return out;
}

// FLOPs of the routed experts' GEMMs one GPU runs in a MoE layer's forward.
double expert_flops(const test::Built& b)
{
  double flops = 0;
  for (const auto& k : sim::workload::kernel_costs(b.scenario.model, b.scenario.plan, b.scenario.cluster.gpu))
    if (k.program == "moe layer forward" && k.kernel.name.rfind("expert fc", 0) == 0)
      flops += k.kernel.flops;
  return flops;
}

} // namespace

TEST_CASE("expert tensor parallelism lays a stage's GPUs out again as etp x ep x edp: EP groups across TP groups, "
          "experts whole or split, the same FLOPs")
{
  // 32 GPUs: tp 4 x dp 8. With etp = tp the 8 expert-parallel ranks are the 8 DP ranks of one TP rank; with etp = 1
  // they are the 8 consecutive GPUs of two TP groups, each sending its own quarter of the tokens.
  const nlohmann::json base{{"tp", 4}, {"dp", 8}, {"ep", 8}, {"global_batch", 8}, {"sequence_parallel", true}};
  auto split = base;
  split["etp"] = 4;
  auto whole = base;
  whole["etp"] = 1;
  const auto a = build(split, false);
  const auto b = build(whole, false);
  const auto ep = sim::workload::Category::EP;
  const auto tp = sim::workload::Category::TP;
  CHECK(peers_of_rank0(a, ep, "moe dispatch all-to-all").peers == std::set<int>{4, 8, 12, 16, 20, 24, 28});
  CHECK(peers_of_rank0(b, ep, "moe dispatch all-to-all").peers == std::set<int>{1, 2, 3, 4, 5, 6, 7});
  // Each GPU sends its 2048 / 4 tokens' top-2 hidden states (2 bytes each), 7/8 of them to other GPUs.
  const double sent = 7.0 / 8 * 2048 / 4 * 2 * 1024 * 2;
  CHECK(peers_of_rank0(a, ep, "moe dispatch all-to-all").bytes == Approx(sent));
  CHECK(peers_of_rank0(b, ep, "moe dispatch all-to-all").bytes == Approx(sent));
  // Split experts gather the routed tokens over the TP group; whole experts need no gather.
  CHECK(!peers_of_rank0(a, tp, "moe all-gather").peers.empty());
  CHECK(peers_of_rank0(b, tp, "moe all-gather").peers.empty());
  // The shared expert gathers over the attention's TP group either way.
  CHECK(peers_of_rank0(b, tp, "shared expert all-gather").peers ==
        peers_of_rank0(a, tp, "shared expert all-gather").peers);
  CHECK(expert_flops(a) == Approx(expert_flops(b)));
  CHECK(expert_flops(b) == Approx(2.0 * 2048 * 2 / 4 * 1024 * 3 * 512));

  // Experts' state: whole experts over 8 EP ranks, 4 replicas each (tp x dp / ep); split, over 32 GPUs, 1 replica.
  const auto& m = a.scenario.model;
  const double experts = 7 * sim::model::count_params(m).moe_layer.experts;
  const auto ma = sim::memory::estimate_memory(m, a.scenario.plan, a.scenario.cluster.gpu).per_stage[0];
  const auto mb = sim::memory::estimate_memory(m, b.scenario.plan, b.scenario.cluster.gpu).per_stage[0];
  CHECK(ma.expert_params == Approx(experts / 32));
  CHECK(mb.expert_params == Approx(experts / 8));
  CHECK(b.scenario.plan.edp() == 4);
  auto sharded = whole;
  sharded["distributed_optimizer"] = true;
  const auto c = build(sharded, true);
  const auto mc = sim::memory::estimate_memory(m, c.scenario.plan, c.scenario.cluster.gpu).per_stage[0];
  CHECK(mc.optimizer_bytes == Approx(12.0 * (mc.params - experts / 8) / 8 + 12.0 * experts / 8 / 4));
  // The expert gradient buckets are reduced over the 4 replicas: ranks 0, 8, 16, 24.
  std::set<int> edp;
  for (const auto& t : b.tasks.tasks())
    if (t.kind == sim::workload::TaskKind::TRANSFER && t.category == sim::workload::Category::DP &&
        b.tasks.label_text(t.label).rfind("expert gradient bucket", 0) == 0 && t.rank == 0)
      edp.insert(t.peer);
  CHECK(!edp.empty());
  CHECK(std::includes(std::set<int>{8, 16, 24}.begin(), std::set<int>{8, 16, 24}.end(), edp.begin(), edp.end()));
}

namespace {

// Group-limited routing drawn at random: `picked` of the groups, then k distinct experts among theirs; the share of
// tokens that need at least one expert of [first, first + held).
double sampled_reach(const sim::model::MoeSpec& moe, int first, int held, int tokens)
{
  std::mt19937 rng(7);
  const int size = static_cast<int>(moe.num_experts / moe.expert_groups);
  std::vector<int> groups(static_cast<std::size_t>(moe.expert_groups));
  std::iota(groups.begin(), groups.end(), 0);
  int reached = 0;
  for (int t = 0; t < tokens; ++t) {
    std::shuffle(groups.begin(), groups.end(), rng);
    std::vector<int> pool;
    for (int g = 0; g < moe.groups_per_token; ++g)
      for (int e = 0; e < size; ++e)
        pool.push_back(groups[static_cast<std::size_t>(g)] * size + e);
    std::shuffle(pool.begin(), pool.end(), rng);
    reached += std::any_of(pool.begin(), pool.begin() + moe.experts_per_token,
                           [&](int e) { return e >= first && e < first + held; })
                   ? 1
                   : 0;
  }
  return static_cast<double>(reached) / tokens;
}

} // namespace

TEST_CASE("the chance that a token needs a GPU or a node: closed forms, and a sampled router agrees")
{
  sim::model::MoeSpec moe;
  moe.num_experts = 16;
  moe.experts_per_token = 2;
  // Without groups: 1 - C(16 - c, 2) / C(16, 2).
  CHECK(sim::model::reach_probability(moe, 2) == Approx(1.0 - (14.0 * 13) / (16.0 * 15)));
  CHECK(sim::model::reach_probability(moe, 16) == 1.0);
  // DeepSeek-V3: 256 experts in 8 groups, 4 groups then 8 experts per token; 4 experts per GPU (EP 64), 32 per node.
  moe.num_experts = 256;
  moe.experts_per_token = 8;
  moe.expert_groups = 8;
  moe.groups_per_token = 4;
  auto miss = [](double pool, double held) {
    double p = 1;
    for (int i = 0; i < 8; ++i)
      p *= (pool - held - i) / (pool - i);
    return p;
  };
  CHECK(sim::model::reach_probability(moe, 4) == Approx(0.5 * (1.0 - miss(128, 4))));
  CHECK(sim::model::reach_probability(moe, 32) == Approx(0.5 * (1.0 - miss(128, 32))));
  // Two whole groups: none, one or both picked (15, 40 and 15 of the 70 ways to pick 4 of 8).
  CHECK(sim::model::reach_probability(moe, 64) ==
        Approx(1.0 - (15.0 + 40.0 * miss(128, 32) + 15.0 * miss(128, 64)) / 70.0));
  for (int held : {4, 32, 64}) {
    INFO("held " << held);
    CHECK(sampled_reach(moe, 0, held, 40000) == Approx(sim::model::reach_probability(moe, held)).margin(0.01));
  }
}

TEST_CASE("DeepEP sends each token once to each node it needs through the NIC, and once to each GPU it needs over "
          "NVLink: fewer bytes across nodes than one copy per expert")
{
  // DeepSeek-V3's routing on 32 GPUs of 4 nodes: EP 32, 8 experts per GPU, 64 per node (two groups).
  auto model = moe_model();
  model["moe"] = {{"num_experts", 256}, {"experts_per_token", 8}, {"expert_ffn_hidden_size", 512},
                  {"expert_groups", 8}, {"groups_per_token", 4},  {"first_dense_layers", 1}};
  const nlohmann::json plan{{"dp", 32}, {"ep", 32}, {"global_batch", 32}, {"moe_dispatcher", "deepep"}};
  const auto b = build(plan, false, model);
  const auto& moe = *b.scenario.model.moe;
  const double copy = 2048.0 * 1024 * 2; // one copy of a GPU's tokens
  const auto sent = peers_of_rank0(b, sim::workload::Category::EP, "moe dispatch all-to-all");
  // To the GPU of local rank 0 in each other node, and to each GPU of its own node.
  CHECK(sent.peers == std::set<int>{1, 2, 3, 4, 5, 6, 7, 8, 16, 24});
  double across = 0;
  for (const auto& t : b.tasks.tasks())
    if (t.kind == sim::workload::TaskKind::TRANSFER && t.rank == 0 && t.peer == 8 && t.microbatch == 0 &&
        t.layer == 1 && b.tasks.label_text(t.label) == "moe dispatch all-to-all")
      across += t.bytes;
  CHECK(across == Approx(copy * sim::model::reach_probability(moe, 64)));
  CHECK(sent.bytes == Approx(3 * across + 7 * 4 * copy * sim::model::reach_probability(moe, 8)));
  // Megatron-core's dispatcher sends 8 copies per token, 24/32 of them across nodes; DeepEP under half as much.
  auto alltoall = plan;
  alltoall["moe_dispatcher"] = "alltoall";
  const auto a = build(alltoall, false, model);
  const double a_across = peers_of_rank0(a, sim::workload::Category::EP, "moe dispatch all-to-all").bytes * 24 / 31;
  CHECK(a_across == Approx(24.0 / 32 * 8 * copy));
  CHECK(3 * across < 0.5 * a_across);

  // FP8 dispatch (DeepSeek-V3): the tokens to the experts and the output gradients back to them in one byte a value
  // and a 4-byte scale per 128; the combine and the input gradients stay 16-bit.
  auto fp8 = plan;
  fp8["precision"] = "fp8";
  fp8["moe_fp8_dispatch"] = true;
  const auto f = build(fp8, false, model);
  const auto ratio = [&](const char* label) {
    return peers_of_rank0(f, sim::workload::Category::EP, label).bytes /
           peers_of_rank0(b, sim::workload::Category::EP, label).bytes;
  };
  CHECK(ratio("moe dispatch all-to-all") == Approx((1.0 + 4.0 / 128) / 2));
  CHECK(ratio("moe combine backward all-to-all") == Approx((1.0 + 4.0 / 128) / 2));
  CHECK(ratio("moe combine all-to-all") == Approx(1.0));
  CHECK(ratio("moe dispatch backward all-to-all") == Approx(1.0));
  auto alltoall_fp8 = fp8;
  alltoall_fp8["moe_dispatcher"] = "alltoall";
  CHECK_THAT(test::error_of([&] { build(alltoall_fp8, false, model); }), Catch::Contains("moe_fp8_dispatch"));
}

TEST_CASE("with ZeRO-2 the experts' gradients are reduce-scattered over their replicas every micro-batch, with ZeRO-3 "
          "their parameters gathered over them before each pass, and with overlap_param_gather before the next "
          "forward")
{
  // 16 GPUs, EP 8: each expert on 2 GPUs (ranks 0 and 8 hold the same ones).
  const auto zero2 = build({{"dp", 16}, {"ep", 8}, {"global_batch", 64}, {"zero_stage", 2}}, false);
  std::set<int> microbatches;
  std::set<int> peers;
  for (const auto& t : zero2.tasks.tasks())
    if (t.kind == sim::workload::TaskKind::TRANSFER && t.rank == 0 &&
        zero2.tasks.label_text(t.label).rfind("expert gradient bucket", 0) == 0) {
      microbatches.insert(t.microbatch);
      peers.insert(t.peer);
    }
  CHECK(microbatches == std::set<int>{0, 1, 2, 3});
  CHECK(peers == std::set<int>{8});
  const auto gather = build(
      {{"dp", 16}, {"ep", 8}, {"global_batch", 64}, {"distributed_optimizer", true}, {"overlap_param_gather", true}},
      false);
  std::set<int> gathered;
  for (const auto& t : gather.tasks.tasks())
    if (t.kind == sim::workload::TaskKind::TRANSFER && t.rank == 0 &&
        gather.tasks.label_text(t.label).rfind("expert parameter all-gather", 0) == 0)
      gathered.insert(t.peer);
  CHECK(gathered == std::set<int>{8});
  const auto zero3 = build({{"dp", 16}, {"ep", 8}, {"global_batch", 64}, {"zero_stage", 3}}, false);
  std::map<std::string, std::set<int>> zero3_peers; // per label
  int expert_gathers = 0;
  for (const auto& t : zero3.tasks.tasks())
    if (t.kind == sim::workload::TaskKind::TRANSFER && t.rank == 0 &&
        zero3.tasks.label_text(t.label).rfind("zero-3", 0) == 0) {
      zero3_peers[zero3.tasks.label_text(t.label)].insert(t.peer);
      if (zero3.tasks.label_text(t.label) == "zero-3 expert parameter all-gather")
        ++expert_gathers;
    }
  CHECK(zero3_peers["zero-3 expert parameter all-gather"] == std::set<int>{8});
  CHECK(zero3_peers["zero-3 parameter all-gather"].size() > 1); // the dense ones over all 16
  CHECK(expert_gathers == 7 * 2 * 4); // each MoE layer (not the dense first one), each pass, each micro-batch
}

TEST_CASE("context parallelism with MoE: each GPU routes its 1/cp of the tokens, and the expert-parallel group folds "
          "over the CP and DP ranks together")
{
  // 8 GPUs: cp 2 x dp 4; EP 8 takes all of them (the CP pairs 0-1, 2-3, ... and the DP ranks).
  const auto b = build({{"cp", 2}, {"dp", 4}, {"ep", 8}, {"global_batch", 8}}, false);
  const auto& p = b.scenario.plan;
  CHECK(p.edp() == 1);
  const auto whole = build({{"dp", 8}, {"ep", 8}, {"global_batch", 8}}, false);
  CHECK(sim::memory::expert_tokens_per_rank(b.scenario.model, p) ==
        Approx(sim::memory::expert_tokens_per_rank(whole.scenario.model, whole.scenario.plan) / 2));
  CHECK(peers_of_rank0(b, sim::workload::Category::EP, "moe dispatch all-to-all").peers ==
        std::set<int>{1, 2, 3, 4, 5, 6, 7});
  // Each GPU sends its 1024 tokens' top-2 hidden states, 7/8 of them to other GPUs.
  CHECK(peers_of_rank0(b, sim::workload::Category::EP, "moe dispatch all-to-all").bytes ==
        Approx(7.0 / 8 * 1024 * 2 * 1024 * 2));
  const auto mem = sim::memory::estimate_memory(b.scenario.model, p, b.scenario.cluster.gpu).per_stage[0];
  CHECK(mem.expert_params == Approx(7 * sim::model::count_params(b.scenario.model).moe_layer.experts / 8));
}
