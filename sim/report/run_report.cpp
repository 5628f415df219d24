#include "report/run_report.hpp"

#include "core/units.hpp"
#include "model/param_count.hpp"
#include "report/analysis.hpp"
#include "report/cost.hpp"
#include "report/validation_summary.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace sim::report {
namespace {

core::Json breakdown_json(const Breakdown& b)
{
  return {{"compute", b.compute},
          {"tp_exposed", b.tp_exposed},
          {"pp_exposed", b.pp_exposed},
          {"dp_exposed", b.dp_exposed},
          {"ep_exposed", b.ep_exposed},
          {"cp_exposed", b.cp_exposed},
          {"bubble", b.bubble},
          {"optimizer", b.optimizer},
          {"host", b.host},
          {"offload_exposed", b.offload_exposed}};
}

std::string percent(double x)
{
  return fmt::format("{:.1f}%", 100.0 * x);
}

template <class E, std::size_t N>
std::string name_of(E value, const std::array<core::Choice<E>, N>& choices)
{
  return std::string(core::choice_name(value, choices));
}

} // namespace

std::string count(double n)
{
  if (n >= 1e12)
    return fmt::format("{:.2f}T", n / 1e12);
  if (n >= 1e9)
    return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1e6)
    return fmt::format("{:.2f}M", n / 1e6);
  return fmt::format("{:.0f}", n);
}

template <class T>
core::Json optional_json(const std::optional<T>& v)
{
  return v ? core::Json(*v) : core::Json(nullptr);
}

core::Json cost_json(const CostMetrics& c)
{
  core::Json j{{"usd_per_gpu_hour", optional_json(c.usd_per_gpu_hour)},
               {"basis", c.basis},
               {"price_basis", c.price_basis},
               {"cluster_usd_per_hour", c.cluster_usd_per_hour},
               {"capital_usd_per_hour", c.capital_usd_per_hour},
               {"network_usd_per_hour", c.network_usd_per_hour},
               {"power_usd_per_hour", c.power_usd_per_hour},
               {"tokens_per_usd", c.tokens_per_usd},
               {"usd_per_million_tokens", optional_json(c.usd_per_million_tokens)},
               {"training_tokens", optional_json(c.training_tokens)},
               {"time_to_train_s", optional_json(c.time_to_train_s)},
               {"cost_to_train_usd", optional_json(c.cost_to_train_usd)},
               {"time_to_train_with_failures_s", optional_json(c.time_to_train_with_failures_s)}};
  if (c.goodput)
    j["goodput"] = {{"job_failures_per_day", c.goodput->job_failures_per_day},
                    {"useful_fraction", c.goodput->useful_fraction},
                    {"optimal_checkpoint_interval_s", optional_json(c.goodput->optimal_interval_s)},
                    {"useful_fraction_at_optimum", optional_json(c.goodput->useful_fraction_at_optimum)}};
  else
    j["goodput"] = nullptr;
  return j;
}

std::vector<std::string> cost_lines(const CostMetrics& c, const scenario::Scenario& s)
{
  std::vector<std::string> out;
  if (c.usd_per_gpu_hour)
    out.push_back(fmt::format("cost: {} per GPU-hour ({}), {} per hour for {} GPUs: {} tokens per dollar{}",
                              core::format_usd(*c.usd_per_gpu_hour), c.price_basis,
                              core::format_usd(c.cluster_usd_per_hour), s.gpus, count(c.tokens_per_usd),
                              c.usd_per_million_tokens
                                  ? fmt::format(", {} per million tokens", core::format_usd(*c.usd_per_million_tokens))
                                  : ""));
  if (c.time_to_train_s)
    out.push_back(fmt::format("training {} tokens: {}{}", count(*c.training_tokens),
                              core::format_duration(*c.time_to_train_s),
                              c.cost_to_train_usd ? ", " + core::format_usd(*c.cost_to_train_usd) : ""));
  if (c.goodput) {
    const auto& r = *s.economics.reliability;
    const auto& g = *c.goodput;
    std::string optimum;
    if (g.optimal_interval_s)
      optimum = fmt::format(" (Young's interval {}: {})", core::format_duration(*g.optimal_interval_s),
                            percent(*g.useful_fraction_at_optimum));
    out.push_back(
        fmt::format("failures: {:.2f} per day over {} GPUs; checkpoints every {} ({} each), restarts of {}: "
                    "{} of the time trains{}{}",
                    g.job_failures_per_day, s.gpus, core::format_duration(r.checkpoint_interval_s),
                    core::format_duration(r.checkpoint_time_s), core::format_duration(r.restart_time_s),
                    percent(g.useful_fraction), optimum,
                    c.time_to_train_with_failures_s
                        ? fmt::format("; {} to train", core::format_duration(*c.time_to_train_with_failures_s))
                        : ""));
  }
  return out;
}

