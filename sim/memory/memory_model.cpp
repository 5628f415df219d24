#include "memory/memory_model.hpp"

#include "model/param_count.hpp"
#include "plan/lora.hpp"
#include "plan/optimizer_state.hpp"
#include "plan/parallel_plan.hpp"
#include "plan/schedule.hpp"

#include <algorithm>
#include <limits>

namespace sim::memory {
namespace {

constexpr double mask_bytes = 1.0; // dropout masks are bytes
constexpr double fp32_bytes = 4.0; // router scores
constexpr double fp8_bytes = 1.0;
// DeepSpeed's swap buffers in pinned host memory (runtime/zero/offload_config.py defaults): the optimizer swapper's 4
// buffers of a sub-group's fp32 elements each; the parameter swapper's 5 of 1e8 16-bit elements.
constexpr double nvme_optimizer_buffers = 4.0;
constexpr double nvme_param_buffers = 5.0;
constexpr double nvme_param_buffer_elements = 1e8;

// Bytes per logit the cross entropy keeps from its forward to its backward, and the bytes more it holds at its busiest
// moment (in its forward and again in its backward), for logits of `l` bytes (16-bit, or fp32 in full precision, where
// every upcast returns its input).
struct LossBytes {
  double held = 0;
  double working = 0;
};

LossBytes loss_bytes(plan::LossImpl impl, double l)
{
  const double upcast = l < fp32_bytes ? fp32_bytes : 0.0; // an fp32 copy of 16-bit logits
  switch (impl) {
    case plan::LossImpl::FUSED: // Megatron-core's vocab-parallel cross entropy: the logits upcast to fp32 inside the
      // function, exponentiated in place and kept as the softmax for the backward (4); the logits alive beside that
      // copy, and in backward the gradient cast from the fp32 one (l)
      return {fp32_bytes, l};
    case plan::LossImpl::EAGER: // CrossEntropyLoss on the logits: log_softmax's output kept (l); beside it the
      // logits and their shifted contiguous copy in forward, the output and input gradients in backward (2 l)
      return {l, 2.0 * l};
    case plan::LossImpl::EAGER_FP32: // the same computed in fp32 (autocast upcasts cross_entropy's input;
      // transformers' Llama calls logits.float()): log_softmax's fp32 output kept (4); beside it the logits, their
      // shifted copy and its fp32 upcast in forward, the fp32 gradients and the 16-bit one in backward (2 l + 4)
      return {fp32_bytes, 2.0 * l + upcast};
    case plan::LossImpl::CHUNKED: // torchtune's compiled chunked cross entropy: the logit chunks kept, from which the
      // backward recomputes the softmax (l); one of 8 chunks upcast to fp32 with its softmax at a time (1)
      return {l, (fp32_bytes + upcast) / 8.0};
  }
  return {fp32_bytes, l};
}

} // namespace

RankParams layer_params_per_rank(const model::ModelSpec& m, const plan::ParallelPlan& p, std::int64_t layer)
{
  const auto h = static_cast<double>(m.hidden_size);
  const model::LayerParams l =
      model::layer_params(m, m.is_moe_layer(layer) ? model::FfnPart::MOE : model::FfnPart::DENSE);
  // Row-parallel biases (the attention output's, the FFN's second matrix's) are whole on every TP rank.
  const double row_biases = m.linear_bias ? h * (l.ffn > 0 ? 2.0 : 1.0) : 0.0;
  RankParams r;
  r.dense = (l.attention + l.ffn - row_biases) / p.tp + row_biases + l.norms + l.router;
  r.experts = l.experts / (static_cast<double>(p.ep) * p.etp);
  return r;
}

RankParams mtp_params_per_rank(const model::ModelSpec& m, const plan::ParallelPlan& p)
{
  const auto h = static_cast<double>(m.hidden_size);
  RankParams r = layer_params_per_rank(m, p, m.mtp_layer_kind_of());
  r.dense += model::count_params(m).mtp_extra - 2.0 * h * h + 2.0 * h * h / p.tp;
  return r;
}

double expert_tokens_per_rank(const model::ModelSpec& m, const plan::ParallelPlan& p)
{
  if (!m.moe)
    return 0.0;
  double load = p.expert_load_imbalance;
  if (m.moe->capacity_factor)
    load = std::min(load, *m.moe->capacity_factor);
  return p.local_seq() * p.micro_batch * static_cast<double>(m.moe->experts_per_token) * load * p.etp / p.tp;
}

double layer_activation_bytes(const model::ModelSpec& m, const plan::ParallelPlan& p, std::int64_t layer)
{
  const double sb = p.local_seq() * p.micro_batch; // this GPU's tokens (1/cp of each sequence)
  const auto h = static_cast<double>(m.hidden_size);
  const double t = p.tp;
  const double sp_divisor = p.sequence_parallel ? t : 1.0;
  const double value = p.value_bytes(); // an activation: 16 bits, 4 bytes in full precision

  if (p.recompute == model::Recompute::FULL)
    return value * sb * h / sp_divisor; // only the layer's input is kept

  // Inputs of the two norms and of the QKV and first FFN GEMMs (a MoE layer's router), and the two residual dropout
  // masks: whole hidden states, split across the TP group only with sequence parallelism. Under FP8, Transformer
  // Engine keeps a linear layer's input for its weight gradient as the FP8 copy it made (one byte): the QKV and
  // fc1 inputs, fc2's input, and the experts' inputs.
  const double saved = p.fp8() ? fp8_bytes : value;
  const bool moe_layer = m.is_moe_layer(layer);
  const bool selective = p.recompute == model::Recompute::SELECTIVE;
  auto recomputes = [&](model::RecomputeModule module) { return selective && p.recompute_modules.has(module); };
  double unsplit = (2.0 * value + saved + (moe_layer ? value : saved)) * sb * h;
  // Recomputed norms keep no output: those that are kernels of their own (Megatron-core's TransformerLayer; with
  // Transformer Engine the input norm and a dense layer's FFN norm are fused into the next linear layer).
  if (recomputes(model::RecomputeModule::LAYERNORM)) {
    const bool fused = p.software.norm == plan::NormImpl::TE;
    if (!fused)
      unsplit -= saved * sb * h;
    if (moe_layer || !fused)
      unsplit -= (moe_layer ? value : saved) * sb * h;
  }
  if (m.dropout)
    unsplit += 2.0 * mask_bytes * sb * h;

  // Q, K, V, the projection's input, and the FFN's intermediate tensors: split across the TP group.
  const auto q = static_cast<double>(m.q_width());
  const auto kv = static_cast<double>(m.kv_width());
  const double ffn_tensors = model::is_gated(m.ffn_kind) ? 3.0 : 2.0;
  // An FFN of width `f` on `tokens`: its first GEMM's output (two tensors when gated) in 16 bits, the second's input
  // as saved.
  auto ffn = [&](double tokens, double f) { return tokens * f * ((ffn_tensors - 1.0) * value + saved); };
  double split = value * sb * (q + static_cast<double>(m.o_width()) + 2.0 * kv);
  if (moe_layer) {
    // The shared expert like a dense FFN; the routed experts' permuted inputs, intermediate tensors and outputs
    // for the token-expert pairs this GPU's experts took (its expert-tensor-parallel group's, their FFN split over
    // that group), and the router's fp32 scores.
    // Recomputing the whole MoE layer keeps none of it; its activation function, the experts' fc2 inputs; its
    // shared expert, that FFN's tensors.
    const model::MoeSpec& e = *m.moe;
    const double pairs = expert_tokens_per_rank(m, p);
    const double expert_width = static_cast<double>(e.expert_ffn_hidden_size) / p.etp;
    if (!recomputes(model::RecomputeModule::MOE)) {
      if (!recomputes(model::RecomputeModule::SHARED_EXPERTS))
        split += ffn(sb, static_cast<double>(e.shared_expert_ffn_hidden_size));
      unsplit += fp32_bytes * sb * static_cast<double>(e.num_experts);
      split += t * pairs * ((value + saved) * h + ffn(1.0, expert_width));
      if (recomputes(model::RecomputeModule::MOE_ACT))
        split -= t * pairs * expert_width * saved;
    }
  } else if (!recomputes(model::RecomputeModule::MLP)) {
    split += ffn(sb, static_cast<double>(m.ffn_hidden_size));
    // silu(gate) * up run eagerly: the product keeps silu's output for its backward too.
    if (p.software.activation == plan::PointwiseImpl::EAGER && model::is_gated(m.ffn_kind))
      split += value * sb * static_cast<double>(m.ffn_hidden_size);
  }
  // An eager RMSNorm (norm_impl eager) keeps its fp32 upcast for the square's and the scale's backward: two a layer
  // (none in full precision, where the upcast is the input itself).
  if (p.software.norm == plan::NormImpl::EAGER && m.norm == model::NormKind::RMSNORM &&
      !recomputes(model::RecomputeModule::LAYERNORM) && !p.full_precision())
    unsplit += 2.0 * fp32_bytes * sb * h;

  // The attention core: without fusion, the s x s softmax output (and dropout mask and output); fused attention
  // keeps only its fp32 log-sum-exp per row. Selective recomputation redoes it instead of keeping it.
  const double a = static_cast<double>(m.num_attention_heads);
  const double s = static_cast<double>(p.seq_length);
  const double scores = a * s * sb;
  if (p.fused_attention())
    split += 4.0 * a * sb;
  else if (!recomputes(model::RecomputeModule::CORE_ATTN))
    split += m.dropout ? (2.0 * value + mask_bytes) * scores : value * scores;

  // LoRA: a frozen linear layer keeps no input (Transformer Engine saves it only `if weight.requires_grad`, PyTorch's
  // autograd guards it by the weight's gradient), so the QKV, fc1 and fc2 inputs counted above go; each site with
  // adapters keeps their input instead, in 16 bits (the gathered one under sequence parallelism, Megatron-core handing
  // the adapters the gathered norm output), or with PEFT's dropout each adapter its dropped copy and mask. The
  // projection's input is the attention output, which the attention's backward keeps anyway.
  double adapters = 0;
  if (p.lora() && !moe_layer) {
    const bool norms_recomputed =
        recomputes(model::RecomputeModule::LAYERNORM) && p.software.norm != plan::NormImpl::TE;
    const bool mlp_recomputed = recomputes(model::RecomputeModule::MLP);
    if (!norms_recomputed)
      unsplit -= 2.0 * saved * sb * h; // the QKV and fc1 inputs
    if (!mlp_recomputed)
      split -= saved * sb * static_cast<double>(m.ffn_hidden_size); // fc2's
    // PEFT's dropout keeps each adapter's dropped copy of its input and the mask; on the output (Megatron-core's,
    // AutoModel's) the adapters keep their one input and each its mask over its output (this GPU's 1/t of it).
    const bool on_input = p.lora_dropout > 0 && p.lora_dropout_position == plan::LoraDropoutAt::INPUT;
    const double dropped = on_input ? value + mask_bytes : 0.0;
    for (auto site : {plan::LinearSite::QKV, plan::LinearSite::PROJ, plan::LinearSite::FC1, plan::LinearSite::FC2}) {
      const auto targets = plan::lora_adapters(m, p, site);
      const bool in_mlp = site == plan::LinearSite::FC1 || site == plan::LinearSite::FC2;
      if (targets.empty() || (in_mlp && mlp_recomputed))
        continue;
      const bool column = site == plan::LinearSite::QKV || site == plan::LinearSite::FC1;
      const double width = column ? targets.front().in : targets.front().in / t; // the input each GPU holds
      if (dropped > 0)
        adapters += dropped * sb * width * static_cast<double>(targets.size());
      else if (site != plan::LinearSite::PROJ)
        adapters += value * sb * width;
      if (p.lora_dropout > 0 && !on_input)
        for (const auto& adapter : targets)
          adapters += mask_bytes * sb * adapter.out / t;
    }
  }

  return unsplit / sp_divisor + split / t + adapters;
}

// Walks the stage's passes in order: a forward pass keeps its activations until its backward pass, or until the weight
// gradients a zero-bubble backward pass left (they still need the layers' inputs). The stage holds the most at the
// first moment the count of held (chunk, micro-batch) pairs peaks.
InFlight in_flight(const plan::ParallelPlan& p, int stage)
{
  InFlight f;
  f.per_chunk.assign(static_cast<std::size_t>(p.virtual_stages), 0);
  std::vector<int> held(static_cast<std::size_t>(p.virtual_stages), 0);
  int count = 0;
  int peak = 0;
  for (const plan::PassRef& pass : plan::stage_order(p, stage)) {
    const auto c = static_cast<std::size_t>(pass.chunk);
    if (pass.pass == plan::Pass::FORWARD) {
      ++held[c];
      if (++count > peak) {
        peak = count;
        f.per_chunk = held;
      }
    } else if (pass.pass == plan::Pass::WEIGHT || !pass.defer_weight) {
      --held[c];
      --count;
    }
  }
  for (int c = 0; c < p.virtual_stages; ++c)
    f.layer_microbatches += static_cast<double>(f.per_chunk[static_cast<std::size_t>(c)]) * p.layers_in_chunk(stage, c);
  return f;
}

double cuda_context_bytes(const plan::ParallelPlan& p)
{
  switch (p.software.generation) {
    case plan::Generation::MEGATRON_LM_2021:
    case plan::Generation::MEGATRON_LM_2022:
    case plan::Generation::MEGATRON_DEEPSPEED:
    case plan::Generation::DEEPSPEED_ZERO3:
      return 1000e6;
    case plan::Generation::MEGATRON_CORE:
    case plan::Generation::COMPOSER_FSDP:
    case plan::Generation::DEEPSPEED: // PyTorch 2.x on CUDA 12: lazy loading
    case plan::Generation::FSDP:
    case plan::Generation::TORCHTITAN:
      return 400e6;
  }
  return 400e6;
}

namespace {

// The estimate with stage s on parts of hbm[s] bytes.
MemoryEstimate estimate(const model::ModelSpec& m, const plan::ParallelPlan& p, const std::vector<double>& hbm)
{
  const model::ParamCount counts = model::count_params(m);
  MemoryEstimate e;
  e.params = counts.total;
  e.active_params = counts.active;
  e.cuda_context_bytes = cuda_context_bytes(p);
  e.headroom_bytes = p.memory_headroom_bytes;
  std::vector<double> capacity = hbm;
  for (double& c : capacity)
    c -= e.cuda_context_bytes + e.headroom_bytes;
  e.capacity_bytes = *std::min_element(capacity.begin(), capacity.end());
  for (std::int64_t l = 0; l < m.num_layers; ++l)
    e.layer_activation_bytes = std::max(e.layer_activation_bytes, layer_activation_bytes(m, p, l));
  // Under full recomputation a layer's backward first re-runs its forward keeping every activation
  // (torch.utils.checkpoint, Megatron's CheckpointFunction): the largest layer's, as if nothing were recomputed.
  double recomputed_layer_bytes = 0;
  if (p.recompute == model::Recompute::FULL) {
    plan::ParallelPlan kept = p;
    kept.recompute = model::Recompute::NONE;
    for (std::int64_t l = 0; l < m.num_layers; ++l)
      recomputed_layer_bytes = std::max(recomputed_layer_bytes, layer_activation_bytes(m, kept, l));
  }
  const LossBytes loss = loss_bytes(p.software.loss, p.value_bytes());

  const double t = p.tp;
  const double d = p.shards(); // CP ranks shard the optimizer with the DP ranks (all, or a hybrid shard group)
  const double h = static_cast<double>(m.hidden_size);
  const double sb = p.local_seq() * p.micro_batch;
  const double sp_divisor = p.sequence_parallel ? t : 1.0;
  const double grad_bytes = p.fp32_grad_accumulation ? 4.0 : 2.0;
  const double value = p.value_bytes(); // a weight: 16 bits, 4 bytes in full precision

  for (int stage = 0; stage < p.pp; ++stage) {
    StageMemory s;
    s.stage = stage;
    s.layers = p.layers_on_stage(stage);
    s.in_flight = in_flight(p, stage);
    double dense_params = 0;
    for (int c = 0; c < p.virtual_stages; ++c) {
      double chunk_activations = 0;
      for (int i = 0; i < p.layers_in_chunk(stage, c); ++i) {
        const std::int64_t layer = p.first_layer_of_chunk(stage, c) + i;
        const RankParams r = layer_params_per_rank(m, p, layer);
        dense_params += r.dense;
        s.expert_params += r.experts;
        chunk_activations += layer_activation_bytes(m, p, layer);
      }
      s.layer_activations_bytes += s.in_flight.per_chunk[static_cast<std::size_t>(c)] * chunk_activations;
    }
    // The embedding where a micro-batch's path starts, the output layer where it ends (DualPipe: two of each).
    int embedding_chunk = -1;
    int head_chunk = -1;
    for (int c = 0; c < p.virtual_stages; ++c) {
      if (p.path_start(p.virtual_stage(stage, c)))
        embedding_chunk = c;
      if (p.path_end(p.virtual_stage(stage, c)))
        head_chunk = c;
    }
    // Multi-token prediction's modules sit with the output layer, each with a layer's state and activations.
    if (head_chunk >= 0 && m.mtp_layers > 0) {
      const auto mtp = static_cast<double>(m.mtp_layers);
      const RankParams r = mtp_params_per_rank(m, p);
      dense_params += mtp * r.dense;
      s.expert_params += mtp * r.experts;
      s.layer_activations_bytes += mtp * s.in_flight.per_chunk[static_cast<std::size_t>(head_chunk)] *
                                   layer_activation_bytes(m, p, m.mtp_layer_kind_of());
    }
    s.layer_params = dense_params + s.expert_params;
    double embedding_params = 0;
    if (embedding_chunk >= 0)
      embedding_params += counts.word_embedding / t + counts.position_embedding + counts.embedding_norm;
    if (head_chunk >= 0) {
      embedding_params += counts.final_norm + counts.lm_head / t;
      // The last stage keeps its own copy of a tied embedding, and of the embedding multi-token prediction looks
      // up the next tokens in.
      if ((m.tie_embeddings || m.mtp_layers > 0) && embedding_chunk < 0)
        embedding_params += counts.word_embedding / t;
    }
    s.params = s.layer_params + embedding_params;

    // Mixed-precision Adam, sharded by ZeRO stage (or Megatron's distributed optimizer, like ZeRO-1) over the
    // data-parallel replicas of each parameter: all dp of them, or an expert's dp/ep. One kind of state,
    // `per_param` bytes each and sharded from ZeRO stage `from_stage` on, of `dense` parameters and the stage's
    // experts:
    auto bytes = [&](double per_param, int from_stage, double dense) {
      const bool sharded = p.zero_stage >= from_stage || (from_stage == 1 && p.distributed_optimizer);
      return sharded ? per_param * (dense / d + s.expert_params / p.edp()) : per_param * (dense + s.expert_params);
    };
    const double dense_all = s.params - s.expert_params;
    const double optimizer_bytes =
        plan::optimizer_state_bytes(p.optimizer_algorithm, static_cast<double>(m.hidden_size), !p.full_precision());
    s.weights_bytes = bytes(value, 3, dense_all);
    // FP8: Transformer Engine's FP8 copy of each transformer-layer weight and its transpose, kept across the step's
    // micro-batches; FP8 parameters replace the 16-bit ones, so only the transpose is added.
    // Under ZeRO-3 the FP8 copies live with the gathered layer only (below, in the buffers).
    if (p.fp8() && !p.fp8_param_gather && p.zero_stage < 3)
      s.weights_bytes += 2.0 * fp8_bytes * s.layer_params;
    // ZeRO-Offload: the optimizer's shard (its fp32 master weights and moments) and an fp32 gradient shard live in
    // pinned host memory (DeepSpeed's single_partition_of_fp32_groups and their .grad); under ZeRO-2/3 the GPU keeps
    // only the bucket being reduced (in the buffers), under ZeRO-1 its full 16-bit gradients.
    // ZeRO-Infinity to NVMe: the state lives on the node's drives, the fp32 gradient shard in host memory beside
    // the swapper's buffers (DeepSpeed's offload_optimizer.buffer_count, 4, each a sub-group's fp32 elements).
    const bool offload = p.offload_optimizer != plan::OffloadDevice::NONE;
    const bool to_nvme = p.offload_optimizer == plan::OffloadDevice::NVME;
    const double gpu_grad_bytes = offload && p.zero_stage >= 2 ? 0.0 : grad_bytes;
    const double offloaded = offload ? p.offload_fraction : 0.0; // the share of the state on the host
    const double gpu_optimizer_bytes = (1.0 - offloaded) * optimizer_bytes;
    auto host = [&](double trained) {
      if (!to_nvme)
        return offloaded * bytes(optimizer_bytes + 4.0, 1, trained);
      const double shard = bytes(1.0, 1, trained);
      return bytes(4.0, 1, trained) +
             nvme_optimizer_buffers * 4.0 * std::min(shard, static_cast<double>(p.nvme_sub_group));
    };
    auto nvme = [&](double trained) { return to_nvme ? bytes(optimizer_bytes, 1, trained) : 0.0; };
    s.grads_bytes = bytes(gpu_grad_bytes, 2, dense_all);
    s.optimizer_bytes = bytes(gpu_optimizer_bytes, 1, dense_all);
    s.host_bytes = host(dense_all);
    s.nvme_bytes = nvme(dense_all);
    double layer_weights = bytes(value, 3, dense_params);
    s.layer_state_bytes =
        layer_weights + bytes(gpu_grad_bytes, 2, dense_params) + bytes(gpu_optimizer_bytes, 1, dense_params);
    s.trainable_params = s.params;
    if (p.lora()) {
      // Only the adapters train (gradients, optimizer state); the base is frozen, its linear layers' weights at the
      // base's bytes (4.127 bits under QLoRA), its norms, embedding and output layer in 16 bits; Transformer Engine's
      // FP8 copies of the frozen weights as in training. Tensor parallelism splits base and adapters alike (dense
      // layers).
      const model::LayerParams l = model::layer_params(m, model::FfnPart::DENSE);
      const double linear = s.layers * (l.attention + l.ffn) / t;
      const double adapters = s.layers * plan::lora_layer_params(m, p) / t;
      const double base = plan::base_weight_bytes(p.base_quantization, p.value_bytes());
      s.trainable_params = adapters;
      s.weights_bytes = bytes(base, 3, linear) + bytes(value, 3, dense_all - linear) + bytes(value, 3, adapters);
      if (p.fp8() && !p.fp8_param_gather && p.zero_stage < 3)
        s.weights_bytes += 2.0 * fp8_bytes * s.layer_params;
      s.grads_bytes = bytes(gpu_grad_bytes, 2, adapters);
      s.optimizer_bytes = bytes(gpu_optimizer_bytes, 1, adapters);
      s.host_bytes = host(adapters);
      s.nvme_bytes = nvme(adapters);
      layer_weights = bytes(base, 3, linear) + bytes(value, 3, dense_params - linear) + bytes(value, 3, adapters);
      s.layer_state_bytes =
          layer_weights + bytes(gpu_grad_bytes, 2, adapters) + bytes(gpu_optimizer_bytes, 1, adapters);
    }
    if (p.offload_params == plan::OffloadDevice::CPU) { // ZeRO-3's weight shard lives on the host
      s.host_bytes += s.weights_bytes;
      s.layer_state_bytes -= layer_weights;
      s.weights_bytes = 0;
    } else if (p.offload_params == plan::OffloadDevice::NVME) { // on the drives, through the swapper's host buffers
      s.nvme_bytes += s.weights_bytes;
      s.host_bytes += nvme_param_buffers * nvme_param_buffer_elements * value;
      s.layer_state_bytes -= layer_weights;
      s.weights_bytes = 0;
    }
    double extras = 0;
    if (embedding_chunk >= 0) { // embedding dropout mask (and BLOOM's embedding norm input)
      double per_microbatch = m.dropout ? mask_bytes * sb * h / sp_divisor : 0.0;
      if (m.embedding_norm)
        per_microbatch += value * sb * h / sp_divisor;
      extras += per_microbatch * s.in_flight.per_chunk[static_cast<std::size_t>(embedding_chunk)];
    }
    const double logits = sb * static_cast<double>(m.vocab_size) / t;
    if (head_chunk >= 0) { // final norm and output-layer inputs, what the cross entropy keeps
      double per_microbatch = 2.0 * value * sb * h / sp_divisor + loss.held * logits;
      // Each MTP module: its own output (the same again) and the inputs of its two norms and its projection.
      per_microbatch *= 1.0 + static_cast<double>(m.mtp_layers);
      per_microbatch += static_cast<double>(m.mtp_layers) * 4.0 * value * sb * h / sp_divisor;
      extras += per_microbatch * s.in_flight.per_chunk[static_cast<std::size_t>(head_chunk)];
    }
    if (p.offload_activations) {
      // Offloaded as each layer's forward ends and fetched one layer ahead of its backward: HBM holds the layer
      // computing and one on the copy engine, the host the rest.
      double largest = 0;
      for (int c = 0; c < p.virtual_stages; ++c)
        for (int i = 0; i < p.layers_in_chunk(stage, c); ++i)
          largest = std::max(largest, layer_activation_bytes(m, p, p.first_layer_of_chunk(stage, c) + i));
      const double kept = std::min(s.layer_activations_bytes, 2.0 * largest);
      s.host_bytes += s.layer_activations_bytes - kept;
      s.layer_activations_bytes = kept;
    }
    s.activations_bytes = s.layer_activations_bytes + extras;

    // Buffers: pipeline send/receive of one micro-batch each way; ZeRO-3's gathered layers (current and
    // prefetched); ZeRO-2/3's gradient bucket being reduced.
    if (p.pp > 1)
      s.buffers_bytes += 4.0 * value * sb * h / sp_divisor;
    if (p.zero_stage >= 3)
      s.buffers_bytes += 2.0 * (p.fp8() ? value + fp8_bytes : value) * s.layer_params / std::max(1, s.layers);
    if (p.zero_stage >= 2)
      s.buffers_bytes += p.dp_bucket_bytes;
    // A MoE layer's token dispatch: the all-to-all's send and receive buffers.
    if (m.moe && s.expert_params > 0)
      s.buffers_bytes += 2.0 * value * h * expert_tokens_per_rank(m, p) / p.etp;

    // Working memory at the stage's busiest moment, beside all it holds: the cross entropy's copies of the logits
    // where the output layer is, or the layer being recomputed.
    s.working_bytes = std::max(head_chunk >= 0 ? loss.working * logits : 0.0, recomputed_layer_bytes);

    s.peak_bytes =
        s.weights_bytes + s.grads_bytes + s.optimizer_bytes + s.activations_bytes + s.buffers_bytes + s.working_bytes;
    s.capacity_bytes = capacity[static_cast<std::size_t>(stage)];
    s.oom = s.peak_bytes > s.capacity_bytes;
    e.oom = e.oom || s.oom;
    e.per_stage.push_back(s);
  }
  const auto tightest = std::max_element(e.per_stage.begin(), e.per_stage.end(), [](const auto& a, const auto& b) {
    return a.peak_bytes - a.capacity_bytes < b.peak_bytes - b.capacity_bytes;
  });
  e.peak_stage = tightest->stage;
  return e;
}

} // namespace

MemoryEstimate estimate_memory(const model::ModelSpec& m, const plan::ParallelPlan& p, const hardware::GpuSpec& gpu)
{
  return estimate(m, p, std::vector<double>(static_cast<std::size_t>(p.pp), gpu.memory_bytes));
}

MemoryEstimate estimate_memory(const model::ModelSpec& m, const plan::ParallelPlan& p,
                               const topology::ClusterSpec& cluster)
{
  std::vector<double> capacity(static_cast<std::size_t>(p.pp), cluster.gpu.memory_bytes);
  if (!cluster.node_gpus.empty()) {
    std::fill(capacity.begin(), capacity.end(), std::numeric_limits<double>::infinity());
    for (int gpu = 0; gpu < p.gpus(); ++gpu) {
      double& c = capacity[static_cast<std::size_t>(plan::coords_of(p, gpu).pp)];
      c = std::min(c, topology::gpu_of_kind(cluster, topology::gpu_kind(cluster, gpu)).memory_bytes);
    }
  }
  MemoryEstimate e = estimate(m, p, capacity);
  // Each node's DRAM holds what its GPUs offload (the GPUs of one node may sit on different stages).
  const int per_node = std::max(1, cluster.node.gpus);
  // (Summed GPU by GPU only where some stage keeps something there.)
  const auto per_node_most = [&](double StageMemory::*bytes) {
    if (std::none_of(e.per_stage.begin(), e.per_stage.end(), [&](const StageMemory& st) { return st.*bytes > 0; }))
      return 0.0;
    std::vector<double> node_bytes(static_cast<std::size_t>((p.gpus() + per_node - 1) / per_node), 0.0);
    for (int gpu = 0; gpu < p.gpus(); ++gpu)
      node_bytes[static_cast<std::size_t>(gpu / per_node)] +=
          e.per_stage[static_cast<std::size_t>(plan::coords_of(p, gpu).pp)].*bytes;
    return node_bytes.empty() ? 0.0 : *std::max_element(node_bytes.begin(), node_bytes.end());
  };
  e.host_node_bytes = per_node_most(&StageMemory::host_bytes);
  e.host_capacity_bytes = cluster.node.host.memory_bytes;
  e.host_oom = e.host_capacity_bytes > 0 && e.host_node_bytes > e.host_capacity_bytes;
  // And its NVMe drives what they swap.
  e.nvme_node_bytes = per_node_most(&StageMemory::nvme_bytes);
  e.nvme_capacity_bytes = cluster.node.host.nvme.drives * cluster.node.host.nvme.capacity_bytes;
  e.nvme_oom = e.nvme_node_bytes > 0 && e.nvme_node_bytes > e.nvme_capacity_bytes;
  return e;
}

} // namespace sim::memory
