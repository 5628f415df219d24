#include "importer/megatron_plan.hpp"

#include "core/input_error.hpp"
#include "model/flops.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <optional>
#include <string>
#include <vector>

namespace sim::importer {
namespace {

// The modules simtrain recomputes, as Megatron-core names them.
std::string module_names()
{
  return fmt::format("{}", fmt::join(model::recompute_module_names({.bits = ~0U}), ", "));
}

class PlanReader : MegatronReader {
 public:
  using MegatronReader::MegatronReader;

  OrderedJson plan(std::int64_t tp, std::int64_t layers)
  {
    OrderedJson p;
    p["tp"] = tp;
    const auto pp = a_.integer_or("pipeline-model-parallel-size", 1, 1, 1 << 16);
    p["pp"] = pp;
    origin("/plan/pp", "pipeline-model-parallel-size");
    if (const auto cp = a_.integer("context-parallel-size", 1, 1 << 16); cp && *cp > 1) {
      p["cp"] = *cp;
      origin("/plan/cp", "context-parallel-size");
      // One kind for every layer, or a list of one per layer (nargs='+'): simulated with the first layer's.
      if (const Given* kind = a_.find("cp-comm-type"); kind && !kind->values.empty()) {
        const std::string& k = kind->values.front();
        if (k != "p2p" && k != "a2a" && k != "allgather" && k != "a2a+p2p")
          Arguments::fail(*kind, "not one of Megatron-LM's choices", k, "one of p2p, a2a, allgather, a2a+p2p");
        if (std::any_of(kind->values.begin(), kind->values.end(), [&](const std::string& x) { return x != k; }))
          not_simulated("cp-comm-type", fmt::format("a kind per layer is simulated as the first layer's, {}", k));
        if (k == "a2a")
          p["cp_kind"] = "all_to_all";
        else if (k != "p2p")
          not_simulated("cp-comm-type", fmt::format("'{}' context parallelism is simulated as the p2p ring", k));
      }
    }
    if (const auto ep = a_.integer("expert-model-parallel-size", 1, 1 << 20); ep && *ep > 1) {
      p["ep"] = *ep;
      origin("/plan/ep", "expert-model-parallel-size");
    }
    if (const auto etp = a_.integer("expert-tensor-parallel-size", 1, 1 << 16)) {
      p["etp"] = *etp;
      origin("/plan/etp", "expert-tensor-parallel-size");
    }
    p["micro_batch"] = a_.integer_or("micro-batch-size", 1, 1, 1 << 16);
    origin("/plan/micro_batch", "micro-batch-size");
    if (const auto gb = a_.integer("global-batch-size", 1, std::int64_t{1} << 40)) {
      p["global_batch"] = *gb;
      origin("/plan/global_batch", "global-batch-size");
    }
    for (const char* ramp : {"rampup-batch-size", "step-batch-size-schedule"})
      if (a_.find(ramp))
        out_.assumptions.push_back(fmt::format("--{}: the step is simulated at the final --global-batch-size", ramp));
    p["seq_length"] = sequence_length();
    origin("/plan/seq_length", "seq-length");
    virtual_stages(p, pp, layers);
    recomputation(p);
    // Megatron-LM turns sequence parallelism off without tensor parallelism (arguments.py).
    p["sequence_parallel"] = a_.flag("sequence-parallel") && p["tp"].get<std::int64_t>() > 1;
    p["distributed_optimizer"] = a_.flag("use-distributed-optimizer");
    // Megatron-LM overlaps neither by default (simtrain's plan overlaps the gradient reduction unless told not to).
    p["overlap_grad_reduce"] = a_.flag("overlap-grad-reduce");
    p["overlap_param_gather"] = a_.flag("overlap-param-gather");
    if (a_.flag("tp-comm-overlap"))
      p["tp_comm_overlap"] = true;
    precision(p);
    dispatcher(p);
    software(p);
    peft(p);
    return p;
  }