namespace {

std::string gpu_name(const scenario::Scenario& s, int gpu)
{
  return fmt::format("n{}.gpu{}", gpu / s.cluster.node.gpus, gpu % s.cluster.node.gpus);
}

// The GPUs whose kernels take the most of the critical path.
constexpr std::size_t path_gpus_shown = 4;

// With GPUs of several kinds, the path's kernel time on each part (by name, the topology's first).
std::vector<std::pair<std::string, double>> path_kernels_by_part(const scenario::Scenario& s, const CriticalPath& path)
{
  std::vector<std::pair<std::string, double>> out;
  if (s.cluster.node_gpus.empty())
    return out;
  for (const auto* gpu : topology::gpu_kinds(s.cluster))
    if (std::none_of(out.begin(), out.end(), [&](const auto& p) { return p.first == gpu->name; }))
      out.emplace_back(gpu->name, 0.0);
  for (const auto& g : path.gpus) {
    const auto& name = topology::gpu_of_kind(s.cluster, topology::gpu_kind(s.cluster, g.gpu)).name;
    std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == name; })->second += g.compute_s;
  }
  return out;
}

core::Json critical_path_json(const scenario::Scenario& s, const CriticalPath& path)
{
  core::Json by_category = core::Json::object();
  for (const auto& [category, seconds] : path.transfer_by_category)
    by_category[std::string(name_of(category, workload::category_choices))] = seconds;
  core::Json gpus = core::Json::array();
  for (std::size_t i = 0; i < std::min(path.gpus.size(), path_gpus_shown); ++i)
    gpus.push_back(
        {{"gpu", gpu_name(s, path.gpus[i].gpu)}, {"stage", path.gpus[i].stage}, {"compute_s", path.gpus[i].compute_s}});
  core::Json j = {
      {"compute_s", path.compute_s}, {"transfer_s", path.transfer_s}, {"transfer_by_category_s", by_category},
      {"host_s", path.host_s},       {"tasks", path.chain.size()},    {"gpus", gpus}};
  if (const auto by_part = path_kernels_by_part(s, path); !by_part.empty()) {
    j["compute_by_gpu_s"] = core::Json::object();
    for (const auto& [name, seconds] : by_part)
      j["compute_by_gpu_s"][name] = seconds;
  }
  return j;
}

std::string straggler_name(const topology::Straggler& st, hardware::Vendor vendor)
{
  if (st.on_switch())
    return fmt::format("{} {}'s uplink at {} bandwidth", st.leaf >= 0 ? "leaf group" : "pod",
                       st.leaf >= 0 ? st.leaf : st.spine, percent(st.bandwidth));
  std::string name = fmt::format("node {}", st.node);
  if (st.gpu >= 0)
    name += fmt::format(" GPU {}", st.gpu);
  if (st.nic >= 0)
    name += fmt::format(" NIC {}", st.nic);
  if (st.compute < 1)
    name += fmt::format(", kernels at {} speed", percent(st.compute));
  if (st.nvlink < 1)
    name += fmt::format(", {} at {} bandwidth", topology::link_label("nvlink", vendor), percent(st.nvlink));
  if (st.bandwidth < 1)
    name += fmt::format(", {} at {} bandwidth", st.nic >= 0 ? "its NIC" : "NICs", percent(st.bandwidth));
  return name;
}

} // namespace

