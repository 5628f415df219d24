#include "validation/case_plan.hpp"

#include "model/flops.hpp"
#include "validation/software_choice.hpp"

#include <cmath>
#include <fmt/format.h>
#include <map>
#include <regex>

namespace sim::validation {
namespace {

using core::Json;

// The global batch in sequences: given as such, as tokens (global_batch_tokens, or a string naming tokens such as
// "4M tokens"), or from micro-batch x dp x gradient-accumulation steps.
std::optional<std::int64_t> global_batch(Conversion& conv, const Json& plan, std::int64_t seq,
                                         std::optional<std::int64_t> micro, std::int64_t dp)
{
  std::optional<double> tokens = number(plan, "global_batch_tokens");
  const Json* g = member(plan, "global_batch");
  if (g && g->is_string() && !tokens) {
    static const std::regex count(R"(^\s*([0-9]+(\.[0-9]+)?)\s*([kmb]?)\s*(tokens?)?\s*$)");
    std::smatch match;
    const std::string value = lower(g->get<std::string>());
    if (std::regex_match(value, match, count) && match[4].matched) {
      // "4M tokens" is 4 x 2^20 when that makes whole sequences (1024 x 4096), else 4 x 10^6.
      const int power = match[3] == "k" ? 1 : match[3] == "m" ? 2 : match[3] == "b" ? 3 : 0;
      const double n = std::stod(match[1].str());
      const double binary = n * std::pow(1024.0, power);
      const double decimal = n * std::pow(1000.0, power);
      tokens = std::fmod(binary, static_cast<double>(seq)) == 0.0 ? binary : decimal;
    } else if (!std::regex_match(value, match, count)) {
      return std::nullopt; // a range such as "32..64": measured per batch in a table
    }
  }
  if (tokens) {
    const double sequences = *tokens / static_cast<double>(seq);
    if (sequences < 1 || std::abs(sequences - std::round(sequences)) > 1e-6) {
      conv.refuse(fmt::format("a global batch of {} tokens is not a whole number of {}-token sequences", *tokens, seq));
      return std::nullopt;
    }
    conv.assume(fmt::format("global batch of {} tokens: {} sequences of {}", *tokens, std::llround(sequences), seq));
    return std::llround(sequences);
  }
  // AutoModel's and torchtitan's local batch: sequences per data-parallel rank per forward and backward, the global
  // batch a whole number of them (gradient accumulation).
  const auto local = integer(plan, "local_batch");
  if (const auto sequences = integer(plan, "global_batch")) {
    if (local && (*local == 0 || *sequences % (*local * dp) != 0)) {
      conv.refuse(fmt::format("global batch {} is not a multiple of local_batch x dp = {} x {}", *sequences,
                              text(plan, "local_batch"), dp));
      return std::nullopt;
    }
    return sequences;
  }
  if (local) {
    conv.assume(fmt::format("global batch from local_batch x dp: {} x {}", *local, dp));
    return *local * dp;
  }
  if (const auto steps = integer(plan, "grad_accum"); steps && micro)
    return *micro * dp * *steps;
  return std::nullopt;
}

// Expert parallelism: sizes, the token dispatcher, and whether dispatch and combine overlap another micro-batch's
// compute.
bool experts_of(Conversion& conv, const Json& plan, Json& p)
{
  if (const auto ep = integer(plan, "ep"); ep && *ep > 1)
    p["ep"] = *ep;
  if (const auto etp = integer(plan, "etp"))
    p["etp"] = *etp;
  if (member(plan, "moe_dispatcher")) {
    const auto d =
        conv.choice(plan, "moe_dispatcher",
                    {{"alltoall", "alltoall"}, {"deepep", "deepep"}, {"hybridep", "deepep"}, {"flex", "deepep"}});
    if (!d)
      return false;
    p["moe_dispatcher"] = *d;
  }
  if (const auto overlap = flag(plan, "moe_a2a_overlap"))
    p["moe_a2a_overlap"] = *overlap;
  if (const auto fp8 = flag(plan, "moe_fp8_dispatch"))
    p["moe_fp8_dispatch"] = *fp8;
  return true;
}

// Fine-tuning and offload (this project's extension of the case schema): LoRA adapters over a frozen base, the base's
// quantization, the optimizer's algorithm, offloaded state, and what the frameworks add around them (torch.compile,
// packed sequences).
bool fine_tuning_of(Conversion& conv, const Json& plan, Json& p)
{
  const auto rank = integer(plan, "lora_rank");
  if (rank && *rank > 0)
    p["lora_rank"] = *rank;
  if (const Json* dropout = member(plan, "lora_dropout"); dropout && dropout->is_number() && *dropout > 0)
    p["lora_dropout"] = dropout->get<double>();
  else if (dropout && !dropout->is_number()) {
    conv.refuse(fmt::format("plan.lora_dropout {} is not a number", dropout->dump()));
    return false;
  }
  if (member(plan, "lora_dropout_position")) { // PEFT drops the input; Megatron-core, NeMo, AutoModel the output
    const auto at = conv.choice(plan, "lora_dropout_position",
                                {{"input", "input"}, {"pre", "input"}, {"output", "output"}, {"post", "output"}});
    if (!at)
      return false;
    if (p.contains("lora_dropout"))
      p["lora_dropout_position"] = *at;
  }
  if (member(plan, "lora_scale_position")) { // PEFT and Megatron-core scale B's output; AutoModel A's
    const auto at = conv.choice(plan, "lora_scale_position", {{"output", "output"}, {"rank", "rank"}});
    if (!at)
      return false;
    if (p.contains("lora_rank"))
      p["lora_scale_position"] = *at;
  }
  if (const Json* targets = member(plan, "lora_targets")) {
    // Hugging Face's names, torchtune's output_proj, PEFT's "all-linear" (every projection: simtrain's default), and
    // Megatron-core's fused linear layers by NeMo 2's and NeMo 1's names (attention_qkv, attention_dense, mlp_fc1/2).
    static const std::map<std::string, std::string> names{{"q_proj", "q_proj"},
                                                          {"k_proj", "k_proj"},
                                                          {"v_proj", "v_proj"},
                                                          {"o_proj", "o_proj"},
                                                          {"output_proj", "o_proj"},
                                                          {"gate_proj", "gate_proj"},
                                                          {"up_proj", "up_proj"},
                                                          {"down_proj", "down_proj"},
                                                          {"linear_qkv", "linear_qkv"},
                                                          {"linear_proj", "linear_proj"},
                                                          {"linear_fc1", "linear_fc1"},
                                                          {"linear_fc2", "linear_fc2"},
                                                          {"attention_qkv", "linear_qkv"},
                                                          {"attention_dense", "linear_proj"},
                                                          {"mlp_fc1", "linear_fc1"},
                                                          {"mlp_fc2", "linear_fc2"}};
    const bool all = targets->is_string() && lower(targets->get<std::string>()) == "all-linear";
    if (!all) {
      if (!targets->is_array() || targets->empty()) {
        conv.refuse(
            fmt::format("plan.lora_targets {} is neither \"all-linear\" nor a list of projections", targets->dump()));
        return false;
      }
      Json list = Json::array();
      for (const auto& t : *targets) {
        const auto name = t.is_string() ? names.find(lower(t.get<std::string>())) : names.end();
        if (name == names.end()) {
          conv.refuse(
              fmt::format("plan.lora_targets: {} is not a projection simtrain knows (q_proj, k_proj, v_proj, "
                          "o_proj or output_proj, gate_proj, up_proj, down_proj; Megatron's linear_qkv, linear_proj, "
                          "linear_fc1, linear_fc2)",
                          t.dump()));
          return false;
        }
        list.push_back(name->second);
      }
      p["lora_targets"] = list;
    }
  }
  if (member(plan, "base_quantization")) {
    const auto q = conv.choice(plan, "base_quantization",
                               {{"none", "none"},
                                {"bf16", "none"},
                                {"nf4", "nf4"},
                                {"gptq", ""},
                                {"int8", ""},
                                {"llm.int8", ""},
                                {"awq", ""},
                                {"hqq", ""}});
    if (!q)
      return false;
    if (q->empty()) {
      conv.refuse(fmt::format("base_quantization \"{}\" is not modelled (bitsandbytes' NF4 is)",
                              text(plan, "base_quantization")));
      return false;
    }
    if (*q == "nf4" && mentions(lower(text(plan, "base_quantization")), "torchao"))
      conv.assume("torchao's NF4 tensor simulated as bitsandbytes' NF4 (the same 4.127 bits a weight; a "
                  "dequantization kernel before each GEMM)");
    p["base_quantization"] = *q;
  }
  if (member(plan, "optimizer")) {
    const std::string said = lower(text(plan, "optimizer"));
    const auto algorithm = conv.choice(plan, "optimizer",
                                       {{"pagedadamw8bit", "adam_8bit"},
                                        {"paged_adamw_8bit", "adam_8bit"},
                                        {"adamw8bit", "adam_8bit"},
                                        {"adamw_8bit", "adam_8bit"},
                                        {"adam8bit", "adam_8bit"},
                                        {"adamw", "adam"},
                                        {"adam", "adam"},
                                        {"sgd", "sgd"},
                                        {"lion", "lion"},
                                        {"adafactor", "adafactor"}});
    if (!algorithm)
      return false;
    if (*algorithm != "adam")
      p["optimizer_algorithm"] = *algorithm;
    if (mentions(said, "paged"))
      conv.assume("bitsandbytes' paged optimizer simulated with its state resident in HBM (paging to host memory, "
                  "which only happens when the GPU runs short, is not modelled)");
  }
  // Offload (ZeRO-Offload, ZeRO-Infinity, FSDP's CPUOffload): the device the optimizer state and parameters live on,
  // and which code updates them there.
  for (const char* key : {"offload_optimizer", "offload_params"})
    if (member(plan, key)) {
      const auto device = conv.choice(plan, key, {{"none", "none"}, {"cpu", "cpu"}, {"nvme", "nvme"}});
      if (!device)
        return false;
      p[key] = *device;
    }
  if (member(plan, "cpu_optimizer")) {
    const auto impl = conv.choice(plan, "cpu_optimizer", {{"deepspeed", "deepspeed"}, {"pytorch", "pytorch"}});
    if (!impl)
      return false;
    p["cpu_optimizer"] = *impl;
  }
  if (const auto delayed = flag(plan, "delayed_update"))
    p["delayed_update"] = *delayed;
  if (const auto packed = flag(plan, "packed"); packed && *packed) {
    conv.assume("sequences packed to the full length: every token counts");
    // Documents packed with their boundaries kept (NeMo's packed SFT, flash attention's variable-length kernels):
    // attention runs within each document.
    if (const auto length = integer(plan, "document_length"); length && *length > 0) {
      p["document_length"] = *length;
      conv.assume(fmt::format("each packed document (about {} tokens) attends only to itself", *length));
    }
  } else if (packed)
    conv.assume("sequences padded to the full length, padding counted as the source counts it");
  const std::string precision = lower(text(plan, "precision"));
  if (mentions(precision, "pure") || mentions(precision, "bf16-true")) {
    if (!p.contains("lora_rank")) {
      conv.refuse("pure bf16 training (weights, gradients and optimizer state all in bf16, no fp32 master copy) is "
                  "not modelled");
      return false;
    }
    conv.assume("pure bf16 under LoRA: the adapters' state simulated in mixed precision (they are a fraction of a "
                "percent of the weights)");
  }
  return true;
}

// The software generation and what the case's framework, date, scripts and notes say about it.
void software_of(Conversion& conv, const Json& plan, Json& p)
{
  const auto choice =
      choose_software(CaseText{.source = text(conv.case_json(), "source"),
                               .framework = text(plan, "framework"),
                               .notes = text(conv.case_json(), "notes"),
                               .zero_stage = static_cast<int>(p.value("zero_stage", 0)),
                               .fp32_accumulation = p.value("fp32_grad_accumulation", p["precision"] != "fp16"),
                               .sequence_parallel = p.value("sequence_parallel", false),
                               .fp8 = p["precision"] == "fp8",
                               .compiled = flag(plan, "compile").value_or(false)});
  for (const auto& [key, value] : choice.plan.items())
    p[key] = value;
  for (const auto& a : choice.assumptions)
    conv.assume(a);
  if (member(plan, "attention")) {
    const auto a = conv.choice(plan, "attention",
                               {{"flash3", "flash3"},
                                {"flash1", "flash1"},
                                {"flash", "flash2"},
                                {"cudnn", "cudnn"},
                                {"unfused", "unfused"},
                                {"te", "te"}});
    if (a)
      p["attention"] = *a;
  }
}

} // namespace

const std::set<std::string>& plan_fields()
{
  static const std::set<std::string> fields(
      {"tp", "pp", "dp", "cp", "ep", "etp", "moe_dispatcher", "moe_a2a_overlap", "moe_fp8_dispatch", "vpp",
       "micro_batch", "global_batch", "global_batch_tokens", "grad_accum", "recompute", "sequence_parallel",
       "zero_stage", "distributed_optimizer", "precision", "grad_reduce_dtype", "ddp_impl", "pipeline_schedule",
       "scatter_gather_p2p", "model_parallel_size", "overlap", "fsdp_sharding", "activation_cpu_offload", "framework",
       "attention",
       // case schema v2
       "local_batch", "fsdp_degree", "fp8_recipe", "cp_comm_type",
       // fine-tuning (this project's extension)
       "lora_rank", "lora_targets", "lora_dropout", "lora_dropout_position", "lora_scale_position", "base_quantization",
       "optimizer", "compile", "packed", "document_length", "offload_optimizer", "offload_params", "cpu_optimizer",
       "delayed_update"});
  return fields;
}

std::string plan_refusal(const Json& plan)
{
  // Sizes that divide others: a zero is a malformed case, refused before anything divides by it.
  for (const char* key : {"tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "grad_accum"})
    if (const auto v = integer(plan, key); v && *v == 0)
      return fmt::format("plan.{} is 0 (expected a size of at least 1)", key);
  if (!integer(plan, "tp") || !integer(plan, "pp"))
    return "the source does not give the tensor- and pipeline-parallel sizes";
  return "";
}

std::optional<Json> convert_plan(Conversion& conv, std::int64_t seq)
{
  const Json& plan = section(conv.case_json(), "plan");
  const Json& hardware = section(conv.case_json(), "hardware");
  const std::int64_t tp = *integer(plan, "tp");
  const std::int64_t pp = *integer(plan, "pp");
  const std::int64_t cp = integer(plan, "cp").value_or(1);
  const auto gpus = integer(hardware, "num_gpus");
  auto dp = integer(plan, "dp");
  if (!dp && gpus && *gpus % (tp * pp * cp) == 0)
    dp = *gpus / (tp * pp * cp);
  if (!dp || *dp == 0 || (gpus && tp * pp * cp * *dp != *gpus)) {
    conv.refuse(fmt::format("tp x pp x cp x dp does not match the {} GPUs", text(hardware, "num_gpus")));
    return std::nullopt;
  }
  if (const auto mp = integer(plan, "model_parallel_size"); mp && *mp != tp * pp) {
    conv.refuse(fmt::format("model_parallel_size {} is not tp x pp = {}", *mp, tp * pp));
    return std::nullopt;
  }
  Json p{{"tp", tp}, {"pp", pp}, {"dp", *dp}};
  if (cp > 1)
    p["cp"] = cp; // Megatron-core's default kind: the ring (--cp-comm-type p2p)
  if (member(plan, "cp_comm_type")) {
    const auto kind =
        conv.choice(plan, "cp_comm_type", {{"p2p", "ring"}, {"a2a+p2p", ""}, {"a2a", "all_to_all"}, {"allgather", ""}});
    if (!kind)
      return std::nullopt;
    if (kind->empty()) {
      conv.refuse(fmt::format("cp_comm_type \"{}\" is not modelled (the ring, p2p, and all-to-all, a2a, are)",
                              text(plan, "cp_comm_type")));
      return std::nullopt;
    }
    if (cp > 1)
      p["cp_kind"] = *kind;
  }
  if (!experts_of(conv, plan, p) || !fine_tuning_of(conv, plan, p))
    return std::nullopt;

  auto micro = integer(plan, "micro_batch");
  const auto global = global_batch(conv, plan, seq, micro, *dp);
  if (conv.refused())
    return std::nullopt;
  if (!micro && global && integer(plan, "grad_accum")) {
    const std::int64_t per_step = *dp * *integer(plan, "grad_accum");
    if (*global % per_step == 0) {
      micro = *global / per_step;
      conv.assume(fmt::format("micro-batch from global batch / (dp x gradient-accumulation steps): {}", *micro));
    }
  }
  if (const auto local = integer(plan, "local_batch"); !micro && local && pp == 1) {
    micro = local;
    conv.assume(
        fmt::format("micro-batch not given: the local batch, {} (one pass per rank without a pipeline)", *local));
  }
  if (!micro)
    conv.assume("micro-batch not given: 1");
  p["micro_batch"] = micro.value_or(1);
  if (global) {
    if (*global % (micro.value_or(1) * *dp) != 0) {
      conv.refuse(
          fmt::format("global batch {} is not a multiple of micro-batch x dp = {}", *global, micro.value_or(1) * *dp));
      return std::nullopt;
    }
    if (const auto steps = integer(plan, "grad_accum"); steps && *steps * micro.value_or(1) * *dp != *global) {
      conv.refuse(fmt::format("global batch {} is not micro-batch x dp x grad_accum = {} x {} x {}", *global,
                              micro.value_or(1), *dp, *steps));
      return std::nullopt;
    }
    p["global_batch"] = *global;
  }

  const std::string schedule = lower(text(plan, "pipeline_schedule"));
  if (member(plan, "vpp") && !integer(plan, "vpp") && mentions(text(plan, "vpp"), "interleaved")) {
    conv.refuse(fmt::format("plan.vpp \"{}\": the interleaved schedule without its number of virtual stages",
                            text(plan, "vpp")));
    return std::nullopt;
  }
  if (const auto v = integer(plan, "vpp"); v && *v > 1) {
    p["schedule"] = "interleaved";
    p["virtual_stages"] = *v;
    if (!schedule.empty() && !mentions(schedule, "interleaved")) {
      conv.refuse(fmt::format("vpp {} contradicts pipeline_schedule \"{}\"", *v, text(plan, "pipeline_schedule")));
      return std::nullopt;
    }
  } else if (mentions(schedule, "gpipe")) {
    p["schedule"] = "gpipe";
  } else if (mentions(schedule, "dualpipev")) {
    p["schedule"] = "dualpipev";
  } else if (mentions(schedule, "dualpipe")) {
    p["schedule"] = "dualpipe";
  } else if (!schedule.empty() && !mentions(schedule, "1f1b")) {
    conv.refuse(fmt::format("pipeline_schedule \"{}\" is not understood (1F1B, interleaved, GPipe, DualPipe or "
                            "DualPipeV)",
                            text(plan, "pipeline_schedule")));
    return std::nullopt;
  }

  if (!member(plan, "recompute") && mentions(lower(text(plan, "framework")), "maxtext")) {
    p["recompute"] = "full";
    conv.assume("recomputation not given: MaxText's default remat_policy 'full' (MaxText/configs/base.yml)");
  } else if (!member(plan, "recompute")) {
    p["recompute"] = "none";
    conv.assume("recomputation not given: none");
  } else if (const auto r =
                 conv.choice(plan, "recompute", {{"full", "full"}, {"selective", "selective"}, {"none", "none"}})) {
    p["recompute"] = *r;
    // "selective (layernorm, moe_act)": the modules it names, as Megatron-core names them.
    if (*r == "selective") {
      const std::string said = lower(text(plan, "recompute"));
      Json modules = Json::array();
      for (const auto& c : model::recompute_module_choices)
        if (std::regex_search(said, std::regex("\\b" + std::string(c.name) + "\\b")))
          modules.push_back(std::string(c.name));
      if (!modules.empty())
        p["recompute_modules"] = modules;
    }
  } else {
    return std::nullopt;
  }

  const int year =
      latest_date(text(conv.case_json(), "source") + " | " + text(plan, "framework")).value_or(YearMonth{}).year;
  // Megatron-LM's examples/llama FP8 table ran train_llama3_8b_h100_fp8.sh (core_r0.12.0), whose settings apply.
  const bool llama_example = mentions(lower(text(conv.case_json(), "source")), "megatron-lm examples/llama");
  if (const auto sp = flag(plan, "sequence_parallel")) {
    p["sequence_parallel"] = *sp;
  } else if (llama_example) {
    p["sequence_parallel"] = tp > 1;
    if (tp > 1)
      conv.assume("sequence parallelism: on (the example script's --sequence-parallel)");
  } else {
    const Json& model = section(conv.case_json(), "model");
    const bool moe = member(model, "experts") || flag(model, "moe").value_or(false);
    const bool modern = (year >= 2023 || moe) && tp > 1;
    p["sequence_parallel"] = modern;
    if (tp > 1)
      conv.assume(moe      ? "sequence parallelism not given: on (Megatron-core requires it for MoE with TP)"
                  : modern ? "sequence parallelism not given: on with TP (Megatron-core practice)"
                           : "sequence parallelism not given: off");
  }

  const std::string precision = lower(text(plan, "precision"));
  if (mentions(precision, "fp8") && member(plan, "fp8_recipe")) {
    p["precision"] = "fp8";
    const auto recipe = conv.choice(plan, "fp8_recipe",
                                    {{"delayed", "delayed"},
                                     {"current", "current"},
                                     {"tensorwise", "current"},
                                     {"blockwise", "blockwise"},
                                     {"block", "blockwise"},
                                     {"mxfp8", "mxfp8"}});
    if (!recipe)
      return std::nullopt;
    if (*recipe == "mxfp8") // as the Megatron-LM importer reads --fp8-recipe mxfp8
      conv.assume("the MXFP8 recipe (32-value blocks with E8M0 scales, Blackwell) simulated as blockwise scaling: "
                  "FP8 GEMMs, one quantisation pass per tensor without an amax reduction");
    p["fp8_recipe"] = *recipe == "mxfp8" ? "blockwise" : *recipe;
  } else if (mentions(precision, "fp8")) {
    p["precision"] = "fp8";
    if (mentions(precision, "blockwise") || mentions(precision, "block"))
      p["fp8_recipe"] = "blockwise";
    else if (mentions(precision, "current") || mentions(precision, "tensorwise"))
      p["fp8_recipe"] = "current";
    else
      conv.assume("FP8 scaling not given: delayed (Transformer Engine's default recipe)");
  } else if (mentions(precision, "fp16")) {
    p["precision"] = "fp16";
  } else {
    p["precision"] = "bf16";
    if (!mentions(precision, "bf16"))
      conv.assume("precision not given: bf16");
  }

  const std::string sharding = lower(text(plan, "fsdp_sharding"));
  if (!sharding.empty()) {
    const auto stage =
        conv.choice(plan, "fsdp_sharding", {{"full_shard", "3"}, {"shard_grad_op", "2"}, {"no_shard", "0"}});
    if (!stage)
      return std::nullopt;
    p["zero_stage"] = std::stoi(*stage);
    // Composer's FSDP reduces gradients in fp32 with autocast ("DEFAULT" mixed precision), else in 16 bits ("PURE").
    p["fp32_grad_accumulation"] = precision.starts_with("amp");
  } else if (const auto zero = integer(plan, "zero_stage")) {
    p["zero_stage"] = *zero;
  } else if (member(plan, "zero_stage")) {
    // Free text (the Llama 3 paper: "FSDP: shards optimizer state + grads; params not resharded after forward"):
    // parameters gathered once per step, gradients reduce-scattered, the optimizer state sharded is, for the step's
    // time, Megatron-core's distributed optimizer.
    const std::string zero_text = lower(text(plan, "zero_stage"));
    if (!(mentions(zero_text, "optimizer") && mentions(zero_text, "grad") && mentions(zero_text, "not resharded"))) {
      conv.refuse(fmt::format("plan.zero_stage \"{}\" is not a ZeRO stage simtrain reads", text(plan, "zero_stage")));
      return std::nullopt;
    }
    p["distributed_optimizer"] = true;
    conv.assume("sharded optimizer state and gradients, parameters kept after forward: the distributed optimizer "
                "(gradients reduce-scattered, parameters gathered once per step; gradients' memory not sharded)");
  } else if (flag(plan, "distributed_optimizer").value_or(false) ||
             mentions(text(plan, "overlap"), "overlap-param-gather")) {
    p["distributed_optimizer"] = true;
    if (!flag(plan, "distributed_optimizer"))
      conv.assume("distributed optimizer (implied by --overlap-param-gather)");
  }
  // Megatron-Bridge's recipes build their optimizer as NeMo 2's do (distributed_fused_adam_with_cosine_annealing,
  // nemo/collections/llm/recipes/optim/adam.py), and NeMo 1's Megatron-core training configs name the same
  // (NeMo-Framework-Launcher conf/training/llama/*.yaml: distributed_fused_adam, overlap_grad_sync and
  // overlap_param_sync true): the distributed optimizer, gradient reduce and parameter gather overlapped. NeMo
  // AutoModel runs PyTorch FSDP2 instead.
  const std::string origin = lower(text(conv.case_json(), "source") + " | " + text(plan, "framework"));
  const bool bridge = mentions(origin, "megatron-bridge");
  if (!member(plan, "distributed_optimizer") && !member(plan, "zero_stage") && !member(plan, "fsdp_degree") &&
      (bridge || (mentions(origin, "nemo") && !mentions(origin, "automodel")))) {
    p["distributed_optimizer"] = true;
    p["overlap_grad_reduce"] = true;
    p["overlap_param_gather"] = true;
    conv.assume(
        fmt::format("optimizer not given: {} (distributed_fused_adam): the distributed optimizer, gradient "
                    "reduce and parameter gather overlapped",
                    bridge ? "Megatron-Bridge's recipe optimizer" : "NeMo's recipe and training-config optimizer"));
  }
  if (const auto degree = integer(plan, "fsdp_degree")) {
    // FSDP / ZeRO-3 over `degree` GPUs; over fewer than the data-parallel ranks it is HSDP, sharded within groups of
    // consecutive ranks and replicated across them (shard_group).
    if (*degree < 1 || *degree > *dp || *dp % *degree != 0) {
      conv.refuse(
          fmt::format("fsdp_degree {} does not divide the {} data-parallel ranks into shard groups", *degree, *dp));
      return std::nullopt;
    }
    if (*degree > 1 && *degree < *dp) {
      p["shard_group"] = *degree;
      conv.assume(fmt::format("FSDP shard groups of {} consecutive data-parallel ranks, {} copies (HSDP: gradients "
                              "reduce-scattered in each group, then all-reduced across the groups)",
                              *degree, *dp / *degree));
    }
    if (p.value("zero_stage", 3) != 3) {
      conv.refuse(fmt::format("fsdp_degree {} with zero_stage {}", *degree, p["zero_stage"].dump()));
      return std::nullopt;
    }
    if (*degree > 1 && pp > 1) {
      // FSDP2 under torch.distributed.pipelining, as the importer reads torchtitan's (see importer/torchtitan.cpp).
      p.erase("zero_stage");
      p["distributed_optimizer"] = true;
      p["overlap_param_gather"] = true;
      p["overlap_grad_reduce"] = false;
      conv.assume(fmt::format("FSDP2 with pipeline parallelism (pp {}) as PyTorch's pipeline schedules run it: "
                              "parameters gathered in the first micro-batch's forward and kept, gradients "
                              "accumulated and reduce-scattered after the last backward (the distributed optimizer "
                              "with its gather overlapped, the reduction after the flush)",
                              pp));
    } else if (*degree > 1) {
      p["zero_stage"] = 3;
    }
  }
  // The example script: the distributed optimizer with overlapped gradient reduction and parameter gather, FP8
  // parameters, gradients reduced in bf16.
  if (llama_example && p["precision"] == "fp8") {
    p["distributed_optimizer"] = true;
    p["overlap_grad_reduce"] = true;
    p["fp8_param_gather"] = true;
    p["overlap_param_gather"] = true;
    p["fp32_grad_accumulation"] = false;
    conv.assume("the example script's settings (examples/llama/train_llama3_8b_h100_fp8.sh): distributed optimizer, "
                "overlapped gradient reduce and parameter gather, --fp8-param-gather, --grad-reduce-in-bf16");
  }
  if (member(plan, "grad_reduce_dtype")) { // Megatron-core's grad_reduce_in_fp32: the gradient buffers' type
    const auto dtype = conv.choice(plan, "grad_reduce_dtype", {{"fp32", "fp32"}, {"bf16", "bf16"}});
    if (!dtype)
      return std::nullopt;
    p["fp32_grad_accumulation"] = *dtype == "fp32";
  }
  if (mentions(text(plan, "overlap"), "overlap-param-gather") && p.value("distributed_optimizer", false))
    p["overlap_param_gather"] = true;
  if (mentions(text(plan, "overlap"), "tp-comm-overlap") && p["sequence_parallel"] == true)
    p["tp_comm_overlap"] = true;

  if (member(plan, "ddp_impl")) {
    const auto ddp = conv.choice(plan, "ddp_impl", {{"local", "local"}, {"torch", "torch"}});
    if (!ddp)
      return std::nullopt;
    p["overlap_grad_reduce"] = *ddp == "torch";
    if (*ddp == "torch")
      p["dp_bucket_size"] = "25MB";
  }
  if (const auto sg = flag(plan, "scatter_gather_p2p"))
    p["pp_scatter_gather"] = *sg;
  software_of(conv, plan, p);
  return p;
}

} // namespace sim::validation
