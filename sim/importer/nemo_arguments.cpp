#include "importer/nemo_arguments.hpp"

#include <algorithm>
#include <array>
#include <optional>

namespace sim::importer {
namespace {

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
    {"model.data.train_ds.max_seq_length", "seq-length"}, // fine-tuning's (a packed sequence's) length
    {"model.data.train_ds.packed_sequence", "nemo-packed-sequence", "True"},
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
    {"model.fp8_params", "fp8-param-gather", "True"}, // Transformer Engine's FP8 weights (fp8_model_init)
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
    "model.restore_from_path",
    "model.answer_only_loss",
    "model.save_nemo_on_validation_end",
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
    "model.log_token_counts",
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

// NeMo 1's PEFT settings (nemo/collections/nlp/parts/peft_config.py) as pseudo-arguments the plan reader takes: the
// scheme and LoRA's rank, targets, dropout and variant; the other schemes' settings change nothing under LoRA.
constexpr std::array nemo_peft_keys = std::to_array<NemoKey>({
    {"model.peft.peft_scheme", "nemo-peft-scheme"},
    {"model.peft.lora_tuning.adapter_dim", "nemo-lora-dim"},
    {"model.peft.lora_tuning.adapter_dropout", "nemo-lora-dropout"},
    {"model.peft.lora_tuning.dropout_position", "nemo-lora-dropout-position"},
    {"model.peft.lora_tuning.variant", "nemo-lora-variant"},
    {"model.peft.lora_tuning.layer_selection", "nemo-lora-layer-selection"},
    {"model.peft.lora_tuning.weight_tying", "nemo-lora-weight-tying", "True"},
});

// A list as an override writes it ([a,b], ['a', 'b']) or the file's JSON (["a","b"]): its items, unquoted.
std::vector<std::string> list_items(std::string_view text)
{
  if (text.starts_with('['))
    text.remove_prefix(1);
  if (text.ends_with(']'))
    text.remove_suffix(1);
  std::vector<std::string> items;
  std::size_t from = 0;
  while (from <= text.size()) {
    const auto comma = std::min(text.find(',', from), text.size());
    std::string_view item = text.substr(from, comma - from);
    const auto first = item.find_first_not_of(" '\"");
    const auto last = item.find_last_not_of(" '\"");
    if (first != std::string_view::npos)
      items.emplace_back(item.substr(first, last - first + 1));
    from = comma + 1;
  }
  return items;
}

std::optional<std::vector<Given>> peft_override(const std::string& key, const std::string& value,
                                                const std::string& token, bool off)
{
  if (key == "model.peft.lora_tuning.target_modules")
    return std::vector<Given>{Given{.name = "nemo-lora-targets", .values = list_items(value), .written = token}};
  for (const auto& k : nemo_peft_keys) {
    if (k.key != key)
      continue;
    if (off || (!k.flag.empty() && value != "True" && value != "true"))
      return std::vector<Given>{Given{.written = token, .idle = true}};
    return std::vector<Given>{
        Given{.name = std::string(k.argument),
              .values = k.flag.empty() ? std::vector<std::string>{value} : std::vector<std::string>{},
              .written = token}};
  }
  if (key.starts_with("model.peft."))
    return std::vector<Given>{Given{.written = token, .idle = true}};
  return std::nullopt;
}

} // namespace

std::string_view nemo_unstaged(std::string_view token)
{
  while (token.starts_with('+'))
    token.remove_prefix(1);
  for (const std::string_view stage : {"training.", "fine_tuning.", "peft."})
    if (token.starts_with(stage))
      return token.substr(stage.size());
  return token;
}

bool is_nemo(std::string_view token)
{
  const auto eq = token.find('=');
  token = nemo_unstaged(token);
  return eq != std::string_view::npos && (token.starts_with("model.") || token.starts_with("trainer.") ||
                                          token.starts_with("exp_manager.") || token.starts_with("run."));
}

std::vector<Given> nemo_override(const std::string& token)
{
  const std::string_view text = nemo_unstaged(token);
  const auto eq = text.find('=');
  const std::string key(text.substr(0, eq));
  const std::string value(text.substr(eq + 1));
  auto idle = [&] { return std::vector<Given>{Given{.written = token, .idle = true}}; };
  const bool off = value == "null" || value == "None" || value == "~";
  if (auto peft = peft_override(key, value, token, off))
    return *peft;
  if (key == "model.activation") {
    if (value == "swiglu" || value == "fast-swiglu")
      return {Given{.name = "swiglu", .written = token}};
    if (value == "squared-relu")
      return {Given{.name = "squared-relu", .written = token}};
    if (value == "gelu" || value == "fast-gelu")
      return idle();
  }
  if (key == "model.normalization" && (value == "layernorm" || value == "layernorm1p" || value == "rmsnorm"))
    return {Given{.name = "normalization", .values = {value == "rmsnorm" ? "RMSNorm" : "LayerNorm"}, .written = token}};
  if (key == "model.fp8")
    return value == "True" || value == "true"
               ? std::vector<Given>{Given{.name = "fp8-format", .values = {"hybrid"}, .written = token}}
               : idle();
  if (key == "model.optim.name") {
    if (value == "distributed_fused_adam" || value == "mcore_distributed_optim")
      return {Given{.name = "use-distributed-optimizer", .written = token}};
    if (value == "fused_adam" || value == "adam" || value == "adamw")
      return idle();
  }
  if (key == "model.optim.grad_sync_dtype")
    return value == "bf16" || value == "bfloat16"
               ? std::vector<Given>{Given{.name = "grad-reduce-in-bf16", .written = token}}
               : idle();
  if (key == "trainer.precision" || key == "model.precision") {
    if (value == "bf16" || value == "bf16-mixed")
      return {Given{.name = "bf16", .written = token}};
    if (value == "16" || value == "16-mixed")
      return {Given{.name = "fp16", .written = token}};
  }
  for (const auto& k : nemo_keys) {
    if (k.key != key)
      continue;
    if (off)
      return idle();
    if (k.flag.empty()) {
      std::vector<Given> out{Given{.name = std::string(k.argument), .values = {value}, .written = token}};
      if (k.argument == "num-query-groups") // NeMo turns grouped-query attention on with the group count
        out.push_back(Given{.name = "group-query-attention", .written = token});
      return out;
    }
    const bool is_true = value == "True" || value == "true";
    const bool is_false = value == "False" || value == "false";
    if (!is_true && !is_false)
      break;
    if (is_true == (k.flag == "True"))
      return {Given{.name = std::string(k.argument), .written = token}};
    return idle();
  }
  for (const auto prefix : nemo_idle_prefixes)
    if (key.starts_with(prefix))
      return idle();
  return {Given{.name = key, .values = {value}, .written = token}}; // not understood: reported
}

} // namespace sim::importer
