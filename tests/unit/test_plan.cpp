#include "plan/parallel_plan.hpp"
#include "plan/plan_rules.hpp"

#include "support.hpp"

using sim::plan::balanced_split;

TEST_CASE("an uneven layer split gives the first and last stages the fewer layers (Llama 3 405B: 126 on 16)")
{
  const std::vector<int> expected{7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7};
  CHECK(balanced_split(126, 16) == expected);
  CHECK(balanced_split(32, 4) == std::vector<int>{8, 8, 8, 8});
  CHECK(balanced_split(10, 4) == std::vector<int>{2, 3, 3, 2});
  CHECK(balanced_split(7, 2) == std::vector<int>{3, 4});
  CHECK(balanced_split(5, 1) == std::vector<int>{5});
}

TEST_CASE("with TP innermost, consecutive ranks form a TP group and PP is outermost")
{
  sim::plan::ParallelPlan p;
  p.tp = 8;
  p.dp = 4;
  p.pp = 2;
  const auto c = sim::plan::coords_of(p, 8 * 4 + 8 + 3);
  CHECK(c.tp == 3);
  CHECK(c.dp == 1);
  CHECK(c.pp == 1);
  for (int r = 0; r < p.gpus(); ++r)
    CHECK(sim::plan::rank_of(p, sim::plan::coords_of(p, r)) == r);
}

TEST_CASE("rank_order puts the named dimension innermost")
{
  sim::plan::ParallelPlan p;
  p.tp = 2;
  p.dp = 3;
  p.pp = 4;
  p.rank_order = {sim::plan::ParallelDim::DP, sim::plan::ParallelDim::TP, sim::plan::ParallelDim::PP};
  CHECK(sim::plan::rank_of(p, {0, 1, 0}) == 1);
  CHECK(sim::plan::rank_of(p, {1, 0, 0}) == 3);
  CHECK(sim::plan::rank_of(p, {0, 0, 1}) == 6);
}

TEST_CASE("hybrid sharding's groups: consecutive data-parallel ranks share a copy, the same shard across copies")
{
  sim::plan::ParallelPlan p;
  p.tp = 2;
  p.dp = 8;
  p.shard_group = 4;
  CHECK(p.shards() == 4);
  CHECK(p.shard_replicas() == 2);
  using sim::plan::GroupDim;
  // Rank 2 x 5 + 1: TP 1, DP 5.
  CHECK(sim::plan::group_of(p, GroupDim::SHARD, 11) == std::vector<int>{9, 11, 13, 15});
  CHECK(sim::plan::group_of(p, GroupDim::REPLICA, 11) == std::vector<int>{3, 11});
  p.shard_group = 0; // not hybrid: one shard group of every data-parallel rank, one copy
  CHECK(sim::plan::group_of(p, GroupDim::SHARD, 11) == sim::plan::group_of(p, GroupDim::DP, 11));
  CHECK(sim::plan::group_of(p, GroupDim::REPLICA, 11) == std::vector<int>{11});
}

TEST_CASE("tensor parallelism must split the heads, the KV heads and the dense FFN, which a model with MoE layers only "
          "does not use, and the shared expert's FFN")
{
  sim::model::ModelSpec m;
  m.num_layers = 4;
  m.num_attention_heads = 32;
  m.num_kv_heads = 8;
  m.ffn_hidden_size = 11008; // 2^8 * 43
  CHECK(sim::plan::tp_splits_model(m, 8));
  CHECK_FALSE(sim::plan::tp_splits_kv_heads(m, 16));
  CHECK_FALSE(sim::plan::tp_splits_model(m, 16));
  m.ffn_hidden_size = 1000;
  CHECK_FALSE(sim::plan::tp_splits_ffn(m, 16));
  m.moe = sim::model::MoeSpec{};
  m.moe->num_experts = 64;
  m.moe->expert_ffn_hidden_size = 768;
  CHECK(sim::plan::tp_splits_ffn(m, 16)); // every layer is MoE: the dense FFN size is unused
  m.moe->shared_expert_ffn_hidden_size = 1000;
  CHECK(sim::plan::tp_splits_shared_expert_ffn(m, 8));
  CHECK_FALSE(sim::plan::tp_splits_shared_expert_ffn(m, 16));
  CHECK(sim::plan::needs_sequence_parallel(m, 2));
  CHECK_FALSE(sim::plan::needs_sequence_parallel(m, 1));
}

TEST_CASE("experts tile a stage's GPUs as etp x ep, ep dividing the experts and etp the expert FFN")
{
  sim::model::MoeSpec moe;
  moe.num_experts = 8;
  moe.expert_ffn_hidden_size = 1536;
  CHECK(sim::plan::experts_tile_stage(16, 8, 2));
  CHECK_FALSE(sim::plan::experts_tile_stage(16, 8, 4));
  CHECK(sim::plan::ep_splits_experts(moe, 8));
  CHECK_FALSE(sim::plan::ep_splits_experts(moe, 16));
  CHECK(sim::plan::etp_splits_expert_ffn(moe, 512));
  CHECK_FALSE(sim::plan::etp_splits_expert_ffn(moe, 1024));
}

TEST_CASE("batches, interleaving, ZeRO and context parallelism: the rules a plan's sizes must meet")
{
  CHECK(sim::plan::batch_splits(512, 2, 64));
  CHECK_FALSE(sim::plan::batch_splits(512, 4, 256));
  CHECK(sim::plan::interleaving_splits_microbatches(16, 4));
  CHECK_FALSE(sim::plan::interleaving_splits_microbatches(6, 4));
  CHECK(sim::plan::zero_stage_combines(1, 8, 2)); // ZeRO-1 shards only the optimizer state
  CHECK(sim::plan::zero_stage_combines(3, 1, 1));
  CHECK_FALSE(sim::plan::zero_stage_combines(2, 2, 1)); // not with a pipeline
  CHECK_FALSE(sim::plan::zero_stage_combines(3, 1, 2)); // nor with context parallelism
  CHECK(sim::plan::cp_splits_sequence(8192, 4));
  CHECK_FALSE(sim::plan::cp_splits_sequence(8190, 2));
  sim::model::ModelSpec m;
  m.num_layers = 4;
  CHECK(sim::plan::layers_fill_chunks(m, 4));
  CHECK_FALSE(sim::plan::layers_fill_chunks(m, 5));
}
