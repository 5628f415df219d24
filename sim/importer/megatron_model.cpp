#include "importer/megatron_model.hpp"

#include "core/input_error.hpp"

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <iterator>
#include <optional>
#include <string_view>
#include <utility>

namespace sim::importer {
namespace {

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

class ModelReader : MegatronReader {
 public:
  using MegatronReader::MegatronReader;

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
        out_.assumptions.emplace_back("--num-query-groups without --group-query-attention: multi-head attention, as "
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
    if (const auto mtp = a_.integer("mtp-num-layers", 0, 16); mtp && *mtp > 0)
      m["mtp_layers"] = *mtp;
    return m;
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
      out_.assumptions.emplace_back("--vocab-file and --merge-file without --tokenizer-type: GPT-2's BPE vocabulary "
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
};

} // namespace

OrderedJson megatron_model(Arguments& a, Imported& out, std::int64_t tp)
{
  return ModelReader(a, out).model(tp);
}

} // namespace sim::importer
