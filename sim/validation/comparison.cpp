#include "validation/comparison.hpp"

#include "core/units.hpp"
#include "report/validation_summary.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdexcept>

namespace sim::validation {
namespace {

using core::Json;

const Json& first_stage(const Json& report)
{
  return report.at("memory").at("per_stage").at(0);
}

double quantile(std::vector<double> v, double q)
{
  if (v.empty())
    return 0.0;
  std::sort(v.begin(), v.end());
  if (q >= 1.0)
    return v.back();
  if (q == 0.5) {
    const std::size_t mid = v.size() / 2;
    return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
  }
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::max<std::size_t>(rank, 1) - 1];
}

std::string format_value(Quantity q, double v)
{
  switch (q) {
    case Quantity::STEP_TIME:
      return core::format_time(v);
    case Quantity::MFU:
    case Quantity::HFU:
    case Quantity::ACTIVATION_SHARE:
      return fmt::format("{:.1f}%", 100.0 * v);
    case Quantity::MODEL_FLOPS:
    case Quantity::HARDWARE_FLOPS:
      return fmt::format("{:.1f} TF/s", v / 1e12);
    case Quantity::TOKENS_PER_GPU:
      return fmt::format("{:.0f} tok/s", v);
    case Quantity::LAYER_FORWARD:
    case Quantity::LAYER_BACKWARD:
    case Quantity::LAYER_TOTAL:
      return fmt::format("{:.2f} ms", v * 1e3);
    case Quantity::STATE_MEMORY:
    case Quantity::ACTIVATION_MEMORY:
    case Quantity::PEAK_MEMORY:
      return fmt::format("{:.2f} GiB", v / 1073741824.0);
  }
  return fmt::format("{}", v);
}

std::string percent(double x)
{
  return fmt::format("{:.1f}%", 100.0 * x);
}

std::string signed_percent(double x)
{
  return fmt::format("{:+.1f}%", 100.0 * x);
}

std::string target_text(const ErrorStats& s)
{
  if (!s.target)
    return "";
  std::string text;
  if (s.target->median < 1.0)
    text += fmt::format("median ≤ {:.0f}%", 100.0 * s.target->median);
  if (s.target->worst < 1.0)
    text += fmt::format("{}worst ≤ {:.0f}%", text.empty() ? "" : ", ", 100.0 * s.target->worst);
  return text + (s.met ? ": met" : ": missed");
}

// How the comparisons are grouped into error statistics: per source and quantity (with the source's targets), or
// per GPU.
enum class Grouping { BY_SOURCE, BY_GPU, BY_KIND };

// The kinds in the order the tables list them.
constexpr std::array<std::string_view, 4> kind_order{"dense", "MoE", "FP8", "CP"};

std::vector<ErrorStats> statistics(const std::vector<Comparison>& comparisons, Grouping grouping,
                                   const std::vector<Target>& targets)
{
  const bool by_source = grouping == Grouping::BY_SOURCE;
  std::map<std::pair<std::string, std::string>, std::vector<double>> groups;
  for (const auto& c : comparisons) {
    if (!c.primary)
      continue;
    if (grouping == Grouping::BY_KIND) { // kinds mix quantities: step times only, as step times
      if (aspect_of(c.quantity) == Aspect::TIME)
        for (const auto& kind : c.kinds)
          groups[{kind, ""}].push_back(step_time_error(c));
      continue;
    }
    if (!by_source && aspect_of(c.quantity) != Aspect::TIME) // a GPU's accuracy is its step times' (reports quote it)
      continue;
    groups[{by_source ? c.source : c.gpu, by_source ? std::string(quantity_name(c.quantity)) : ""}].push_back(c.error);
  }
  std::vector<ErrorStats> out;
  for (auto [key, errors] : groups) {
    ErrorStats s = error_stats(errors);
    s.group = key.first;
    s.quantity = key.second;
    if (by_source)
      for (const auto& t : targets)
        if (t.source == s.group)
          s.target = t;
    if (s.target)
      s.met = s.median <= s.target->median && s.worst <= s.target->worst;
    out.push_back(s);
  }
  if (grouping == Grouping::BY_KIND) // in kind_order, not alphabetically
    std::stable_sort(out.begin(), out.end(), [](const ErrorStats& a, const ErrorStats& b) {
      return std::find(kind_order.begin(), kind_order.end(), a.group) <
             std::find(kind_order.begin(), kind_order.end(), b.group);
    });
  return out;
}

} // namespace