  // NeMo 1's PEFT (nemo/collections/nlp/parts/peft_config.py): LoRA of adapter_dim on target_modules (attention_qkv
  // unless told), Megatron-core's ParallelLinearAdapter beside each fused layer, or Q, K, V and gate, up apart in the
  // "canonical" variant. Other schemes (adapters, IA3, p-tuning) are reported.
  void peft(OrderedJson& p)
  {
    if (a_.flag("nemo-packed-sequence"))
      not_simulated("nemo-packed-sequence",
                    "each packed document attends only to itself, but the configuration does not say how long they "
                    "are: simulated as one document per sequence unless plan.document_length is set");
    const auto scheme = a_.text("nemo-peft-scheme");
    if (scheme != "lora") {
      if (scheme && *scheme != "none")
        not_simulated("nemo-peft-scheme",
                      fmt::format("NeMo's '{}' PEFT is not simulated: the scenario trains every weight", *scheme));
      // Whatever lora_tuning said (nemo_arguments.cpp names it nemo-lora-*), once per setting.
      std::vector<std::string> lora_settings;
      for (const Given& g : a_.all())
        if (g.name.starts_with("nemo-lora-") &&
            std::find(lora_settings.begin(), lora_settings.end(), g.name) == lora_settings.end())
          lora_settings.push_back(g.name);
      for (const auto& name : lora_settings)
        out_.no_effect.push_back(Setting{a_.find(name)->spelt(), "without peft_scheme lora"});
      return;
    }
    if (!a_.find("nemo-lora-dim"))
      out_.assumptions.emplace_back(
          "LoRA rank 32: lora_tuning.adapter_dim not given (the launcher's PEFT configs' value)");
    p["lora_rank"] = a_.integer_or("nemo-lora-dim", 32, 1, 1 << 16);
    origin("/plan/lora_rank", "nemo-lora-dim");
    const bool canonical = a_.choice("nemo-lora-variant", {"nemo", "canonical"}) == "canonical";
    std::vector<std::string> targets;
    auto add = [&](std::initializer_list<const char*> names) {
      for (const char* name : names)
        if (std::find(targets.begin(), targets.end(), name) == targets.end())
          targets.emplace_back(name);
    };
    auto qkv = [&] { canonical ? add({"q_proj", "k_proj", "v_proj"}) : add({"linear_qkv"}); };
    auto fc1 = [&] { canonical ? add({"gate_proj", "up_proj"}) : add({"linear_fc1"}); };
    const Given* given = a_.find("nemo-lora-targets");
    for (const auto& module : given ? given->values : std::vector<std::string>{"attention_qkv"}) {
      const bool attention = module == "attention" || module == "all";
      const bool mlp = module == "mlp" || module == "all";
      if (!attention && !mlp && module != "attention_qkv" && module != "attention_dense" && module != "mlp_fc1" &&
          module != "mlp_fc2")
        Arguments::fail(*given, "names a module NeMo's LoRA does not target", module,
                        "attention_qkv, attention_dense, mlp_fc1, mlp_fc2, attention, mlp or all");
      if (module == "attention_qkv" || attention)
        qkv();
      if (module == "attention_dense" || attention)
        add({"linear_proj"});
      if (module == "mlp_fc1" || mlp)
        fc1();
      if (module == "mlp_fc2" || mlp)
        add({"linear_fc2"});
    }
    p["lora_targets"] = targets;
    origin("/plan/lora_targets", "nemo-lora-targets");
    if (const auto dropout = a_.number("nemo-lora-dropout", 0.0, 1.0); dropout && *dropout > 0) {
      p["lora_dropout"] = *dropout;
      origin("/plan/lora_dropout", "nemo-lora-dropout");
      // NeMo drops the adapter's output unless told "pre".
      const bool pre = a_.choice("nemo-lora-dropout-position", {"pre", "post"}).value_or("post") == "pre";
      p["lora_dropout_position"] = pre ? "input" : "output";
      origin("/plan/lora_dropout_position", "nemo-lora-dropout-position");
    }
    if (a_.find("nemo-lora-layer-selection"))
      not_simulated("nemo-lora-layer-selection", "adapters on some layers only: simulated on every layer");
    if (a_.flag("nemo-lora-weight-tying"))
      not_simulated("nemo-lora-weight-tying", "one adapter shared by every layer: simulated as one per layer");
  }

