#include "workload/builder_rooms.hpp"

#include "memory/memory_model.hpp"
#include "plan/schedule.hpp"
#include "workload/optimizer_step.hpp"

#include <algorithm>

namespace sim::workload {
namespace {

using plan::Pass;
using plan::PassRef;
using plan::PipelineOp;

} // namespace

PipelinePasses::PipelinePasses(BuildState& state, DataParallel& dp, OptimizerStep& optimizer)
    : b_(state), m_(state.m), p_(state.p), dp_(dp), optimizer_(optimizer)
{
  forwards_.assign(static_cast<std::size_t>(p_.chunks()), 0);
  gradients_.assign(static_cast<std::size_t>(p_.chunks()), 0);
}

void PipelinePasses::run_stage(int s)
{
  if (p_.dualpipe()) {
    dualpipe_loop(s);
    return;
  }
  const auto order = stage_order(p_, s);
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (p_.moe_a2a_overlap && k + 1 < order.size() && pairable(order[k], order[k + 1])) {
      side_by_side(s, order[k], order[k + 1]);
      ++k;
    } else {
      pass(s, order[k]);
    }
  }
}

// Runs a program on every GPU of stage `s`: compute on each (its kind of part's step: `select` picks the program
// from a kind's programs), collectives per tensor- or expert-parallel group.
template <class Select>
void PipelinePasses::run(Select select, int s, const Where& w)
{
  const Program& program = select(b_.programs.front());
  const auto mine = [&](int r, std::size_t i) -> const Step& {
    return b_.kind_of_gpu[static_cast<std::size_t>(r)] == 0
               ? program[i]
               : select(b_.programs[b_.kind_of_gpu[static_cast<std::size_t>(r)]])[i];
  };
  for (std::size_t i = 0; i < program.size(); ++i) {
    const Step& step = program[i];
    if (step.kind == Step::Kind::COMPUTE) {
      for (int r : b_.stage_gpus(s))
        b_.tail[static_cast<std::size_t>(r)] = {b_.compute(r, mine(r, i), w)};
      continue;
    }
    const auto [dim, category] = step.group == Group::EP    ? std::pair{Dim::EP, Category::EP}
                                 : step.group == Group::ETP ? std::pair{Dim::ETP, Category::TP}
                                 : step.group == Group::CP  ? std::pair{Dim::CP, Category::CP}
                                                            : std::pair{Dim::TP, Category::TP};
    for (const auto& group : b_.groups(dim, s)) {
      const auto members = b_.simulated_of(group);
      const TaskId end = b_.collective(step.collective, group, step.bytes, category, step.label, w,
                                       b_.tails_of(members), {.deduplicated = step.deduplicated});
      for (int r : members) {
        if (step.kind == Step::Kind::OVERLAP)
          b_.tail[static_cast<std::size_t>(r)] = {b_.compute(r, mine(r, i), w), end};
        else
          b_.tail[static_cast<std::size_t>(r)] = {end};
      }
    }
  }
}

std::uint64_t PipelinePasses::input_key(Pass pass, int d, int vs, int mb) const
{
  return (static_cast<std::uint64_t>(d) << 40) | (static_cast<std::uint64_t>(vs) << 22) |
         (static_cast<std::uint64_t>(mb) << 1) | (pass == Pass::BACKWARD ? 1U : 0U);
}

TaskId PipelinePasses::input(Pass pass, int d, int vs, int mb)
{
  const auto [it, inserted] = inputs_.try_emplace(input_key(pass, d, vs, mb), no_task);
  if (inserted)
    it->second = b_.sync(Category::PP, {});
  return it->second;
}

// The stage waits for the activations (or gradients) of this micro-batch; without sequence parallelism each TP
// rank received a 1/tp slice, gathered inside the TP group.
void PipelinePasses::wait_input(int s, Pass pass, int vs, const Where& w)
{
  for (int d : b_.dp_simulated()) {
    const TaskId ready = input(pass, d, vs, w.microbatch);
    const auto group = b_.tp_group(d, s);
    const auto members = b_.simulated_of(group);
    for (int r : members)
      b_.tail[static_cast<std::size_t>(r)].push_back(ready);
    if (scatter_gather()) {
      const TaskId end = b_.collective(CollectiveKind::ALL_GATHER, group, b_.act_bytes, Category::PP,
                                       pass == Pass::FORWARD ? "pp activation all-gather" : "pp gradient all-gather", w,
                                       b_.tails_of(members));
      for (int r : members)
        b_.tail[static_cast<std::size_t>(r)] = {end};
    }
    // DeepSpeed's engine freed the stage's partitioned output after sending it: backward gathers it again over the
    // tensor-parallel group (PartitionedTensor.full(), v0.5).
    if (pass == Pass::BACKWARD && b_.deepspeed_engine() && p_.tp > 1 && !p_.sequence_parallel) {
      const TaskId end = b_.collective(CollectiveKind::ALL_GATHER, group, b_.act_bytes, Category::PP,
                                       "pp output re-gather", w, b_.tails_of(members));
      for (int r : members)
        b_.tail[static_cast<std::size_t>(r)] = {end};
    }
  }
}

