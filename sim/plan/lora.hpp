// LoRA's adapters on a dense transformer layer, as PEFT places them: for each targeted projection W (out x in), A
// (rank x in) and B (out x rank) trained beside the frozen W; and what a frozen base weight occupies.
#pragma once

#include "model/model_spec.hpp"
#include "plan/parallel_plan.hpp"

#include <vector>

namespace sim::plan {

// The linear layers of a transformer block, as its GEMMs are fused: Q, K and V in one, gate and up in one (FC1).
enum class LinearSite { QKV, PROJ, FC1, FC2 };

struct Adapter {
  double in = 0;
  double out = 0;
};

// The adapters on one site: each targeted projection's widths, whole (workload/lora_kernels splits them over a
// tensor-parallel group).
std::vector<Adapter> lora_adapters(const model::ModelSpec& m, const ParallelPlan& p, LinearSite site);

// Adapter parameters of one layer: rank x (in + out), summed over the targets.
double lora_layer_params(const model::ModelSpec& m, const ParallelPlan& p);

// Bytes per frozen linear weight: the training's `value_bytes` (16 bits, fp32 in full precision), or NF4 with double
// quantization (bitsandbytes: 4 bits, an 8-bit absmax per 64 weights, an fp32 scale per 256 of those: 4.127 bits, the
// QLoRA paper's 0.127 bits of constants).
double base_weight_bytes(BaseQuantization q, double value_bytes);

} // namespace sim::plan
