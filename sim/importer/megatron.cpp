#include "importer/megatron.hpp"

#include "core/document.hpp"
#include "core/input_error.hpp"
#include "core/units.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <optional>
#include <span>
#include <string_view>

namespace sim::importer {
namespace {

// One argument as given: `--name v1 v2` or `--name=v`.
struct Given {
  std::string name; // without the dashes, '_' read as '-'
  std::vector<std::string> values;
  bool used = false;
  std::string written; // as the command line spells it ("--nproc_per_node", "model.num_layers=32")
  bool idle = false;   // a NeMo override that changes nothing (a default, a learning rate): never matched

  std::string spelt() const
  {
    if (written.find('=') != std::string::npos)
      return written; // a NeMo override, as given
    const std::string option = written.empty() ? "--" + name : written;
    return values.empty() ? option : fmt::format("{} {}", option, fmt::join(values, " "));
  }
};

bool is_option(std::string_view token)
{
  return token.size() > 2 && token.starts_with("--");
}

// NeMo 1.x's Hydra overrides (model.X=V, trainer.X=V) and the Megatron-LM arguments they stand for
// (nemo/collections/nlp/models/language_modeling/megatron_gpt_model.py, NeMo-Framework-Launcher's training configs).
// `flag`: a boolean that gives the Megatron-LM flag when it has this value ("True", or "False" for negated ones).
struct NemoKey {
  std::string_view key;
  std::string_view argument;
  std::string_view flag = {};
};

constexpr std::array nemo_keys = std::to_array<NemoKey>({
    {"model.micro_batch_size", "micro-batch-size"},
    {"model.global_batch_size", "global-batch-size"},
    {"model.rampup_batch_size", "rampup-batch-size"},
    {"model.tensor_model_parallel_size", "tensor-model-parallel-size"},
    {"model.pipeline_model_parallel_size", "pipeline-model-parallel-size"},
    {"model.virtual_pipeline_model_parallel_size", "virtual-pipeline-model-parallel-size"},
    {"model.context_parallel_size", "context-parallel-size"},
    {"model.expert_model_parallel_size", "expert-model-parallel-size"},
    {"model.expert_tensor_parallel_size", "expert-tensor-parallel-size"},
    {"model.encoder_seq_length", "seq-length"},
    {"model.data.seq_length", "seq-length"},
    {"model.max_position_embeddings", "max-position-embeddings"},
    {"model.num_layers", "num-layers"},
    {"model.hidden_size", "hidden-size"},
    {"model.ffn_hidden_size", "ffn-hidden-size"},
    {"model.num_attention_heads", "num-attention-heads"},
    {"model.num_query_groups", "num-query-groups"},
    {"model.kv_channels", "kv-channels"},
    {"model.hidden_dropout", "hidden-dropout"},
    {"model.attention_dropout", "attention-dropout"},
    {"model.make_vocab_size_divisible_by", "make-vocab-size-divisible-by"},
    {"model.position_embedding_type", "position-embedding-type"},
    {"model.activations_checkpoint_granularity", "recompute-granularity"},
    {"model.activations_checkpoint_method", "recompute-method"},
    {"model.activations_checkpoint_num_layers", "recompute-num-layers"},
    {"model.num_moe_experts", "num-experts"},
    {"model.moe_router_topk", "moe-router-topk"},
    {"model.moe_token_dispatcher_type", "moe-token-dispatcher-type"},
    {"model.tokenizer.type", "tokenizer-type"},
    {"model.sequence_parallel", "sequence-parallel", "True"},
    {"model.ub_tp_comm_overlap", "tp-comm-overlap", "True"},
    {"model.bias", "disable-bias-linear", "False"},
    {"model.share_embeddings_and_output_weights", "untie-embeddings-and-output-weights", "False"},
    {"model.optim.overlap_grad_sync", "overlap-grad-reduce", "True"},
    {"model.optim.overlap_param_sync", "overlap-param-gather", "True"},
    {"model.gradient_accumulation_fusion", "no-gradient-accumulation-fusion", "False"},
    {"trainer.devices", "nemo-devices"},
    {"trainer.num_nodes", "nemo-num-nodes"},
    {"model.moe_expert_capacity_factor", "moe-expert-capacity-factor"},
    {"model.moe_grouped_gemm", "moe-grouped-gemm", "True"},
    {"model.moe_aux_loss_coeff", "moe-aux-loss-coeff"},
    {"model.rotary_base", "rotary-base"},
    {"model.fsdp", "use-torch-fsdp2", "True"},
    {"model.sharp", "nemo-sharp", "True"},
});

// NeMo settings that change nothing in one step (learning rate, data, logging, checkpoints, fusions assumed).
constexpr std::array nemo_idle_prefixes = std::to_array<std::string_view>({
    "model.optim.lr",
    "model.optim.betas",
    "model.optim.weight_decay",
    "model.optim.sched.",
    "model.optim.bucket_cap_mb",
    "model.optim.contiguous_grad_buffer",
    "model.data.",
    "model.tokenizer.",
    "model.nsys_profile.",
    "model.seed",
    "model.init_method_std",
    "model.layernorm_epsilon",
    "model.megatron_amp_O2",
    "model.native_amp_",
    "model.hysteresis",
    "model.resume_from_checkpoint",
    "model.apply_query_key_layer_scaling",
    "model.persist_layer_norm",
    "model.gradient_as_bucket_view",
    "model.grad_div_ar_fusion",
    "model.bias_activation_fusion",
    "model.bias_dropout_add_fusion",
    "model.masked_softmax_fusion",
    "model.fp8_margin",
    "model.fp8_interval",
    "model.fp8_amax_",
    "model.fp8_hybrid",
    "model.fp8_e4m3",
    "model.transformer_engine",
    "model.use_cpu_initialization",
    "model.onnx_safe",
    "model.apex_transformer_log_level",
    "model.pre_process",
    "model.post_process",
    "model.fp32_residual_connection",
    "model.fp16_lm_cross_entropy",
    "model.sync_batch_comm",
    "model.grad_allreduce_chunk_size_mb",
    "model.use_emha",
    "model.overlap_p2p_comm",
    "model.batch_p2p_comm",
    "model.apply_rope_fusion",
    "model.attention_type",
    "model.cross_entropy_loss_fusion",
    "model.defer_embedding_wgrad_compute",
    "model.wgrad_deferral_limit",
    "model.deterministic_mode",
    "model.do_layer_norm_weight_decay",
    "model.ffn_dropout",
    "model.gc_interval",
    "model.get_attention_mask_from_fusion",
    "model.headscale",
    "model.mcore_customization_config.",
    "model.mcore_gpt",
    "model.normalize_attention_scores",
    "model.num_micro_batches_with_partial_activation_checkpoints",
    "model.activations_checkpoint_layers_per_pipeline",
    "model.openai_gelu",
    "model.rotary_percentage",
    "model.scale_positional_embedding",
    "model.seq_len_interpolation_factor",
    "model.transformer_block_type",
    "model.use_scaled_init_method",
    "model.ub_tp_comm_overlap_cfg",
    "model.optim.contiguous_param_buffer",
    "model.fsdp_",
    "model.fp8_wgrad",
    "model.reduce_amax",
    "model.moe_pad_expert_input_to_capacity",
    "model.use_flash_attention",
    "trainer.max_steps",
    "trainer.max_epochs",
    "trainer.max_time",
    "trainer.log_every_n_steps",
    "trainer.val_check_interval",
    "trainer.limit_val_batches",
    "trainer.limit_test_batches",
    "trainer.gradient_clip_val",
    "trainer.enable_checkpointing",
    "trainer.logger",
    "trainer.accelerator",
    "trainer.use_distributed_sampler",
    "trainer.accumulate_grad_batches",
    "exp_manager.",
    "run.",
});

bool is_nemo(std::string_view token)
{
  const auto eq = token.find('=');
  while (token.starts_with('+'))
    token.remove_prefix(1);
  return eq != std::string_view::npos && (token.starts_with("model.") || token.starts_with("trainer.") ||
                                          token.starts_with("exp_manager.") || token.starts_with("run."));
}

// One NeMo override as the Megatron-LM arguments it means.
std::vector<Given> nemo_override(const std::string& token)
{
  std::string_view text = token;
  while (text.starts_with('+'))
    text.remove_prefix(1);
  const auto eq = text.find('=');
  const std::string key(text.substr(0, eq));
  const std::string value(text.substr(eq + 1));
  auto idle = [&] { return std::vector<Given>{Given{"", {}, false, token, true}}; };
  const bool off = value == "null" || value == "None" || value == "~";
  if (key == "model.activation") {
    if (value == "swiglu" || value == "fast-swiglu")
      return {Given{"swiglu", {}, false, token}};
    if (value == "squared-relu")
      return {Given{"squared-relu", {}, false, token}};
    if (value == "gelu" || value == "fast-gelu")
      return idle();
  }
  if (key == "model.normalization" && (value == "layernorm" || value == "layernorm1p" || value == "rmsnorm"))
    return {Given{"normalization", {value == "rmsnorm" ? "RMSNorm" : "LayerNorm"}, false, token}};
  if (key == "model.fp8")
    return value == "True" || value == "true" ? std::vector<Given>{Given{"fp8-format", {"hybrid"}, false, token}}
                                              : idle();
  if (key == "model.optim.name") {
    if (value == "distributed_fused_adam" || value == "mcore_distributed_optim")
      return {Given{"use-distributed-optimizer", {}, false, token}};
    if (value == "fused_adam" || value == "adam" || value == "adamw")
      return idle();
  }
  if (key == "model.optim.grad_sync_dtype")
    return value == "bf16" || value == "bfloat16" ? std::vector<Given>{Given{"grad-reduce-in-bf16", {}, false, token}}
                                                  : idle();
  if (key == "trainer.precision" || key == "model.precision") {
    if (value == "bf16" || value == "bf16-mixed")
      return {Given{"bf16", {}, false, token}};
    if (value == "16" || value == "16-mixed")
      return {Given{"fp16", {}, false, token}};
  }
  for (const auto& k : nemo_keys) {
    if (k.key != key)
      continue;
    if (off)
      return idle();
    if (k.flag.empty()) {
      std::vector<Given> out{Given{std::string(k.argument), {value}, false, token}};
      if (k.argument == "num-query-groups") // NeMo turns grouped-query attention on with the group count
        out.push_back(Given{"group-query-attention", {}, false, token});
      return out;
    }
    const bool is_true = value == "True" || value == "true";
    const bool is_false = value == "False" || value == "false";
    if (!is_true && !is_false)
      break;
    if (is_true == (k.flag == "True"))
      return {Given{std::string(k.argument), {}, false, token}};
    return idle();
  }
  for (const auto prefix : nemo_idle_prefixes)
    if (key.starts_with(prefix))
      return idle();
  return {Given{key, {value}, false, token}}; // not understood: reported
}

// argparse's way with a command line that has no positional arguments: an option takes the words up to the next
// option. Later repeats of an option win. NeMo's overrides stand for the Megatron-LM arguments they mean.
std::vector<Given> parse(std::span<const std::string> tokens)
{
  std::vector<Given> given;
  for (const auto& token : tokens) {
    if (is_nemo(token)) {
      const auto meant = nemo_override(token);
      given.insert(given.end(), meant.begin(), meant.end());
      given.push_back(Given{"", {}, true, "", true}); // ends the override: a following word is not its value
    } else if (is_option(token)) {
      Given g;
      const auto eq = token.find('=');
      g.name = token.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      g.written = "--" + g.name;
      std::replace(g.name.begin(), g.name.end(), '_', '-');
      if (eq != std::string::npos)
        g.values.push_back(token.substr(eq + 1));
      given.push_back(std::move(g));
    } else if (given.empty() || given.back().idle) {
      given.push_back(Given{"", {token}, false, ""}); // a stray word: reported as not understood
    } else {
      given.back().values.push_back(token);
    }
  }
  return given;
}

std::optional<std::int64_t> parse_integer(const std::string& text)
{
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return v;
}

class Arguments {
 public:
  explicit Arguments(std::vector<Given> given) : given_(std::move(given)) {}