double step_time_error(const Comparison& c)
{
  const Quantity q = c.quantity;
  const bool throughput = q == Quantity::MFU || q == Quantity::HFU || q == Quantity::MODEL_FLOPS ||
                          q == Quantity::HARDWARE_FLOPS || q == Quantity::TOKENS_PER_GPU;
  return throughput ? 1.0 / (1.0 + c.error) - 1.0 : c.error;
}

std::vector<std::string> run_kinds(const Json& scenario)
{
  const Json& model = scenario.contains("model") ? scenario["model"] : Json();
  const Json& plan = scenario.contains("plan") ? scenario["plan"] : Json();
  return report::run_kinds(
      model.is_object() && model.contains("moe"), plan.is_object() && plan.value("precision", "") == "fp8",
      plan.is_object() && plan.contains("cp") && plan["cp"].is_number() && plan["cp"].get<double>() > 1);
}

ErrorStats error_stats(std::vector<double> errors)
{
  ErrorStats s;
  s.count = static_cast<int>(errors.size());
  s.bias = quantile(errors, 0.5);
  for (double& e : errors)
    e = std::abs(e);
  s.median = quantile(errors, 0.5);
  s.p90 = quantile(errors, 0.9);
  s.worst = quantile(errors, 1.0);
  return s;
}

bool ValidationResult::targets_met() const
{
  return failed.empty() && std::all_of(by_source.begin(), by_source.end(), [](const ErrorStats& s) { return s.met; });
}

double predicted_value(const Expectation& e, const Json& report, const Json* baseline)
{
  const auto tokens_per_gpu = [&report] {
    return report.at("tokens_per_s").get<double>() / report.at("cluster").at("gpus").get<double>();
  };
  if (e.source_flops_per_token && (e.quantity == Quantity::MODEL_FLOPS || e.quantity == Quantity::MFU)) {
    const double flops = tokens_per_gpu() * *e.source_flops_per_token;
    if (e.quantity == Quantity::MODEL_FLOPS)
      return flops;
    // The report's MFU divides its FLOP/s by the peak it used: the same peak, the source's FLOPs.
    return e.peak_scale * flops * report.at("mfu").get<double>() / (report.at("tflops_per_gpu").get<double>() * 1e12);
  }
  switch (e.quantity) {
    case Quantity::STEP_TIME:
      return report.at("step_time_s").get<double>();
    case Quantity::MFU:
      return e.peak_scale * report.at("mfu").get<double>();
    case Quantity::HFU:
      return e.peak_scale * report.at("hfu").get<double>();
    case Quantity::MODEL_FLOPS:
      return report.at("tflops_per_gpu").get<double>() * 1e12;
    case Quantity::HARDWARE_FLOPS:
      return report.at("tflops_per_gpu").get<double>() * 1e12 * report.at("hfu").get<double>() /
             report.at("mfu").get<double>();
    case Quantity::TOKENS_PER_GPU:
      return tokens_per_gpu();
    case Quantity::LAYER_FORWARD:
      return report.at("layer_s").at("forward").get<double>();
    case Quantity::LAYER_BACKWARD:
      return report.at("layer_s").at("backward").get<double>();
    case Quantity::LAYER_TOTAL:
      return report.at("layer_s").at("forward").get<double>() + report.at("layer_s").at("backward").get<double>();
    case Quantity::STATE_MEMORY:
      return first_stage(report).at("layer_state_bytes").get<double>();
    case Quantity::ACTIVATION_MEMORY:
      return first_stage(report).at("layer_activations_bytes").get<double>();
    case Quantity::PEAK_MEMORY: {
      double peak = 0;
      for (const auto& stage : report.at("memory").at("per_stage"))
        peak = std::max(peak, stage.at("peak_bytes").get<double>());
      return peak;
    }
    case Quantity::ACTIVATION_SHARE:
      if (!baseline)
        throw std::runtime_error("no baseline run");
      return first_stage(report).at("layer_activations_bytes").get<double>() /
             first_stage(*baseline).at("layer_activations_bytes").get<double>();
  }
  return 0.0;
}

const std::vector<Target>& default_targets()
{
  static const std::vector<Target> targets{
      {"SC21 Table 1", 0.05, 0.12},     {"Korthikanti Table 4", 0.05, 0.12}, {"MT-NLG", 1.0, 0.10},
      {"Megatron-LM H100", 0.05, 0.12}, {"MosaicML A100", 0.05, 0.12},       {"Korthikanti memory", 0.01, 0.02},
  };
  return targets;
}

