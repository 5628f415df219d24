// Parameter counts of a model, per transformer layer and for the embedding and output layers: the total, and the
// active ones (what one token's forward pass uses: the routed experts it goes to, not all of them).
#pragma once

#include "model/model_spec.hpp"

namespace sim::model {

struct LayerParams {
  double attention = 0;      // Q, K, V (or MLA's projections and latent norms), output projection (+ biases)
  double ffn = 0;            // the dense FFN, or a MoE layer's shared expert(s) and their gate
  double experts = 0;        // a MoE layer's routed experts, all of them
  double active_experts = 0; // the experts_per_token of them one token goes through
  double router = 0;         // a MoE layer's router (+ its bias)
  double norms = 0;          // the pre-norm block's norms (and QK norms)
  double total() const { return attention + ffn + experts + router + norms; }
  double active() const { return attention + ffn + active_experts + router + norms; }
};

struct ParamCount {
  LayerParams layer;         // a dense transformer layer
  LayerParams moe_layer;     // a mixture-of-experts layer (all zero for a dense model)
  double layers = 0;         // all transformer layers
  double word_embedding = 0; // vocab x hidden
  double position_embedding = 0;
  double embedding_norm = 0;
  double final_norm = 0;
  double lm_head = 0;    // 0 when tied to the word embedding
  LayerParams mtp_layer; // one multi-token-prediction module's transformer layer (the last layer's kind)
  double mtp_extra = 0;  // and the rest of one module: its three norms and its 2h x h projection
  double mtp = 0;        // all MTP modules (they share the embedding and the output layer)
  double total = 0;
  double active = 0; // per token: every parameter but the routed experts a token does not go to
};

// Weights of the GEMMs from the hidden state to queries, keys and values (MLA: its down and up projections).
double qkv_weights(const ModelSpec& m);

// A layer's feed-forward part: one FFN, or a MoE layer's experts (with its shared experts and router).
enum class FfnPart { DENSE, MOE };

// One layer's parameters, with the feed-forward part `ffn` (a model without experts has only dense layers).
LayerParams layer_params(const ModelSpec& m, FfnPart ffn);

// The parameters of one routed expert (its gated or plain FFN, with biases).
double expert_params(const ModelSpec& m);

ParamCount count_params(const ModelSpec& m);

} // namespace sim::model
