// The parallel plan: how one training step is laid out over the GPUs (TP, PP, DP, batches, schedule, ZeRO,
// recomputation, precision, rank order). Defaults follow Megatron-LM.
#pragma once

#include "hardware/gpu_spec.hpp"
#include "model/flops.hpp"
#include "plan/software.hpp"

#include <array>
#include <cstdint>
#include <vector>

namespace sim::plan {

// DualPipe (DeepSeek-V3's bidirectional schedule) and DualPipeV (its V-shaped cut in half) as deepseek-ai/DualPipe
// runs them: each GPU holds two chunks, pairs of a forward and a backward pass of different micro-batches run side by
// side, and some backward passes leave their weight gradients for later (zero bubble).
enum class Schedule { GPIPE, ONE_F_ONE_B, INTERLEAVED, DUALPIPE, DUALPIPE_V };

inline constexpr std::array<core::Choice<Schedule>, 5> schedule_choices{{{"gpipe", Schedule::GPIPE},
                                                                         {"1f1b", Schedule::ONE_F_ONE_B},
                                                                         {"interleaved", Schedule::INTERLEAVED},
                                                                         {"dualpipe", Schedule::DUALPIPE},
                                                                         {"dualpipev", Schedule::DUALPIPE_V}}};

// The three parallel dimensions, as they appear in `rank_order` (innermost first).
enum class ParallelDim { TP, DP, PP };
using RankOrder = std::array<ParallelDim, 3>;

inline constexpr std::array<core::Choice<RankOrder>, 6> rank_order_choices{
    {{"tp-dp-pp", {ParallelDim::TP, ParallelDim::DP, ParallelDim::PP}},
     {"tp-pp-dp", {ParallelDim::TP, ParallelDim::PP, ParallelDim::DP}},
     {"dp-tp-pp", {ParallelDim::DP, ParallelDim::TP, ParallelDim::PP}},
     {"dp-pp-tp", {ParallelDim::DP, ParallelDim::PP, ParallelDim::TP}},
     {"pp-tp-dp", {ParallelDim::PP, ParallelDim::TP, ParallelDim::DP}},
     {"pp-dp-tp", {ParallelDim::PP, ParallelDim::DP, ParallelDim::TP}}}};

// How collectives over groups that span nodes run: a flat ring, or hierarchically (inside nodes, then a ring per
// local rank across nodes); `auto` picks hierarchical when a group has several GPUs on each of several nodes, and
// NCCL's double binary tree across nodes for an all-reduce where NCCL's model prefers it; `tree` always takes the
// tree for all-reduces across three nodes or more (NCCL_ALGO=Tree).
enum class CollectiveAlgorithm { AUTO, RING, HIERARCHICAL, TREE };

inline constexpr std::array<core::Choice<CollectiveAlgorithm>, 4> collective_algorithm_choices{
    {{"auto", CollectiveAlgorithm::AUTO},
     {"ring", CollectiveAlgorithm::RING},
     {"hierarchical", CollectiveAlgorithm::HIERARCHICAL},
     {"tree", CollectiveAlgorithm::TREE}}};

// Mixed precision: weights and activations in 16 bits with fp32 master weights; under `fp8` (Transformer Engine) the
// linear layers' GEMMs also take FP8 operands (E4M3 forward, E5M2 gradients). Full precision: weights, activations,
// gradients and optimizer state all in fp32 (no master copy, no loss scaling), the GEMMs on the CUDA cores (`fp32`,
// PyTorch's default since 1.12: torch.backends.cuda.matmul.allow_tf32 = False) or on TF32 tensor cores (`tf32`).
inline constexpr std::array<core::Choice<hardware::Precision>, 5> training_precision_choices{
    {{"bf16", hardware::Precision::BF16},
     {"fp16", hardware::Precision::FP16},
     {"fp8", hardware::Precision::FP8},
     {"fp32", hardware::Precision::FP32},
     {"tf32", hardware::Precision::TF32}}};

// How Transformer Engine scales FP8 tensors: per tensor from the amax history of earlier steps (delayed), per tensor
// from the tensor's own amax just before the cast (current), or per block of 128 values (blockwise, DeepSeek-V3's
// recipe; TE's Float8BlockScaling).
enum class Fp8Recipe { DELAYED, CURRENT, BLOCKWISE };

inline constexpr std::array<core::Choice<Fp8Recipe>, 3> fp8_recipe_choices{
    {{"delayed", Fp8Recipe::DELAYED}, {"current", Fp8Recipe::CURRENT}, {"blockwise", Fp8Recipe::BLOCKWISE}}};

// How a context-parallel group shares out attention over the sequence: a ring passing key/value blocks around the
// group beside the attention blocks (Megatron-core's p2p), or all-to-alls from sequence to head sharding and back
// around the attention (DeepSpeed-Ulysses; Megatron-core's a2a).
enum class CpKind { RING, ALL_TO_ALL };

inline constexpr std::array<core::Choice<CpKind>, 2> cp_kind_choices{
    {{"ring", CpKind::RING}, {"all_to_all", CpKind::ALL_TO_ALL}}};

// Where LoRA's dropout acts: on each adapter's input (PEFT: a dropped copy of the input per adapter) or on its output
// (Megatron-core's and NeMo's adapters, NeMo AutoModel's LinearLoRA: dropout_position "post").
enum class LoraDropoutAt { INPUT, OUTPUT };

inline constexpr std::array<core::Choice<LoraDropoutAt>, 2> lora_dropout_at_choices{
    {{"input", LoraDropoutAt::INPUT}, {"output", LoraDropoutAt::OUTPUT}}};

// Where LoRA's scale (alpha / rank) multiplies: B's output (PEFT's `lora_B(lora_A(x)) * scaling`, Megatron-core's
// adapters) or A's rank-r output before B (NeMo AutoModel's LinearLoRA, which keeps a tensor-parallel partial sum
// partial so).
enum class LoraScaleAt { OUTPUT, RANK };

inline constexpr std::array<core::Choice<LoraScaleAt>, 2> lora_scale_at_choices{
    {{"output", LoraScaleAt::OUTPUT}, {"rank", LoraScaleAt::RANK}}};

// How a MoE layer's tokens reach their experts: Megatron-core's all-to-all (one copy per token and expert, straight
// to the expert's GPU), or DeepEP (Megatron-core's flex dispatcher): one copy per token and destination node through
// the NICs, to the GPU of the same local rank there, which forwards one copy per token and destination GPU over
// NVLink, the two pipelined.
enum class MoeDispatcher { ALL_TO_ALL, DEEPEP };

inline constexpr std::array<core::Choice<MoeDispatcher>, 2> moe_dispatcher_choices{
    {{"alltoall", MoeDispatcher::ALL_TO_ALL}, {"deepep", MoeDispatcher::DEEPEP}}};

// What the optimizer keeps and does per parameter, beside its fp32 master copy of the weights: Adam (or AdamW: two
// fp32 moments), SGD with momentum (one), Lion (one), bitsandbytes' blockwise 8-bit Adam (two one-byte moments and an
// fp32 scale per 256 values of each), Adafactor (T5's default: no first moment, the second factored into fp32 row and
// column means).
enum class OptimizerAlgorithm { ADAM, SGD, LION, ADAM_8BIT, ADAFACTOR };

inline constexpr std::array<core::Choice<OptimizerAlgorithm>, 5> optimizer_algorithm_choices{
    {{"adam", OptimizerAlgorithm::ADAM},
     {"sgd", OptimizerAlgorithm::SGD},
     {"lion", OptimizerAlgorithm::LION},
     {"adam_8bit", OptimizerAlgorithm::ADAM_8BIT},
     {"adafactor", OptimizerAlgorithm::ADAFACTOR}}};

// The projections of a transformer layer LoRA adapters can sit on, by Hugging Face's names (Llama's modules: GPT's
// fused QKV counts as q, k and v, its first FFN matrix as up), or one adapter on each of Megatron-core's fused linear
// layers, by its names (NeMo's and Megatron-Bridge's LoRA: linear_qkv is one adapter of out = q + 2 kv, linear_fc1 one
// over gate and up).
enum class LoraTarget : unsigned { Q, K, V, O, GATE, UP, DOWN, LINEAR_QKV, LINEAR_PROJ, LINEAR_FC1, LINEAR_FC2 };

inline constexpr std::array<core::Choice<LoraTarget>, 11> lora_target_choices{{{"q_proj", LoraTarget::Q},
                                                                               {"k_proj", LoraTarget::K},
                                                                               {"v_proj", LoraTarget::V},
                                                                               {"o_proj", LoraTarget::O},
                                                                               {"gate_proj", LoraTarget::GATE},
                                                                               {"up_proj", LoraTarget::UP},
                                                                               {"down_proj", LoraTarget::DOWN},
                                                                               {"linear_qkv", LoraTarget::LINEAR_QKV},
                                                                               {"linear_proj", LoraTarget::LINEAR_PROJ},
                                                                               {"linear_fc1", LoraTarget::LINEAR_FC1},
                                                                               {"linear_fc2", LoraTarget::LINEAR_FC2}}};

// A set of targets; every linear layer of the transformer blocks by default (QLoRA's, PEFT's "all-linear").
struct LoraTargets {
  unsigned bits = 0x7FU;
  [[nodiscard]] bool has(LoraTarget t) const { return ((bits >> static_cast<unsigned>(t)) & 1U) != 0; }
  void add(LoraTarget t) { bits |= 1U << static_cast<unsigned>(t); }
  bool operator==(const LoraTargets&) const = default;
};

// The frozen base weights of a LoRA fine-tune: in the training precision, or QLoRA's 4-bit NormalFloat with double
// quantization (bitsandbytes' Linear4bit: each linear layer's weight dequantized to 16 bits before every GEMM).
enum class BaseQuantization { NONE, NF4 };

inline constexpr std::array<core::Choice<BaseQuantization>, 2> base_quantization_choices{
    {{"none", BaseQuantization::NONE}, {"nf4", BaseQuantization::NF4}}};

// Where the optimizer's state lives and its update runs: on the GPU, or in the host's memory with the update on
// its CPU (DeepSpeed's ZeRO-Offload: each GPU's gradient shard copied out as its bucket is reduced, CPU Adam, the
// updated 16-bit shard copied back before the parameters are gathered), or on the node's NVMe drives, swapped
// through host memory for the CPU's update sub-group by sub-group (ZeRO-Infinity).
enum class OffloadDevice { NONE, CPU, NVME };

inline constexpr std::array<core::Choice<OffloadDevice>, 3> offload_device_choices{
    {{"none", OffloadDevice::NONE}, {"cpu", OffloadDevice::CPU}, {"nvme", OffloadDevice::NVME}}};

// What updates an offloaded optimizer's state on the CPU: DeepSpeed's CPU Adam (AVX, OpenMP; ZeRO-Offload), or the
// PyTorch optimizer itself on CPU tensors (FSDP's CPUOffload, torchtitan).
enum class CpuOptimizer { DEEPSPEED, PYTORCH };

inline constexpr std::array<core::Choice<CpuOptimizer>, 2> cpu_optimizer_choices{
    {{"deepspeed", CpuOptimizer::DEEPSPEED}, {"pytorch", CpuOptimizer::PYTORCH}}};

struct ParallelPlan {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  // Context parallelism: each data-parallel rank's sequences split over `cp` GPUs (two chunks each, balancing the
  // causal mask as Megatron-core does). CP ranks hold the same weights, so they reduce gradients and share the
  // optimizer's shards with the data-parallel ranks; in the rank order they are the innermost part of the DP
  // dimension (Megatron-core's tp-cp-dp-pp).
  int cp = 1;
  CpKind cp_kind = CpKind::RING;
  // Expert parallelism (MoE layers), as Megatron-core folds it over the attention's layout: a stage's tp x cp x dp
  // GPUs are laid out again for the routed experts as etp x ep x edp (innermost first, in the order of the
  // attention's tp-then-cp-then-dp ranks). Each expert-parallel group of `ep` GPUs shares the routed experts out,
  // num_experts / ep each, and each expert is split over an expert-tensor-parallel group of `etp` GPUs (by default the
  // attention's tp).
  int ep = 1;
  int etp = 1;
  // The busiest expert-parallel rank's routed tokens over the mean (1: a perfectly balanced router).
  double expert_load_imbalance = 1.0;
  MoeDispatcher moe_dispatcher = MoeDispatcher::ALL_TO_ALL;
  // 1F1B with the expert-parallel all-to-alls overlapped (Megatron-core --overlap-moe-expert-parallel-comm): each
  // forward pass runs beside the backward pass of another micro-batch next to it in the schedule.
  bool moe_a2a_overlap = false;
  // DeepSeek-V3's low-precision communication (its Sec. 3.3.2) over DeepEP: the tokens dispatched to the experts and
  // the output gradients sent back to them in FP8 (one byte a value and a 4-byte scale per 128), the combine and the
  // input gradients in BF16. Needs precision fp8 and moe_dispatcher deepep.
  bool moe_fp8_dispatch = false;
  int micro_batch = 1;           // sequences per micro-batch
  std::int64_t global_batch = 1; // sequences per step
  std::int64_t seq_length = 0;   // tokens per sequence
  // Packed fine-tuning data: each sequence is documents of this mean length, each attending only to itself (flash
  // attention's variable-length kernels, Transformer Engine's THD layout); 0: one document per sequence.
  std::int64_t document_length = 0;
  Schedule schedule = Schedule::ONE_F_ONE_B;
  int virtual_stages = 1; // model chunks per GPU (interleaved schedule; 2 under DualPipe and DualPipeV)
  int zero_stage = 0;
  bool distributed_optimizer = false;
  OptimizerAlgorithm optimizer_algorithm = OptimizerAlgorithm::ADAM;
  // Parameter-efficient fine-tuning (PEFT's LoRA): adapters of rank `lora_rank` on the `lora_targets` projections of
  // every layer are all that trains; every other weight is frozen (no weight gradient, no gradient reduction, no
  // optimizer state). 0: every weight trains.
  int lora_rank = 0;
  LoraTargets lora_targets;
  BaseQuantization base_quantization = BaseQuantization::NONE;
  OffloadDevice offload_optimizer = OffloadDevice::NONE;
  // ZeRO-3's parameter shards in host memory (DeepSpeed's offload_param, FSDP's CPUOffload): each gather first copies
  // the GPU's shard up from the host; the CPU's update writes the shard there, so nothing is copied back.
  OffloadDevice offload_params = OffloadDevice::NONE;
  CpuOptimizer cpu_optimizer = CpuOptimizer::DEEPSPEED;
  // Hybrid sharding: the data-parallel ranks (CP with them) that one copy of the sharded state is split over, in
  // consecutive groups; the groups replicate each other (PyTorch FSDP's HYBRID_SHARD, torchtitan's and MaxText's
  // HSDP, Megatron-core's num_distributed_optimizer_instances = dp_cp / shard_group). 0: all of them.
  int shard_group = 0;
  // The textbook pipeline, for teaching: every transfer is free (pipeline sends and collectives), no stage has the
  // embedding or the output layer's work, and the stages must be identical (same layers): a GPipe, 1F1B or
  // interleaved step's bubble is then the formula's exactly.
  bool ideal = false;
  model::Recompute recompute = model::Recompute::NONE;
  model::RecomputeModules recompute_modules; // what selective recomputation redoes
  bool sequence_parallel = false;
  bool tp_comm_overlap = false; // SP collectives pipelined with their GEMMs (Megatron-core --tp-comm-overlap)
  double dp_bucket_bytes = 0;
  double memory_headroom_bytes = 0; // HBM kept free on every GPU: what the memory model does not count
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = false; // sharded optimizer: gather updated parameters during the next forward
  bool nvme_pipeline = false;        // see nvme_sub_group
  // ZeRO-Offload's one-step delayed parameter update (Ren et al. 2021, Sec. 5.3): the CPU updates with the gradients
  // of the step before while the GPUs run the next forward and backward passes, which use parameters one step old.
  bool delayed_update = false;
  // Activation offloading (torchtune's enable_activation_offloading, Megatron-core's fine-grained activation
  // offloading): what each layer's forward pass keeps for its backward is copied to host memory as the layer ends and
  // fetched back one layer ahead of its backward pass, on the GPU's copy engine.
  bool offload_activations = false;
  hardware::Precision precision = hardware::Precision::BF16;
  Fp8Recipe fp8_recipe = Fp8Recipe::DELAYED;
  // fp16's dynamic loss scaling: the share of steps whose gradients overflow, which the scaler skips (their tokens do
  // not train) while it lowers the scale.
  double skipped_steps = 0;
  // The share of each GPU's optimizer shard that is offloaded and updated on the CPU, the rest staying on the GPU
  // (Megatron-core's HybridDeviceOptimizer, --optimizer-offload-fraction).
  double offload_fraction = 1.0;
  // PEFT's lora_dropout (with lora_rank): each adapter's input goes through its own dropout (nn.Dropout when above 0,
  // nn.Identity otherwise), a kernel forward (the dropped copy and its mask) and backward (the gradient through the
  // mask).
  double lora_dropout = 0.0;
  LoraDropoutAt lora_dropout_position = LoraDropoutAt::INPUT;
  LoraScaleAt lora_scale_position = LoraScaleAt::OUTPUT;
  // ZeRO-Infinity's NVMe swapping: the optimizer's update in sub-groups of this many parameters (DeepSpeed's
  // sub_group_size), each swapped in, updated and swapped out; with `nvme_pipeline` the next sub-group is read and
  // the last written while the CPU updates (pipeline_read / pipeline_write), else one after the other.
  std::int64_t nvme_sub_group = 1000000000;
  bool fp8_param_gather = false;      // fp8: parameters kept and all-gathered in FP8 (Megatron-core --fp8-param-gather)
  bool fp32_grad_accumulation = true; // gradients accumulated and reduced in fp32 (Megatron does this for bf16)
  bool pp_scatter_gather = true;      // without SP, a stage sends 1/tp of its activations per TP rank, then gathers
  RankOrder rank_order{ParallelDim::TP, ParallelDim::DP, ParallelDim::PP};
  std::vector<int> layers_per_chunk; // layers of each virtual stage (see virtual_stage), size pp * virtual_stages
  CollectiveAlgorithm collective_algorithm = CollectiveAlgorithm::AUTO;
  Software software; // the framework's generation and the behaviours that come with it