// Each TP rank sends its slice to its counterpart on the next (or previous) virtual stage. The sender does not
// wait. With rail-optimised networks a cross-rail send is relayed over NVLink to the GPU on the receiver's rail
// (NCCL's PXN), both legs running together.
// (`posted`: DualPipe, which waits for its sends at its next wait: the sends are added there instead.)
void PipelinePasses::send(int s, Pass pass, int vs, const Where& w, Posted* posted)
{
  const int to_vs = pass == Pass::FORWARD ? vs + 1 : vs - 1;
  const int to_stage = p_.stage_of(to_vs);
  const std::uint32_t label = b_.g.label(pass == Pass::FORWARD ? "pp send activations" : "pp send gradients");
  for (int d : b_.dp_simulated()) {
    const TaskId ready = input(pass, d, to_vs, w.microbatch);
    for (int t : b_.tp_simulated()) {
      const int src = b_.rank(t, d, s);
      const int dst = b_.rank(t, d, to_stage);
      const double bytes = scatter_gather() || p_.sequence_parallel ? b_.act_bytes / p_.tp : b_.act_bytes;
      const auto deps = b_.tail[static_cast<std::size_t>(src)];
      for (const Flow& f : point_to_point(src, dst, bytes)) {
        const TaskId sent = b_.transfer(f, Category::PP, no_task, label, w, deps);
        b_.g.depend(ready, sent);
        if (posted != nullptr)
          posted->emplace_back(src, sent);
        // The device is synchronised after the send: the sender's next kernel waits for it.
        else if (p2p_sync() && f.src == src)
          b_.tail[static_cast<std::size_t>(src)].push_back(sent);
      }
    }
  }
}

// Each TP rank sends a 1/tp slice of the activations and the receiving TP group all-gathers them. DeepSpeed's
// pipeline engine always partitions them over the tensor-parallel group.
bool PipelinePasses::scatter_gather() const
{
  return p_.tp > 1 && !p_.sequence_parallel && (p_.pp_scatter_gather || b_.deepspeed_engine());
}

std::vector<Flow> PipelinePasses::point_to_point(int src, int dst, double bytes)
{
  const int per_node = b_.graph.gpus_per_node;
  const int src_node = src / per_node;
  const int dst_node = dst / per_node;
  if (b_.cluster.network.rail_optimized && src_node != dst_node) {
    const int dst_nic = b_.graph.nic_of_gpu[static_cast<std::size_t>(dst % per_node)];
    if (b_.graph.nic_of_gpu[static_cast<std::size_t>(src % per_node)] != dst_nic) {
      if (b_.folding) // the relay's NIC would also carry another GPU's traffic: not symmetric
        throw NotFoldable{};
      const int relay = src_node * per_node + b_.cluster.node.nics.gpus[static_cast<std::size_t>(dst_nic)].front();
      return {b_.lowering.send(src, relay, bytes), b_.lowering.send(relay, dst, bytes)};
    }
  }
  return {b_.lowering.send(src, dst, bytes)};
}

const Program& PipelinePasses::program_of(const LayerPrograms& programs, int item, Pass pass) const
{
  const bool forward = pass == Pass::FORWARD;
  if (item == embedding_item)
    return forward ? programs.embedding_forward : programs.embedding_backward;
  if (item == head_item)
    return forward ? programs.head_forward : programs.head_backward;
  if (is_mtp(item))
    return forward ? programs.mtp_forward : programs.mtp_backward;
  return forward ? programs.forward_of(m_, item) : programs.backward_of(m_, item);
}

// A zero-bubble backward pass's programs: without the weight gradients (BACKWARD), or those alone (WEIGHT).
const Program& PipelinePasses::split_program_of(const LayerPrograms& programs, int item, Pass pass) const
{
  const bool weights = pass == Pass::WEIGHT;
  if (item == embedding_item)
    return weights ? no_program_ : programs.embedding_backward;
  if (item == head_item)
    return weights ? programs.head_weight : programs.head_backward_input;
  if (is_mtp(item))
    return weights ? programs.mtp_weight : programs.mtp_backward_input;
  const LayerKind kind = layer_kind(m_, item);
  return weights ? programs.layer_weight[kind] : programs.layer_backward_input[kind];
}

