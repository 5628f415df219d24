#include "workload/layer_program.hpp"

#include "workload/attention_program.hpp"
#include "workload/layer_shape.hpp"
#include "workload/optimizer_step.hpp"
#include "workload/program_steps.hpp"

#include <algorithm>

namespace sim::workload {
namespace {

using hardware::GemmLayout;
using hardware::Kernel;
using hardware::KernelPass;
using hardware::memory_bound;
using hardware::MemoryKernel;

// fc1, the activation, the cast of fc2's input (fp8) and fc2: fc2 is the last kernel.
std::vector<Kernel> ffn_forward(const Shape& x)
{
  std::vector<Kernel> ks{linear(x, "fc1", x.T, x.f1 / x.t, x.h)};
  append_kernels(ks, activation(x, x.gated ? "gated activation" : "activation", x.T * x.f / x.t));
  quantize(ks, x, "fc2 input cast", x.T * x.f / x.t);
  ks.push_back(linear(x, "fc2", x.T, x.h, x.f / x.t));
  return ks;
}

// Which way a MoE all-to-all carries the tokens: to the experts (activations forward, output gradients backward), or
// back from them.
enum class Direction { TO_EXPERTS, FROM_EXPERTS };

// A MoE layer's all-to-all over its expert-parallel group: one copy per token and expert (Megatron-core's
// dispatcher), or per token and destination node and GPU (DeepEP); to the experts in FP8 under moe_fp8_dispatch.
Step token_all_to_all(const Shape& x, std::string label, Direction direction)
{
  const double bytes = x.dispatched * (direction == Direction::TO_EXPERTS ? x.fp8_sent : 1.0);
  if (!x.deepep)
    return collective(std::move(label), CollectiveKind::ALL_TO_ALL, bytes, Group::EP);
  Step s = collective(std::move(label), CollectiveKind::ALL_TO_ALL, bytes / x.topk, Group::EP);
  s.deduplicated = true;
  return s;
}

// The routed experts' activation function, and the cast of its output (fc2's input) under FP8.
std::vector<Kernel> expert_activation(const Shape& x)
{
  std::vector<Kernel> ks =
      activation(x, x.gated ? "expert gated activation" : "expert activation", x.pairs_taken * x.fe / x.et);
  quantize(ks, x, "expert fc2 input cast", x.pairs_taken * x.fe / x.et);
  return ks;
}

// The shared expert's forward kernels (none without one): a dense FFN on the gathered hidden states.
std::vector<Kernel> shared_expert_forward(const Shape& x)
{
  std::vector<Kernel> ks;
  if (x.fs <= 0)
    return ks;
  quantize(ks, x, "shared expert input cast", x.T * x.h);
  ks.push_back(linear(x, "shared expert fc1", x.T, x.fs1 / x.t, x.h));
  append_kernels(ks, activation(x, "shared expert activation", x.T * x.fs / x.t));
  quantize(ks, x, "shared expert fc2 input cast", x.T * x.fs / x.t);
  ks.push_back(linear(x, "shared expert fc2", x.T, x.h, x.fs / x.t));
  return ks;
}

// A MoE layer's FFN half, forward, as Megatron-core's all-to-all token dispatcher runs it: route and permute the
// GPU's tokens, send them to their experts' GPUs (all-to-all over the expert-parallel group), gather them over the
// expert-tensor-parallel group (each expert is split over it), run the local experts as grouped GEMMs, reduce-
// scatter, send the outputs back, unpermute and weigh them. The shared expert is a dense FFN over the attention's
// tensor-parallel group, on the hidden states gathered over it. Dropless, the dispatch's sizes are the router's
// counts, copied to the host before the all-to-all (Megatron-core's dispatcher; DeepEP's dispatch waits for them
// too): the host launches the experts' kernels only once the GPU has routed.
Program moe_forward(const Shape& x, const Costing& c, bool recompute)
{
  const double per_expert = x.per_expert;
  std::vector<Kernel> route{matmul(x, "router", x.Tsp, x.experts, x.h),
                            memory_bound("router softmax and top-k", 3.0 * 4.0 * x.Tsp * x.experts),
                            memory_bound("permute", 2.0 * x.e * x.pairs_sent * x.h)};
  std::vector<Kernel> experts = quantized(x, "expert input cast", x.pairs_taken * x.h);
  experts.push_back(linear(x, "expert fc1", per_expert, x.fe1 / x.et, x.h, x.local_experts));
  append_kernels(experts, expert_activation(x));
  experts.push_back(linear(x, "expert fc2", per_expert, x.h, x.fe / x.et, x.local_experts));
  append_kernels(experts, shared_expert_forward(x));
  const bool shared_gather = x.fs > 0 && x.t > 1;
  Program p{c.compute("router", route, recompute)};
  if (shared_gather)
    p.push_back(collective("shared expert all-gather", CollectiveKind::ALL_GATHER, x.shared_gathered));
  p.push_back(token_all_to_all(x, "moe dispatch all-to-all", Direction::TO_EXPERTS));
  if (x.et > 1)
    p.push_back(collective("moe all-gather", CollectiveKind::ALL_GATHER, x.expert_gathered, Group::ETP));
  p.push_back(c.compute("experts", experts, recompute));
  p.back().host_waits = true;
  if (x.et > 1)
    p.push_back(collective("moe reduce-scatter", CollectiveKind::REDUCE_SCATTER, x.expert_gathered, Group::ETP));
  p.push_back(token_all_to_all(x, "moe combine all-to-all", Direction::FROM_EXPERTS));
  if (shared_gather)
    p.push_back(collective("shared expert reduce-scatter", CollectiveKind::REDUCE_SCATTER, x.shared_gathered));
  p.push_back(c.compute("unpermute", {memory_bound("unpermute", 3.0 * x.e * x.pairs_sent * x.h)}, recompute));
  return p;
}

Program moe_backward(const Shape& x, const Costing& c)
{
  const double per_expert = x.per_expert;
  const double ek = x.local_experts;
  std::vector<Kernel> experts = quantized(x, "expert output-grad cast", x.pairs_taken * x.h);
  experts.push_back(linear(x, "expert fc2 dgrad", per_expert, x.fe / x.et, x.h, ek, GemmLayout::DGRAD));
  experts.push_back(linear(x, "expert fc2 wgrad", x.h, x.fe / x.et, per_expert, ek, GemmLayout::WGRAD));
  append_kernels(experts, activation_backward(x, "expert activation backward", x.pairs_taken * x.fe / x.et));
  quantize(experts, x, "expert fc1 output-grad cast", x.pairs_taken * x.fe1 / x.et);
  experts.push_back(linear(x, "expert fc1 dgrad", per_expert, x.h, x.fe1 / x.et, ek, GemmLayout::DGRAD));
  experts.push_back(linear(x, "expert fc1 wgrad", x.fe1 / x.et, x.h, per_expert, ek, GemmLayout::WGRAD));
  if (x.fs > 0) {
    quantize(experts, x, "shared expert output-grad cast", x.T * x.h);
    experts.push_back(linear(x, "shared expert fc2 dgrad", x.T, x.fs / x.t, x.h, 1, GemmLayout::DGRAD));
    experts.push_back(linear(x, "shared expert fc2 wgrad", x.h, x.fs / x.t, x.T, 1, GemmLayout::WGRAD));
    append_kernels(experts, activation_backward(x, "shared expert activation backward", x.T * x.fs / x.t));
    quantize(experts, x, "shared expert fc1 output-grad cast", x.T * x.fs1 / x.t);
    experts.push_back(linear(x, "shared expert fc1 dgrad", x.T, x.h, x.fs1 / x.t, 1, GemmLayout::DGRAD));
    experts.push_back(linear(x, "shared expert fc1 wgrad", x.fs1 / x.t, x.h, x.T, 1, GemmLayout::WGRAD));
  }
  const bool shared_gather = x.fs > 0 && x.t > 1;
  Program p{c.compute("unpermute backward", {memory_bound("unpermute backward", 3.0 * x.e * x.pairs_sent * x.h)})};
  if (shared_gather)
    p.push_back(collective("shared expert output-grad all-gather", CollectiveKind::ALL_GATHER, x.shared_gathered));
  p.push_back(token_all_to_all(x, "moe combine backward all-to-all", Direction::TO_EXPERTS));
  if (x.et > 1)
    p.push_back(collective("moe output-grad all-gather", CollectiveKind::ALL_GATHER, x.expert_gathered, Group::ETP));
  p.push_back(c.compute("experts backward", experts));
  if (x.et > 1)
    p.push_back(
        collective("moe input-grad reduce-scatter", CollectiveKind::REDUCE_SCATTER, x.expert_gathered, Group::ETP));
  p.push_back(token_all_to_all(x, "moe dispatch backward all-to-all", Direction::FROM_EXPERTS));
  if (shared_gather)
    p.push_back(
        collective("shared expert input-grad reduce-scatter", CollectiveKind::REDUCE_SCATTER, x.shared_gathered));
  p.push_back(c.compute("router backward",
                        {memory_bound("permute backward", 2.0 * x.e * x.pairs_sent * x.h),
                         memory_bound("router softmax backward", 3.0 * 4.0 * x.Tsp * x.experts),
                         matmul(x, "router dgrad", x.Tsp, x.h, x.experts, 1, GemmLayout::DGRAD),
                         weight_gradient(matmul(x, "router wgrad", x.experts, x.h, x.Tsp, 1, GemmLayout::WGRAD))}));
  return p;
}

// A dense layer's FFN forward with its tensor-parallel collectives, `norms` (ending with the FFN's norm) run first.
Program dense_ffn_forward(const Shape& x, const Costing& c, std::vector<Kernel> norms, bool recompute)
{
  const double act = x.T * x.h * x.e;                     // one hidden-state tensor, whole
  const double gathered = x.T * x.h * x.gathered_element; // fc1's input, gathered
  Program p;
  quantize(norms, x, "fc1 input cast", x.Tsp * x.h, {.after_norm = true});
  if (x.comm_overlap) {
    const auto ffn = ffn_forward(x);
    p.push_back(c.compute("norm", norms, recompute));
    p.push_back(overlap(c.compute("fc1", std::vector<Kernel>(ffn.begin(), ffn.end() - 1), recompute),
                        CollectiveKind::ALL_GATHER, gathered));
    p.push_back(overlap(c.compute("fc2", {ffn.back()}, recompute), CollectiveKind::REDUCE_SCATTER, act));
  } else if (x.sp) {
    p.push_back(c.compute("norm", norms, recompute));
    p.push_back(collective("ffn all-gather", CollectiveKind::ALL_GATHER, gathered));
    p.push_back(c.compute("ffn", ffn_forward(x), recompute));
    p.push_back(collective("ffn reduce-scatter", CollectiveKind::REDUCE_SCATTER, act));
  } else {
    for (auto& k : ffn_forward(x))
      norms.push_back(k);
    p.push_back(c.compute("ffn", norms, recompute));
    if (x.t > 1)
      p.push_back(collective("ffn all-reduce", CollectiveKind::ALL_REDUCE, act));
  }
  return p;
}

Program layer_forward(const Shape& x, const Costing& c, bool recompute)
{
  Program p = attention_forward(x, c, recompute);
  auto norms = residual(x, "attention residual");
  append_kernels(norms, norm(x, "ffn norm"));
  if (x.moe) {
    p.push_back(c.compute("norm", norms, recompute));
    append(p, moe_forward(x, c, recompute));
    p.push_back(c.compute("residual", residual(x, "ffn residual"), recompute));
    return p;
  }
  append(p, dense_ffn_forward(x, c, norms, recompute));
  p.push_back(c.compute("residual", residual(x, "ffn residual"), recompute));
  return p;
}

// The FFN half of a dense layer's backward pass, from the layer's output gradient to the FFN norm's.
Program ffn_backward(const Shape& x, const Costing& c)
{
  const double act = x.T * x.h * x.e;
  const double gathered = x.T * x.h * x.gathered_element; // an output gradient or fc1's input, gathered
  // fc2's dgrad first; then its wgrad, the activation's backward and the cast of fc1's output gradient (fp8).
  const Kernel fc2_dgrad = linear(x, "fc2 dgrad", x.T, x.f / x.t, x.h, 1, GemmLayout::DGRAD);
  std::vector<Kernel> fc2_rest{linear(x, "fc2 wgrad", x.h, x.f / x.t, x.T, 1, GemmLayout::WGRAD)};
  append_kernels(fc2_rest, activation_backward(x, "activation backward", x.T * x.f / x.t));
  quantize(fc2_rest, x, "fc1 output-grad cast", x.T * x.f1 / x.t);
  const Kernel fc1_dgrad = linear(x, "fc1 dgrad", x.T, x.h, x.f1 / x.t, 1, GemmLayout::DGRAD);
  const Kernel fc1_wgrad = linear(x, "fc1 wgrad", x.f1 / x.t, x.h, x.T, 1, GemmLayout::WGRAD);
  std::vector<Kernel> residual_back{residual_backward(x)};
  quantize(residual_back, x, "fc2 output-grad cast", x.Tsp * x.h);
  Program p;
  if (x.sp) {
    p.push_back(c.compute("residual", residual_back));
    if (x.comm_overlap) {
      p.push_back(overlap(c.compute("fc2 dgrad", {fc2_dgrad}), CollectiveKind::ALL_GATHER, gathered));
      p.push_back(c.compute("ffn dgrad", fc2_rest));
    } else {
      p.push_back(collective("ffn output-grad all-gather", CollectiveKind::ALL_GATHER, gathered));
      fc2_rest.insert(fc2_rest.begin(), fc2_dgrad);
      p.push_back(c.compute("ffn dgrad", fc2_rest));
    }
    backward_overlap(p, x, c.compute("fc1 dgrad", {fc1_dgrad}), CollectiveKind::ALL_GATHER, gathered,
                     {.collective_first = true});
    backward_overlap(p, x, c.compute("fc1 wgrad", {fc1_wgrad}), CollectiveKind::REDUCE_SCATTER, act);
    return p;
  }
  std::vector<Kernel> ffn = residual_back;
  ffn.push_back(fc2_dgrad);
  for (const auto& k : fc2_rest)
    ffn.push_back(k);
  ffn.push_back(fc1_dgrad);
  p.push_back(c.compute("ffn dgrad", ffn));
  if (x.t > 1)
    backward_overlap(p, x, c.compute("fc1 wgrad", {fc1_wgrad}), CollectiveKind::ALL_REDUCE, act);
  else
    p.push_back(c.compute("fc1 wgrad", {fc1_wgrad}));
  return p;
}

Program layer_backward(const Shape& x, const Costing& c, model::Recompute recompute, model::RecomputeModules modules)
{
  Program p;
  if (recompute == model::Recompute::FULL)
    p = layer_forward(x, c, true);
  // Selective recomputation redoes each module as the backward pass reaches it (Megatron-core's TransformerLayer):
  // the norms that are kernels of their own (Transformer Engine fuses the input norm and a dense layer's FFN norm
  // into the next linear layer), a dense MLP with its collectives, a MoE layer whole (its all-to-alls too), or its
  // experts' activation and its shared expert.
  auto redo = [&](model::RecomputeModule m) { return recompute == model::Recompute::SELECTIVE && modules.has(m); };
  const bool fused_norms = x.norm == MemoryKernel::RMSNORM_TE || x.norm == MemoryKernel::LAYERNORM_TE;
  if (x.moe) { // with tp > 1, sequence parallelism (the plan requires it)
    p.push_back(c.compute("residual", {residual_backward(x)}));
    std::vector<Kernel> again;
    if (redo(model::RecomputeModule::LAYERNORM))
      again = norm(x, "ffn norm");
    if (!redo(model::RecomputeModule::MOE)) {
      if (redo(model::RecomputeModule::MOE_ACT))
        append_kernels(again, expert_activation(x));
      if (redo(model::RecomputeModule::SHARED_EXPERTS))
        append_kernels(again, shared_expert_forward(x));
    }
    add_compute(p, c, "moe recompute", again, true);
    if (redo(model::RecomputeModule::MOE))
      append(p, moe_forward(x, c, true));
    append(p, moe_backward(x, c));
  } else {
    if (redo(model::RecomputeModule::MLP))
      append(p, dense_ffn_forward(x, c, norm(x, "ffn norm"), true));
    else if (redo(model::RecomputeModule::LAYERNORM) && !fused_norms)
      p.push_back(c.compute("norm recompute", norm(x, "ffn norm"), true));
    for (const Step& s : ffn_backward(x, c))
      p.push_back(s);
  }
  std::vector<Kernel> norms = norm_backward(x, "ffn norm backward");
  norms.push_back(residual_backward(x));
  if (x.post_norms) // the attention's and the FFN's post-norms
    for (int i = 0; i < 2; ++i)
      append_kernels(norms, norm_backward(x, "post norm backward"));
  p.push_back(c.compute("norm backward", norms));
  if (redo(model::RecomputeModule::LAYERNORM) && !fused_norms)
    p.push_back(c.compute("norm recompute", norm(x, "input norm"), true));
  if (redo(model::RecomputeModule::CORE_ATTN)) {
    if (x.cp > 1)
      append(p, context_parallel_core(x, c, {.recompute = true}));
    else
      p.push_back(c.compute("attention core recompute", core_forward(x), true));
  }
  for (const Step& s : attention_backward(x, c))
    p.push_back(s);
  return p;
}

Program embedding_forward(const Shape& x, const Costing& c)
{
  const double act = x.T * x.h * x.e;
  Program p{c.compute("embedding", {memory_bound("embedding lookup", 2.0 * x.e * x.T * x.h, MemoryKernel::EMBEDDING)})};
  if (x.t > 1)
    p.push_back(collective("embedding " + std::string(x.sp ? "reduce-scatter" : "all-reduce"),
                           x.sp ? CollectiveKind::REDUCE_SCATTER : CollectiveKind::ALL_REDUCE, act));
  if (x.dropout)
    p.push_back(c.compute("embedding dropout",
                          {memory_bound("embedding dropout", (2.0 * x.e + 1.0) * x.Tsp * x.h, MemoryKernel::DROPOUT)}));
  return p;
}

Program embedding_backward(const Shape& x, const Costing& c)
{
  Program p;
  if (x.sp)
    p.push_back(collective("embedding grad all-gather", CollectiveKind::ALL_GATHER, x.T * x.h * x.e));
  p.push_back(c.compute("embedding backward", {memory_bound("embedding grad scatter-add", 2.0 * x.e * x.T * x.h,
                                                            MemoryKernel::EMBEDDING, KernelPass::BACKWARD)}));
  return p;
}

Program head_forward(const Shape& x, const Costing& c)
{
  const double logits = x.T * x.vocab / x.t;
  Program p{c.compute("final norm", norm(x, "final norm"))};
  if (x.sp)
    p.push_back(collective("output all-gather", CollectiveKind::ALL_GATHER, x.T * x.h * x.e));
  // Megatron-LM's vocabulary-parallel cross entropy on fp32 logits: upcast, max, subtract, exp, sum, normalise (the
  // softmax is kept for the backward pass). Full-precision logits need no upcast.
  std::vector<Kernel> head{matmul(x, "logits", x.T, x.vocab / x.t, x.h)};
  if (x.e < 4.0)
    head.push_back(memory_bound("logits to fp32", (x.e + 4.0) * logits));
  for (const Kernel& k : {memory_bound("logit max", 4.0 * logits), memory_bound("subtract max", 8.0 * logits),
                          memory_bound("exp", 8.0 * logits), memory_bound("sum of exp", 4.0 * logits),
                          memory_bound("softmax", 8.0 * logits)})
    head.push_back(k);
  p.push_back(c.compute("logits", head));
  if (x.t > 1) // the vocabulary-parallel cross entropy's max, sum and target logit
    p.push_back(collective("cross-entropy all-reduce", CollectiveKind::ALL_REDUCE, 3.0 * 4.0 * x.T));
  return p;
}

Program head_backward(const Shape& x, const Costing& c)
{
  const double logits = x.T * x.vocab / x.t;
  std::vector<Kernel> dgrad{memory_bound("cross entropy backward", 8.0 * logits)};
  if (x.e < 4.0)
    dgrad.push_back(memory_bound("logit gradient to 16 bits", (4.0 + x.e) * logits));
  dgrad.push_back(matmul(x, "logits dgrad", x.T, x.h, x.vocab / x.t, 1, GemmLayout::DGRAD));
  Program p{c.compute("logits dgrad", dgrad)};
  const Step wgrad = c.compute(
      "logits wgrad", {weight_gradient(matmul(x, "logits wgrad", x.vocab / x.t, x.h, x.T, 1, GemmLayout::WGRAD))});
  if (x.t > 1)
    backward_overlap(p, x, wgrad, x.sp ? CollectiveKind::REDUCE_SCATTER : CollectiveKind::ALL_REDUCE, x.T * x.h * x.e);
  else
    p.push_back(wgrad);
  p.push_back(c.compute("final norm backward", norm_backward(x, "final norm backward")));
  return p;
}

// A multi-token-prediction module's input (Megatron-core's MultiTokenPredictionLayer): the hidden state and the next
// tokens' embedding each normed, concatenated and projected back to h by a column-parallel GEMM, gathered over TP.
Program mtp_input_forward(const Shape& x, const Costing& c)
{
  std::vector<Kernel> ks = norm(x, "mtp hidden norm");
  append_kernels(ks, norm(x, "mtp embedding norm"));
  ks.push_back(linear(x, "mtp projection", x.T, x.h / x.t, 2.0 * x.h));
  Program p{c.compute("mtp input", ks)};
  if (x.t > 1)
    p.push_back(collective("mtp projection all-gather", CollectiveKind::ALL_GATHER, x.T * x.h * x.e));
  return p;
}

Program mtp_input_backward(const Shape& x, const Costing& c)
{
  Program p;
  if (x.t > 1)
    p.push_back(collective("mtp projection grad reduce-scatter", CollectiveKind::REDUCE_SCATTER, x.T * x.h * x.e));
  std::vector<Kernel> ks{
      linear(x, "mtp projection dgrad", x.T, 2.0 * x.h, x.h / x.t, 1, GemmLayout::DGRAD),
      weight_gradient(linear(x, "mtp projection wgrad", x.h / x.t, 2.0 * x.h, x.T, 1, GemmLayout::WGRAD))};
  for (const char* name : {"mtp hidden norm backward", "mtp embedding norm backward"})
    append_kernels(ks, norm_backward(x, name));
  p.push_back(c.compute("mtp input backward", ks));
  return p;
}

// Every GPU of a step waits for the others (collectives in each layer, the gradient reduction every step): its
// tensor cores run at the pace of the slowest of them.
hardware::GpuSpec paced_by_slowest(const hardware::GpuSpec& gpu, const plan::ParallelPlan& p)
{
  hardware::GpuSpec paced = gpu;
  paced.sustained_compute_ratio *= hardware::slowest_of(gpu.sustained_spread, p.gpus());
  return paced;
}

// The kinds of layer the model has, in order of their first layer, and their names in kernel tables.
std::vector<LayerKind> kinds_of(const model::ModelSpec& m)
{
  std::vector<LayerKind> kinds;
  for (std::int64_t l = 0; l < m.num_layers; ++l)
    if (std::find(kinds.begin(), kinds.end(), layer_kind(m, l)) == kinds.end())
      kinds.push_back(layer_kind(m, l));
  return kinds;
}

std::string name_of(LayerKind kind)
{
  switch (kind) {
    case LayerKind::DENSE:
      return "layer";
    case LayerKind::MOE:
      return "moe layer";
    case LayerKind::WINDOWED:
      return "windowed layer";
    case LayerKind::WINDOWED_MOE:
      return "windowed moe layer";
  }
  return "layer";
}

} // namespace

void append(Program& head, const Program& tail)
{
  for (const Step& s : tail) {
    if (!head.empty() && head.back().kind == Step::Kind::COMPUTE && s.kind == Step::Kind::COMPUTE &&
        head.back().recompute == s.recompute && !s.host_waits) {
      Step& last = head.back();
      last.duration_s += s.duration_s;
      last.memory_s += s.memory_s;
      last.flops += s.flops;
      last.host_s += s.host_s;
      if (last.label != s.label && last.label.find(s.label) == std::string::npos)
        last.label += ", " + s.label;
    } else {
      head.push_back(s);
      head.back().adapter_collectives.clear();
    }
    for (const AdapterCollective& a : s.adapter_collectives)
      head.push_back(collective(s.label + " " + a.label, a.kind, a.bytes));
  }
}

std::vector<KernelCost> kernel_costs(const model::ModelSpec& m, const plan::ParallelPlan& p,
                                     const hardware::GpuSpec& gpu)
{
  std::vector<KernelCost> log;
  const hardware::GpuSpec paced = paced_by_slowest(gpu, p);
  Costing c(paced, p.compute_precision(), &log, p.software.host_launch);
  c.set_lora(lora_kernels(m, p));
  for (LayerKind kind : kinds_of(m)) {
    const Shape layer = shape_of(m, p, paced, kind);
    c.set_program(name_of(kind) + " forward");
    layer_forward(layer, c, false);
    c.set_program(name_of(kind) + " backward");
    layer_backward(layer, c, p.recompute, p.recompute_modules);
  }
  const Shape x = shape_of(m, p, paced, LayerKind::DENSE);
  c.set_program("embedding forward");
  embedding_forward(x, c);
  c.set_program("embedding backward");
  embedding_backward(x, c);
  c.set_program("output layer forward");
  head_forward(x, c);
  c.set_program("output layer backward");
  head_backward(x, c);
  if (m.mtp_layers > 0) { // (its embedding, layer and output layer are the ones above)
    c.set_program("mtp input forward");
    mtp_input_forward(x, c);
    c.set_program("mtp input backward");
    mtp_input_backward(x, c);
  }
  return log;
}

LayerPrograms build_programs(const model::ModelSpec& m, const plan::ParallelPlan& p, const hardware::GpuSpec& gpu_in)
{
  const hardware::GpuSpec gpu = paced_by_slowest(gpu_in, p);
  const Shape x = shape_of(m, p, gpu, LayerKind::DENSE);
  Costing c(gpu, p.compute_precision(), nullptr, p.software.host_launch);
  c.set_lora(lora_kernels(m, p));
  // Consecutive compute steps (no collective between them, as with tp = 1) run as one task.
  auto merged = [](const Program& steps) {
    Program out;
    append(out, steps);
    return out;
  };
  LayerPrograms out;
  for (LayerKind kind : kinds_of(m)) {
    const Shape layer = shape_of(m, p, gpu, kind);
    out.layer_forward[kind] = merged(layer_forward(layer, c, false));
    out.layer_backward[kind] = merged(layer_backward(layer, c, p.recompute, p.recompute_modules));
  }
  out.embedding_forward = merged(embedding_forward(x, c));
  out.embedding_backward = merged(embedding_backward(x, c));
  out.head_forward = merged(head_forward(x, c));
  out.head_backward = merged(head_backward(x, c));
  const Shape last = shape_of(m, p, gpu, layer_kind(m, m.mtp_layer_kind_of()));
  // An MTP module: the next tokens' embedding, its input, its layer, its output layer; back in reverse.
  auto mtp_backward = [&](const Costing& costing) {
    Program b = head_backward(x, costing);
    append(b, layer_backward(last, costing, p.recompute, p.recompute_modules));
    append(b, mtp_input_backward(x, costing));
    append(b, embedding_backward(x, costing));
    return b;
  };
  if (m.mtp_layers > 0) {
    out.mtp_forward = embedding_forward(x, c);
    append(out.mtp_forward, mtp_input_forward(x, c));
    append(out.mtp_forward, layer_forward(last, c, false));
    append(out.mtp_forward, head_forward(x, c));
    out.mtp_backward = mtp_backward(c);
  }
  if (p.dualpipe()) {
    std::vector<Kernel> weights;
    Costing split(gpu, p.compute_precision(), nullptr, p.software.host_launch);
    split.set_lora(lora_kernels(m, p));
    split.defer_weight_gradients(&weights);
    // What is left once the weight gradients are taken out: no empty compute steps, collectives that ran beside a
    // weight-gradient GEMM on their own.
    auto input_part = [&](const Program& steps) {
      Program left;
      for (Step s : steps) {
        if (s.kind != Step::Kind::COLLECTIVE && s.duration_s == 0 && s.flops == 0) {
          if (s.kind == Step::Kind::COMPUTE)
            continue;
          s.kind = Step::Kind::COLLECTIVE;
        }
        append(left, {s});
      }
      return left;
    };
    auto weight_part = [&]() {
      Program w{c.compute("weight gradients", weights)};
      weights.clear();
      return w;
    };
    for (LayerKind kind : kinds_of(m)) {
      const Shape layer = shape_of(m, p, gpu, kind);
      out.layer_backward_input[kind] = input_part(layer_backward(layer, split, p.recompute, p.recompute_modules));
      out.layer_weight[kind] = weight_part();
    }
    out.head_backward_input = input_part(head_backward(x, split));
    out.head_weight = weight_part();
    if (m.mtp_layers > 0) {
      out.mtp_backward_input = input_part(mtp_backward(split));
      out.mtp_weight = weight_part();
    }
  }
  out.per_param = parameter_pass_times(p, gpu);
  return out;
}

bool same_steps(const LayerPrograms& a, const LayerPrograms& b)
{
  const auto alike = [](const Program& x, const Program& y) {
    return std::equal(x.begin(), x.end(), y.begin(), y.end(), [](const Step& s, const Step& t) {
      return s.kind == t.kind && s.label == t.label && s.recompute == t.recompute && s.host_waits == t.host_waits &&
             (s.kind == Step::Kind::COMPUTE || (s.collective == t.collective && s.group == t.group &&
                                                s.bytes == t.bytes && s.deduplicated == t.deduplicated));
    });
  };
  const auto all_alike = [&](const auto& xs, const auto& ys) {
    return std::equal(xs.begin(), xs.end(), ys.begin(), ys.end(), alike);
  };
  return all_alike(a.layer_forward.programs, b.layer_forward.programs) &&
         all_alike(a.layer_backward.programs, b.layer_backward.programs) &&
         alike(a.embedding_forward, b.embedding_forward) && alike(a.embedding_backward, b.embedding_backward) &&
         alike(a.head_forward, b.head_forward) && alike(a.head_backward, b.head_backward) &&
         all_alike(a.layer_backward_input.programs, b.layer_backward_input.programs) &&
         all_alike(a.layer_weight.programs, b.layer_weight.programs) &&
         alike(a.head_backward_input, b.head_backward_input) && alike(a.head_weight, b.head_weight) &&
         alike(a.mtp_forward, b.mtp_forward) && alike(a.mtp_backward, b.mtp_backward) &&
         alike(a.mtp_backward_input, b.mtp_backward_input) && alike(a.mtp_weight, b.mtp_weight) &&
         (a.per_param.grad_accumulation_s > 0) == (b.per_param.grad_accumulation_s > 0) &&
         a.per_param.grad_accumulation_from_first == b.per_param.grad_accumulation_from_first &&
         (a.per_param.fp8_weight_cast_s > 0) == (b.per_param.fp8_weight_cast_s > 0);
}

} // namespace sim::workload
