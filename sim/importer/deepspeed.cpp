#include "importer/deepspeed.hpp"

#include "core/document.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <map>
#include <string_view>

namespace sim::importer {
namespace {

bool is_auto(const core::Node& n)
{
  return n.json().is_string() && n.json().get<std::string>() == "auto";
}

bool member(std::string_view key, std::initializer_list<std::string_view> keys)
{
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// A value that may be "auto" (HuggingFace Trainer fills it in): absent then.
std::optional<std::int64_t> integer_unless_auto(const core::Node& n, std::int64_t max)
{
  if (is_auto(n))
    return std::nullopt;
  return n.as_integer(1, max);
}

class DeepSpeedImport {
 public:
  DeepSpeedImport(Imported& out, int gpus) : out_(out), gpus_(gpus) {}

  void read(const core::Node& config, OrderedJson& plan, const DeepSpeedOptions& o)
  {
    if (!config.json().is_object())
      config.fail("a DeepSpeed config is a JSON object", "an object such as {\"train_batch_size\": 32}");
    std::optional<core::Node> train_batch;
    std::optional<core::Node> micro_batch;
    std::optional<core::Node> accumulation;
    for (const auto& [key, value] : config.json().items()) {
      const core::Node n = config.element_of(key);
      if (key == "train_batch_size")
        train_batch = n;
      else if (key == "train_micro_batch_size_per_gpu")
        micro_batch = n;
      else if (key == "gradient_accumulation_steps")
        accumulation = n;
      else if (key == "fp16" || key == "bf16")
        precision(n, key, plan);
      else if (key == "zero_optimization")
        zero(n, plan);
      else if (key == "optimizer")
        optimizer(n, plan);
      else if (key == "tensor_parallel")
        tensor_parallel(n, plan);
      else if (key == "activation_checkpointing")
        activation_checkpointing(n);
      else if (member(key, {"scheduler",
                            "gradient_clipping",
                            "steps_per_print",
                            "wall_clock_breakdown",
                            "prescale_gradients",
                            "gradient_predivide_factor",
                            "zero_allow_untested_optimizer",
                            "dump_state",
                            "tensorboard",
                            "wandb",
                            "csv_monitor",
                            "comet",
                            "flops_profiler",
                            "comms_logger",
                            "checkpoint",
                            "memory_breakdown",
                            "autotuning",
                            "aio",
                            "seed",
                            "torch_autocast",
                            "communication_data_type",
                            "data_types",
                            "pipeline",
                            "timers",
                            "elasticity_enabled",
                            "disable_allgather",
                            "sparse_gradients"}))
        no_effect_or_not(n, key);
      else
        out_.not_simulated.push_back(Setting{spelt(n), "not understood, left out of the scenario"});
    }
    if (!precision_given_) {
      plan["precision"] = "fp32";
      out_.assumptions.emplace_back("no fp16 or bf16 section: DeepSpeed trains in fp32, its matmuls on the CUDA "
                                    "cores (PyTorch's default since 1.12; plan precision tf32 where TF32 is allowed)");
    }
    batches(train_batch, micro_batch, accumulation, o, config, plan);
  }

 private:
  void precision(const core::Node& n, const std::string& key, OrderedJson& plan)
  {
    if (!n.json().is_object())
      n.fail("a precision section is an object", "{\"enabled\": true}");
    const auto enabled = n.json().find("enabled");
    const bool on =
        enabled != n.json().end() && (enabled->is_string() ? *enabled == "auto" : n.element_of("enabled").as_bool());
    if (!on)
      return;
    if (enabled->is_string())
      out_.assumptions.push_back(fmt::format("{}/enabled \"auto\": {} mixed precision", n.pointer(), key));
    if (precision_given_ && plan.value("precision", "") != key) {
      if (!enabled->is_string())
        n.fail("fp16 and bf16 are both enabled", "one of them");
      return; // "auto" in both: the one named first
    }
    precision_given_ = true;
    plan["precision"] = key;
    for (const auto& [sub, v] : n.json().items())
      if (sub != "enabled")
        out_.no_effect.push_back(Setting{spelt(n.element_of(sub)), ""}); // loss scaling, master weights
  }

  void zero(const core::Node& n, OrderedJson& plan)
  {
    if (!n.json().is_object())
      n.fail("zero_optimization is an object", "{\"stage\": 2, ...}");
    const auto stage_node = n.json().find("stage");
    stage_ = stage_node == n.json().end() ? 0 : static_cast<int>(n.element_of("stage").as_integer(0, 3));
    plan["zero_stage"] = stage_;
    out_.origins.emplace_back("/plan/zero_stage", n.pointer() + "/stage");
    // DeepSpeed overlaps the gradient reduction with the backward pass only when asked, except at stage 3 (the
    // framework's default: written only when the config says).
    for (const auto& [key, value] : n.json().items()) {
      const core::Node v = n.element_of(key);
      if (key == "stage")
        continue;
      if (key == "overlap_comm") {
        plan["overlap_grad_reduce"] = v.as_bool();
        out_.origins.emplace_back("/plan/overlap_grad_reduce", v.pointer());
      } else if (key == "reduce_bucket_size") {
        // Elements of the 16-bit gradients (DeepSpeed's default 5e8).
        if (!is_auto(v)) {
          bucket_elements_ = v.as_number(1.0, 1e12);
          bucket_given_ = true;
        }
      } else if ((key == "offload_optimizer" || key == "offload_param") && value.is_object() &&
                 value.contains("device") && member(v.element_of("device").as_string(), {"cpu", "nvme"})) {
        // ZeRO-Offload; ZeRO-Infinity's parameters and optimizer state on the CPU or NVMe (its swapper pipelined
        // when the optimizer's reads or writes are)
        const std::string to = key == "offload_param" ? "offload_params" : "offload_optimizer";
        plan[to] = v.element_of("device").as_string();
        out_.origins.emplace_back("/plan/" + to, v.pointer() + "/device");
        for (const char* pipelined : {"pipeline_read", "pipeline_write"})
          if (key == "offload_optimizer" && value.contains(pipelined) && v.element_of(pipelined).as_bool()) {
            plan["nvme_pipeline"] = true;
            out_.origins.emplace_back("/plan/nvme_pipeline", v.pointer() + "/" + pipelined);
          }
      } else if ((key == "cpu_offload" || key == "cpu_offload_params") && value.is_boolean() && value.get<bool>()) {
        // ZeRO-Offload, and ZeRO-3's parameter offload, as DeepSpeed 0.3 spelt them
        const std::string to = key == "cpu_offload" ? "offload_optimizer" : "offload_params";
        plan[to] = "cpu";
        out_.origins.emplace_back("/plan/" + to, v.pointer());
      } else if (key == "offload_optimizer" || key == "offload_param") {
        const auto device =
            value.is_object() && value.contains("device") ? v.element_of("device").as_string() : std::string("none");
        if (device != "none")
          out_.not_simulated.push_back(
              Setting{spelt(v), fmt::format("{} to {} is not simulated yet: the scenario keeps {} on the GPUs",
                                            key == "offload_param" ? "parameter offload" : "optimizer offload", device,
                                            key == "offload_param" ? "the parameters" : "the optimizer")});
      } else if (key == "sub_group_size") { // ZeRO-Infinity's swapping unit (DeepSpeed's default 1e9)
        if (!is_auto(v)) {
          plan["nvme_sub_group"] = static_cast<std::int64_t>(v.as_number(1e6, 1e12));
          out_.origins.emplace_back("/plan/nvme_sub_group", v.pointer());
        }
      } else if (member(key,
                        {"zenflow", "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_gradients",
                         "zero_quantized_nontrainable_weights", "mics_shard_size", "mics_hierarchical_params_gather",
                         "cpu_offload", "cpu_offload_params"})) { // false: no effect
        if (!(value.is_boolean() && !value.get<bool>()) && !(value.is_number() && value.get<double>() <= 1))
          out_.not_simulated.push_back(Setting{spelt(v), "not simulated (ZeRO++, MiCS and ZenFlow are not in "
                                                         "simtrain's ZeRO)"});
      } else if (member(key, {"contiguous_gradients",
                              "reduce_scatter",
                              "allgather_partitions",
                              "allgather_bucket_size",
                              "round_robin_gradients",
                              "stage3_prefetch_bucket_size",
                              "stage3_param_persistence_threshold",
                              "stage3_max_live_parameters",
                              "stage3_max_reuse_distance",
                              "stage3_gather_16bit_weights_on_model_save",
                              "gather_16bit_weights_on_model_save",
                              "stage3_gather_fp16_weights_on_model_save",
                              "ignore_unused_parameters",
                              "load_from_fp32_weights",
                              "elastic_checkpoint",
                              "legacy_stage1",
                              "memory_efficient_linear",
                              "use_multi_rank_bucket_allreduce",
                              "prefetch_bucket_size",
                              "param_persistence_threshold",
                              "max_live_parameters",
                              "max_reuse_distance",
                              "stage3_module_granularity_threshold",
                              "log_trace_cache_warnings"})) {
        out_.no_effect.push_back(Setting{spelt(v), "a ZeRO setting simtrain's ZeRO does not model"});
      } else {
        out_.not_simulated.push_back(Setting{spelt(v), "not understood, left out of the scenario"});
      }
    }
  }

  // DeepSpeed's optimizer types (deepspeed/runtime/config.py's names, lower-cased) by the algorithm simtrain runs.
  void optimizer(const core::Node& n, OrderedJson& plan)
  {
    if (!n.json().is_object())
      n.fail("optimizer is an object", R"({"type": "AdamW", "params": {...}})");
    const std::string given = n.json().contains("type") ? n.element_of("type").as_string() : std::string();
    std::string type = given;
    std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
    static const std::map<std::string, std::string> algorithms{
        {"adam", "adam"}, {"adamw", "adam"},     {"fusedadam", "adam"},     {"sgd", "sgd"},
        {"lion", "lion"}, {"fusedlion", "lion"}, {"adafactor", "adafactor"}};
    if (const auto it = algorithms.find(type); it == algorithms.end()) {
      out_.not_simulated.push_back(
          Setting{spelt(n), fmt::format("the '{}' optimizer is simulated as Adam", given.empty() ? "?" : given)});
    } else if (it->second == "adam") {
      out_.no_effect.push_back(Setting{spelt(n), "Adam, as simulated"});
    } else {
      plan["optimizer_algorithm"] = it->second;
      out_.origins.emplace_back("/plan/optimizer_algorithm", n.pointer() + "/type");
    }
  }

  void tensor_parallel(const core::Node& n, OrderedJson& plan)
  {
    if (!n.json().is_object())
      n.fail("tensor_parallel is an object", "{\"autotp_size\": 4}");
    for (const auto& [key, value] : n.json().items()) {
      const core::Node v = n.element_of(key);
      if (key == "autotp_size" || key == "tp_size") {
        tp_ = v.as_integer(1, 1 << 16);
        plan["tp"] = tp_;
        out_.origins.emplace_back("/plan/tp", v.pointer());
      } else {
        out_.not_simulated.push_back(Setting{spelt(v), "not understood, left out of the scenario"});
      }
    }
  }

  void activation_checkpointing(const core::Node& n)
  {
    if (!n.json().is_object())
      n.fail("activation_checkpointing is an object", "{\"partition_activations\": false, ...}");
    for (const auto& [key, value] : n.json().items()) {
      const core::Node v = n.element_of(key);
      if ((key == "partition_activations" || key == "cpu_checkpointing") && value.is_boolean() && value.get<bool>())
        out_.not_simulated.push_back(Setting{spelt(v), "not simulated: checkpoints stay whole on the GPU"});
      else
        out_.no_effect.push_back(Setting{spelt(v), "how checkpoints are kept; whether there are any is the "
                                                   "training script's choice (set plan.recompute)"});
    }
  }

  void no_effect_or_not(const core::Node& n, const std::string& key)
  {
    if (key == "communication_data_type" || key == "data_types")
      out_.not_simulated.push_back(Setting{spelt(n), "gradients are simulated in the training precision"});
    else
      out_.no_effect.push_back(Setting{spelt(n), ""});
  }

  // DeepSpeed's rule: train_batch_size = micro batch x accumulation steps x data-parallel GPUs; any two give the
  // third (engine config, _set_batch_related_parameters).
  void batches(const std::optional<core::Node>& train, const std::optional<core::Node>& micro,
               const std::optional<core::Node>& accumulation, const DeepSpeedOptions& o, const core::Node& config,
               OrderedJson& plan)
  {
    const std::int64_t dp = gpus_ / tp_;
    // 0: not given (or "auto").
    std::int64_t tb = train ? integer_unless_auto(*train, std::int64_t{1} << 40).value_or(0) : 0;
    std::int64_t mb = micro ? integer_unless_auto(*micro, 1 << 16).value_or(0) : 0;
    const std::int64_t gas = accumulation ? integer_unless_auto(*accumulation, 1 << 20).value_or(0) : 0;
    if (tb == 0)
      tb = o.global_batch.value_or(0);
    if (mb == 0)
      mb = o.micro_batch.value_or(0);
    if (gpus_ % tp_ != 0)
      config.fail(fmt::format("tensor parallelism {} does not divide the {} GPUs", tp_, gpus_),
                  "a GPU count that is a multiple of autotp_size");
    if (tb > 0 && mb > 0 && gas > 0 && tb != mb * gas * dp) {
      const std::string problem =
          fmt::format("is not micro batch x accumulation steps x data-parallel GPUs = {} x {} x {}", mb, gas, dp);
      if (train && !is_auto(*train))
        train->fail(problem, std::to_string(mb * gas * dp));
      throw core::InputError(core::Location{"--global-batch", "", ""}, problem, std::to_string(tb),
                             std::to_string(mb * gas * dp));
    }
    if (tb == 0 && mb == 0)
      throw core::InputError(config.location(), "the batch size is not known",
                             "no train_batch_size or train_micro_batch_size_per_gpu (or \"auto\")",
                             "one in the config, or --micro-batch / --global-batch");
    const std::int64_t steps = std::max<std::int64_t>(gas, 1);
    if (mb == 0)
      mb = tb / (steps * dp);
    if (tb == 0)
      tb = mb * steps * dp;
    if (mb < 1)
      config.fail(fmt::format("train_batch_size {} leaves less than one sequence per GPU", tb),
                  fmt::format("at least {} sequences", dp * steps));
    plan["micro_batch"] = mb;
    plan["global_batch"] = tb;
    out_.origins.emplace_back("/plan/global_batch", train ? train->pointer() : std::string("--global-batch"));
  }

  Imported& out_;
  int gpus_;
  std::int64_t tp_ = 1;
  int stage_ = 0;
  double bucket_elements_ = 5e8; // zero_optimization.reduce_bucket_size, DeepSpeed's default
  bool bucket_given_ = false;
  bool precision_given_ = false;

 public:
  int stage() const { return stage_; }
  double bucket_elements() const { return bucket_elements_; }
  bool bucket_given() const { return bucket_given_; }
};

} // namespace

Imported import_deepspeed(const core::Node& config, const Target& target, const DeepSpeedOptions& options)
{
  Imported out;
  if (!target.gpus)
    throw core::InputError(config.location(), "the GPU count is not known",
                           "a DeepSpeed config, which leaves it to "
                           "the launcher",
                           "--gpus N");
  OrderedJson plan;
  plan["tp"] = 1;
  plan["pp"] = 1;
  DeepSpeedImport ds(out, *target.gpus);
  ds.read(config, plan, options);
  if (options.seq_length)
    plan["seq_length"] = *options.seq_length;
  // DeepSpeed's defaults (plan.framework): gradients in fp32 only without ZeRO in bf16 (BF16_Optimizer), buckets of
  // reduce_bucket_size, overlap_comm at stage 3, PyTorch's norms, SDPA's FlashAttention-2 kernels, DeepSpeed's
  // optimizer step; a bucket size the config gives is its own.
  plan["framework"] = "deepspeed";
  if (ds.bucket_given()) {
    const std::string precision = plan.value("precision", "bf16");
    const bool fp32_grads = (precision == "bf16" && ds.stage() == 0) || precision == "fp32";
    plan["dp_bucket_size"] = fmt::format("{:.0f}B", ds.bucket_elements() * (fp32_grads ? 4.0 : 2.0));
  }
  out.assumptions.emplace_back("a PyTorch model under DeepSpeed (plan.framework deepspeed: PyTorch's norms, "
                               "scaled_dot_product_attention's FlashAttention-2 kernels, DeepSpeed's optimizer step, "
                               "its gradient types, buckets and overlap)");
  out.assumptions.emplace_back("no activation recomputation (the training script turns it on; set plan.recompute)");
  if (!options.seq_length)
    out.assumptions.emplace_back("the model's own sequence length (--seq-length to change it)");

  set_scenario(out, target, "deepspeed", config.location().file, options.model, std::move(plan));
  return out;
}

} // namespace sim::importer