// A pass of a micro-batch through a chunk: a forward pass, a backward pass (with or without its weight gradients),
// or the weight gradients a zero-bubble backward pass left. Its output goes on to the next virtual stage: sent
// (unless `send_output` is false: DualPipe posts its sends itself), or handed over on the same GPU.
void PipelinePasses::pass(int s, const PassRef& ref, const PassOptions& options)
{
  const bool forward = ref.pass == Pass::FORWARD;
  const int mb = ref.microbatch;
  const int vs = virtual_stage(p_, s, ref.chunk);
  const auto v = static_cast<std::size_t>(vs);
  const Where base{forward                    ? Category::FORWARD
                   : ref.pass == Pass::WEIGHT ? Category::WEIGHT
                                              : Category::BACKWARD,
                   s, ref.chunk, mb, -1};
  if (ref.pass == Pass::WEIGHT) {
    weight_pass(s, vs, base);
    return;
  }
  const bool has_input = forward ? !p_.path_start(vs) : !p_.path_end(vs);
  if (has_input)
    wait_input(s, ref.pass, vs, base);
  host_syncs(s, base);

  const bool first_forward = forward && forwards_[v]++ == 0;
  const bool weights = !forward && !ref.defer_weight; // this pass computes the weight gradients
  const bool first_gradient = weights && gradients_[v] == 0;
  const bool last_gradient = weights && ++gradients_[v] == b_.microbatches_through();
  const auto items = b_.pass_items(vs, ref.pass);
  std::vector<DataParallel::Gathered> gathered(items.size()); // per item, per GPU
  if (p_.zero_stage >= 3 && !items.empty())
    gathered[0] = dp_.gather_parameters(s, items[0], base);
  // FSDP's BACKWARD_POST issues the next unit's gather after the current unit's gradients are computed.
  const bool prefetch_after = !forward && p_.software.backward_prefetch == plan::BackwardPrefetch::POST;
  for (std::size_t i = 0; i < items.size(); ++i) {
    Where w = base;
    w.layer = items[i] >= 0 ? items[i] : -1;
    if (first_forward && dp_.gathers_before_forward())
      for (int r : b_.stage_gpus(s)) {
        const auto& ready = b_.params_ready[static_cast<std::size_t>(r)];
        if (const auto it = ready.find(items[i]); it != ready.end()) // (a frozen item's weights are not gathered)
          b_.tail[static_cast<std::size_t>(r)].push_back(it->second);
      }
    if (p_.zero_stage >= 3) {
      if (i + 1 < items.size() && !prefetch_after) // prefetch the next item's parameters while this one computes
        gathered[i + 1] = dp_.gather_parameters(s, items[i + 1], w);
      for (int r : b_.stage_gpus(s))
        for (TaskId end : gathered[i][r])
          b_.tail[static_cast<std::size_t>(r)].push_back(end);
    }
    if (first_forward || p_.zero_stage >= 3) // ZeRO-3 gathers, and so casts, the weights for every pass
      optimizer_.cast_weights(s, items[i], w);
    if (p_.offload_activations && !forward && items[i] >= 0)
      for (int r : b_.stage_gpus(s)) { // its activations back (fetched ahead), and the next layer's fetch issued
        b_.tail[static_cast<std::size_t>(r)].push_back(fetch_activations(r, vs, items[i], w));
        if (i + 1 < items.size() && items[i + 1] >= 0)
          fetch_activations(r, vs, items[i + 1], w);
      }
    run(
        [&](const LayerPrograms& programs) -> const Program& {
          return ref.defer_weight ? split_program_of(programs, items[i], Pass::BACKWARD)
                                  : program_of(programs, items[i], ref.pass);
        },
        s, w);
    if (p_.offload_activations && forward && items[i] >= 0)
      offload_activations(s, vs, items[i], w);
    if (weights)
      optimizer_.accumulate_gradients(s, items[i], w, {.first = first_gradient});

    if (p_.zero_stage >= 3 && i + 1 < items.size() && prefetch_after)
      gathered[i + 1] = dp_.gather_parameters(s, items[i + 1], w);
    if (weights && (p_.zero_stage >= 2 || last_gradient))
      for (int r : b_.stage_gpus(s))
        b_.grad_ready[static_cast<std::size_t>(r)][items[i]] = b_.join(r);
  }
  reduce_amaxes(s, items, ref.pass, base);
  pass_on(s, ref.pass, vs, base, options);
  if (weights && p_.zero_stage >= 2)
    dp_.reduce_gradients(s, mb);
}