ValidationResult compare(const std::vector<CaseConversion>& cases, const std::map<std::string, RunOutcome>& outcomes,
                         const std::vector<Target>& targets)
{
  ValidationResult r;
  r.cases = static_cast<int>(cases.size());
  for (const auto& c : cases) {
    if (!c.unsupported.empty()) {
      r.unsupported.push_back({c.id, c.unsupported});
      continue;
    }
    for (const auto& run : c.runs) {
      const auto outcome = outcomes.find(run.name);
      if (outcome == outcomes.end() || !outcome->second.ok) {
        r.failed.push_back({run.name, outcome == outcomes.end() ? "not run" : outcome->second.failure});
        continue;
      }
      const Json* baseline = nullptr;
      if (!run.baseline.empty()) {
        const auto b = outcomes.find(run.baseline);
        if (b != outcomes.end() && b->second.ok)
          baseline = &b->second.report;
      }
      for (const auto& e : run.expectations) {
        Comparison cmp{
            c.id, run.name, c.source, c.gpu, e.key, e.quantity, e.measured, 0, 0, e.primary, run_kinds(run.scenario)};
        try {
          cmp.predicted = predicted_value(e, outcome->second.report, baseline);
        } catch (const std::exception& ex) {
          r.failed.push_back({run.name, fmt::format("{}: {}", e.key, ex.what())});
          continue;
        }
        cmp.error = (cmp.predicted - cmp.measured) / cmp.measured;
        r.comparisons.push_back(cmp);
      }
    }
  }
  r.by_source = statistics(r.comparisons, Grouping::BY_SOURCE, targets);
  r.by_gpu = statistics(r.comparisons, Grouping::BY_GPU, targets);
  r.by_kind = statistics(r.comparisons, Grouping::BY_KIND, targets);
  return r;
}

std::string render_text(const ValidationResult& r)
{
  std::string out;
  const auto line = [&out](const std::string& s) { out += s + "\n"; };
  std::size_t width = 4;
  for (const auto& c : r.comparisons)
    width = std::max(width, c.run.size());
  line(fmt::format("{:<{}}  {:<32} {:>12} {:>12} {:>8}", "case", width, "quantity", "predicted", "measured", "error"));
  for (const auto& c : r.comparisons)
    line(fmt::format("{:<{}}  {:<32} {:>12} {:>12} {:>8}{}", c.run, width, quantity_name(c.quantity),
                     format_value(c.quantity, c.predicted), format_value(c.quantity, c.measured),
                     signed_percent(c.error), c.primary ? "" : "  (restates the above)"));
  if (!r.unsupported.empty()) {
    line("");
    line(fmt::format("not simulated ({} cases simtrain cannot express):", r.unsupported.size()));
    for (const auto& u : r.unsupported)
      line(fmt::format("  {}: {}", u.name, u.why));
  }
  if (!r.failed.empty()) {
    line("");
    line(fmt::format("failed ({} runs):", r.failed.size()));
    for (const auto& f : r.failed)
      line(fmt::format("  {}: {}", f.name, f.why));
  }
  const auto table = [&line](const std::string& title, const std::vector<ErrorStats>& stats, Grouping grouping) {
    const bool quantity = grouping == Grouping::BY_SOURCE; // the per-source table has quantity and target
    const bool bias = grouping != Grouping::BY_GPU;
    const char* group = grouping == Grouping::BY_SOURCE ? "source" : grouping == Grouping::BY_GPU ? "GPU" : "kind";
    line("");
    line(title);
    line(fmt::format("  {:<22} {:<34} {:>5} {:>7} {:>7} {:>7} {:>7}  {}", group, quantity ? "quantity" : "", "cases",
                     bias ? "bias" : "", "median", "p90", "worst", quantity ? "target" : ""));
    for (const auto& s : stats)
      line(fmt::format("  {:<22} {:<34} {:>5} {:>7} {:>7} {:>7} {:>7}  {}", s.group, s.quantity, s.count,
                       bias ? signed_percent(s.bias) : "", percent(s.median), percent(s.p90), percent(s.worst),
                       target_text(s)));
  };
  table("absolute error per source (each case's primary comparison)", r.by_source, Grouping::BY_SOURCE);
  table("absolute error per GPU (times and throughputs)", r.by_gpu, Grouping::BY_GPU);
  table("step-time error per kind of run (throughputs as step times, < 0 too short; a run counts in each kind it is)",
        r.by_kind, Grouping::BY_KIND);
  return out;
}