core::Json run_json(const scenario::Scenario& s, const Metrics& m, const RunCost& cost,
                    const std::vector<core::Json>& validation)
{
  core::Json j;
  j["kind"] = "simulation";
  j["scenario"] = {{"name", s.name}, {"file", s.file}};
  const model::ParamCount counts = model::count_params(s.model);
  // FLOPs, TFLOP/s and MFU count the parameters each token uses: for a MoE model, the active ones.
  j["model"] = {{"name", s.model.name}, {"params", counts.total}, {"active_params", counts.active}};
  j["cluster"] = {{"name", s.cluster.name}, {"gpu", s.cluster.gpu.name}, {"gpus", s.gpus}, {"nodes", s.nodes}};
  if (!s.cluster.node_gpus.empty()) {
    core::Json kinds = core::Json::array();
    for (std::size_t k = 0; k < s.cluster.node_gpus.size(); ++k) {
      const auto& kind = s.cluster.node_gpus[k];
      kinds.push_back(
          {{"nodes", {kind.first, kind.last}}, {"gpu", kind.gpu.name}, {"validation", validation.at(k + 1)}});
    }
    j["cluster"]["node_gpus"] = kinds; // nodes whose GPUs are of another kind
  }
  if (const auto estimates = s.cluster.gpu.estimates(); !estimates.empty())
    j["cluster"]["gpu_estimates"] = estimates; // catalogue fields with nothing measured behind them
  j["plan"] = plan_json(s.plan);
  j["step_time_s"] = m.step_time_s;
  j["pipeline_time_s"] = m.pipeline_time_s;
  j["tokens_per_s"] = m.tokens_per_s;
  j["model_flops_per_step"] = m.model_flops;
  j["hardware_flops_per_step"] = m.hardware_flops;
  j["tflops_per_gpu"] = m.tflops_per_gpu;
  j["mfu"] = m.mfu;
  j["hfu"] = m.hfu;
  j["validation"] = validation.at(0);
  core::Json stages = core::Json::array();
  for (const auto& st : m.per_stage)
    stages.push_back(
        {{"stage", st.stage}, {"rank", st.rank}, {"bubble", st.bubble}, {"breakdown_s", breakdown_json(st.breakdown)}});
  std::vector<double> bubble_per_stage;
  for (const auto& st : m.per_stage)
    bubble_per_stage.push_back(st.bubble);
  j["bubble"] = {{"per_stage", bubble_per_stage},
                 {"mean", m.bubble_mean},
                 {"theory", m.bubble_theory},
                 {"formula", m.bubble_formula}};
  j["breakdown_s"] = breakdown_json(m.breakdown);
  j["comm_s"] = {{"tp", m.comm.tp}, {"pp", m.comm.pp}, {"dp", m.comm.dp}, {"ep", m.comm.ep}, {"cp", m.comm.cp}};
  j["layer_s"] = {{"forward", m.layer_forward_s}, {"backward", m.layer_backward_s}};
  j["critical_path"] = critical_path_json(s, m.critical_path);
  if (!s.cluster.stragglers.empty()) {
    core::Json stragglers = core::Json::array();
    for (std::size_t i = 0; i < s.cluster.stragglers.size(); ++i) {
      const auto& st = s.cluster.stragglers[i];
      const auto index = [](int at) { return at >= 0 ? core::Json(at) : core::Json(); };
      stragglers.push_back({{"node", index(st.node)},
                            {"gpu", index(st.gpu)},
                            {"nic", index(st.nic)},
                            {"leaf", index(st.leaf)},
                            {"spine", index(st.spine)},
                            {"compute", st.compute},
                            {"nvlink", st.nvlink},
                            {"bandwidth", st.bandwidth},
                            {"critical_path_s", m.straggler_path_s[i]}});
    }
    j["stragglers"] = stragglers;
  }
  j["stages"] = stages;
  core::Json links = core::Json::object();
  for (const auto& [cls, c] : m.links) {
    core::Json busiest = core::Json::array();
    for (const auto& l : c.busiest)
      busiest.push_back({{"link", l.name}, {"bytes", l.bytes}, {"avg_util", l.avg_util}});
    links[cls] = {{"label", topology::link_label(cls, s.cluster.gpu.vendor)},
                  {"links", c.links},
                  {"bytes", c.bytes},
                  {"avg_util", c.avg_util},
                  {"peak_util", c.peak_util ? core::Json(*c.peak_util) : core::Json()},
                  {"busiest", busiest},
                  {"utilization_over_time", c.utilization}};
  }
  j["links"] = links;
  core::Json mem = core::Json::array();
  for (const auto& st : m.memory.per_stage)
    mem.push_back({{"stage", st.stage},
                   {"weights_bytes", st.weights_bytes},
                   {"grads_bytes", st.grads_bytes},
                   {"optimizer_bytes", st.optimizer_bytes},
                   {"activations_bytes", st.activations_bytes},
                   {"buffers_bytes", st.buffers_bytes},
                   {"working_bytes", st.working_bytes},
                   {"host_bytes", st.host_bytes},
                   {"nvme_bytes", st.nvme_bytes},
                   {"peak_bytes", st.peak_bytes},
                   {"capacity_bytes", st.capacity_bytes},
                   {"oom", st.oom}});
  j["memory"] = {{"per_stage", mem},
                 {"oom", m.memory.oom},
                 {"capacity_bytes", m.memory.capacity_bytes},
                 {"cuda_context_bytes", m.memory.cuda_context_bytes},
                 {"headroom_bytes", m.memory.headroom_bytes},
                 {"host", host_memory_json(m.memory)},
                 {"nvme", nvme_memory_json(m.memory)}};
  j["cost"] = cost_json(cost_metrics(s.economics, s.cluster, s.gpus, m.tokens_per_s));
  j["tasks"] = cost.tasks;
  j["folded"] = cost.folded;
  j["simulated_gpus"] = cost.simulated_gpus;
  j["sim_wall_s"] = cost.wall_s;
  j["sim_peak_rss_bytes"] = cost.peak_rss_bytes;
  core::Json warnings = core::Json::array();
  for (const auto& w : s.warnings)
    warnings.push_back(core::format_warning(w));
  j["warnings"] = warnings;
  return j;
}

