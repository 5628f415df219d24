#include "report/analysis.hpp"

#include "core/units.hpp"
#include "model/param_count.hpp"
#include "plan/plan_keys.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace sim::report {
namespace {

template <class E, std::size_t N>
std::string name_of(E value, const std::array<core::Choice<E>, N>& choices)
{
  return std::string(core::choice_name(value, choices));
}

std::string flop_count(double flops)
{
  if (flops >= 1e18)
    return fmt::format("{:.3f} EFLOP", flops / 1e18);
  if (flops >= 1e15)
    return fmt::format("{:.3f} PFLOP", flops / 1e15);
  if (flops >= 1e12)
    return fmt::format("{:.3f} TFLOP", flops / 1e12);
  return fmt::format("{:.3f} GFLOP", flops / 1e9);
}

std::string gib(double bytes)
{
  return fmt::format("{:.2f}", bytes / (1024.0 * 1024.0 * 1024.0));
}

} // namespace

Analysis analyse(const scenario::Scenario& s)
{
  Analysis a;
  const auto& p = s.plan;
  a.memory = memory::estimate_memory(s.model, p, s.cluster);
  const auto seq = static_cast<double>(p.seq_length);
  // Packed documents count as sequences of their own: the same tokens, attention over each document.
  const double span = p.attention_span();
  const double documents = seq / span;
  a.layer_forward = model::layer_forward_flops(s.model, span, p.micro_batch * documents);
  a.logits_forward = model::logits_forward_flops(s.model, seq, p.micro_batch);
  a.step = model::step_flops(s.model, span, static_cast<double>(p.global_batch) * documents, p.recompute,
                             p.recompute_modules, p.lora());
  a.tokens_per_step = seq * static_cast<double>(p.global_batch);
  a.peak_flops = topology::mean_peak(s.cluster, p.compute_precision(), s.gpus);
  return a;
}

std::string parallel_extras(const plan::ParallelPlan& p)
{
  std::string out;
  if (p.cp > 1)
    out += fmt::format(" x CP {} ({})", p.cp, name_of(p.cp_kind, plan::cp_kind_choices));
  if (p.ep > 1) {
    out += fmt::format(" (EP {}", p.ep);
    if (p.etp != p.tp)
      out += fmt::format(", ETP {}", p.etp);
    if (p.moe_dispatcher == plan::MoeDispatcher::DEEPEP)
      out += p.moe_fp8_dispatch ? ", DeepEP in FP8" : ", DeepEP";
    if (p.moe_a2a_overlap)
      out += ", all-to-all overlapped";
    out += ")";
  }
  return out;
}

std::string recompute_text(const plan::ParallelPlan& p)
{
  std::string text(name_of(p.recompute, model::recompute_choices));
  if (p.recompute != model::Recompute::SELECTIVE || p.recompute_modules == model::RecomputeModules{})
    return text;
  return fmt::format("{} ({})", text, fmt::join(model::recompute_module_names(p.recompute_modules), ", "));
}

std::string sharding_text(const plan::ParallelPlan& p)
{
  std::string out = p.zero_stage > 0 ? fmt::format(", ZeRO-{}", p.zero_stage) : "";
  if (p.distributed_optimizer)
    out += ", distributed optimizer";
  if (p.shard_group > 0 && p.shard_replicas() > 1)
    out += fmt::format(" in shard groups of {} ({} copies)", p.shard_group, p.shard_replicas());
  return out;
}

