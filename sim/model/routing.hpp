// Where a MoE router sends a token, as the token dispatch sees it: the chance that a token needs a given GPU or node.
#pragma once

#include "model/model_spec.hpp"

namespace sim::model {

// The chance that a token routes to at least one expert of a block of `held` consecutive experts (one GPU's, or one
// node's), the router taken as uniform: it picks `groups_per_token` of the expert groups, then `experts_per_token`
// distinct experts among theirs. Exact for a block that lies within one group or is made of whole groups (a block
// spanning parts of several groups is taken as its whole groups).
double reach_probability(const MoeSpec& moe, double held);

} // namespace sim::model