  // The last occurrence, marked as understood.
  Given* find(std::string_view name)
  {
    Given* last = nullptr;
    for (auto& g : given_)
      if (g.name == name) {
        g.used = true;
        last = &g;
      }
    return last;
  }
  bool flag(std::string_view name)
  {
    Given* g = find(name);
    if (g && !g->values.empty())
      fail(*g, "is a flag and takes no value", fmt::format("{}", fmt::join(g->values, " ")), "the flag alone");
    return g != nullptr;
  }
  std::optional<std::string> text(std::string_view name)
  {
    Given* g = find(name);
    if (!g)
      return std::nullopt;
    if (g->values.size() != 1)
      fail(*g, "takes one value", g->values.empty() ? "none" : fmt::format("{}", fmt::join(g->values, " ")),
           "one value");
    return g->values.front();
  }
  std::optional<std::int64_t> integer(std::string_view name, std::int64_t min, std::int64_t max)
  {
    const auto t = text(name);
    if (!t)
      return std::nullopt;
    const auto v = parse_integer(*t);
    if (!v || *v < min || *v > max)
      fail(*find(name), v ? "out of range" : "not an integer", *t, fmt::format("an integer from {} to {}", min, max));
    return v;
  }
  std::int64_t integer_or(std::string_view name, std::int64_t fallback, std::int64_t min, std::int64_t max)
  {
    return integer(name, min, max).value_or(fallback);
  }
  std::int64_t required(std::string_view name, std::int64_t min, std::int64_t max)
  {
    if (const auto v = integer(name, min, max))
      return *v;
    throw core::InputError(core::Location{"megatron arguments", "", ""}, fmt::format("--{} is missing", name),
                           "no such argument", fmt::format("--{} (Megatron-LM requires it)", name));
  }
  std::optional<double> number(std::string_view name, double min, double max)
  {
    const auto t = text(name);
    if (!t)
      return std::nullopt;
    const auto v = core::parse_number(*t);
    if (!v || *v < min || *v > max)
      fail(*find(name), v ? "out of range" : "not a number", *t, fmt::format("a number from {} to {}", min, max));
    return v;
  }
  // A choice among `names`, spelt as Megatron-LM spells them.
  std::optional<std::string> choice(std::string_view name, std::initializer_list<std::string_view> names)
  {
    const auto t = text(name);
    if (t && std::find(names.begin(), names.end(), *t) == names.end())
      fail(*find(name), "not one of Megatron-LM's choices", *t, fmt::format("one of {}", fmt::join(names, ", ")));
    return t;
  }