void PipelinePasses::offload_activations(int s, int vs, int item, const Where& w)
{
  const double bytes = memory::layer_activation_bytes(m_, p_, item);
  for (int r : b_.stage_gpus(s)) {
    // On the copy engine once the layer's forward kernels are done, after its copies before (the engine takes them
    // in turn); the GPU goes on with the next layer.
    const TaskId done = b_.join(r);
    auto& copies = b_.offload_tail[static_cast<std::size_t>(r)];
    copies = b_.host_copy(r, bytes / pinned_copy_efficiency, copy_to_host, "activations to host", w, {done, copies});
    offloaded_[{r, vs, w.microbatch, item}] = copies;
  }
}

TaskId PipelinePasses::fetch_activations(int r, int vs, int item, const Where& w)
{
  const std::tuple<int, int, int, int> key{r, vs, w.microbatch, item};
  if (const auto it = fetched_.find(key); it != fetched_.end())
    return it->second;
  // After the copy out, and after this GPU's fetch before (the copy engine takes them in turn).
  auto& before = b_.fetch_tail[static_cast<std::size_t>(r)];
  const auto out = offloaded_.find(key);
  const double bytes = memory::layer_activation_bytes(m_, p_, item);
  before = b_.host_copy(r, bytes / pinned_copy_efficiency, copy_from_host, "activations from host", w,
                        {out == offloaded_.end() ? no_task : out->second, before});
  fetched_[key] = before;
  return before;
}

// FP8 with delayed scaling: when a pass leaves Transformer Engine's fp8_autocast region (forward) or ends its first
// FP8 module's backward, the amaxes of the pass's FP8 tensors are max-reduced over Megatron's amax reduction group
// (every GPU of the stage: TP x CP x DP), blocking the GPU (reduce_and_update_fp8_tensors). One fp32 per tensor:
// input, weight and output per GEMM forward, output and input gradient per GEMM backward.
void PipelinePasses::reduce_amaxes(int s, const std::vector<int>& items, Pass pass, const Where& w)
{
  const bool forward = pass == Pass::FORWARD;
  if (!p_.fp8() || p_.fp8_recipe != plan::Fp8Recipe::DELAYED || p_.tp * p_.dp_cp() == 1)
    return;
  double gemms = 0;
  for (int item : items)
    if (item >= 0 || is_mtp(item)) // (an MTP module: its layer's and its projection's)
      gemms += item >= 0 ? fp8_gemms(item) : fp8_gemms(static_cast<int>(m_.mtp_layer_kind_of())) + 1.0;
  if (gemms == 0)
    return;
  const auto group = b_.stage_group(s);
  const auto members = b_.simulated_of(group);
  const TaskId end = b_.collective(CollectiveKind::ALL_REDUCE, group, 4.0 * (forward ? 3.0 : 2.0) * gemms, Category::DP,
                                   "fp8 amax all-reduce", w, b_.tails_of(members));
  for (int r : members)
    b_.tail[static_cast<std::size_t>(r)] = {end};
}

// The FP8 GEMMs of a transformer layer on one GPU: the attention's projections, and the FFN's two or, in a MoE
// layer, two per local expert and two for the shared expert.
double PipelinePasses::fp8_gemms(int layer) const
{
  double attention = 2; // QKV and the output projection
  if (m_.mla)
    attention = (m_.mla->q_lora_rank > 0 ? 4.0 : 3.0) + 1.0;
  if (!m_.is_moe_layer(layer))
    return attention + 2.0;
  const double local = static_cast<double>(m_.moe->num_experts) / p_.ep;
  return attention + 2.0 * local + (m_.moe->shared_expert_ffn_hidden_size > 0 ? 2.0 : 0.0);
}

// The weight gradients a zero-bubble backward pass left, item by item in backward order.
void PipelinePasses::weight_pass(int s, int vs, const Where& base)
{
  const auto v = static_cast<std::size_t>(vs);
  const bool first_gradient = gradients_[v] == 0;
  const bool last_gradient = ++gradients_[v] == b_.microbatches_through();
  for (int item : b_.pass_items(vs, Pass::BACKWARD)) {
    Where w = base;
    w.layer = item >= 0 ? item : -1;
    run([&](const LayerPrograms& programs) -> const Program& { return split_program_of(programs, item, Pass::WEIGHT); },
        s, w);
    optimizer_.accumulate_gradients(s, item, w, {.first = first_gradient});
    if (last_gradient)
      for (int r : b_.stage_gpus(s))
        b_.grad_ready[static_cast<std::size_t>(r)][item] = b_.join(r);
  }
}