std::string run_text(const scenario::Scenario& s, const Metrics& m, const RunCost& cost,
                     const std::vector<core::Json>& validation)
{
  const auto& p = s.plan;
  std::string out;
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  line(fmt::format("{} ({}): {} on {} x {} ({}, {} node{})", s.name, s.file, s.model.name, s.gpus, s.cluster.gpu.name,
                   s.cluster.name, s.nodes, s.nodes == 1 ? "" : "s"));
  for (const auto& k : s.cluster.node_gpus)
    line(fmt::format("  nodes {}-{}: {} instead", k.first, k.last, k.gpu.name));
  std::string schedule = name_of(p.schedule, plan::schedule_choices);
  if (p.schedule == plan::Schedule::INTERLEAVED)
    schedule += fmt::format(" (v={})", p.virtual_stages);
  line(fmt::format(
      "plan: TP {} x PP {} x DP {}{}, micro-batch {}, global batch {} ({} micro-batch{}), sequence {}, {}, "
      "recompute {}{}{}{}",
      p.tp, p.pp, p.dp, report::parallel_extras(p), p.micro_batch, p.global_batch, p.microbatches(),
      p.microbatches() == 1 ? "" : "es", p.seq_length, schedule, report::recompute_text(p),
      p.sequence_parallel ? ", sequence parallel" : "", report::sharding_text(p), report::training_text(p)));
  line(report::software_text(p));
  if (p.ideal)
    line("ideal pipeline: every transfer free, no embedding or output layer, identical stages (the textbook's "
         "assumptions; step time, MFU and cost are not a prediction)");
  if (s.model.moe) {
    const model::ParamCount counts = model::count_params(s.model);
    line(fmt::format("model: {} parameters, {} active per token: FLOPs, TFLOP/s and MFU count the active ones",
                     core::format_count(counts.total), core::format_count(counts.active)));
  }
  if (p.fp8())
    line(fmt::format("precision: FP8 linear layers ({} scaling), the rest in bf16; MFU against the bf16 peak",
                     name_of(p.fp8_recipe, plan::fp8_recipe_choices)));
  else if (p.precision == hardware::Precision::FP16)
    line("precision: fp16 with dynamic loss scaling; MFU against the fp16 peak");
  else if (p.precision == hardware::Precision::FP32)
    line("precision: fp32 throughout, GEMMs on the CUDA cores; MFU against the fp32 peak");
  else if (p.precision == hardware::Precision::TF32)
    line("precision: fp32 values, GEMMs and attention on TF32 tensor cores; MFU against the tf32 peak");
  line("");
  line(fmt::format("step time {}   {:.0f} tokens/s   {:.1f} TFLOP/s per GPU   MFU {}   HFU {}",
                   core::format_time(m.step_time_s), m.tokens_per_s, m.tflops_per_gpu, percent(m.mfu), percent(m.hfu)));
  if (p.skipped_steps > 0)
    line(fmt::format("tokens/s counts the steps fp16's loss scaler keeps: {} of them skipped (plan skipped_steps)",
                     percent(p.skipped_steps)));
  line(report::accuracy_line(validation.at(0)));
  for (std::size_t k = 0; k < s.cluster.node_gpus.size(); ++k) {
    const auto& kind = s.cluster.node_gpus[k];
    line(report::accuracy_line(validation.at(k + 1), fmt::format(" (nodes {}-{})", kind.first, kind.last)));
  }
  for (const auto* gpu : topology::gpu_kinds(s.cluster)) {
    const auto estimates = gpu->estimates();
    if (estimates.empty())
      continue;
    std::string fields;
    for (const auto& f : estimates)
      fields += (fields.empty() ? "" : ", ") + f;
    line(fmt::format("catalogue: {}'s {} {} not measured on the part (datasheet rates or estimates stand in)",
                     gpu->name, fields, estimates.size() == 1 ? "is" : "are"));
  }
  line("");
  line("where the step goes (mean over GPUs)");
  const auto& b = m.breakdown;
  std::vector<std::pair<std::string, double>> rows{{"compute", b.compute},
                                                   {"exposed TP communication", b.tp_exposed},
                                                   {"exposed PP communication", b.pp_exposed},
                                                   {"exposed DP communication", b.dp_exposed},
                                                   {"pipeline bubble", b.bubble},
                                                   {"optimizer", b.optimizer},
                                                   {"waiting for the host", b.host}};
  if (s.plan.cp > 1)
    rows.insert(rows.begin() + 4, {"exposed CP communication", b.cp_exposed});
  if (s.model.moe)
    rows.insert(rows.begin() + 4, {"exposed EP all-to-all", b.ep_exposed});
  if (s.plan.offload_optimizer != plan::OffloadDevice::NONE || s.plan.offload_activations)
    rows.insert(rows.end() - 1, {"exposed offload (host)", b.offload_exposed});
  for (const auto& [name, seconds] : rows)
    line(fmt::format("  {:<26} {:>12} {:>7}", name, core::format_time(seconds), percent(seconds / m.step_time_s)));
  line(fmt::format("  one layer on stage 0: forward {}, backward {}{}", core::format_time(m.layer_forward_s),
                   core::format_time(m.layer_backward_s),
                   s.plan.recompute == model::Recompute::NONE ? "" : " (with its recomputation)"));
  const auto& path = m.critical_path;
  std::string flows;
  for (const auto& [category, seconds] : path.transfer_by_category)
    flows += fmt::format("{}{} {}", flows.empty() ? "" : ", ", name_of(category, workload::category_choices),
                         core::format_time(seconds));
  line(fmt::format("  critical path: kernels {} ({}), flows {}{}{}{}", core::format_time(path.compute_s),
                   percent(path.compute_s / m.step_time_s), core::format_time(path.transfer_s),
                   flows.empty() ? "" : " (" + flows + ")",
                   path.host_s > 0 ? fmt::format(", host {}", core::format_time(path.host_s)) : "",
                   path.gpus.empty()
                       ? ""
                       : fmt::format("; most kernels on {} (stage {}, {})", gpu_name(s, path.gpus.front().gpu),
                                     path.gpus.front().stage, core::format_time(path.gpus.front().compute_s))));
  if (const auto by_part = path_kernels_by_part(s, path); !by_part.empty()) {
    std::string parts;
    for (const auto& [name, seconds] : by_part)
      parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", name, core::format_time(seconds));
    line("  critical path kernels by part: " + parts);
  }
  for (std::size_t i = 0; i < s.cluster.stragglers.size(); ++i)
    line(fmt::format("  straggler {}: {} on the critical path",
                     straggler_name(s.cluster.stragglers[i], s.cluster.gpu.vendor),
                     core::format_time(m.straggler_path_s[i])));
  line("");
  std::string bubbles;
  for (const auto& st : m.per_stage) {
    if (st.stage == 16 && m.per_stage.size() > 20) {
      bubbles += " ...";
      break;
    }
    bubbles += fmt::format("  {}: {}", st.stage, percent(st.bubble));
  }
  if (p.pp == 1)
    line("idle share of the forward-backward phase (one stage, no pipeline bubble: the GPU waits on communication):");
  else
    line(fmt::format("pipeline bubble per stage (idle share of the pipeline phase; textbook {} = {}):",
                     m.bubble_formula, percent(m.bubble_theory)));
  line(bubbles);
  line("");
  line(fmt::format("  {:<15} {:>12} {:>9} {:>9}  {}", "links", "bytes", "avg util", "peak util", "busiest"));
  for (const auto& [cls, c] : m.links) {
    if (c.bytes <= 0)
      continue;
    const std::string busiest =
        c.busiest.empty() ? ""
                          : fmt::format("{} ({})", c.busiest.front().name, core::format_bytes(c.busiest.front().bytes));
    line(fmt::format("  {:<15} {:>12} {:>9} {:>9}  {}", topology::link_label(cls, s.cluster.gpu.vendor),
                     core::format_bytes(c.bytes), percent(c.avg_util),
                     c.peak_util ? percent(*c.peak_util) : std::string("-"), busiest));
  }
  line("");
  const auto& worst = m.memory.per_stage[static_cast<std::size_t>(m.memory.peak_stage)];
  line(fmt::format("memory: peak {} of {} per GPU ({}) on stage {}: {}", core::format_bytes(worst.peak_bytes),
                   core::format_bytes(worst.capacity_bytes), reserved_text(m.memory), worst.stage,
                   m.memory.oom
                       ? fmt::format("OUT OF MEMORY by {}", core::format_bytes(worst.peak_bytes - worst.capacity_bytes))
                       : "fits"));
  if (m.memory.host_node_bytes > 0)
    line("host memory: " + host_memory_line(m.memory));
  if (m.memory.nvme_node_bytes > 0)
    line("nvme: " + nvme_memory_line(m.memory));
  for (const auto& l : cost_lines(cost_metrics(s.economics, s.cluster, s.gpus, m.tokens_per_s), s))
    line(l);
  line(fmt::format("simulated {} tasks in {} (peak memory {}){}", cost.tasks, core::format_time(cost.wall_s),
                   core::format_bytes(cost.peak_rss_bytes),
                   cost.folded ? fmt::format("; {} simulated GPUs each stood for {} interchangeable GPUs",
                                             cost.simulated_gpus, cost.multiplicity)
                               : ""));
  for (const auto& w : s.warnings)
    line(core::format_warning(w));
  return out;
}

} // namespace sim::report