  [[noreturn]] static void fail(const Given& g, const std::string& problem, const std::string& found,
                                const std::string& expected)
  {
    const bool nemo = g.written.find('=') != std::string::npos;
    throw core::InputError(core::Location{nemo ? "nemo override " + g.written.substr(0, g.written.find('='))
                                               : "megatron argument --" + g.name,
                                          "", ""},
                           problem, found, expected);
  }

  const std::vector<Given>& all() const { return given_; }

 private:
  std::vector<Given> given_;
};

// Arguments that change nothing in one training step's time or memory: optimizer hyperparameters, schedules, data,
// tokenizer files, logging, checkpointing, initialisation and fusions simtrain's kernels already assume.
constexpr std::array no_effect_arguments = std::to_array<std::string_view>({
    "adam-beta1",
    "adam-beta2",
    "adam-eps",
    "apply-layernorm-1p",
    "async-save",
    "attention-softmax-in-fp32",
    "auto-detect-ckpt-format",
    "bias-dropout-fusion",
    "bias-gelu-fusion",
    "calculate-per-token-loss",
    "check-for-nan-in-loss-and-grad",
    "ckpt-format",
    "ckpt-fully-parallel-load",
    "ckpt-fully-parallel-save",
    "clip-grad",
    "cross-entropy-fusion-impl",
    "cross-entropy-loss-fusion",
    "data-cache-path",
    "data-path",
    "dataloader-type",
    "decoupled-lr",
    "decoupled-min-lr",
    "dist-ckpt-strictness",
    "distributed-backend",
    "distributed-timeout-minutes",
    "empty-unused-memory-level",
    "end-weight-decay",
    "eod-mask-loss",
    "eval-interval",
    "eval-iters",
    "exit-duration-in-mins",
    "exit-interval",
    "exit-signal-handler",
    "finetune",
    "fp8-amax-compute-algo",
    "fp8-amax-history-len",
    "fp8-interval",
    "fp8-margin",
    "hysteresis",
    "init-method-std",
    "initial-loss-scale",
    "load",
    "local-rank",
    "log-interval",
    "log-memory-to-tensorboard",
    "log-num-zeros-in-grad",
    "log-params-norm",
    "log-throughput",
    "log-timers-to-tensorboard",
    "log-validation-ppl-to-tensorboard",
    "loss-scale",
    "loss-scale-window",
    "lr",
    "lr-decay-iters",
    "lr-decay-samples",
    "lr-decay-style",
    "lr-warmup-fraction",
    "lr-warmup-init",
    "lr-warmup-iters",
    "lr-warmup-samples",
    "manual-gc",
    "manual-gc-interval",
    "merge-file",
    "min-loss-scale",
    "min-lr",
    "mock-data",
    "moe-aux-loss-coeff",
    "moe-grouped-gemm",
    "moe-router-bias-update-rate",
    "moe-router-dtype",
    "moe-router-pre-softmax",
    "moe-router-topk-scaling-factor",
    "moe-z-loss-coeff",
    "no-async-tensor-model-parallel-allreduce-deprecated",
    "no-bias-dropout-fusion",
    "no-bias-gelu-fusion",
    "no-create-attention-mask-in-dataloader",
    "no-load-optim",
    "no-load-rng",
    "no-masked-softmax-fusion",
    "no-mmap-bin-files",
    "no-persist-layer-norm",
    "no-position-embedding",
    "no-rope-fusion",
    "no-save-optim",
    "no-save-rng",
    "norm-epsilon",
    "num-workers",
    "override-opt-param-scheduler",
    "profile",
    "profile-ranks",
    "profile-step-end",
    "profile-step-start",
    "reset-attention-mask",
    "reset-position-ids",
    "rotary-base",
    "rotary-percent",
    "rotary-scaling-factor",
    "save",
    "save-interval",
    "seed",
    "split",
    "start-weight-decay",
    "tensorboard-dir",
    "tensorboard-log-interval",
    "tensorboard-queue-size",
    "test-data-path",
    "tiktoken-pattern",
    "timing-log-level",
    "tokenizer-model",
    "train-data-path",
    "train-iters",
    "train-samples",
    "use-checkpoint-args",
    "use-checkpoint-opt-param-scheduler",
    "use-cpu-initialization",
    "use-dist-ckpt",
    "use-mcore-models",
    "use-pytorch-profiler",
    "valid-data-path",
    "vocab-file",
    "wandb-exp-name",
    "wandb-project",
    "wandb-save-dir",
    "weight-decay",
    "weight-decay-incr-style",
});

// Vocabulary sizes of the tokenizers that carry their own (Megatron-LM's tokenizer classes).
std::optional<std::int64_t> tokenizer_vocabulary(std::string_view type)
{
  if (type == "GPT2BPETokenizer")
    return 50257;
  if (type == "Llama2Tokenizer")
    return 32000;
  if (type == "BertWordPieceLowerCase")
    return 30522;
  if (type == "BertWordPieceCase")
    return 28996;
  // HuggingFace tokenizers by name (NeMo's huggingface library): each model's config.json vocab_size.
  for (const auto& [prefix, size] : {std::pair<std::string_view, std::int64_t>{"meta-llama/Meta-Llama-3", 128256},
                                     {"meta-llama/Llama-3", 128256},
                                     {"meta-llama/Llama-2", 32000},
                                     {"mistralai/Mixtral-8x7B", 32000},
                                     {"mistralai/Mixtral-8x22B", 32768},
                                     {"mistralai/Mistral-7B", 32000},
                                     {"gpt2", 50257}})
    if (type.starts_with(prefix))
      return size;
  return std::nullopt;
}

struct Launch {
  std::optional<int> gpus;
  std::string script;
  std::vector<Given> launcher;
};

// torchrun / python -m torch.distributed.run / deepspeed before the script: their GPU count.
Launch read_launcher(std::span<const std::string> tokens, const std::string& script)
{
  Launch l;
  l.script = script;
  l.launcher = parse(tokens);
  std::optional<std::int64_t> per_node;
  std::int64_t nodes = 1;
  for (const auto& g : l.launcher) {
    if (g.values.size() != 1)
      continue;
    if (g.name == "nproc-per-node" || g.name == "num-gpus")
      per_node = parse_integer(g.values.front());
    else if (g.name == "nnodes" || g.name == "num-nodes")
      nodes = parse_integer(g.values.front()).value_or(0);
  }
  if (per_node && *per_node > 0 && nodes > 0 && *per_node * nodes <= (1 << 24))
    l.gpus = static_cast<int>(*per_node * nodes);
  return l;
}

class MegatronImport {
 public:
  MegatronImport(Arguments& a, Imported& out) : a_(a), out_(out) {}