  void virtual_stages(OrderedJson& p, std::int64_t pp, std::int64_t layers)
  {
    std::optional<std::int64_t> v = a_.integer("num-virtual-stages-per-pipeline-rank", 1, 1024);
    if (!v)
      v = a_.integer("virtual-pipeline-model-parallel-size", 1, 1024);
    if (const auto per = a_.integer("num-layers-per-virtual-pipeline-stage", 1, 1 << 20)) {
      if (layers % (pp * *per) != 0)
        Arguments::fail(*a_.find("num-layers-per-virtual-pipeline-stage"),
                        fmt::format("does not divide the {} layers per pipeline stage", layers / pp),
                        std::to_string(*per), "a divisor of num-layers / pipeline-model-parallel-size");
      v = layers / (pp * *per);
    }
    if (v && *v > 1) {
      p["virtual_stages"] = *v;
      origin("/plan/virtual_stages", "num-layers-per-virtual-pipeline-stage");
    }
    const auto first = a_.integer("decoder-first-pipeline-num-layers", 0, layers);
    const auto last = a_.integer("decoder-last-pipeline-num-layers", 0, layers);
    const bool embedding = a_.flag("account-for-embedding-in-pipeline-split");
    const bool loss = a_.flag("account-for-loss-in-pipeline-split");
    if (a_.find("pipeline-model-parallel-layout"))
      not_simulated("pipeline-model-parallel-layout", "an explicit layout is simulated as an even split");
    if ((!first && !last && !embedding && !loss) || pp == 1)
      return;
    if (v && *v > 1) {
      not_simulated("decoder-first-pipeline-num-layers",
                    "an uneven split with virtual stages is simulated as an even split");
      return;
    }
    // Megatron-LM's uneven split: the first and last stages as given, the rest shared evenly; the embedding and the
    // loss each counted as one layer of their stage when asked.
    const std::int64_t head = first.value_or(-1);
    const std::int64_t tail = last.value_or(-1);
    const std::int64_t counted = layers + (embedding ? 1 : 0) + (loss ? 1 : 0);
    const std::int64_t given = (head >= 0 ? head : 0) + (tail >= 0 ? tail : 0);
    const std::int64_t middle = pp - (head >= 0 ? 1 : 0) - (tail >= 0 ? 1 : 0);
    if (middle < 0 || given > layers || (middle > 0 && (counted - given) % middle != 0) ||
        (middle == 0 && given != layers))
      throw core::InputError(core::Location{"megatron arguments", "", ""},
                             "the uneven pipeline split does not share the layers out evenly",
                             fmt::format("{} layers, first {}, last {}, {} stages", layers, head, tail, pp),
                             "the remaining layers divisible by the remaining stages");
    const std::int64_t each = middle > 0 ? (counted - given) / middle : 0;
    std::vector<std::int64_t> split(static_cast<std::size_t>(pp), each);
    if (head >= 0)
      split.front() = head;
    else if (embedding)
      --split.front();
    if (tail >= 0)
      split.back() = tail;
    else if (loss)
      --split.back();
    if (std::any_of(split.begin(), split.end(), [](std::int64_t n) { return n < 1; }))
      throw core::InputError(core::Location{"megatron arguments", "", ""}, "a pipeline stage would get no layer",
                             fmt::format("{}", fmt::join(split, ", ")), "at least one layer per stage");
    p["layers_per_stage"] = split;
    origin("/plan/layers_per_stage", "decoder-first-pipeline-num-layers");
  }

  void recomputation(OrderedJson& p)
  {
    std::string recompute = a_.flag("recompute-activations") ? "selective" : "none";
    if (const auto g = a_.choice("recompute-granularity", {"full", "selective"}))
      recompute = *g;
    const auto method = a_.choice("recompute-method", {"uniform", "block"});
    const auto layers = a_.integer("recompute-num-layers", 0, 1 << 20);
    if (recompute == "full" && method == "block")
      not_simulated("recompute-method", fmt::format("block recomputation of {} layers per stage is simulated as "
                                                    "full recomputation of every layer",
                                                    layers.value_or(0)));
    if (recompute == "full" && method == "uniform" && layers.value_or(1) > 1)
      not_simulated("recompute-num-layers",
                    fmt::format("uniform recomputation in groups of {} layers is simulated layer by layer", *layers));
    p["recompute"] = recompute;
    origin("/plan/recompute", "recompute-granularity");
    if (const auto* modules = a_.find("recompute-modules"); modules && recompute == "selective") {
      auto list = OrderedJson::array();
      for (const auto& module : modules->values) {
        const bool known = std::any_of(model::recompute_module_choices.begin(), model::recompute_module_choices.end(),
                                       [&](const auto& c) { return c.name == module; });
        if (known)
          list.push_back(module);
        else
          not_simulated("recompute-modules", fmt::format("selective recomputation of '{}' is not simulated ({} are)",
                                                         module, module_names()));
      }
      if (!list.empty()) {
        p["recompute_modules"] = list;
        origin("/plan/recompute_modules", "recompute-modules");
      }
    }
  }

