#include "plan/plan_keys.hpp"

#include "core/input_error.hpp"
#include "core/units.hpp"
#include "plan/plan_rules.hpp"

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <fmt/format.h>
#include <numeric>
#include <type_traits>
#include <vector>

namespace sim::plan {
namespace {

using core::Json;

constexpr std::int64_t max_gpus = 1 << 20;
constexpr double max_headroom_bytes = 1099511627776.0; // 1 TiB: more HBM than any part has

// A key's value lives in the plan, or in its software (P: the plan, const or not).
template <class P, class T>
auto& field(P& p, T ParallelPlan::*member)
{
  return p.*member;
}
template <class P, class T>
auto& field(P& p, T Software::*member)
{
  return p.software.*member;
}

template <class M>
struct MemberOf;
template <class T, class C>
struct MemberOf<T C::*> {
  using value = T;
  using owner = C;
};
template <class M>
using ValueOf = typename MemberOf<M>::value;

// A key's default: a constant, or what the keys read before it make it.
template <class T>
class Fallback {
 public:
  Fallback(T value) : of_([value](const PlanReading&) { return value; }) {}
  template <std::invocable<const PlanReading&> F>
  Fallback(F of) : of_(std::move(of))
  {}
  T operator()(const PlanReading& r) const { return of_(r); }