  OrderedJson model(std::int64_t tp)
  {
    OrderedJson m;
    m["schema"] = "model/v1";
    const auto layers = a_.required("num-layers", 1, 1 << 20);
    const auto hidden = a_.required("hidden-size", 1, 1 << 22);
    const auto heads = a_.required("num-attention-heads", 1, 1 << 16);
    const bool swiglu = a_.flag("swiglu");
    const bool mla = a_.flag("multi-latent-attention");
    m["name"] = fmt::format("Megatron GPT ({} layers, hidden {})", layers, hidden);
    m["description"] = "Imported from Megatron-LM arguments by simtrain import megatron";
    m["num_layers"] = layers;
    m["hidden_size"] = hidden;
    m["num_attention_heads"] = heads;
    for (const auto& [key, argument] : {std::pair<const char*, const char*>{"/model/num_layers", "num-layers"},
                                        {"/model/hidden_size", "hidden-size"},
                                        {"/model/num_attention_heads", "num-attention-heads"},
                                        {"/model/num_kv_heads", "num-query-groups"},
                                        {"/model/ffn_hidden_size", "ffn-hidden-size"},
                                        {"/model/head_dim", "kv-channels"},
                                        {"/model/moe", "num-experts"},
                                        {"/model/mla", "multi-latent-attention"}})
      origin(key, argument);
    const bool gqa = a_.flag("group-query-attention");
    const auto groups = a_.integer("num-query-groups", 1, heads);
    if (!mla) {
      // Megatron-LM reads --num-query-groups only with --group-query-attention (default 1 group then).
      m["num_kv_heads"] = gqa ? groups.value_or(1) : heads;
      if (groups && !gqa)
        out_.assumptions.push_back("--num-query-groups without --group-query-attention: multi-head attention, as "
                                   "Megatron-LM reads it");
      if (const auto kv = a_.integer("kv-channels", 1, 1 << 16); kv && *kv * heads != hidden)
        m["head_dim"] = *kv;
    }
    // Megatron-LM's default FFN width: 4h, or for SwiGLU two thirds of that rounded down to a multiple of 64.
    const auto ffn_default = swiglu ? 4 * hidden * 2 / 3 / 64 * 64 : 4 * hidden; // int((4h * 2/3) / 64) * 64
    const auto ffn = a_.integer_or("ffn-hidden-size", ffn_default, 1, 1 << 24);
    m["ffn_hidden_size"] = ffn;
    m["vocab_size"] = vocabulary(tp);
    const auto seq = sequence_length();
    m["seq_length"] = std::max(seq, a_.integer_or("max-position-embeddings", seq, 1, 1 << 24));
    const bool squared_relu = a_.flag("squared-relu");
    if (squared_relu)
      not_simulated("squared-relu", "squared ReLU is simulated as ReLU (the same GEMMs, one elementwise kernel)");
    m["ffn_kind"] = swiglu ? "swiglu" : squared_relu ? "relu" : "gelu";
    m["norm"] = a_.choice("normalization", {"LayerNorm", "RMSNorm"}).value_or("LayerNorm") == "RMSNorm" ? "rmsnorm"
                                                                                                        : "layernorm";
    m["position_embedding"] = position_embedding();
    m["tie_embeddings"] = !a_.flag("untie-embeddings-and-output-weights");
    const bool bias = !a_.flag("disable-bias-linear");
    m["qkv_bias"] = bias || a_.flag("add-qkv-bias");
    m["linear_bias"] = bias;
    const double attention_dropout = a_.number("attention-dropout", 0.0, 1.0).value_or(0.1);
    const double hidden_dropout = a_.number("hidden-dropout", 0.0, 1.0).value_or(0.1);
    m["dropout"] = attention_dropout > 0.0 || hidden_dropout > 0.0;
    if (a_.flag("qk-layernorm"))
      m["qk_norm"] = true;
    if (mla)
      m["mla"] = latent_attention();
    if (const auto experts = a_.integer("num-experts", 1, 1 << 16))
      m["moe"] = mixture(*experts, ffn, layers);
    return m;
  }