// After a forward or backward pass, its output goes to the next virtual stage on the micro-batch's path: sent to
// another stage, or (DualPipeV's turn at the last GPU) ready at once on this one.
void PipelinePasses::pass_on(int s, Pass pass, int vs, const Where& w, const PassOptions& options)
{
  const bool forward = pass == Pass::FORWARD;
  if (forward ? p_.path_end(vs) : p_.path_start(vs))
    return;
  const int to_vs = forward ? vs + 1 : vs - 1;
  if (p_.stage_of(to_vs) != s) {
    if (options.send_output)
      send(s, pass, vs, w);
    return;
  }
  for (int d : b_.dp_simulated()) {
    const TaskId ready = input(pass, d, to_vs, w.microbatch);
    for (int r : b_.simulated_of(b_.tp_group(d, s)))
      b_.g.depend(ready, b_.join(r));
  }
}

// DualPipe's or DualPipeV's loop on stage s (workload/schedule): receives and sends are posted, and each wait makes
// the GPU's next work wait for everything posted before it.
void PipelinePasses::dualpipe_loop(int s)
{
  Posted posted;
  auto wait = [&] {
    for (const auto& [r, t] : posted)
      b_.tail[static_cast<std::size_t>(r)].push_back(t);
    posted.clear();
  };
  for (const PipelineOp& op : dualpipe_ops(p_, s)) {
    const int vs = virtual_stage(p_, s, op.pass.chunk);
    const Where w{op.pass.pass == Pass::FORWARD ? Category::FORWARD : Category::BACKWARD, s, op.pass.chunk,
                  op.pass.microbatch, -1};
    switch (op.kind) {
      case PipelineOp::Kind::RECEIVE:
        for (int d : b_.dp_simulated()) {
          const TaskId ready = input(op.pass.pass, d, vs, op.pass.microbatch);
          for (int r : b_.simulated_of(b_.tp_group(d, s)))
            posted.emplace_back(r, ready);
        }
        break;
      case PipelineOp::Kind::SEND:
        send(s, op.pass.pass, vs, w, &posted);
        break;
      case PipelineOp::Kind::WAIT:
        wait();
        break;
      case PipelineOp::Kind::RUN:
        if (op.paired)
          side_by_side(s, op.pass, op.beside, {.send_output = false});
        else
          pass(s, op.pass, {.send_output = false});
        break;
    }
  }
  wait(); // the step ends with a last wait
}

// Device synchronisations the framework makes per micro-batch (timers, meta-data copies), half in each pass: the
// GPU idles for a kernel launch after each while the host issues the next kernel.
void PipelinePasses::host_syncs(int s, const Where& w)
{
  const int syncs = p_.software.host_syncs_per_microbatch;
  if (syncs == 0)
    return;
  b_.on_stage(s, w, [&](const LayerPrograms&, const hardware::GpuSpec& gpu) {
    Step step;
    step.label = "host synchronisation";
    step.duration_s = 0.5 * syncs * gpu.kernel_overhead_s;
    return step;
  });
}

// 1F1B with the all-to-all overlapped (Megatron-core's --overlap-moe-expert-parallel-comm): a forward and a
// backward pass of different micro-batches, next to each other in the stage's order, run side by side as two
// streams of work on each GPU, so that one's all-to-alls proceed while the other computes (the replay still runs a
// GPU's kernels one at a time, in the order they become ready). The passes after them wait for both.
void PipelinePasses::side_by_side(int s, const PassRef& a, const PassRef& b, const PassOptions& options)
{
  b_.g.concurrent_passes = true;
  const auto gpus = b_.stage_gpus(s);
  std::vector<std::vector<TaskId>> before;
  for (int r : gpus)
    before.push_back(b_.tail[static_cast<std::size_t>(r)]);
  pass(s, a, options);
  for (std::size_t i = 0; i < gpus.size(); ++i)
    std::swap(before[i], b_.tail[static_cast<std::size_t>(gpus[i])]); // `before` now holds a's tails
  pass(s, b, options);
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    auto& tail = b_.tail[static_cast<std::size_t>(gpus[i])];
    tail.insert(tail.end(), before[i].begin(), before[i].end());
  }
}

} // namespace sim::workload