std::string training_text(const plan::ParallelPlan& p)
{
  std::string out;
  if (p.document_length > 0)
    out += fmt::format(", packed documents of {} tokens", p.document_length);
  if (p.lora()) {
    int targets = 0;
    for (const auto& c : plan::lora_target_choices)
      targets += p.lora_targets.has(c.value) ? 1 : 0;
    out += fmt::format(", LoRA rank {} on {} projection{}", p.lora_rank, targets, targets == 1 ? "" : "s");
    if (p.lora_dropout > 0)
      out += fmt::format(" (dropout {:g} on the adapters' {})", p.lora_dropout,
                         p.lora_dropout_position == plan::LoraDropoutAt::OUTPUT ? "outputs" : "inputs");
    if (p.base_quantization == plan::BaseQuantization::NF4)
      out += " over an NF4 base (QLoRA)";
  }
  if (p.optimizer_algorithm != plan::OptimizerAlgorithm::ADAM)
    out += fmt::format(", {} optimizer", name_of(p.optimizer_algorithm, plan::optimizer_algorithm_choices));
  const auto where = [](plan::OffloadDevice d) { return d == plan::OffloadDevice::NVME ? "NVMe" : "the CPU"; };
  if (p.offload_optimizer != plan::OffloadDevice::NONE) {
    const std::string optimizer = fmt::format("optimizer offloaded to {}", where(p.offload_optimizer));
    out += p.offload_params == plan::OffloadDevice::NONE
               ? ", " + optimizer
               : fmt::format(", parameters offloaded to {}, {}", where(p.offload_params), optimizer);
    out += p.cpu_optimizer == plan::CpuOptimizer::DEEPSPEED ? " (DeepSpeed's CPU Adam)" : " (PyTorch's optimizer)";
  }
  if (p.offload_activations)
    out += ", activations offloaded to the CPU";
  return out;
}

std::string software_text(const plan::ParallelPlan& p)
{
  const auto& sw = p.software;
  const char* dtype = p.fp32_grad_accumulation ? "fp32" : (p.precision == hardware::Precision::FP16 ? "fp16" : "bf16");
  std::string reduce;
  if (p.dp * p.cp > 1)
    reduce = fmt::format(", reduced in {} buckets {}", core::format_bytes(p.dp_bucket_bytes),
                         p.overlap_grad_reduce ? "during the backward pass" : "after the backward pass");
  return fmt::format("software: {} (framework {}, software {}): gradients in {}{}; norm_impl {}, attention {}, "
                     "optimizer {}",
                     plan::generation_summary(sw.generation), name_of(sw.framework, plan::framework_choices),
                     name_of(sw.generation, plan::generation_choices), dtype, reduce,
                     name_of(sw.norm, plan::norm_impl_choices), name_of(sw.attention, plan::attention_choices),
                     name_of(sw.optimizer, plan::optimizer_impl_choices));
}

std::string reserved_text(const memory::MemoryEstimate& m)
{
  return fmt::format(
      "HBM less the CUDA context ({}){}", core::format_bytes(m.cuda_context_bytes),
      m.headroom_bytes > 0 ? fmt::format(" and the plan's headroom ({})", core::format_bytes(m.headroom_bytes)) : "");
}

core::Json host_memory_json(const memory::MemoryEstimate& m)
{
  return {{"node_bytes", m.host_node_bytes}, {"capacity_bytes", m.host_capacity_bytes}, {"oom", m.host_oom}};
}

std::string host_memory_line(const memory::MemoryEstimate& m)
{
  const auto& worst = *std::max_element(m.per_stage.begin(), m.per_stage.end(),
                                        [](const auto& a, const auto& b) { return a.host_bytes < b.host_bytes; });
  const std::string offloaded =
      fmt::format("offloaded {} per GPU (stage {}), {} per node", core::format_bytes(worst.host_bytes), worst.stage,
                  core::format_bytes(m.host_node_bytes));
  if (m.host_capacity_bytes <= 0)
    return offloaded + "; the topology gives no host memory";
  if (m.host_oom)
    return fmt::format("{} of {}: OUT OF HOST MEMORY by {}", offloaded, core::format_bytes(m.host_capacity_bytes),
                       core::format_bytes(m.host_node_bytes - m.host_capacity_bytes));
  return fmt::format("{} of {} ({:.0f}%): fits", offloaded, core::format_bytes(m.host_capacity_bytes),
                     100.0 * m.host_node_bytes / m.host_capacity_bytes);
}

core::Json nvme_memory_json(const memory::MemoryEstimate& m)
{
  return {{"node_bytes", m.nvme_node_bytes}, {"capacity_bytes", m.nvme_capacity_bytes}, {"oom", m.nvme_oom}};
}

