// A LoRA fine-tune's kernels (PEFT's LoraLayer over bitsandbytes' Linear4bit for QLoRA): a frozen linear layer keeps
// its forward and data-gradient GEMMs, loses its weight gradient, and gains its adapters' small GEMMs and the
// elementwise scale and add around them; a 4-bit base weight is dequantized to 16 bits before each of its GEMMs.
#pragma once

#include "hardware/compute_model.hpp"
#include "model/model_spec.hpp"
#include "plan/lora.hpp"

#include <array>
#include <optional>
#include <string_view>
#include <vector>

namespace sim::workload {

struct LoraKernels {
  double rank = 0;
  bool quantized = false; // NF4 base: dequantized before each forward and data-gradient GEMM
  bool dropout = false;   // PEFT's lora_dropout above 0: a dropout kernel on each adapter's input
  std::array<std::vector<plan::Adapter>, 4> adapters; // by plan::LinearSite
};

// The plan's adapters on a dense layer; nullopt unless the plan trains LoRA.
std::optional<LoraKernels> lora_kernels(const model::ModelSpec& m, const plan::ParallelPlan& p);

// The block's linear layer a GEMM belongs to, by the layer programs' kernel names (qkv, attention projection,
// projection dgrad/wgrad, fc1, fc2 and their passes); nullopt for every other kernel.
std::optional<plan::LinearSite> linear_site(std::string_view kernel_name);

// What `k` becomes when only adapters train: the kernels that run in its place (none for a frozen weight's gradient,
// the embedding's gradient scatter-add among them).
std::vector<hardware::Kernel> with_adapters(const hardware::Kernel& k, const LoraKernels& lora);

} // namespace sim::workload
