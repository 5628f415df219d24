// A LoRA fine-tune's kernels (PEFT's LoraLayer over bitsandbytes' Linear4bit for QLoRA): a frozen linear layer keeps
// its forward and data-gradient GEMMs, loses its weight gradient, and gains its adapters' small GEMMs and the
// elementwise scale and add around them; a 4-bit base weight is dequantized to 16 bits before each of its GEMMs.
// Under tensor parallelism the adapters are Megatron-core's (NeMo's and Megatron-Bridge's ParallelLinearAdapter, its
// all-to-all variant off): beside a column-parallel layer (QKV, fc1) A is split by rank and its output gathered, B by
// output; beside a row-parallel one (projection, fc2) A is split by input and its partial output all-reduced, B by
// output and its output gathered whole (then scattered over the sequence under sequence parallelism).
#pragma once

#include "hardware/compute_model.hpp"
#include "model/model_spec.hpp"
#include "plan/lora.hpp"
#include "workload/task_graph.hpp" // CollectiveKind

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sim::workload {

struct LoraKernels {
  double rank = 0;
  double tp = 1;          // tensor parallelism: the adapters split as Megatron-core splits them
  double e = 2;           // bytes of a value (the layer's: 4 in full precision)
  bool sp = false;        // sequence parallelism (with tp > 1)
  bool quantized = false; // NF4 base: dequantized before each forward and data-gradient GEMM
  bool dropout = false;   // lora_dropout above 0: a dropout kernel on each adapter's input (PEFT's) or output
  bool dropout_on_output = false;
  bool scale_rank = false; // the scale on A's rank-r output (AutoModel's), not over B's output (PEFT's, Megatron's)
  std::array<std::vector<plan::Adapter>, 4> adapters; // by plan::LinearSite
};

// A tensor-parallel collective an adapter adds beside a base GEMM: its kind and whole buffer in bytes.
struct AdapterCollective {
  std::string label;
  CollectiveKind kind = CollectiveKind::ALL_REDUCE;
  double bytes = 0;
};

// The plan's adapters on a dense layer; nullopt unless the plan trains LoRA.
std::optional<LoraKernels> lora_kernels(const model::ModelSpec& m, const plan::ParallelPlan& p);

// The block's linear layer a GEMM belongs to, by the layer programs' kernel names (qkv, attention projection,
// projection dgrad/wgrad, fc1, fc2 and their passes); nullopt for every other kernel.
std::optional<plan::LinearSite> linear_site(std::string_view kernel_name);

// What `k` becomes when only adapters train: the kernels that run in its place (none for a frozen weight's gradient,
// the embedding's gradient scatter-add among them).
std::vector<hardware::Kernel> with_adapters(const hardware::Kernel& k, const LoraKernels& lora);

// The collectives over the tensor-parallel group that the adapters beside base GEMM `k` add (none with tp 1, for a
// weight gradient, or for a kernel that is no linear layer's). Forward, per adapter of rank r on T tokens: column
// layers all-gather A's output (T x r), row layers all-reduce it and all-gather B's (T x out). Data gradient: B's
// input gradient all-reduced (T x r); a column adapter's input gradient all-reduced (T x in) unless sequence
// parallelism's reduce-scatter of the layer's input gradient takes it; a row adapter's output gradient all-gathered
// back over the sequence (T x out) under sequence parallelism.
std::vector<AdapterCollective> adapter_collectives(const hardware::Kernel& k, const LoraKernels& lora);

} // namespace sim::workload