std::string nvme_memory_line(const memory::MemoryEstimate& m)
{
  const std::string swapped = fmt::format("swapped {} per node", core::format_bytes(m.nvme_node_bytes));
  if (m.nvme_oom)
    return fmt::format("{} to {} of drives: OUT OF NVMe SPACE by {}", swapped,
                       core::format_bytes(m.nvme_capacity_bytes),
                       core::format_bytes(m.nvme_node_bytes - m.nvme_capacity_bytes));
  return fmt::format("{} to {} of drives ({:.0f}%): fits", swapped, core::format_bytes(m.nvme_capacity_bytes),
                     100.0 * m.nvme_node_bytes / m.nvme_capacity_bytes);
}

core::Json plan_json(const plan::ParallelPlan& p)
{
  core::Json j;
  for (const auto& key : plan::plan_keys())
    if (auto value = key.report_value(p); !value.is_null())
      j[core::Json::json_pointer(key.report)] = std::move(value);
  j["microbatches"] = p.microbatches(); // per pipeline and step: what global_batch, micro_batch and dp make
  return j;
}

core::Json analysis_json(const scenario::Scenario& s, const Analysis& a)
{
  core::Json j;
  j["kind"] = "analysis";
  j["note"] = "analytic memory and FLOP estimate from the architecture and the plan; no simulation";
  j["scenario"] = {{"name", s.name}, {"file", s.file}};
  const auto counts = model::count_params(s.model);
  j["model"] = {{"name", s.model.name},
                {"params", counts.total},
                {"active_params", counts.active},
                {"num_layers", s.model.num_layers},
                {"hidden_size", s.model.hidden_size},
                {"num_attention_heads", s.model.num_attention_heads},
                {"num_kv_heads", s.model.num_kv_heads},
                {"ffn_hidden_size", s.model.ffn_hidden_size},
                {"vocab_size", s.model.vocab_size}};
  j["cluster"] = {{"name", s.cluster.name},
                  {"gpu", s.cluster.gpu.name},
                  {"gpus", s.gpus},
                  {"nodes", s.nodes},
                  {"gpus_per_node", s.cluster.node.gpus},
                  {"hbm_bytes", s.cluster.gpu.memory_bytes},
                  {"peak_flops_per_gpu", a.peak_flops}};
  j["plan"] = plan_json(s.plan);

  core::Json stages = core::Json::array();
  for (const auto& st : a.memory.per_stage) {
    stages.push_back({{"stage", st.stage},
                      {"layers", st.layers},
                      {"params", st.params},
                      {"expert_params", st.expert_params},
                      {"trainable_params", st.trainable_params},
                      {"weights_bytes", st.weights_bytes},
                      {"grads_bytes", st.grads_bytes},
                      {"optimizer_bytes", st.optimizer_bytes},
                      {"layer_state_bytes", st.layer_state_bytes},
                      {"activations_bytes", st.activations_bytes},
                      {"layer_activations_bytes", st.layer_activations_bytes},
                      {"microbatches_in_flight", st.in_flight.per_chunk},
                      {"buffers_bytes", st.buffers_bytes},
                      {"working_bytes", st.working_bytes},
                      {"host_bytes", st.host_bytes},
                      {"nvme_bytes", st.nvme_bytes},
                      {"peak_bytes", st.peak_bytes},
                      {"free_bytes", st.capacity_bytes - st.peak_bytes},
                      {"oom", st.oom}});
  }
  j["memory"] = {{"params", a.memory.params},
                 {"active_params", a.memory.active_params},
                 {"capacity_bytes", a.memory.capacity_bytes},
                 {"cuda_context_bytes", a.memory.cuda_context_bytes},
                 {"headroom_bytes", a.memory.headroom_bytes},
                 {"layer_activation_bytes", a.memory.layer_activation_bytes},
                 {"peak_stage", a.memory.peak_stage},
                 {"oom", a.memory.oom},
                 {"host", host_memory_json(a.memory)},
                 {"nvme", nvme_memory_json(a.memory)},
                 {"per_stage", stages}};

  const auto& l = a.layer_forward;
  j["flops"] = {{"layer_forward_per_microbatch",
                 {{"qkv", l.qkv},
                  {"attention_scores", l.attention_scores},
                  {"attention_context", l.attention_context},
                  {"projection", l.projection},
                  {"ffn", l.ffn},
                  {"total", l.total()}}},
                {"logits_forward_per_microbatch", a.logits_forward},
                {"step",
                 {{"forward", a.step.forward},
                  {"backward", a.step.backward},
                  {"recompute", a.step.recompute},
                  {"model", a.step.model()},
                  {"hardware", a.step.hardware()}}},
                {"tokens_per_step", a.tokens_per_step},
                {"model_flops_per_token", a.step.model() / a.tokens_per_step},
                {"step_time_at_peak_s", a.step.hardware() / (a.peak_flops * s.gpus)}};

  core::Json warnings = core::Json::array();
  for (const auto& w : s.warnings)
    warnings.push_back(core::format_warning(w));
  j["warnings"] = warnings;
  return j;
}