  std::int64_t sequence_length()
  {
    if (const auto s = a_.integer("seq-length", 1, 1 << 24))
      return *s;
    return a_.required("decoder-seq-length", 1, 1 << 24);
  }

  std::int64_t vocabulary(std::int64_t tp)
  {
    if (const auto padded = a_.integer("padded-vocab-size", 1, 1 << 24))
      return *padded;
    const auto type = a_.text("tokenizer-type");
    auto size = a_.integer("vocab-size", 1, 1 << 24);
    if (!size && type)
      size = tokenizer_vocabulary(*type);
    if (!size && !type && a_.find("vocab-file") && a_.find("merge-file")) {
      size = tokenizer_vocabulary("GPT2BPETokenizer");
      out_.assumptions.push_back("--vocab-file and --merge-file without --tokenizer-type: GPT-2's BPE vocabulary "
                                 "(50,257 tokens)");
    }
    if (!size)
      throw core::InputError(core::Location{"megatron arguments", "", ""}, "the vocabulary size is not known",
                             type ? "--tokenizer-type " + *type + ", which reads it from its files" : "no tokenizer",
                             "--vocab-size (the tokenizer's vocabulary)");
    // Megatron-LM pads the vocabulary to a multiple of make-vocab-size-divisible-by x TP (vocab_utils.py).
    const auto multiple = a_.integer_or("make-vocab-size-divisible-by", 128, 1, 1 << 20) * tp;
    return (*size + multiple - 1) / multiple * multiple;
  }

