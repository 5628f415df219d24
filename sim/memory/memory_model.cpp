#include "memory/memory_model.hpp"

#include "model/param_count.hpp"

#include <algorithm>

namespace sim::memory {
namespace {

constexpr double element_bytes = 2.0;      // 16-bit activations
constexpr double mask_bytes = 1.0;         // dropout masks are bytes
constexpr double optimizer_bytes = 12.0;   // Adam: fp32 master weights, momentum, variance
constexpr double loss_element_bytes = 4.0; // the vocabulary-parallel cross entropy works in fp32

} // namespace

double layer_params_per_rank(const model::ModelSpec& m, int t)
{
  const auto h = static_cast<double>(m.hidden_size);
  const auto q = static_cast<double>(m.q_width());
  const auto kv = static_cast<double>(m.kv_width());
  const auto f = static_cast<double>(m.ffn_hidden_size);
  const double up = model::is_gated(m.ffn_kind) ? 2.0 : 1.0;
  double split = h * (q + 2.0 * kv) + q * h + (up + 1.0) * h * f;
  double replicated = model::count_params(m).layer.norms;
  if (m.qkv_bias)
    split += q + 2.0 * kv;
  if (m.linear_bias) {
    split += up * f;       // column-parallel biases are split
    replicated += 2.0 * h; // row-parallel biases are not
  }
  return split / t + replicated;
}

double layer_activation_bytes(const model::ModelSpec& m, const plan::ParallelPlan& p)
{
  const double sb = static_cast<double>(p.seq_length) * p.micro_batch;
  const auto h = static_cast<double>(m.hidden_size);
  const double t = p.tp;
  const double sp_divisor = p.sequence_parallel ? t : 1.0;

  if (p.recompute == model::Recompute::FULL)
    return element_bytes * sb * h / sp_divisor; // only the layer's input is kept

  // Inputs of the two norms and of the QKV and first FFN GEMMs, and the two residual dropout masks: whole
  // hidden states, split across the TP group only with sequence parallelism.
  double unsplit = 4.0 * element_bytes * sb * h;
  if (m.dropout)
    unsplit += 2.0 * mask_bytes * sb * h;

  // Q, K, V, the projection's input, and the FFN's intermediate tensors: split across the TP group.
  const auto q = static_cast<double>(m.q_width());
  const auto kv = static_cast<double>(m.kv_width());
  const auto f = static_cast<double>(m.ffn_hidden_size);
  const double ffn_tensors = model::is_gated(m.ffn_kind) ? 3.0 : 2.0;
  double split = element_bytes * sb * (2.0 * q + 2.0 * kv) + ffn_tensors * element_bytes * sb * f;

  // The attention core: without fusion, the s x s softmax output (and dropout mask and output); fused attention
  // keeps only its fp32 log-sum-exp per row. Selective recomputation redoes it instead of keeping it.
  const double a = static_cast<double>(m.num_attention_heads);
  const double s = static_cast<double>(p.seq_length);
  const double scores = a * s * sb;
  if (p.fused_attention())
    split += 4.0 * a * sb;
  else if (p.recompute != model::Recompute::SELECTIVE)
    split += m.dropout ? (2.0 * element_bytes + mask_bytes) * scores : element_bytes * scores;

  return unsplit / sp_divisor + split / t;
}

InFlight in_flight(const plan::ParallelPlan& p, int stage)
{
  InFlight f;
  f.per_chunk.assign(static_cast<std::size_t>(p.virtual_stages), 0);
  const auto m = static_cast<int>(p.microbatches());
  switch (p.schedule) {
    case plan::Schedule::GPIPE:
      f.per_chunk[0] = m;
      break;
    case plan::Schedule::ONE_F_ONE_B:
      f.per_chunk[0] = std::min(p.pp - stage, m);
      break;
    case plan::Schedule::INTERLEAVED: {
      // Megatron-LM: (p - stage - 1) * 2 + (v - 1) * p warm-up forwards, then one more before the first backward.
      const int total = m * p.virtual_stages;
      const int warmup = (p.pp - stage - 1) * 2 + (p.virtual_stages - 1) * p.pp;
      const int held = std::min(warmup + 1, total);
      for (int k = 0; k < held; ++k)
        ++f.per_chunk[static_cast<std::size_t>((k % (p.pp * p.virtual_stages)) / p.pp)];
      break;
    }
  }
  for (int c = 0; c < p.virtual_stages; ++c)
    f.layer_microbatches += static_cast<double>(f.per_chunk[static_cast<std::size_t>(c)]) * p.layers_in_chunk(stage, c);
  return f;
}

MemoryEstimate estimate_memory(const model::ModelSpec& m, const plan::ParallelPlan& p, const hardware::GpuSpec& gpu)
{
  const model::ParamCount counts = model::count_params(m);
  MemoryEstimate e;
  e.params = counts.total;
  e.capacity_bytes = gpu.memory_bytes;
  e.layer_activation_bytes = layer_activation_bytes(m, p);

  const double t = p.tp;
  const double d = p.dp;
  const double h = static_cast<double>(m.hidden_size);
  const double sb = static_cast<double>(p.seq_length) * p.micro_batch;
  const double sp_divisor = p.sequence_parallel ? t : 1.0;
  const double per_layer = layer_params_per_rank(m, p.tp);
  const double grad_bytes = p.fp32_grad_accumulation ? 4.0 : 2.0;

  for (int stage = 0; stage < p.pp; ++stage) {
    StageMemory s;
    s.stage = stage;
    s.layers = p.layers_on_stage(stage);
    s.layer_params = per_layer * s.layers;
    double embedding_params = 0;
    if (stage == 0)
      embedding_params += counts.word_embedding / t + counts.position_embedding + counts.embedding_norm;
    if (stage == p.pp - 1) {
      embedding_params += counts.final_norm + counts.lm_head / t;
      if (m.tie_embeddings && p.pp > 1) // the last stage keeps its own copy of the tied embedding
        embedding_params += counts.word_embedding / t;
    }
    s.params = s.layer_params + embedding_params;

    // Mixed-precision Adam, sharded by ZeRO stage (or Megatron's distributed optimizer, like ZeRO-1).
    const double weight_shards = p.zero_stage >= 3 ? d : 1.0;
    const double grad_shards = p.zero_stage >= 2 ? d : 1.0;
    const double optimizer_shards = p.zero_stage >= 1 || p.distributed_optimizer ? d : 1.0;
    const double state_per_param =
        element_bytes / weight_shards + grad_bytes / grad_shards + optimizer_bytes / optimizer_shards;
    s.weights_bytes = element_bytes * s.params / weight_shards;
    s.grads_bytes = grad_bytes * s.params / grad_shards;
    s.optimizer_bytes = optimizer_bytes * s.params / optimizer_shards;
    s.layer_state_bytes = state_per_param * s.layer_params;

    s.in_flight = in_flight(p, stage);
    s.layer_activations_bytes = s.in_flight.layer_microbatches * e.layer_activation_bytes;
    double extras = 0;
    if (stage == 0) { // embedding dropout mask (and BLOOM's embedding norm input)
      double per_microbatch = m.dropout ? mask_bytes * sb * h / sp_divisor : 0.0;
      if (m.embedding_norm)
        per_microbatch += element_bytes * sb * h / sp_divisor;
      extras += per_microbatch * s.in_flight.per_chunk.front();
    }
    if (stage == p.pp - 1) { // final norm and output-layer inputs, fp32 softmax of the cross entropy
      const double per_microbatch =
          2.0 * element_bytes * sb * h / sp_divisor + loss_element_bytes * sb * static_cast<double>(m.vocab_size) / t;
      extras += per_microbatch * s.in_flight.per_chunk.back();
    }
    s.activations_bytes = s.layer_activations_bytes + extras;

    // Buffers: pipeline send/receive of one micro-batch each way; ZeRO-3's gathered layers (current and
    // prefetched); ZeRO-2/3's gradient bucket being reduced.
    if (p.pp > 1)
      s.buffers_bytes += 4.0 * element_bytes * sb * h / sp_divisor;
    if (p.zero_stage >= 3)
      s.buffers_bytes += 2.0 * element_bytes * per_layer;
    if (p.zero_stage >= 2)
      s.buffers_bytes += p.dp_bucket_bytes;

    s.peak_bytes = s.weights_bytes + s.grads_bytes + s.optimizer_bytes + s.activations_bytes + s.buffers_bytes;
    s.oom = s.peak_bytes > gpu.memory_bytes;
    e.oom = e.oom || s.oom;
    e.per_stage.push_back(s);
  }
  const auto worst = std::max_element(e.per_stage.begin(), e.per_stage.end(),
                                      [](const auto& a, const auto& b) { return a.peak_bytes < b.peak_bytes; });
  e.peak_stage = worst->stage;
  return e;
}

} // namespace sim::memory
