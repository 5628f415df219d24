// Internal to the layer programs (workload/layer_program, attention_program, program_steps): the shapes of one
// transformer layer on one tensor-parallel rank for one micro-batch, from the model, the plan and the GPU.
#pragma once

#include "hardware/compute_model.hpp"
#include "model/model_spec.hpp"
#include "plan/parallel_plan.hpp"
#include "workload/layer_program.hpp"

#include <vector>

namespace sim::workload {

// Shapes of one layer on one tensor-parallel rank for one micro-batch.
struct Shape {
  double b, s, T, Tsp; // micro-batch, sequence, tokens on this GPU (b s / cp), tokens outside the TP region (T / t, SP)
  double cp;           // context-parallel ranks sharing each sequence
  double e;            // bytes of an activation or weight value: 2 (16 bits), 4 in full precision
  plan::CpKind cp_kind;
  double h, q, kv, v, f, f1, a, d, t, vocab; // v: the values' width (MLA's differ from its keys')
  bool sp, flash, dropout, rope, gated;
  bool fp8;                    // the linear layers' GEMMs take FP8 operands (Transformer Engine)
  plan::Fp8Recipe recipe;      // and how their inputs are scaled
  double gathered_element;     // bytes per element of a GEMM input all-gathered over the TP group (FP8: gathered cast)
  bool comm_overlap;           // sequence-parallel collectives pipelined with the GEMM beside them
  bool backward_overlap;       // the backward's TP communication runs beside the weight-gradient GEMM
  hardware::MemoryKernel norm; // the norm kernels' class (kind and implementation)
  bool eager_norm;             // an RMSNorm run as PyTorch operations (norm_impl eager), each a kernel
  bool norm_weights_train;     // the norms' weights take gradients (not under LoRA)
  bool eager_rope;             // the rotary embedding as eager PyTorch operations (rope_impl eager)
  bool eager_activation;       // the gated activation as eager PyTorch operations (activation_impl eager)
  hardware::AttentionImpl attention;
  double keys; // keys each query attends to: s, or the sliding window
  double span; // the sequence a query's causal mask runs over: s, or a packed document's length
  double o;    // the attention output's width (MLA: heads x value head size)
  // A MoE layer: the expert-tensor-parallel size, experts, experts per token, their FFN (f1: its first matrix's
  // width), the shared expert's, the experts on this GPU, the token-expert pairs this GPU sends and those its experts
  // take (its expert-tensor-parallel group's, with the load imbalance).
  // The GEMMs from the hidden state to queries, keys and values: outputs, inputs, split over TP or not (MLA's
  // down-projections are replicated, as in Megatron-core).
  struct Projection {
    double out, in;
    bool split;
  };
  std::vector<Projection> qkv;
  bool qk_norm, post_norms;
  bool moe;
  double et, experts, topk, fe, fe1, fs, fs1, local_experts, pairs_sent, pairs_taken;
  double per_expert;      // tokens each local expert takes
  double dispatched;      // bytes each GPU's all-to-all sends (the busiest rank's share)
  double expert_gathered; // bytes of the routed tokens' all-gather and reduce-scatter over the expert-TP group
  double shared_gathered; // bytes of the shared expert's all-gather and reduce-scatter over the TP group
  bool deepep;            // dispatch and combine deduplicated per node and GPU
  double fp8_sent;        // the bytes per value of the all-to-alls to the experts, over 2 (moe_fp8_dispatch: 1 + 4/128)
};

Shape shape_of(const model::ModelSpec& m, const plan::ParallelPlan& p, const hardware::GpuSpec& gpu, LayerKind kind);

} // namespace sim::workload
