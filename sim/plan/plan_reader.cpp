#include "plan/plan_reader.hpp"

#include "core/units.hpp"
#include "plan/plan_keys.hpp"
#include "plan/plan_rules.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <functional>
#include <map>

namespace sim::plan {
namespace {

// Expert parallelism: what Megatron-core accepts, and what simtrain simulates of it.
void check_experts(const ParallelPlan& p, const core::Node& node, const model::ModelSpec& m)
{
  if (!m.moe) {
    if (p.ep > 1)
      infeasible(node, "ep", fmt::format("ep={} for model '{}', which has no experts", p.ep, m.name), "ep 1");
    if (p.etp != p.tp)
      infeasible(node, "etp", fmt::format("etp={} for model '{}', which has no experts", p.etp, m.name),
                 fmt::format("etp equal to tp ({}), or no etp", p.tp));
    if (p.moe_dispatcher != MoeDispatcher::ALL_TO_ALL)
      infeasible(node, "moe_dispatcher", fmt::format("a token dispatcher for model '{}', which has no experts", m.name),
                 "alltoall, or no moe_dispatcher");
    if (p.moe_a2a_overlap || p.moe_fp8_dispatch)
      infeasible(node, p.moe_a2a_overlap ? "moe_a2a_overlap" : "moe_fp8_dispatch",
                 fmt::format("an expert all-to-all setting for model '{}', which has no experts", m.name),
                 "false, or no such key");
    return;
  }
  const model::MoeSpec& e = *m.moe;
  if (!experts_tile_stage(p.tp * p.dp * p.cp, p.ep, p.etp))
    infeasible(node, "ep",
               fmt::format("etp*ep = {}*{} does not divide tp*cp*dp = {}*{}*{}: the experts are laid out again over "
                           "the GPUs of a stage's tensor-, context- and data-parallel groups",
                           p.etp, p.ep, p.tp, p.cp, p.dp),
               "etp*ep dividing tp*cp*dp");
  if (!ep_splits_experts(e, p.ep))
    infeasible(node, "ep", fmt::format("{} does not divide num_experts={} of model '{}'", p.ep, e.num_experts, m.name),
               "a divisor of num_experts");
  if (p.moe_a2a_overlap && p.schedule == Schedule::GPIPE)
    infeasible(node, "moe_a2a_overlap",
               "GPipe has no forward and backward passes of different micro-batches next to each other to overlap",
               "schedule 1f1b or interleaved, or no moe_a2a_overlap");
  if (p.moe_fp8_dispatch && (!p.fp8() || p.moe_dispatcher != MoeDispatcher::DEEPEP))
    infeasible(node, "moe_fp8_dispatch",
               "FP8 dispatch quantizes with the FP8 recipe and sends through DeepEP's kernels",
               "precision fp8 and moe_dispatcher deepep, or no moe_fp8_dispatch");
  if (p.moe_dispatcher == MoeDispatcher::DEEPEP && p.etp > 1)
    infeasible(node, "moe_dispatcher", fmt::format("deepep with etp={}: DeepEP dispatches to whole experts", p.etp),
               "etp 1, or moe_dispatcher alltoall");
  if (needs_sequence_parallel(m, p.tp) && !p.sequence_parallel)
    infeasible(node, "sequence_parallel",
               "MoE layers with tp > 1 need sequence parallelism (Megatron-core requires it)",
               "sequence_parallel true");
  if (!etp_splits_expert_ffn(e, p.etp))
    infeasible(node, "etp",
               fmt::format("{} does not divide expert_ffn_hidden_size={} of model '{}'", p.etp,
                           e.expert_ffn_hidden_size, m.name));
  if (!tp_splits_shared_expert_ffn(m, p.tp))
    infeasible(node, "tp",
               fmt::format("{} does not divide shared_expert_ffn_hidden_size={} of model '{}'", p.tp,
                           e.shared_expert_ffn_hidden_size, m.name));
  if (p.expert_load_imbalance > p.ep)
    infeasible(node, "expert_load_imbalance",
               fmt::format("{} exceeds ep={}: the busiest rank cannot take more than every token",
                           p.expert_load_imbalance, p.ep),
               fmt::format("between 1 and ep={}", p.ep));
}

// DualPipe and DualPipeV as deepseek-ai/DualPipe's step() asserts them.
void check_dualpipe(const ParallelPlan& p, const core::Node& node)
{
  const auto name = core::choice_name(p.schedule, schedule_choices);
  if (p.virtual_stages != 2)
    infeasible(node, "virtual_stages",
               fmt::format("{} runs two chunks per GPU, not virtual_stages={}", name, p.virtual_stages),
               "no virtual_stages, or 2");
  if (p.pp < 2 || (p.schedule == Schedule::DUALPIPE && p.pp % 2 != 0))
    infeasible(node, "pp",
               fmt::format("{} needs {} pipeline stages, not pp={}", name,
                           p.schedule == Schedule::DUALPIPE ? "an even number of" : "at least 2", p.pp),
               p.schedule == Schedule::DUALPIPE ? "an even pp >= 2" : "pp >= 2");
  const std::int64_t m = p.microbatches();
  if (m < 2 * p.pp || (p.schedule == Schedule::DUALPIPE && m % 2 != 0))
    infeasible(node, "global_batch",
               fmt::format("{} needs at least 2*pp = {} micro-batches per step{}; this plan has {}", name, 2 * p.pp,
                           p.schedule == Schedule::DUALPIPE ? ", an even number" : "", m));
  if (p.software.pipeline_engine == PipelineEngine::DEEPSPEED)
    infeasible(node, "schedule", fmt::format("DeepSpeed's pipeline engine does not run {}", name),
               "schedule 1f1b, or pipeline_engine megatron");
}

// Context parallelism: what Megatron-core accepts, and what simtrain simulates of it.
// Packed documents: no longer than a sequence; attention by document needs a fused kernel (varlen flash attention or
// Transformer Engine's THD layout), and under a context-parallel ring two chunks of each on every GPU.
void check_documents(const ParallelPlan& p, const core::Node& node)
{
  if (p.document_length == 0)
    return;
  if (p.document_length > p.seq_length)
    infeasible(node, "document_length", fmt::format("{} is longer than seq_length={}", p.document_length, p.seq_length),
               "a document length up to seq_length (0: one document per sequence)");
  if (!p.fused_attention())
    infeasible(node, "document_length",
               "attention by document runs fused kernels only (flash attention's variable-length ones)",
               "a fused attention, or document_length 0");
  // Under ring context parallelism Transformer Engine's THD layout splits every document into 2 x cp chunks, two per
  // GPU (the causal load balance); all-to-all moves heads, and each GPU then holds whole documents.
  if (p.cp > 1 && p.cp_kind == CpKind::RING && p.document_length < 2 * p.cp)
    infeasible(node, "document_length",
               fmt::format("{} tokens do not split into 2 x cp = {} chunks of a document for ring context parallelism",
                           p.document_length, 2 * p.cp),
               fmt::format("at least {} tokens, or cp_kind all_to_all", 2 * p.cp));
}

void check_context(const ParallelPlan& p, const core::Node& node, const model::ModelSpec& m)
{
  if (p.cp == 1)
    return;
  // Megatron-core splits each sequence into 2 x cp chunks, a rank taking one from each end (causal balance).
  if (!cp_splits_sequence(p.seq_length, p.cp))
    infeasible(node, "cp",
               fmt::format("seq_length={} is not divisible by 2*cp = {}: context parallelism gives each rank two "
                           "equal chunks of every sequence",
                           p.seq_length, 2 * p.cp),
               "a cp with seq_length divisible by 2*cp");
  if (!p.fused_attention())
    infeasible(node, "attention", "context parallelism runs fused attention (Transformer Engine) only",
               "a fused attention, or cp 1");
  // The all-to-all kind attends over the whole sequence for a share of the heads, so any mask works; Transformer
  // Engine's ring (p2p) asserts against a window (attn_forward_func_with_cp: a2a or all_gather only).
  if (m.sliding_window > 0 && p.cp_kind == CpKind::RING)
    infeasible(node, "cp_kind",
               fmt::format("Transformer Engine's ring context parallelism does not support the sliding-window "
                           "attention of model '{}'",
                           m.name),
               "cp_kind all_to_all, or cp 1");
  if (p.cp_kind == CpKind::ALL_TO_ALL) {
    const auto heads = m.num_attention_heads / p.tp;
    const auto kv_heads = m.num_kv_heads / p.tp;
    if (heads % p.cp != 0 || kv_heads % p.cp != 0)
      infeasible(node, "cp",
                 fmt::format("{} does not divide the {} query and {} key/value heads per tensor-parallel rank: the "
                             "all-to-all kind shards attention by heads",
                             p.cp, heads, kv_heads),
                 "a cp dividing the heads per TP rank, or cp_kind ring");
  }
  if (zero_shards_gradients(p.zero_stage))
    infeasible(node, "zero_stage", "ZeRO-2/3 with context parallelism is not simulated yet",
               "zero_stage 0 or 1, or the distributed optimizer");
}

// Hybrid sharding splits a sharded state (ZeRO or the distributed optimizer) over groups of the data-parallel ranks.
void check_shard_group(const ParallelPlan& p, const core::Node& node, const model::ModelSpec& m)
{
  if (p.zero_stage == 0 && !p.distributed_optimizer)
    infeasible(node, "shard_group", "hybrid sharding needs a sharded state, which the plan does not have",
               "zero_stage 1-3 or distributed_optimizer true, or no shard_group");
  if (p.shard_group < 2 || p.dp_cp() % p.shard_group != 0)
    infeasible(node, "shard_group",
               fmt::format("{} does not divide the {} data-parallel ranks{} into groups of two or more", p.shard_group,
                           p.dp_cp(), p.cp > 1 ? " (dp*cp)" : ""),
               "a divisor of dp*cp of at least 2");
  if (m.moe && p.shard_group < p.dp_cp())
    infeasible(node, "shard_group",
               fmt::format("hybrid sharding of the routed experts' state (model '{}') is not modelled", m.name),
               "no shard_group with a mixture-of-experts model");
}

} // namespace

ParallelPlan read_plan(const core::Node& node, const model::ModelSpec& model, std::optional<int> gpus)
{
  core::ObjectReader in(node);
  PlanReading r{in, model, gpus, {}};
  for (const auto& key : plan_keys())
    key.read(r);
  in.finish();
  return r.plan;
}

// LoRA as simulated: dense layers of standard attention; under tensor parallelism Megatron-core's adapters, 16-bit
// beside FP8 base GEMMs (NeMo's and Megatron-Bridge's ParallelLinearAdapter), no 4-bit base.
template <class Warn>
void check_lora(const ParallelPlan& p, const core::Node& node, const model::ModelSpec& m, const Warn& warn)
{
  if (p.base_quantization == BaseQuantization::NF4 && !p.lora())
    infeasible(node, "base_quantization", "a 4-bit base is QLoRA's: it trains LoRA adapters over frozen weights",
               "lora_rank > 0, or base_quantization none");
  if (!p.lora())
    return;
  if (p.lora_rank > m.hidden_size)
    infeasible(node, "lora_rank",
               fmt::format("{} exceeds hidden_size={} of model '{}'", p.lora_rank, m.hidden_size, m.name),
               "a rank below the projections' widths (8-64 in practice)");
  if (p.tp > 1 && p.base_quantization == BaseQuantization::NF4)
    infeasible(node, "base_quantization",
               fmt::format("bitsandbytes' 4-bit layers have no tensor-parallel form (tp={})", p.tp),
               "tp 1 (QLoRA shards its base with FSDP/ZeRO-3), or base_quantization none");
  if ((p.fp8() || p.full_precision()) && p.base_quantization == BaseQuantization::NF4)
    infeasible(node, "base_quantization",
               fmt::format("a 4-bit base is dequantized to 16 bits for its GEMMs, not run in {}",
                           core::choice_name(p.precision, training_precision_choices)),
               "precision bf16 or fp16, or base_quantization none");
  if (m.moe || m.mla)
    infeasible(node, "lora_rank",
               fmt::format("LoRA on {} layers of model '{}' is not simulated yet", m.moe ? "MoE" : "MLA", m.name),
               "a dense model with standard attention");
  if (p.lora_targets.has(LoraTarget::GATE) && !model::is_gated(m.ffn_kind) && p.lora_targets != LoraTargets{})
    warn("lora_targets", fmt::format("gate_proj: model '{}' has no gated FFN; no adapter there", m.name));
}

// ZeRO-Offload as simulated: optimizer state sharded by ZeRO, in the memory of a host the topology describes.
void check_offload(const ParallelPlan& p, const core::Node& node, const topology::ClusterSpec& cluster)
{
  if (p.delayed_update &&
      (p.offload_optimizer != OffloadDevice::CPU || p.offload_params != OffloadDevice::NONE || p.distributed_optimizer))
    infeasible(node, "delayed_update",
               p.offload_optimizer != OffloadDevice::CPU
                   ? fmt::format("the delayed update is ZeRO-Offload's, whose optimizer runs on the CPU; the plan has "
                                 "offload_optimizer {}",
                                 core::choice_name(p.offload_optimizer, offload_device_choices))
               : p.distributed_optimizer
                   ? std::string("the delayed update is ZeRO-Offload's, not Megatron-core's hybrid optimizer "
                                 "(distributed_optimizer)")
                   : std::string("the delayed update is ZeRO-Offload's, with the parameters on the GPUs; the "
                                 "plan offloads them too (offload_params)"),
               "offload_optimizer cpu with zero_stage 1-3 and offload_params none, or delayed_update false");
  if (p.offload_params != OffloadDevice::NONE) {
    if (p.zero_stage < 3)
      infeasible(
          node, "offload_params",
          fmt::format("parameters are offloaded in shards, which ZeRO-3 / FSDP makes; the plan has zero_stage {}",
                      p.zero_stage),
          "zero_stage 3 with offload_params cpu");
    if (p.offload_optimizer == OffloadDevice::NONE)
      infeasible(node, "offload_params",
                 "parameters offloaded with the optimizer on the GPU are not simulated yet (FSDP's CPUOffload and "
                 "ZeRO-Infinity's configurations offload both)",
                 "offload_optimizer cpu with offload_params cpu");
  }
  if (p.offload_activations &&
      (!cluster.node.pcie || cluster.node.host.memory_bandwidth <= 0 || cluster.node.host.memory_bytes <= 0))
    infeasible(node, "offload_activations",
               fmt::format("topology '{}' does not describe its hosts (node.pcie and node.host with memory and "
                           "memory_bandwidth), where activations are offloaded",
                           cluster.name),
               "a topology with node.pcie and node.host, or offload_activations false");
  if (p.offload_optimizer == OffloadDevice::NONE)
    return;
  if (p.full_precision())
    infeasible(node, "offload_optimizer",
               fmt::format("offloading the optimizer of {} training is not simulated (ZeRO-Offload and Megatron-core's "
                           "hybrid optimizer are simulated with 16-bit weights beside fp32 state)",
                           core::choice_name(p.precision, training_precision_choices)),
               "precision bf16 or fp16, or offload_optimizer none");
  if (p.zero_stage == 0 && !p.distributed_optimizer)
    infeasible(node, "offload_optimizer",
               "the optimizer state offloaded is a shard of ZeRO's or of the distributed optimizer; the plan has "
               "neither",
               "zero_stage 1-3 or distributed_optimizer true, with offload_optimizer cpu");
  if (p.offload_fraction < 1 && p.offload_params != OffloadDevice::NONE)
    infeasible(node, "offload_fraction",
               fmt::format("{:g} of the optimizer offloaded with the parameters on the host is not simulated",
                           p.offload_fraction),
               "offload_fraction 1 with offload_params cpu");
  if ((p.offload_optimizer == OffloadDevice::NVME || p.offload_params == OffloadDevice::NVME) && p.zero_stage < 3)
    infeasible(node, p.offload_optimizer == OffloadDevice::NVME ? "offload_optimizer" : "offload_params",
               fmt::format("offload to NVMe is ZeRO-Infinity's, which runs with ZeRO-3 (DeepSpeed's stage 3 "
                           "offload); the plan has zero_stage {}{}",
                           p.zero_stage, p.distributed_optimizer ? " and the distributed optimizer" : ""),
               "zero_stage 3 with offload to nvme, or offload to cpu");
  if ((p.offload_optimizer == OffloadDevice::NVME || p.offload_params == OffloadDevice::NVME) &&
      cluster.node.host.nvme.drives == 0)
    infeasible(node, p.offload_optimizer == OffloadDevice::NVME ? "offload_optimizer" : "offload_params",
               fmt::format("topology '{}' has no NVMe drives to offload to (node.host.nvme)", cluster.name),
               "a topology with node.host.nvme, or offload to cpu");
  if (p.offload_fraction < 1 && p.offload_optimizer == OffloadDevice::NVME)
    infeasible(node, "offload_fraction",
               fmt::format("{:g} of the optimizer on NVMe is not simulated (Megatron-core's fraction offloads to the "
                           "CPU)",
                           p.offload_fraction),
               "offload_fraction 1 with offload_optimizer nvme");
  if (!cluster.node.pcie || cluster.node.host.memory_bandwidth <= 0 || cluster.node.host.memory_bytes <= 0)
    infeasible(node, "offload_optimizer",
               fmt::format("topology '{}' does not describe its hosts (node.pcie and node.host with memory and "
                           "memory_bandwidth), which offload runs on",
                           cluster.name),
               "a topology with node.pcie and node.host, or offload_optimizer none");
}

std::vector<core::Warning> check_plan(const ParallelPlan& p, const core::Node& node, const model::ModelSpec& m,
                                      const topology::ClusterSpec& cluster, int gpus)
{
  std::vector<core::Warning> warnings;
  auto warn = [&](std::string_view key, std::string message) {
    warnings.push_back(core::Warning{key_location(node, key), std::move(message)});
  };

  if (p.gpus() != gpus)
    infeasible(node, "dp",
               p.cp > 1 ? fmt::format("tp*pp*cp*dp = {}*{}*{}*{} = {} does not match the cluster's {} GPUs", p.tp, p.pp,
                                      p.cp, p.dp, p.gpus(), gpus)
                        : fmt::format("tp*pp*dp = {}*{}*{} = {} does not match the cluster's {} GPUs", p.tp, p.pp, p.dp,
                                      p.gpus(), gpus),
               p.cp > 1 ? "tp*pp*cp*dp equal to the GPU count" : "tp*pp*dp equal to the GPU count");

  if (!tp_splits_heads(m, p.tp))
    infeasible(
        node, "tp",
        fmt::format("{} does not divide num_attention_heads={} of model '{}'", p.tp, m.num_attention_heads, m.name));
  if (!tp_splits_kv_heads(m, p.tp))
    infeasible(node, "tp",
               fmt::format("{} does not divide num_kv_heads={} of model '{}'", p.tp, m.num_kv_heads, m.name));
  if (!tp_splits_ffn(m, p.tp))
    infeasible(node, "tp",
               fmt::format("{} does not divide ffn_hidden_size={} of model '{}'", p.tp, m.ffn_hidden_size, m.name));

  check_experts(p, node, m);
  check_context(p, node, m);

  if (p.layers_per_chunk.empty()) {
    if (p.virtual_stages > 1)
      infeasible(node, "virtual_stages",
                 fmt::format("pp*virtual_stages = {}*{} = {} chunks exceed num_layers={} of model '{}'", p.pp,
                             p.virtual_stages, p.chunks(), m.num_layers, m.name),
                 "at least one layer per chunk");
    infeasible(node, "pp", fmt::format("{} stages exceed num_layers={} of model '{}'", p.pp, m.num_layers, m.name),
               "at least one layer per stage");
  }

  const std::int64_t per_step = static_cast<std::int64_t>(p.micro_batch) * p.dp;
  if (!batch_splits(p.global_batch, p.micro_batch, p.dp))
    infeasible(node, "global_batch",
               fmt::format("{} is not divisible by micro_batch*dp = {}*{} = {}", p.global_batch, p.micro_batch, p.dp,
                           per_step));

  if (p.schedule == Schedule::INTERLEAVED) {
    if (p.virtual_stages < 2)
      infeasible(node, "virtual_stages", "the interleaved schedule needs virtual_stages >= 2",
                 "virtual_stages >= 2, or schedule 1f1b");
    if (p.pp < 2)
      infeasible(node, "schedule", "the interleaved schedule needs pp >= 2", "pp >= 2, or schedule 1f1b");
    if (!interleaving_splits_microbatches(p.microbatches(), p.pp))
      infeasible(node, "global_batch",
                 fmt::format("the interleaved schedule needs the {} micro-batches per step to be a multiple of pp={} "
                             "(as Megatron-LM requires)",
                             p.microbatches(), p.pp));
    if (p.software.pipeline_engine == PipelineEngine::DEEPSPEED)
      infeasible(node, "schedule", "DeepSpeed's pipeline engine runs only the non-interleaved 1F1B schedule",
                 "schedule 1f1b, or pipeline_engine megatron");
  } else if (p.dualpipe()) {
    check_dualpipe(p, node);
  } else if (p.virtual_stages > 1) {
    infeasible(node, "virtual_stages",
               fmt::format("virtual_stages={} needs the interleaved schedule", p.virtual_stages),
               "schedule \"interleaved\", or virtual_stages 1");
  }

  if (zero_shards_gradients(p.zero_stage) && p.pp > 1)
    infeasible(node, "zero_stage",
               fmt::format("ZeRO stage {} shards gradients, which DeepSpeed cannot combine with pipeline parallelism "
                           "(pp={})",
                           p.zero_stage, p.pp),
               "zero_stage 0 or 1 with pp > 1");
  if (p.zero_stage >= 1 && p.distributed_optimizer)
    infeasible(node, "distributed_optimizer",
               "the distributed optimizer and ZeRO both shard the optimizer state; choose one",
               "distributed_optimizer false, or zero_stage 0");

  if (p.shard_group > 0)
    check_shard_group(p, node, m);

  check_lora(p, node, m, warn);
  check_documents(p, node);
  check_offload(p, node, cluster);

  if (p.skipped_steps > 0 && p.precision != hardware::Precision::FP16)
    infeasible(node, "skipped_steps",
               fmt::format("only fp16's loss scaler skips steps; the plan trains in {}",
                           core::choice_name(p.precision, training_precision_choices)),
               "precision fp16, or skipped_steps 0");

  if (m.position_embedding == model::PositionEmbedding::LEARNED && p.seq_length > m.seq_length)
    infeasible(node, "seq_length",
               fmt::format("{} exceeds the {} learned positions of model '{}'", p.seq_length, m.seq_length, m.name));

  if (!cluster.gpu.peak(p.precision)) {
    const auto name = core::choice_name(p.precision, hardware::precision_choices);
    infeasible(node, "precision", fmt::format("{} has no {} rate in its catalogue entry", cluster.gpu.name, name),
               "a precision listed in the GPU's peak_flops");
  }
  if (p.full_precision() && !p.fp32_grad_accumulation)
    infeasible(node, "fp32_grad_accumulation",
               fmt::format("false, but {} training keeps and reduces its gradients in fp32",
                           core::choice_name(p.precision, training_precision_choices)),
               "fp32_grad_accumulation true (or left out)");

  if (p.fp8_param_gather && !p.distributed_optimizer && p.zero_stage != 3)
    infeasible(node, "fp8_param_gather",
               "FP8 parameters are gathered by Megatron-core's distributed optimizer or by FSDP (ZeRO-3, torchao's "
               "float8 all-gather), neither of which the plan uses",
               "distributed_optimizer true or zero_stage 3, or fp8_param_gather false");

  if (p.sequence_parallel && p.tp == 1)
    warn("sequence_parallel", "has no effect with tp=1 (Megatron-LM turns it off)");
  if (p.overlap_param_gather && !((p.distributed_optimizer || p.zero_stage == 1 || p.zero_stage == 2) && p.dp > 1))
    warn("overlap_param_gather", "has no effect without a sharded optimizer (distributed_optimizer, zero_stage 1 or 2) "
                                 "and dp > 1");
  if (p.tp_comm_overlap && (!p.sequence_parallel || p.tp == 1))
    warn("tp_comm_overlap", "has no effect without sequence_parallel and tp > 1 (Megatron-core requires both)");
  if (p.full_precision())
    warn("precision",
         fmt::format("{0} GEMMs and attention priced at {1}'s {0} peak times its measured 16-bit efficiencies: the "
                     "catalogue has no measured {0} GEMM rate (GeForce cards' fp32 peaks count dual-issue FP32 units "
                     "a GEMM does not fill)",
                     core::choice_name(p.precision, training_precision_choices), cluster.gpu.name));

  // Fewer micro-batches than stages: most of the pipeline idles (GPipe and 1F1B: (p-1)/(m+p-1)).
  if (p.pp > 1 && p.microbatches() < p.pp) {
    const double m_ = static_cast<double>(p.microbatches());
    const double bubble = (p.pp - 1.0) / (m_ * p.virtual_stages + p.pp - 1.0);
    warn("global_batch",
         fmt::format("{} micro-batch{} per step for {} pipeline stages: about {:.0f}% of the pipeline phase is bubble; "
                     "a global_batch of {} or more (several micro-batches per stage) keeps it small",
                     p.microbatches(), p.microbatches() == 1 ? "" : "es", p.pp, 100.0 * bubble,
                     4LL * p.pp * p.micro_batch * p.dp));
  }

  // TP groups that straddle nodes run their per-layer all-reduces over the NICs.
  if (p.tp > 1) {
    int spanning = 0;
    int worst = 1;
    for (int d = 0; d < p.size(ParallelDim::DP); ++d)
      for (int stage = 0; stage < p.pp; ++stage) {
        if (rank_of(p, {0, d, stage}) >= gpus)
          continue;
        std::map<int, int> nodes;
        for (int t = 0; t < p.tp; ++t)
          ++nodes[rank_of(p, RankCoords{t, d, stage}) / cluster.node.gpus];
        if (nodes.size() > 1) {
          ++spanning;
          worst = std::max(worst, static_cast<int>(nodes.size()));
        }
      }
    if (spanning > 0)
      warn("tp", fmt::format("{} of {} tensor-parallel groups span nodes (up to {} nodes each): their all-reduces "
                             "cross the inter-node network",
                             spanning, gpus / p.tp, worst));
  }

  if (p.ideal) { // identical chunks: as many layers of each kind (MoE or dense, local or global attention)
    std::vector<std::array<int, 4>> kinds;
    for (int vs = 0; vs < static_cast<int>(p.layers_per_chunk.size()); ++vs) {
      std::array<int, 4> count{};
      int layer = 0;
      for (int c = 0; c < vs; ++c)
        layer += p.layers_per_chunk[static_cast<std::size_t>(c)];
      for (int l = 0; l < p.layers_per_chunk[static_cast<std::size_t>(vs)]; ++l, ++layer)
        ++count[static_cast<std::size_t>((m.is_moe_layer(layer) ? 1 : 0) + (m.is_local_attention(layer) ? 2 : 0))];
      kinds.push_back(count);
    }
    if (std::adjacent_find(kinds.begin(), kinds.end(), std::not_equal_to<>()) != kinds.end()) {
      const bool counts_differ = std::adjacent_find(p.layers_per_chunk.begin(), p.layers_per_chunk.end(),
                                                    std::not_equal_to<>()) != p.layers_per_chunk.end();
      infeasible(
          node, "ideal",
          fmt::format("an ideal pipeline needs identical stages; the {} layers of model '{}' split into {} {} {}",
                      m.num_layers, m.name, p.layers_per_chunk.size(), p.virtual_stages > 1 ? "chunks" : "stages",
                      counts_differ ? fmt::format("of {} layers", fmt::join(p.layers_per_chunk, ", "))
                                    : "whose layers differ in kind (MoE or dense, local or global attention)"),
          "pp (x virtual_stages) dividing the layers, and the same kinds of layer in each");
    }
  }
  if (p.layers_per_chunk.size() > 1) {
    const auto [lo, hi] = std::minmax_element(p.layers_per_chunk.begin(), p.layers_per_chunk.end());
    if (*lo != *hi && !node.json().contains("layers_per_stage"))
      warn(p.schedule == Schedule::INTERLEAVED ? "virtual_stages" : "pp",
           fmt::format("{} layers do not split evenly into {} {}; balanced as {} to {} layers (fewer on the first "
                       "and last, which also hold the embedding and the output layer)",
                       m.num_layers, p.schedule == Schedule::DUALPIPE ? p.pp : p.chunks(),
                       p.virtual_stages > 1 && p.schedule != Schedule::DUALPIPE ? "chunks" : "stages", *lo, *hi));
  }
  return warnings;
}

} // namespace sim::plan
