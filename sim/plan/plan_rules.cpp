#include "plan/plan_rules.hpp"

namespace sim::plan {

bool tp_splits_heads(const model::ModelSpec& m, int tp)
{
  return m.num_attention_heads % tp == 0;
}

bool tp_splits_kv_heads(const model::ModelSpec& m, int tp)
{
  return m.num_kv_heads % tp == 0;
}

bool tp_splits_ffn(const model::ModelSpec& m, int tp)
{
  return m.ffn_hidden_size % tp == 0 || m.moe_layers() == m.num_layers;
}

bool tp_splits_shared_expert_ffn(const model::ModelSpec& m, int tp)
{
  return !m.moe || m.moe->shared_expert_ffn_hidden_size % tp == 0;
}

bool tp_splits_model(const model::ModelSpec& m, int tp)
{
  return tp_splits_heads(m, tp) && tp_splits_kv_heads(m, tp) && tp_splits_ffn(m, tp) &&
         tp_splits_shared_expert_ffn(m, tp);
}

bool layers_fill_chunks(const model::ModelSpec& m, int chunks)
{
  return m.num_layers >= chunks;
}

bool batch_splits(std::int64_t global_batch, int micro_batch, int dp)
{
  return global_batch % (static_cast<std::int64_t>(micro_batch) * dp) == 0;
}

bool interleaving_splits_microbatches(std::int64_t microbatches, int pp)
{
  return microbatches % pp == 0;
}

bool zero_shards_gradients(int zero_stage)
{
  return zero_stage >= 2;
}

bool zero_stage_combines(int zero_stage, int pp, int cp)
{
  return !zero_shards_gradients(zero_stage) || (pp == 1 && cp == 1);
}

bool needs_sequence_parallel(const model::ModelSpec& m, int tp)
{
  return m.moe && tp > 1;
}

bool experts_tile_stage(int stage_gpus, int ep, int etp)
{
  return stage_gpus % (etp * ep) == 0;
}

bool ep_splits_experts(const model::MoeSpec& moe, int ep)
{
  return moe.num_experts % ep == 0;
}

bool etp_splits_expert_ffn(const model::MoeSpec& moe, int etp)
{
  return moe.expert_ffn_hidden_size % etp == 0;
}

bool cp_splits_sequence(std::int64_t seq_length, int cp)
{
  return seq_length % (2 * cp) == 0;
}

} // namespace sim::plan
