// Internal to the layer programs: what their steps are made of. Kernels costed on one GPU into compute steps,
// collective and overlapped steps, and the kernels every part of a layer shares (linear layers' GEMMs, FP8 casts,
// norms, residual adds).
#pragma once

#include "hardware/compute_model.hpp"
#include "workload/layer_program.hpp"
#include "workload/layer_shape.hpp"
#include "workload/lora_kernels.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace sim::workload {

// Kernels costed on one GPU into compute steps (each kernel logged with its cost where a log is given).
class Costing {
 public:
  // With `host_launch`, each step also carries the host's time to launch its kernels.
  Costing(const hardware::GpuSpec& gpu, hardware::Precision precision, std::vector<KernelCost>* log = nullptr,
          bool host_launch = false)
      : gpu_(gpu), precision_(precision), log_(log), host_launch_(host_launch)
  {}

  Step compute(std::string label, const std::vector<hardware::Kernel>& kernels, bool recompute = false) const;

  void set_program(std::string name) { program_ = std::move(name); }
  // Weight-gradient kernels left out of the steps and collected in `into` (a zero-bubble backward pass's split).
  void defer_weight_gradients(std::vector<hardware::Kernel>* into) { deferred_ = into; }
  // A LoRA fine-tune: each kernel replaced by what runs in its place (workload/lora_kernels).
  void set_lora(std::optional<LoraKernels> lora) { lora_ = std::move(lora); }

 private:
  const hardware::GpuSpec& gpu_;
  hardware::Precision precision_;
  std::vector<KernelCost>* log_;
  bool host_launch_;
  std::vector<hardware::Kernel>* deferred_ = nullptr;
  std::string program_;
  std::optional<LoraKernels> lora_;
};

Step collective(std::string label, CollectiveKind kind, double bytes, Group group = Group::TP);
Step overlap(Step compute, CollectiveKind kind, double bytes);

struct BackwardOverlapOptions {
  bool collective_first = false; // without overlap, the collective runs before the GEMM (else after it)
};
// A backward GEMM and the tensor-parallel collective that may run beside it: overlapped (Megatron-LM's asynchronous
// communication, 2021-09 on), or the collective after the GEMM, blocking (the 2021 code's autograd order).
void backward_overlap(Program& p, const Shape& x, Step compute, CollectiveKind kind, double bytes,
                      const BackwardOverlapOptions& options = {});

// `kernels` appended to `into`.
inline void append_kernels(std::vector<hardware::Kernel>& into, const std::vector<hardware::Kernel>& kernels)
{
  into.insert(into.end(), kernels.begin(), kernels.end());
}

// Kernels as a compute step at the end of `p` (merged with a compute step before it); nothing when there are none.
void add_compute(Program& p, const Costing& c, std::string label, const std::vector<hardware::Kernel>& kernels,
                 bool recompute);

hardware::Kernel weight_gradient(hardware::Kernel k);

// A GEMM of the layer's values (16-bit, or fp32 in full precision).
hardware::Kernel matmul(const Shape& x, std::string_view name, double m, double n, double k, double batch = 1,
                        hardware::GemmLayout layout = hardware::GemmLayout::FORWARD);

// A linear layer's GEMM: FP8 operands under fp8 (Transformer Engine), the layer's values otherwise. Attention, the
// router and the output layer stay in 16 bits, as Megatron-core keeps them.
hardware::Kernel linear(const Shape& x, std::string_view name, double m, double n, double k, double batch = 1,
                        hardware::GemmLayout layout = hardware::GemmLayout::FORWARD);

struct CastOptions {
  // With delayed scaling the norm before the GEMM writes FP8 itself (TE's LayerNormLinear), no extra pass.
  bool after_norm = false;
};
// Transformer Engine's quantisation of a 16-bit tensor of `elements` for FP8 GEMMs: one kernel writes the FP8 tensor
// and its transpose (the other GEMM's operand layout), after a pass for the tensor's amax under current scaling.
// Nothing without FP8.
void quantize(std::vector<hardware::Kernel>& ks, const Shape& x, std::string_view name, double elements,
              const CastOptions& options = {});
std::vector<hardware::Kernel> quantized(const Shape& x, std::string_view name, double elements,
                                        const CastOptions& options = {});

// A norm over the hidden state (Tsp x h): one kernel, or the eager RMSNorm's operations, each a kernel.
std::vector<hardware::Kernel> norm(const Shape& x, const char* name);
std::vector<hardware::Kernel> norm_backward(const Shape& x, const char* name);
// The same over `rows` rows of `elements` values in all (the query and key norms).
std::vector<hardware::Kernel> norm(const Shape& x, const char* name, double elements, double rows);
std::vector<hardware::Kernel> norm_backward(const Shape& x, const char* name, double elements, double rows);
// The rotary embedding of the queries and keys (nothing without RoPE): one fused kernel, or transformers' eager
// operations on each; and its backward.
std::vector<hardware::Kernel> rotary(const Shape& x);
std::vector<hardware::Kernel> rotary_backward(const Shape& x);
// The FFN's activation over `n` values of its hidden width: GELU, or the gated activation (SwiGLU: one fused kernel,
// or silu(gate) * up eagerly, two kernels forward and three backward).
std::vector<hardware::Kernel> activation(const Shape& x, const char* name, double n);
std::vector<hardware::Kernel> activation_backward(const Shape& x, const char* name, double n);
// The residual add after attention and after the FFN: Megatron's fused bias-dropout-add with dropout; after the
// block's own norm where the model has post-norms (Gemma).
std::vector<hardware::Kernel> residual(const Shape& x, const char* name);
// Its backward: the dropout mask applied to the incoming gradient (without dropout, the two gradient branches
// added).
hardware::Kernel residual_backward(const Shape& x);

} // namespace sim::workload