std::string render_markdown(const ValidationResult& r, const MarkdownOptions& options)
{
  std::string out;
  const auto line = [&out](const std::string& s) { out += s + "\n"; };
  if (options.brief) {
    line("| kind of run | cases | median error of the step time | bias (< 0: steps too short) | worst |");
    line("| --- | ---: | ---: | ---: | ---: |");
    for (const auto& s : r.by_kind)
      line(fmt::format("| {} | {} | {} | {} | {} |", s.group, s.count, percent(s.median), signed_percent(s.bias),
                       percent(s.worst)));
    line("");
    line("| GPU | cases | median error (each case's primary time or throughput) | worst |");
    line("| --- | ---: | ---: | ---: |");
    for (const auto& s : r.by_gpu)
      line(fmt::format("| {} | {} | {} | {} |", s.group, s.count, percent(s.median), percent(s.worst)));
    return out;
  }
  line("| source | quantity | cases | bias | median | p90 | worst | target |");
  line("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |");
  for (const auto& s : r.by_source)
    line(fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |", s.group, s.quantity, s.count, signed_percent(s.bias),
                     percent(s.median), percent(s.p90), percent(s.worst), target_text(s)));
  line("");
  line("| GPU | cases | median | p90 | worst |");
  line("| --- | ---: | ---: | ---: | ---: |");
  for (const auto& s : r.by_gpu)
    line(fmt::format("| {} | {} | {} | {} | {} |", s.group, s.count, percent(s.median), percent(s.p90),
                     percent(s.worst)));
  line("");
  line("| kind of run (step-time error) | cases | bias | median | p90 | worst |");
  line("| --- | ---: | ---: | ---: | ---: | ---: |");
  for (const auto& s : r.by_kind)
    line(fmt::format("| {} | {} | {} | {} | {} | {} |", s.group, s.count, signed_percent(s.bias), percent(s.median),
                     percent(s.p90), percent(s.worst)));
  if (options.per_case) {
    line("");
    line("| case | quantity | predicted | measured | error |");
    line("| --- | --- | ---: | ---: | ---: |");
    for (const auto& c : r.comparisons)
      if (c.primary)
        line(fmt::format("| {} | {} | {} | {} | {} |", c.run, quantity_name(c.quantity),
                         format_value(c.quantity, c.predicted), format_value(c.quantity, c.measured),
                         signed_percent(c.error)));
  }
  if (!r.unsupported.empty()) {
    line("");
    line("Not simulated:");
    line("");
    std::map<std::string, std::vector<std::string>> by_reason;
    for (const auto& u : r.unsupported)
      by_reason[u.why].push_back(u.name);
    for (const auto& [why, names] : by_reason)
      line(fmt::format("- {}: {}", why, fmt::join(names, ", ")));
  }
  if (!r.failed.empty()) {
    line("");
    line("Failed runs:");
    line("");
    for (const auto& f : r.failed)
      line(fmt::format("- {}: {}", f.name, f.why));
  }
  return out;
}

Json render_json(const ValidationResult& r)
{
  Json comparisons = Json::array();
  for (const auto& c : r.comparisons)
    comparisons.push_back({{"case", c.case_id},
                           {"run", c.run},
                           {"source", c.source},
                           {"gpu", c.gpu},
                           {"key", c.key},
                           {"quantity", quantity_name(c.quantity)},
                           {"measured", c.measured},
                           {"predicted", c.predicted},
                           {"error", c.error},
                           {"primary", c.primary},
                           {"kinds", c.kinds}});
  const auto stats = [](const std::vector<ErrorStats>& list) {
    Json a = Json::array();
    for (const auto& s : list)
      a.push_back({{"group", s.group},
                   {"quantity", s.quantity},
                   {"cases", s.count},
                   {"bias", s.bias},
                   {"median", s.median},
                   {"p90", s.p90},
                   {"worst", s.worst},
                   {"target_met", s.met}});
    return a;
  };
  const auto listed = [](const std::vector<Listed>& list) {
    Json a = Json::array();
    for (const auto& l : list)
      a.push_back({{"name", l.name}, {"why", l.why}});
    return a;
  };
  return {{"kind", "validation"},
          {"cases", r.cases},
          {"comparisons", comparisons},
          {"by_source", stats(r.by_source)},
          {"by_gpu", stats(r.by_gpu)},
          {"by_kind", stats(r.by_kind)},
          {"unsupported", listed(r.unsupported)},
          {"failed", listed(r.failed)},
          {"targets_met", r.targets_met()}};
}

} // namespace sim::validation