  void precision(OrderedJson& p)
  {
    const bool fp16 = a_.flag("fp16");
    const bool bf16 = a_.flag("bf16");
    const auto fp8 = a_.choice("fp8-format", {"e4m3", "hybrid"});
    const auto recipe = a_.choice("fp8-recipe", {"delayed", "tensorwise", "mxfp8", "blockwise"});
    if (!fp16 && !bf16 && !fp8) {
      // Megatron-LM without a 16-bit flag trains in fp32 (FP32Optimizer); PyTorch leaves its matmuls on the CUDA
      // cores since 1.12.
      p["precision"] = "fp32";
      out_.assumptions.emplace_back("no --fp16, --bf16 or --fp8-format: fp32 training, its matmuls on the CUDA cores "
                                    "(PyTorch's default since 1.12; plan precision tf32 where TF32 is allowed)");
    } else {
      p["precision"] = fp8 ? "fp8" : fp16 ? "fp16" : "bf16";
      origin("/plan/precision", fp8 ? "fp8-format" : fp16 ? "fp16" : "bf16");
    }
    if (fp8) {
      if (recipe == "mxfp8")
        not_simulated("fp8-recipe", "MXFP8 is simulated as blockwise scaling (scales per block of values)");
      if (recipe && *recipe != "delayed")
        p["fp8_recipe"] = *recipe == "tensorwise" ? "current" : "blockwise";
      // NeMo's fp8_params keeps FP8 weights (Transformer Engine's fp8_model_init) with any optimizer; gathering them
      // in FP8 needs Megatron-core's distributed one (Megatron-LM asserts it for --fp8-param-gather).
      if (a_.flag("fp8-param-gather") && a_.flag("use-distributed-optimizer"))
        p["fp8_param_gather"] = true;
      else if (a_.flag("fp8-param-gather"))
        not_simulated("fp8-param-gather", "FP8 weights outside the distributed optimizer: simulated as 16-bit "
                                          "weights cast to FP8 for each micro-batch");
    } else if (a_.find("fp8-param-gather") || recipe) {
      out_.assumptions.emplace_back("FP8 settings without --fp8-format: no FP8, as Megatron-LM runs it");
    }
    // Megatron-LM accumulates and reduces gradients in fp32 under bf16 unless told to reduce in bf16
    // (arguments.py), and under fp16 only with --accumulate-allreduce-grads-in-fp32.
    const bool fp32_flag = a_.flag("accumulate-allreduce-grads-in-fp32");
    const bool bf16_reduce = a_.flag("grad-reduce-in-bf16");
    p["fp32_grad_accumulation"] = fp16 && !fp8 ? fp32_flag : !bf16_reduce;
  }

  void dispatcher(OrderedJson& p)
  {
    const auto type = a_.choice("moe-token-dispatcher-type", {"allgather", "alltoall", "flex", "alltoall_seq"});
    const bool deepep = a_.flag("moe-enable-deepep") ||
                        a_.choice("moe-flex-dispatcher-backend", {"deepep", "hybridep"}).value_or("") == "deepep";
    if (type == "flex" && deepep)
      p["moe_dispatcher"] = "deepep";
    else if (type && *type != "alltoall")
      not_simulated("moe-token-dispatcher-type",
                    fmt::format("the '{}' dispatcher is simulated as Megatron-core's all-to-all", *type));
    if (a_.flag("overlap-moe-expert-parallel-comm"))
      p["moe_a2a_overlap"] = true;
    if (a_.flag("moe-use-fp8-dispatch"))
      p["moe_fp8_dispatch"] = true;
  }

  void software(OrderedJson& p)
  {
    const auto impl = a_.choice("transformer-impl", {"local", "transformer_engine", "inference_optimized"});
    const auto backend = a_.choice("attention-backend", {"flash", "fused", "unfused", "local", "auto"});
    if (impl == "local") {
      p["norm_impl"] = "apex";
      origin("/plan/norm_impl", "transformer-impl");
    }
    if (a_.flag("use-flash-attn"))
      p["attention"] = "flash2";
    else if (backend == "unfused" || backend == "local" || (impl == "local" && !backend))
      p["attention"] = "unfused";
    if (a_.flag("no-gradient-accumulation-fusion"))
      p["grad_accumulation"] = "hook";
    if (a_.flag("no-async-tensor-model-parallel-allreduce"))
      p["tp_backward_overlap"] = false;
    if (const auto opt = a_.choice("optimizer", {"adam", "sgd", "muon", "dist_muon", "lion", "soap", "adaptive_muon"});
        opt && *opt != "adam")
      not_simulated("optimizer", fmt::format("the '{}' optimizer is simulated as Adam", *opt));
    for (const char* fsdp : {"use-torch-fsdp2", "use-megatron-fsdp"})
      if (a_.flag(fsdp))
        not_simulated(fsdp, "FSDP is not carried over: the plan keeps Megatron-LM's data parallelism (set "
                            "plan.zero_stage 3 for FSDP's sharding)");
    if (a_.flag("nemo-sharp"))
      not_simulated("nemo-sharp", "InfiniBand SHARP is not simulated: collectives run as NCCL's rings");
    if (a_.flag("optimizer-cpu-offload")) { // Megatron-core's HybridDeviceOptimizer: torch's AdamW on the CPU
      p["offload_optimizer"] = "cpu";
      p["cpu_optimizer"] = "pytorch";
      if (const auto fraction = a_.number("optimizer-offload-fraction", 0.0, 1.0))
        p["offload_fraction"] = *fraction;
    }
    if (a_.flag("use-precision-aware-optimizer"))
      not_simulated("use-precision-aware-optimizer",
                    "not simulated: the optimizer keeps fp32 master weights and moments in mixed precision");
  }
};

} // namespace

OrderedJson megatron_plan(Arguments& a, Imported& out, std::int64_t tp, std::int64_t layers)
{
  return PlanReader(a, out).plan(tp, layers);
}

} // namespace sim::importer
