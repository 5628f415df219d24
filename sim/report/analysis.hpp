// The analytic view of a scenario (no simulation): memory per stage and FLOPs per step, as text and JSON.
#pragma once

#include "core/document.hpp"
#include "memory/memory_model.hpp"
#include "model/flops.hpp"
#include "scenario/scenario.hpp"

#include <string>

namespace sim::report {

struct Analysis {
  memory::MemoryEstimate memory;
  model::LayerFlops layer_forward; // one layer, one micro-batch, whole (not sharded)
  double logits_forward = 0;       // one micro-batch
  model::StepFlops step;           // the global batch
  double tokens_per_step = 0;
  double peak_flops = 0; // per GPU, at the plan's precision
};

Analysis analyse(const scenario::Scenario& s);

// The resolved plan with every default filled in, as reports show it (plan::plan_keys() says where each key goes).
core::Json plan_json(const plan::ParallelPlan& p);
// " x CP 2 (ring)", " (EP 8)": the parallel dimensions beside TP, PP and DP, for the one-line plan summaries.
std::string parallel_extras(const plan::ParallelPlan& p);
// How the plan shards its state, for the plan line: ", ZeRO-3 in shard groups of 16 (11 copies)", or "".
std::string sharding_text(const plan::ParallelPlan& p);
// What trains and how, for the plan line: ", LoRA rank 16 on 7 projections over an NF4 base (QLoRA), adam_8bit
// optimizer", or "" for every weight under Adam.
std::string training_text(const plan::ParallelPlan& p);
// The framework whose defaults the plan takes, and what they make of it: "software: DeepSpeed v0.12-v0.17 under a
// PyTorch model (framework deepspeed, software deepspeed): gradients in bf16, reduced in 953.67 MiB buckets during the
// backward pass; norm_impl torch, attention flash2, optimizer deepspeed" (the plan keys they set).
std::string software_text(const plan::ParallelPlan& p);

// What each GPU's HBM holds before the plan's tensors: "HBM less the CUDA context (381.47 MiB)", and the headroom.
std::string reserved_text(const memory::MemoryEstimate& m);
// The host tier of a memory estimate: the node holding the most offloaded state, against its DRAM, as JSON
// ({node_bytes, capacity_bytes, oom}) and as the summaries' line ("offloaded ... of ...: fits").
core::Json host_memory_json(const memory::MemoryEstimate& m);
std::string host_memory_line(const memory::MemoryEstimate& m);
// The NVMe tier the same way ({node_bytes, capacity_bytes, oom}; "swapped ... of ...: fits").
core::Json nvme_memory_json(const memory::MemoryEstimate& m);
std::string nvme_memory_line(const memory::MemoryEstimate& m);

// "none", "full", "selective", or "selective (layernorm, moe_act)" where the modules are not the attention core alone.
std::string recompute_text(const plan::ParallelPlan& p);

core::Json analysis_json(const scenario::Scenario& s, const Analysis& a);
std::string analysis_text(const scenario::Scenario& s, const Analysis& a);

} // namespace sim::report