  std::string position_embedding()
  {
    if (a_.flag("use-rotary-position-embeddings"))
      return "rope";
    const auto kind =
        a_.choice("position-embedding-type", {"learned_absolute", "rope", "mrope", "yarn", "none", "relative"})
            .value_or("learned_absolute");
    if (kind == "learned_absolute")
      return "learned";
    if (kind != "rope")
      not_simulated("position-embedding-type",
                    fmt::format("'{}' position embeddings are simulated as RoPE (no learned table)", kind));
    return "rope";
  }

  OrderedJson latent_attention()
  {
    OrderedJson l;
    l["q_lora_rank"] = a_.integer_or("q-lora-rank", 0, 0, 1 << 20);
    l["kv_lora_rank"] = a_.integer_or("kv-lora-rank", 32, 1, 1 << 20);
    l["qk_nope_head_dim"] = a_.integer_or("qk-head-dim", 128, 1, 1 << 16);
    l["qk_rope_head_dim"] = a_.integer_or("qk-pos-emb-head-dim", 64, 1, 1 << 16);
    l["v_head_dim"] = a_.integer_or("v-head-dim", 128, 1, 1 << 16);
    return l;
  }

  OrderedJson mixture(std::int64_t experts, std::int64_t ffn, std::int64_t layers)
  {
    OrderedJson e;
    e["num_experts"] = experts;
    e["experts_per_token"] = a_.integer_or("moe-router-topk", 2, 1, experts);
    e["expert_ffn_hidden_size"] = a_.integer_or("moe-ffn-hidden-size", ffn, 1, 1 << 22);
    if (const auto shared = a_.integer("moe-shared-expert-intermediate-size", 1, 1 << 22))
      e["shared_expert_ffn_hidden_size"] = *shared;
    if (a_.flag("moe-shared-expert-gate"))
      e["shared_expert_gate"] = true;
    if (const auto freq = a_.text("moe-layer-freq"))
      layer_frequency(*freq, layers, e);
    if (a_.choice("moe-router-score-function", {"softmax", "sigmoid"}).value_or("softmax") == "sigmoid")
      e["router"] = "sigmoid";
    const auto balancing =
        a_.choice("moe-router-load-balancing-type", {"aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "none"})
            .value_or("aux_loss");
    if (a_.flag("moe-router-enable-expert-bias"))
      e["load_balancing"] = "aux_free";
    else if (balancing == "sinkhorn")
      not_simulated("moe-router-load-balancing-type", "Sinkhorn routing is simulated as top-k routing");
    if (const auto cf = a_.number("moe-expert-capacity-factor", 0.01, 1000.0))
      e["capacity_factor"] = *cf;
    if (const auto groups = a_.integer("moe-router-num-groups", 1, experts)) {
      e["expert_groups"] = *groups;
      e["groups_per_token"] = a_.integer_or("moe-router-group-topk", *groups, 1, *groups);
    }
    return e;
  }

  // --moe-layer-freq N (every N-th layer), or Megatron-LM's pattern "([0]*3+[1]*58)" of dense layers then MoE ones.
  void layer_frequency(const std::string& text, std::int64_t layers, OrderedJson& e)
  {
    if (const auto n = parse_integer(text); n && *n >= 1 && *n <= layers) {
      e["layer_frequency"] = *n;
      return;
    }
    std::string s;
    std::copy_if(text.begin(), text.end(), std::back_inserter(s), [](char c) { return c != ' ' && c != '\''; });
    std::int64_t dense = 0;
    std::int64_t moe = 0;
    if (std::sscanf(s.c_str(), "([0]*%ld+[1]*%ld)", &dense, &moe) == 2 && dense >= 0 && dense + moe == layers &&
        dense < layers) {
      e["first_dense_layers"] = dense;
      return;
    }
    Arguments::fail(*a_.find("moe-layer-freq"), "not a layer pattern simtrain simulates", text,
                    fmt::format("an integer, or ([0]*D+[1]*M) with D+M = --num-layers {}", layers));
  }

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
    return p;
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
    if (const auto* modules = a_.find("recompute-modules"); modules && recompute == "selective")
      for (const auto& module : modules->values)
        if (module != "core_attn")
          not_simulated("recompute-modules", fmt::format("selective recomputation of '{}' is not simulated (only "
                                                         "core_attn, the attention's softmax and its inputs)",
                                                         module));
    p["recompute"] = recompute;
    origin("/plan/recompute", "recompute-granularity");
  }

  void precision(OrderedJson& p)
  {
    const bool fp16 = a_.flag("fp16");
    const bool bf16 = a_.flag("bf16");
    const auto fp8 = a_.choice("fp8-format", {"e4m3", "hybrid"});
    const auto recipe = a_.choice("fp8-recipe", {"delayed", "tensorwise", "mxfp8", "blockwise"});
    if (!fp16 && !bf16 && !fp8)
      not_simulated("(no --fp16, --bf16 or --fp8-format)", "fp32 training is simulated as bf16 mixed precision");
    p["precision"] = fp8 ? "fp8" : fp16 ? "fp16" : "bf16";
    origin("/plan/precision", fp8 ? "fp8-format" : fp16 ? "fp16" : "bf16");
    if (fp8) {
      if (recipe == "mxfp8")
        not_simulated("fp8-recipe", "MXFP8 is simulated as blockwise scaling (scales per block of values)");
      if (recipe && *recipe != "delayed")
        p["fp8_recipe"] = *recipe == "tensorwise" ? "current" : "blockwise";
      if (a_.flag("fp8-param-gather"))
        p["fp8_param_gather"] = true;
    } else if (a_.find("fp8-param-gather") || recipe) {
      out_.assumptions.push_back("FP8 settings without --fp8-format: no FP8, as Megatron-LM runs it");
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
    for (const char* offload : {"optimizer-cpu-offload", "use-precision-aware-optimizer"})
      if (a_.flag(offload))
        not_simulated(offload, "not simulated: the optimizer runs on the GPU in mixed precision");
  }

  void not_simulated(std::string_view name, std::string why)
  {
    const Given* g = a_.find(name);
    out_.not_simulated.push_back(Setting{g ? g->spelt() : std::string(name), std::move(why)});
  }
  void origin(const std::string& pointer, std::string_view name)
  {
    if (const Given* g = a_.find(name))
      out_.origins.emplace_back(pointer, g->spelt());
  }

 private:
  Arguments& a_;
  Imported& out_;
};

} // namespace

Imported import_megatron(const std::vector<std::string>& arguments, const Target& target)
{
  Imported out;
  for (std::size_t i = 0; i < arguments.size(); ++i)
    if (!core::is_valid_utf8(arguments[i]))
      throw core::InputError(core::Location{"megatron arguments", "", ""},
                             fmt::format("argument {} is not valid UTF-8", i + 1),
                             core::escape_invalid_utf8(core::clip(arguments[i], 40)), "text");
  const auto script = std::find_if(arguments.begin(), arguments.end(),
                                   [](const std::string& t) { return !is_option(t) && t.ends_with(".py"); });
  std::span<const std::string> own(arguments);
  std::optional<int> launched_gpus;
  if (script != arguments.end()) {
    const auto at = static_cast<std::size_t>(script - arguments.begin());
    const Launch launch = read_launcher(own.subspan(0, at), *script);
    launched_gpus = launch.gpus;
    for (const auto& g : launch.launcher)
      out.no_effect.push_back(
          Setting{g.name.empty() ? fmt::format("{}", fmt::join(g.values, " ")) : g.spelt(), "the launcher's"});
    own = own.subspan(at + 1);
  }
  Arguments a(parse(own));
  MegatronImport import(a, out);
  const auto tp = a.integer_or("tensor-model-parallel-size", 1, 1, 1 << 16);

  OrderedJson s;
  s["schema"] = "scenario/v1";
  s["name"] = target.name;
  s["description"] = fmt::format("Imported by simtrain import megatron from {} arguments",
                                 script != arguments.end() ? *script : std::string("Megatron-LM"));
  OrderedJson model = import.model(tp);
  const auto layers = model["num_layers"].get<std::int64_t>();
  s["model"] = std::move(model);
  s["topology"] = target.topology;
  // NeMo's trainer.devices x trainer.num_nodes, where no launcher gave a count.
  const auto devices = a.integer("nemo-devices", 1, 1 << 16);
  const auto nodes = a.integer("nemo-num-nodes", 1, 1 << 20);
  if (!launched_gpus && devices)
    launched_gpus = static_cast<int>(std::min<std::int64_t>(*devices * nodes.value_or(1), 1 << 24));
  const auto gpus = target.gpus ? target.gpus : launched_gpus;
  if (!gpus)
    throw core::InputError(core::Location{"megatron arguments", "", ""}, "the GPU count is not known",
                           "no --gpus and no launcher (torchrun --nproc_per_node N --nnodes M) before the script",
                           "--gpus N");
  if (!target.gpus)
    out.assumptions.push_back(fmt::format("{} GPUs, from the launcher's --nproc_per_node x --nnodes (NeMo's "
                                          "trainer.devices x trainer.num_nodes)",
                                          *gpus));
  s["gpus"] = *gpus;
  s["plan"] = import.plan(tp, layers);
  if (const Given* g = a.find("tensor-model-parallel-size"))
    out.origins.emplace_back("/plan/tp", g->spelt());
  out.origins.emplace_back("/gpus", target.gpus ? "--gpus" : "the launcher's GPU count");

  for (const auto& g : a.all()) {
    if (g.idle && !g.written.empty())
      out.no_effect.push_back(Setting{g.written, ""});
    if (g.used || g.idle)
      continue;
    if (std::find(no_effect_arguments.begin(), no_effect_arguments.end(), g.name) != no_effect_arguments.end())
      out.no_effect.push_back(Setting{g.spelt(), ""});
    else
      out.not_simulated.push_back(
          Setting{g.name.empty() ? fmt::format("{}", fmt::join(g.values, " ")) : g.spelt(),
                  g.name.empty() ? "a word outside any argument" : "not understood, left out of the scenario"});
  }
  out.scenario = std::move(s);
  return out;
}

} // namespace sim::importer