std::string analysis_text(const scenario::Scenario& s, const Analysis& a)
{
  const auto& p = s.plan;
  const auto& m = s.model;
  std::string out;
  auto line = [&out](const std::string& text) { out += text + "\n"; };

  line(fmt::format("{} ({})", s.name, s.file));
  // The file's description speaks of the file's plan: say when the command line changed what it describes.
  if (!s.description.empty() && s.overrides.empty())
    line(s.description);
  else if (!s.description.empty())
    line(fmt::format("{} (as the file describes it, before --set {})", s.description,
                     core::clip(fmt::format("{}", fmt::join(s.overrides, " --set ")), 160)));
  line("Analytic estimate from the architecture and the plan (memory model and FLOP count; no simulation).");
  line("");
  line(fmt::format("model    {}: {} layers, hidden {}, {} heads ({} KV), FFN {} ({}), vocab {}; {} parameters{}",
                   m.name, m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads, m.ffn_hidden_size,
                   name_of(m.ffn_kind, model::ffn_kind_choices), m.vocab_size, core::format_count(a.memory.params),
                   m.mtp_layers > 0 ? fmt::format(" ({} of them in {} multi-token-prediction module{})",
                                                  core::format_count(model::count_params(m).mtp), m.mtp_layers,
                                                  m.mtp_layers == 1 ? "" : "s")
                                    : ""));
  if (m.moe)
    line(fmt::format("         {} MoE layers of {} experts ({} per token, FFN {}{}); {} active parameters per token "
                     "(FLOPs and MFU count these)",
                     m.moe_layers(), m.moe->num_experts, m.moe->experts_per_token, m.moe->expert_ffn_hidden_size,
                     m.moe->shared_expert_ffn_hidden_size > 0
                         ? fmt::format(", shared expert FFN {}", m.moe->shared_expert_ffn_hidden_size)
                         : "",
                     core::format_count(a.memory.active_params)));
  line(fmt::format("cluster  {}: {} x {} ({} node{} of {}), {} HBM, {} peak {}", s.cluster.name, s.gpus,
                   s.cluster.gpu.name, s.nodes, s.nodes == 1 ? "" : "s", s.cluster.node.gpus,
                   core::format_bytes(s.cluster.gpu.memory_bytes), core::format_flop_rate(a.peak_flops),
                   name_of(p.compute_precision(), plan::training_precision_choices)));
  if (p.fp8())
    line(
        fmt::format("         FP8 linear layers ({} scaling{}), GEMMs {:.2f}x the bf16 rate; MFU against the bf16 peak",
                    name_of(p.fp8_recipe, plan::fp8_recipe_choices), p.fp8_param_gather ? ", FP8 parameters" : "",
                    s.cluster.gpu.fp8_speedup().value_or(0.0)));
  std::string schedule = name_of(p.schedule, plan::schedule_choices);
  if (p.schedule == plan::Schedule::INTERLEAVED)
    schedule += fmt::format(" (v={})", p.virtual_stages);
  line(fmt::format("plan     TP {} x PP {} x DP {}{}; micro-batch {}, global batch {} ({} micro-batch{} per pipeline), "
                   "sequence {}; {}; recompute {}{}{}{}",
                   p.tp, p.pp, p.dp, parallel_extras(p), p.micro_batch, p.global_batch, p.microbatches(),
                   p.microbatches() == 1 ? "" : "es", p.seq_length, schedule, recompute_text(p),
                   p.sequence_parallel ? ", sequence parallel" : "", sharding_text(p), training_text(p)));
  line("");
  line("Memory per GPU, one GPU of each pipeline stage (GiB)");
  line(fmt::format("{:>5} {:>6} {:>9} {:>8} {:>8} {:>9} {:>11} {:>7} {:>7} {:>8} {:>8}  {}", "stage", "layers",
                   "params", "weights", "grads", "optimizer", "activations", "buffers", "working", "peak", "free",
                   "mb in flight"));
  for (const auto& st : a.memory.per_stage) {
    std::string held;
    for (std::size_t c = 0; c < st.in_flight.per_chunk.size(); ++c) {
      if (c > 0)
        held += '+';
      held += std::to_string(st.in_flight.per_chunk[c]);
    }
    line(fmt::format("{:>5} {:>6} {:>9} {:>8} {:>8} {:>9} {:>11} {:>7} {:>7} {:>8} {:>8}  {}{}", st.stage, st.layers,
                     core::format_count(st.params), gib(st.weights_bytes), gib(st.grads_bytes), gib(st.optimizer_bytes),
                     gib(st.activations_bytes), gib(st.buffers_bytes), gib(st.working_bytes), gib(st.peak_bytes),
                     gib(st.capacity_bytes - st.peak_bytes), held, st.oom ? "  OUT OF MEMORY" : ""));
  }
  const auto& worst = a.memory.per_stage[static_cast<std::size_t>(a.memory.peak_stage)];
  const double capacity = worst.capacity_bytes;
  if (a.memory.oom) {
    int failing = 0;
    for (const auto& st : a.memory.per_stage)
      failing += st.oom ? 1 : 0;
    line(fmt::format("verdict  OUT OF MEMORY: stage {} needs {} of {} ({} over); {} of {} stages do not fit",
                     worst.stage, core::format_bytes(worst.peak_bytes), core::format_bytes(capacity),
                     core::format_bytes(worst.peak_bytes - capacity), failing, a.memory.per_stage.size()));
  } else {
    line(fmt::format("verdict  fits: the GPU with the least room (stage {}) uses {} of {} ({:.0f}%), {} free",
                     worst.stage, core::format_bytes(worst.peak_bytes), core::format_bytes(capacity),
                     100.0 * worst.peak_bytes / capacity, core::format_bytes(capacity - worst.peak_bytes)));
  }
  line("         usable: " + reserved_text(a.memory));
  if (a.memory.host_node_bytes > 0)
    line("host     " + host_memory_line(a.memory));
  if (a.memory.nvme_node_bytes > 0)
    line("nvme     " + nvme_memory_line(a.memory));
  line(fmt::format("         activations per layer per micro-batch: {}; NCCL's buffers and the allocator's "
                   "fragmentation are not counted (plan.memory_headroom keeps room for them)",
                   core::format_bytes(a.memory.layer_activation_bytes)));
  line("");
  line("FLOPs per step (matrix multiplies; forward 1x, backward 2x)");
  line(fmt::format("  forward {}, backward {}, recomputation {}", flop_count(a.step.forward),
                   flop_count(a.step.backward), flop_count(a.step.recompute)));
  line(fmt::format("  model FLOPs {} ({:.2f} x {}params per token), hardware FLOPs {} over {} tokens",
                   flop_count(a.step.model()), a.step.model() / a.tokens_per_step / a.memory.active_params,
                   m.moe ? "active " : "", flop_count(a.step.hardware()), core::format_count(a.tokens_per_step)));
  line(fmt::format("  at 100% of peak on all {} GPUs one step would take {} (a lower bound, not a prediction)", s.gpus,
                   core::format_time(a.step.hardware() / (a.peak_flops * s.gpus))));
  for (const auto& w : s.warnings)
    line(core::format_warning(w));
  return out;
}

} // namespace sim::report