 private:
  std::function<T(const PlanReading&)> of_;
};

// A key held in `member`, written as its value; a report shows the software's keys inside its `software` object.
template <class M>
PlanKey key(std::string name, M member, std::function<void(PlanReading&)> read)
{
  constexpr bool software = std::is_same_v<typename MemberOf<M>::owner, Software>;
  std::function<Json(const ParallelPlan&)> write;
  if constexpr (!std::is_enum_v<ValueOf<M>>)
    write = [member](const ParallelPlan& p) { return Json(field(p, member)); };
  std::string report = (software ? "/software/" : "/") + name;
  return PlanKey{std::move(name), std::move(read), write, std::move(report), write};
}

template <class M>
PlanKey integer(std::string name, M member, Fallback<ValueOf<M>> fallback, std::int64_t min, std::int64_t max)
{
  return key(name, member, [name, member, fallback, min, max](PlanReading& r) {
    field(r.plan, member) = static_cast<ValueOf<M>>(r.in.integer_or(name, fallback(r), min, max));
  });
}

template <class M>
PlanKey number(std::string name, M member, const Fallback<double>& fallback, double min, double max)
{
  return key(name, member, [name, member, fallback, min, max](PlanReading& r) {
    field(r.plan, member) = r.in.number_or(name, fallback(r), min, max);
  });
}

template <class M>
PlanKey flag(std::string name, M member, const Fallback<bool>& fallback)
{
  return key(name, member,
             [name, member, fallback](PlanReading& r) { field(r.plan, member) = r.in.flag_or(name, fallback(r)); });
}

template <class M>
PlanKey choice(std::string name, M member, std::span<const core::Choice<ValueOf<M>>> choices,
               Fallback<ValueOf<M>> fallback)
{
  PlanKey k = key(name, member, [name, member, choices, fallback](PlanReading& r) {
    field(r.plan, member) = r.in.choice_or<ValueOf<M>>(name, choices, fallback(r));
  });
  k.write = [member, choices](const ParallelPlan& p) {
    return Json(std::string(core::choice_name(field(p, member), choices)));
  };
  k.report_value = k.write;
  return k;
}

// The default of a software key: the software generation's, read before it.
template <class T>
Fallback<T> from_generation(T Software::*member)
{
  return [member](const PlanReading& r) { return r.plan.software.*member; };
}

// A key that only FP8 training has: refused, and left out, with another precision.
PlanKey fp8_only(PlanKey k)
{
  k.read = [name = k.name, read = std::move(k.read)](PlanReading& r) {
    if (auto given = r.in.find(name); given && !r.plan.fp8())
      given->fail_found(
          "applies only to FP8 training",
          fmt::format("precision \"{}\"", core::choice_name(r.plan.precision, training_precision_choices)),
          "precision \"fp8\", or no " + name);
    read(r);
  };
  const auto only = [](std::function<Json(const ParallelPlan&)> write) {
    return [write = std::move(write)](const ParallelPlan& p) { return p.fp8() ? write(p) : Json(); };
  };
  k.write = only(k.write);
  k.report_value = only(k.report_value);
  return k;
}

void read_dp(PlanReading& r)
{
  ParallelPlan& p = r.plan;
  const core::Node& node = r.in.node();
  const std::int64_t model_parallel = static_cast<std::int64_t>(p.tp) * p.pp * p.cp;
  if (model_parallel > max_gpus)
    infeasible(node, "pp",
               p.cp > 1 ? fmt::format("tp*pp*cp = {}*{}*{} = {} GPUs per replica", p.tp, p.pp, p.cp, model_parallel)
                        : fmt::format("tp*pp = {}*{} = {} GPUs per replica", p.tp, p.pp, model_parallel),
               fmt::format("at most {} GPUs in all", max_gpus));
  const int default_dp = r.gpus && *r.gpus % model_parallel == 0 ? static_cast<int>(*r.gpus / model_parallel) : 1;
  p.dp = static_cast<int>(r.in.integer_or("dp", default_dp, 1, max_gpus));
  if (model_parallel * p.dp > max_gpus)
    infeasible(node, "dp",
               p.cp > 1
                   ? fmt::format("tp*pp*cp*dp = {}*{}*{}*{} = {} GPUs", p.tp, p.pp, p.cp, p.dp, model_parallel * p.dp)
                   : fmt::format("tp*pp*dp = {}*{}*{} = {} GPUs", p.tp, p.pp, p.dp, model_parallel * p.dp),
               fmt::format("at most {} GPUs in all", max_gpus));
}

void read_seq_length(PlanReading& r)
{
  if (r.model.seq_length == 0 && !r.in.has("seq_length"))
    throw core::InputError(key_location(r.in.node(), "seq_length"), "missing required key", "nothing",
                           fmt::format("the sequence length to train at: model '{}' does not state one (a HuggingFace "
                                       "config's max_position_embeddings is how far it can attend, not its "
                                       "pre-training length)",
                                       r.model.name));
  r.plan.seq_length = r.in.integer_or("seq_length", r.model.seq_length, 1, 1 << 24);
}

PlanKey schedule_key()
{
  PlanKey k = choice("schedule", &ParallelPlan::schedule, schedule_choices, [](const PlanReading& r) {
    return r.plan.virtual_stages > 1 ? Schedule::INTERLEAVED : Schedule::ONE_F_ONE_B;
  });
  k.read = [read = std::move(k.read)](PlanReading& r) {
    read(r);
    // Two chunks per GPU under DualPipe, whatever virtual_stages says (check_plan refuses another count).
    if (r.plan.dualpipe() && !r.in.has("virtual_stages"))
      r.plan.virtual_stages = 2;
  };
  return k;
}

// `framework` names the framework that runs the step (the framework of the `software` generation where only that is
// given): its gradient defaults (accumulated in fp32 or not, bucket size, overlap) and its current generation follow.
PlanKey framework_key()
{
  return choice("framework", &Software::framework, framework_choices, [](const PlanReading& r) {
    const auto software = r.in.find("software");
    return software ? framework_of(software->as_choice<Generation>(std::span(generation_choices)))
                    : Framework::MEGATRON;
  });
}

// `software` names the generation whose code history sets the defaults of the software keys after it: the
// framework's current one unless given, and one of the framework's own if both are.
PlanKey generation_key()
{
  PlanKey k = choice("software", &Software::generation, generation_choices,
                     [](const PlanReading& r) { return current_generation(r.plan.software.framework); });
  k.report = "/software/generation";
  k.read = [read = std::move(k.read)](PlanReading& r) {
    read(r);
    ParallelPlan& p = r.plan;
    if (framework_of(p.software.generation) != p.software.framework)
      r.in.find("software")
          ->fail_found("a generation of another framework",
                       fmt::format("\"{}\", {}'s", core::choice_name(p.software.generation, generation_choices),
                                   core::choice_name(framework_of(p.software.generation), framework_choices)),
                       fmt::format(R"(a generation of framework "{}" (or no software: its current one, "{}"))",
                                   core::choice_name(p.software.framework, framework_choices),
                                   core::choice_name(current_generation(p.software.framework), generation_choices)));
    p.software = software_of(p.software.generation,
                             SoftwareContext{p.pp > 1, p.schedule == Schedule::INTERLEAVED, p.fp32_grad_accumulation});
  };
  return k;
}

// Hybrid sharding's group: written only where a scenario states it; a report of a sharded plan shows the ranks each
// copy of the state is split over (all of dp x cp unless hybrid), one without sharding leaves it out.
PlanKey shard_group_key()
{
  PlanKey k = integer("shard_group", &ParallelPlan::shard_group, 0, 1, max_gpus);
  k.write = [](const ParallelPlan& p) { return p.shard_group > 0 ? Json(p.shard_group) : Json(); };
  k.report_value = [](const ParallelPlan& p) {
    return p.zero_stage > 0 || p.distributed_optimizer ? Json(p.shards()) : Json();
  };
  return k;
}

PlanKey bucket_key()
{
  PlanKey k = key("dp_bucket_size", &ParallelPlan::dp_bucket_bytes, [](PlanReading& r) {
    ParallelPlan& p = r.plan;
    const double grad_bytes = p.fp32_grad_accumulation ? 4.0 : 2.0;
    p.dp_bucket_bytes = r.in.quantity_or("dp_bucket_size", core::Dimension::BYTES,
                                         framework_bucket_bytes(p.software.framework, p.zero_stage, p.dp, grad_bytes));
  });
  // The shortest text that reads back as the same double.
  k.write = [](const ParallelPlan& p) { return Json(fmt::format("{}B", p.dp_bucket_bytes)); };
  k.report = "/dp_bucket_size_bytes";
  return k;
}

// HBM a plan keeps free beside the CUDA context (NCCL's buffers, the caching allocator's fragmentation): written
// where set.
PlanKey headroom_key()
{
  PlanKey k = key("memory_headroom", &ParallelPlan::memory_headroom_bytes, [](PlanReading& r) {
    r.plan.memory_headroom_bytes = r.in.quantity_or("memory_headroom", core::Dimension::BYTES, 0.0);
    if (r.plan.memory_headroom_bytes > max_headroom_bytes)
      r.in.find("memory_headroom")
          ->fail_found("out of range", core::format_bytes(r.plan.memory_headroom_bytes), "0 to 1 TiB");
  });
  k.write = [](const ParallelPlan& p) {
    return p.memory_headroom_bytes > 0 ? Json(fmt::format("{}B", p.memory_headroom_bytes)) : Json();
  };
  k.report = "/memory_headroom_bytes";
  return k;
}

void read_layer_split(PlanReading& r)
{
  ParallelPlan& p = r.plan;
  const model::ModelSpec& model = r.model;
  if (auto split = r.in.find("layers_per_stage")) {
    if (split->array_size() != static_cast<std::size_t>(p.pp))
      split->fail_found("wrong length", fmt::format("{} entries", split->array_size()),
                        fmt::format("one layer count per pipeline stage (pp={})", p.pp));
    if (p.dualpipe())
      split->fail_found("an explicit split cannot be combined with DualPipe's two chunks per GPU",
                        fmt::format("schedule \"{}\"", core::choice_name(p.schedule, schedule_choices)),
                        "schedule 1f1b, or no layers_per_stage");
    if (p.virtual_stages > 1)
      split->fail_found("an explicit split cannot be combined with virtual stages",
                        fmt::format("virtual_stages={}", p.virtual_stages), "virtual_stages=1");
    int sum = 0;
    for (std::size_t i = 0; i < split->array_size(); ++i) {
      const int n = static_cast<int>(split->element(i).as_integer(1, 1 << 20));
      p.layers_per_chunk.push_back(n);
      sum += n;
    }
    if (sum != model.num_layers)
      split->fail_found("does not add up to the model's layers", fmt::format("a total of {}", sum),
                        fmt::format("num_layers={} of model '{}'", model.num_layers, model.name));
  } else if (p.schedule == Schedule::DUALPIPE && p.virtual_stages == 2 && layers_fill_chunks(model, p.pp)) {
    p.layers_per_chunk = balanced_split(static_cast<int>(model.num_layers), p.pp); // the path of the first copy
    const auto copy = p.layers_per_chunk;                                          // and of the second
    p.layers_per_chunk.insert(p.layers_per_chunk.end(), copy.begin(), copy.end());
  } else if (layers_fill_chunks(model, p.chunks())) {
    p.layers_per_chunk = balanced_split(static_cast<int>(model.num_layers), p.chunks());
  }
}

// The report shows every chunk's layers; a scenario states a split of its stages where it is not the balanced one.
PlanKey layer_split_key()
{
  PlanKey k = key("layers_per_stage", &ParallelPlan::layers_per_chunk, read_layer_split);
  k.write = [](const ParallelPlan& p) {
    const auto& split = p.layers_per_chunk;
    if (p.virtual_stages > 1 || p.dualpipe() || split.empty())
      return Json();
    const int layers = std::accumulate(split.begin(), split.end(), 0);
    return split == balanced_split(layers, p.pp) ? Json() : Json(split);
  };
  k.report = "/layers_per_chunk";
  return k;
}

// A set of named members (a bit each) read from a non-empty list of their names.
template <class Set, class E, std::size_t N>
Set read_set(const core::Node& list, const std::array<core::Choice<E>, N>& choices, const std::string& expected)
{
  if (list.array_size() == 0)
    list.fail_found("empty", "[]", expected);
  Set out{.bits = 0};
  for (std::size_t i = 0; i < list.array_size(); ++i)
    out.add(list.element(i).as_choice<E>(std::span<const core::Choice<E>>(choices)));
  return out;
}

// Selective recomputation's modules: a list of Megatron-core's names, only with recompute "selective"; written in a
// scenario where it is not the attention core alone, in a report for every selective plan.
PlanKey recompute_modules_key()
{
  PlanKey k;
  k.name = "recompute_modules";
  k.report = "/recompute_modules";
  k.read = [](PlanReading& r) {
    ParallelPlan& p = r.plan;
    auto list = r.in.find("recompute_modules");
    if (!list)
      return;
    if (p.recompute != model::Recompute::SELECTIVE)
      list->fail_found("modules are recomputed only under selective recomputation",
                       fmt::format("recompute \"{}\"", core::choice_name(p.recompute, model::recompute_choices)),
                       "recompute \"selective\", or no recompute_modules");
    p.recompute_modules = read_set<model::RecomputeModules>(
        *list, model::recompute_module_choices, "at least one module (core_attn is selective recomputation's default)");
  };
  auto names = [](const ParallelPlan& p) { return Json(model::recompute_module_names(p.recompute_modules)); };
  k.write = [names](const ParallelPlan& p) {
    if (p.recompute != model::Recompute::SELECTIVE || p.recompute_modules == model::RecomputeModules{})
      return Json();
    return names(p);
  };
  // A report shows the modules of every selective plan, the default too.
  k.report_value = [names](const ParallelPlan& p) {
    return p.recompute == model::Recompute::SELECTIVE ? names(p) : Json();
  };
  return k;
}

// PEFT's lora_dropout, only with lora_rank; written where above 0.
PlanKey lora_dropout_key()
{
  PlanKey k = number("lora_dropout", &ParallelPlan::lora_dropout, 0.0, 0.0, 0.99);
  auto read = k.read;
  k.read = [read](PlanReading& r) {
    read(r);
    if (r.plan.lora_dropout > 0 && !r.plan.lora())
      r.in.find("lora_dropout")
          ->fail_found("a dropout needs adapters", "lora_rank 0", "lora_rank > 0, or no lora_dropout");
  };
  k.write = [](const ParallelPlan& p) { return p.lora_dropout > 0 ? Json(p.lora_dropout) : Json(); };
  k.report_value = [](const ParallelPlan& p) { return p.lora() ? Json(p.lora_dropout) : Json(); };
  return k;
}

// When a key means something: refused where given without it (`found` naming what the plan has, `instead` what it
// needs), left out of the written plan without it or at its default, reported where it holds.
struct Applies {
  std::function<bool(const ParallelPlan&)> holds;
  const char* refusal; // "a scale position needs adapters"
  const char* found;   // "lora_rank 0"
  const char* instead; // "lora_rank > 0"
};

template <class T>
PlanKey only_where(PlanKey k, T ParallelPlan::*member, T fallback, const Applies& a)
{
  k.read = [name = k.name, read = std::move(k.read), a](PlanReading& r) {
    read(r);
    if (auto given = r.in.find(name); given && !a.holds(r.plan))
      given->fail_found(a.refusal, a.found, fmt::format("{}, or no {}", a.instead, name));
  };
  k.write = [write = std::move(k.write), member, fallback, holds = a.holds](const ParallelPlan& p) {
    return holds(p) && p.*member != fallback ? write(p) : Json();
  };
  k.report_value = [report = std::move(k.report_value), holds = a.holds](const ParallelPlan& p) {
    return holds(p) ? report(p) : Json();
  };
  return k;
}

// Where the dropout acts, only with a dropout; where the scale multiplies, only with adapters.
PlanKey lora_dropout_position_key()
{
  return only_where(choice("lora_dropout_position", &ParallelPlan::lora_dropout_position, lora_dropout_at_choices,
                           LoraDropoutAt::INPUT),
                    &ParallelPlan::lora_dropout_position, LoraDropoutAt::INPUT,
                    {[](const ParallelPlan& p) { return p.lora_dropout > 0; }, "a dropout position needs a dropout",
                     "lora_dropout 0", "lora_dropout > 0"});
}

PlanKey lora_scale_position_key()
{
  return only_where(
      choice("lora_scale_position", &ParallelPlan::lora_scale_position, lora_scale_at_choices, LoraScaleAt::OUTPUT),
      &ParallelPlan::lora_scale_position, LoraScaleAt::OUTPUT,
      {[](const ParallelPlan& p) { return p.lora(); }, "a scale position needs adapters", "lora_rank 0",
       "lora_rank > 0"});
}

// LoRA's target projections: a list of Hugging Face names, only with lora_rank; written where not every projection.
PlanKey lora_targets_key()
{
  PlanKey k;
  k.name = "lora_targets";
  k.report = "/lora_targets";
  k.read = [](PlanReading& r) {
    ParallelPlan& p = r.plan;
    auto list = r.in.find("lora_targets");
    if (!list)
      return;
    if (!p.lora())
      list->fail_found("adapters need a rank", "lora_rank 0", "lora_rank > 0, or no lora_targets");
    p.lora_targets =
        read_set<LoraTargets>(*list, lora_target_choices, "at least one projection (q_proj, v_proj: PEFT's for Llama)");
  };
  auto names = [](const ParallelPlan& p) {
    Json out = Json::array();
    for (const auto& c : lora_target_choices)
      if (p.lora_targets.has(c.value))
        out.push_back(c.name);
    return out;
  };
  k.write = [names](const ParallelPlan& p) { return p.lora() && p.lora_targets != LoraTargets{} ? names(p) : Json(); };
  k.report_value = [names](const ParallelPlan& p) { return p.lora() ? names(p) : Json(); };
  return k;
}

std::vector<PlanKey> make_plan_keys()
{
  using P = ParallelPlan;
  using S = Software;
  return {
      framework_key(),
      integer("tp", &P::tp, 1, 1, 1 << 16),
      integer("pp", &P::pp, 1, 1, 1 << 16),
      integer("cp", &P::cp, 1, 1, 1 << 16),
      choice("cp_kind", &P::cp_kind, cp_kind_choices, CpKind::RING),
      key("dp", &P::dp, read_dp),
      integer("ep", &P::ep, 1, 1, max_gpus),
      integer(
          "etp", &P::etp, [](const PlanReading& r) { return r.plan.tp; }, 1, 1 << 16),
      number("expert_load_imbalance", &P::expert_load_imbalance, 1.0, 1.0, 1e4),
      choice("moe_dispatcher", &P::moe_dispatcher, moe_dispatcher_choices, MoeDispatcher::ALL_TO_ALL),
      flag("moe_a2a_overlap", &P::moe_a2a_overlap, false),
      flag("moe_fp8_dispatch", &P::moe_fp8_dispatch, false),
      integer("micro_batch", &P::micro_batch, 1, 1, 1 << 16),
      integer(
          "global_batch", &P::global_batch,
          [](const PlanReading& r) { return static_cast<std::int64_t>(r.plan.micro_batch) * r.plan.dp; }, 1, INT64_MAX),
      key("seq_length", &P::seq_length, read_seq_length),
      integer("document_length", &P::document_length, 0, 0, 1 << 24),
      integer("virtual_stages", &P::virtual_stages, 1, 1, 1024),
      schedule_key(),
      integer("zero_stage", &P::zero_stage, 0, 0, 3),
      flag("distributed_optimizer", &P::distributed_optimizer, false),
      choice("optimizer_algorithm", &P::optimizer_algorithm, optimizer_algorithm_choices, OptimizerAlgorithm::ADAM),
      integer("lora_rank", &P::lora_rank, 0, 0, 1 << 16),
      lora_targets_key(),
      lora_dropout_key(),
      lora_dropout_position_key(),
      lora_scale_position_key(),
      choice("base_quantization", &P::base_quantization, base_quantization_choices, BaseQuantization::NONE),
      choice("offload_optimizer", &P::offload_optimizer, offload_device_choices, OffloadDevice::NONE),
      choice("offload_params", &P::offload_params, offload_device_choices, OffloadDevice::NONE),
      choice("cpu_optimizer", &P::cpu_optimizer, cpu_optimizer_choices, CpuOptimizer::DEEPSPEED),
      number("offload_fraction", &P::offload_fraction, 1.0, 0.0, 1.0),
      integer("nvme_sub_group", &P::nvme_sub_group, 1000000000, 1000000, 1000000000000),
      flag("nvme_pipeline", &P::nvme_pipeline, false),
      flag("delayed_update", &P::delayed_update, false),
      flag("offload_activations", &P::offload_activations, false),
      shard_group_key(),
      flag("ideal", &P::ideal, false),
      choice("recompute", &P::recompute, model::recompute_choices, model::Recompute::NONE),
      recompute_modules_key(),
      flag("sequence_parallel", &P::sequence_parallel, false),
      flag("tp_comm_overlap", &P::tp_comm_overlap, false),
      flag("overlap_grad_reduce", &P::overlap_grad_reduce,
           [](const PlanReading& r) {
             return framework_overlaps_grad_reduce(r.plan.software.framework, r.plan.zero_stage);
           }),
      flag("overlap_param_gather", &P::overlap_param_gather, false),
      choice("precision", &P::precision, training_precision_choices, hardware::Precision::BF16),
      fp8_only(choice("fp8_recipe", &P::fp8_recipe, fp8_recipe_choices, Fp8Recipe::DELAYED)),
      number("skipped_steps", &P::skipped_steps, 0.0, 0.0, 0.5),
      fp8_only(flag("fp8_param_gather", &P::fp8_param_gather, false)),
      flag("fp32_grad_accumulation", &P::fp32_grad_accumulation,
           [](const PlanReading& r) {
             return framework_fp32_gradients(r.plan.software.framework, r.plan.precision, r.plan.zero_stage);
           }),
      flag("pp_scatter_gather", &P::pp_scatter_gather, true),
      choice("rank_order", &P::rank_order, rank_order_choices, P{}.rank_order),
      choice("collective_algorithm", &P::collective_algorithm, collective_algorithm_choices, CollectiveAlgorithm::AUTO),
      generation_key(),
      choice("norm_impl", &S::norm, norm_impl_choices, from_generation(&S::norm)),
      choice("attention", &S::attention, attention_choices, from_generation(&S::attention)),
      flag("tp_backward_overlap", &S::tp_backward_overlap, from_generation(&S::tp_backward_overlap)),
      choice("grad_accumulation", &S::grad_accumulation, grad_accumulation_choices,
             from_generation(&S::grad_accumulation)),
      flag("p2p_sync", &S::p2p_sync, from_generation(&S::p2p_sync)),
      integer("host_syncs_per_microbatch", &S::host_syncs_per_microbatch,
              from_generation(&S::host_syncs_per_microbatch), 0, 1000),
      choice("optimizer", &S::optimizer, optimizer_impl_choices, from_generation(&S::optimizer)),
      choice("pipeline_engine", &S::pipeline_engine, pipeline_engine_choices, from_generation(&S::pipeline_engine)),
      choice("backward_prefetch", &S::backward_prefetch, backward_prefetch_choices,
             from_generation(&S::backward_prefetch)),
      flag("zero3_per_tensor", &S::zero3_per_tensor, from_generation(&S::zero3_per_tensor)),
      flag("host_launch", &S::host_launch, from_generation(&S::host_launch)),
      choice("loss_impl", &S::loss, loss_impl_choices, from_generation(&S::loss)),
      choice("rope_impl", &S::rope, pointwise_impl_choices, from_generation(&S::rope)),
      choice("activation_impl", &S::activation, pointwise_impl_choices, from_generation(&S::activation)),
      bucket_key(),
      headroom_key(),
      layer_split_key(),
  };
}

} // namespace

std::span<const PlanKey> plan_keys()
{
  static const std::vector<PlanKey> keys = make_plan_keys();
  return keys;
}

Json write_plan(const ParallelPlan& p)
{
  Json j = Json::object();
  for (const auto& k : plan_keys())
    if (auto value = k.write(p); !value.is_null())
      j[k.name] = std::move(value);
  return j;
}

core::Location key_location(const core::Node& plan_node, std::string_view key)
{
  return plan_node.provenance().locate(core::pointer_append(plan_node.pointer(), key));
}

void infeasible(const core::Node& plan_node, std::string_view key, const std::string& problem,
                const std::string& expected)
{
  throw core::InfeasiblePlan(key_location(plan_node, key), problem, {}, expected);
}

} // namespace sim::plan
