// Parameter counts of a model, per transformer layer and for the embedding and output layers.
#pragma once

#include "model/model_spec.hpp"

namespace sim::model {

struct LayerParams {
  double attention = 0; // Q, K, V, output projection (+ biases)
  double ffn = 0;       // up (and gate) and down projections (+ biases)
  double norms = 0;     // the two norms of a pre-norm block
  double total() const { return attention + ffn + norms; }
};

struct ParamCount {
  LayerParams layer;         // one transformer layer
  double layers = 0;         // all transformer layers
  double word_embedding = 0; // vocab x hidden
  double position_embedding = 0;
  double embedding_norm = 0;
  double final_norm = 0;
  double lm_head = 0; // 0 when tied to the word embedding
  double total = 0;
};

ParamCount count_params(const ModelSpec& m);

} // namespace sim::model