  bool operator==(const ParallelPlan&) const = default;

  bool fused_attention() const { return software.attention != Attention::UNFUSED; }
  bool lora() const { return lora_rank > 0; }
  bool fp8() const { return precision == hardware::Precision::FP8; }
  // Full precision (fp32 or tf32): every value in 4 bytes, no 16-bit copies.
  bool full_precision() const
  {
    return precision == hardware::Precision::FP32 || precision == hardware::Precision::TF32;
  }
  // Bytes of an activation, a weight or a weight gradient as the GEMMs and kernels read them.
  double value_bytes() const { return full_precision() ? 4.0 : 2.0; }
  // The precision of everything but FP8 GEMMs (attention, norms, the output layer), and what MFU is measured against.
  hardware::Precision compute_precision() const { return fp8() ? hardware::Precision::BF16 : precision; }

  int gpus() const { return tp * pp * dp * cp; }
  int dp_cp() const { return dp * cp; } // the GPUs of a stage holding the same weights (gradient reduction groups)
  double local_seq() const { return static_cast<double>(seq_length) / cp; } // tokens of a sequence on one GPU
  // What attention runs over: a packed document, or the whole sequence.
  double attention_span() const { return static_cast<double>(document_length > 0 ? document_length : seq_length); }
  int edp() const { return tp * dp * cp / (etp * ep); } // expert data parallelism: replicas of each expert
  int shards() const { return shard_group > 0 ? shard_group : dp_cp(); } // ranks sharing one copy of sharded state
  int shard_replicas() const { return dp_cp() / shards(); }
  std::int64_t microbatches() const { return global_batch / (static_cast<std::int64_t>(micro_batch) * dp); }
  int chunks() const { return pp * virtual_stages; }
  bool dualpipe() const { return schedule == Schedule::DUALPIPE || schedule == Schedule::DUALPIPE_V; }
  // Virtual stages number the positions along a micro-batch's path: chunk * pp + stage, except that DualPipe's and
  // DualPipeV's second chunk runs the stages back (2 pp - 1 - stage). DualPipe's micro-batches take one of two paths,
  // 0 .. pp - 1 (the first half of them) and pp .. 2 pp - 1 (the second half, entering at the last GPU), over two
  // copies of the model: virtual stages v and v + pp hold the same layers.
  int virtual_stage(int stage, int chunk) const
  {
    return dualpipe() && chunk == 1 ? 2 * pp - 1 - stage : chunk * pp + stage;
  }
  int stage_of(int vs) const { return dualpipe() && vs >= pp ? 2 * pp - 1 - vs : vs % pp; }
  int chunk_of(int vs) const { return vs / pp; }
  bool path_start(int vs) const { return vs == 0 || (schedule == Schedule::DUALPIPE && vs == pp); }
  bool path_end(int vs) const { return vs == chunks() - 1 || (schedule == Schedule::DUALPIPE && vs == pp - 1); }
  int first_layer(int vs) const; // the model's index of the virtual stage's first layer
  int layers_on_stage(int stage) const;
  int layers_in_chunk(int stage, int chunk) const
  {
    return layers_per_chunk[static_cast<std::size_t>(virtual_stage(stage, chunk))];
  }
  int first_layer_of_chunk(int stage, int chunk) const { return first_layer(virtual_stage(stage, chunk)); }
  int size(ParallelDim d) const; // DP: the data- and context-parallel ranks together (CP innermost)
};

// Spreads `layers` over `parts` consecutive pieces as evenly as possible. The first and last pieces also carry the
// embedding and the output layer, so they are the ones that get fewer layers when the split is uneven
// (126 layers on 16 stages: 7, 8 x 14, 7 -- the split Llama 3 405B used).
std::vector<int> balanced_split(int layers, int parts);

// The GPU that runs each rank is the rank itself; the rank's coordinate along each dimension follows rank_order.
struct RankCoords {
  int tp = 0;
  int dp = 0;
  int pp = 0;
};
RankCoords coords_of(const ParallelPlan& plan, int rank);
int rank_of(const ParallelPlan& plan, RankCoords c);

// The parallel groups a GPU belongs to. TP, DP (CP inside it) and CP follow rank_order. The experts lay a stage's
// GPUs, taken in the attention's tp-then-dp order, out again as etp x ep x edp, innermost first (Megatron-core's
// expert rank order). SHARD: the shard_group consecutive DP coordinates that split one copy of a sharded state;
// REPLICA: the GPUs holding the same shard in each copy (the DP group when nothing is hybrid).
enum class GroupDim { TP, DP, CP, EP, ETP, EDP, SHARD, REPLICA };
// The GPUs that differ from `gpu` in `dim`'s coordinate only, in that coordinate's order (`gpu` among them).
std::vector<int> group_of(const ParallelPlan& plan, GroupDim dim, int gpu);

} // namespace sim::plan
