// The rules a plan's sizes must meet, as pure predicates: check_plan refuses a plan that breaks one (with its
// message), and the sweep's automatic layouts enumerate only sizes that meet them.
#pragma once

#include "model/model_spec.hpp"

#include <cstdint>

namespace sim::plan {

// Tensor parallelism splits the attention heads, the key/value heads, the dense FFN (where the model has dense
// layers) and the shared expert's FFN (MoE models) evenly over the tp GPUs.
bool tp_splits_heads(const model::ModelSpec& m, int tp);
bool tp_splits_kv_heads(const model::ModelSpec& m, int tp);
bool tp_splits_ffn(const model::ModelSpec& m, int tp);
bool tp_splits_shared_expert_ffn(const model::ModelSpec& m, int tp);
bool tp_splits_model(const model::ModelSpec& m, int tp); // all four

// Every chunk of the model (a pipeline stage, or a virtual stage) holds at least one layer.
bool layers_fill_chunks(const model::ModelSpec& m, int chunks);

// Each data-parallel rank takes whole micro-batches of the global batch: micro_batch * dp divides it.
bool batch_splits(std::int64_t global_batch, int micro_batch, int dp);

// The interleaved schedule runs the micro-batches of a step in rounds of pp (as Megatron-LM requires).
bool interleaving_splits_microbatches(std::int64_t microbatches, int pp);

// ZeRO stages 2 and 3 shard the gradients, which DeepSpeed cannot combine with pipeline parallelism, and which
// simtrain does not simulate with context parallelism.
bool zero_shards_gradients(int zero_stage);
bool zero_stage_combines(int zero_stage, int pp, int cp);

// Megatron-core's MoE layers need sequence parallelism when tensor parallelism splits them.
bool needs_sequence_parallel(const model::ModelSpec& m, int tp);

// The routed experts are laid out again over a stage's tp x cp x dp GPUs (`stage_gpus`) as etp x ep x edp: etp * ep
// divides them, ep divides the experts, etp the expert FFN.
bool experts_tile_stage(int stage_gpus, int ep, int etp);
bool ep_splits_experts(const model::MoeSpec& moe, int ep);
bool etp_splits_expert_ffn(const model::MoeSpec& moe, int etp);

// Context parallelism gives each of the cp ranks two equal chunks of every sequence (Megatron-core's causal
// balance): 2 * cp divides the sequence length.
bool cp_splits_sequence(std::int64_t seq_length, int cp);

} // namespace sim::plan
