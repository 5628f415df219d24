#include "study/sweep_result.hpp"

#include "core/input_error.hpp"
#include "core/units.hpp"
#include "report/validation_summary.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <map>
#include <set>

namespace sim::study {
namespace {

using core::Json;

std::string csv_field(const std::string& s)
{
  if (s.find_first_of(",\"\n") == std::string::npos)
    return s;
  std::string out = "\"";
  for (char c : s)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// A column heading: the path's last component, shortened for the plan keys a sweep varies most.
std::string heading(const std::string& path)
{
  static const std::map<std::string, std::string> shorter{{"plan.micro_batch", "mbs"},
                                                          {"plan.virtual_stages", "v"},
                                                          {"plan.zero_stage", "zero"},
                                                          {"plan.sequence_parallel", "sp"},
                                                          {"plan.global_batch", "batch"}};
  const auto it = shorter.find(path);
  return it == shorter.end() ? short_name(path) : it->second;
}

// The row's value of each column (empty when its layout does not set it).
std::vector<std::string> column_values(const SweepRow& row, const std::vector<std::string>& columns)
{
  std::map<std::string, std::string> values;
  for (const auto& o : row.layout.overrides)
    values[override_path(o)] = override_value(o);
  std::vector<std::string> out;
  for (const auto& c : columns)
    out.push_back(values.count(c) ? values[c] : "");
  return out;
}

// Where the scenario's own layout stands.
std::string baseline_text(const SweepResult& r)
{
  const auto it = std::find_if(r.rows.begin(), r.rows.end(), [](const SweepRow& x) { return x.baseline; });
  if (it == r.rows.end())
    return r.shard.empty() ? "  the scenario's own layout is not among these"
                           : "  the scenario's own layout is not in this shard";
  const std::string label = layout_label(it->layout).empty() ? "as it is" : layout_label(it->layout);
  if (it->outcome != Outcome::RANKED)
    return fmt::format("  the scenario's own layout ({}): {}: {}", label, outcome_name(it->outcome), it->reason);
  if (it->rank == 1)
    return fmt::format("  the scenario's own layout ({}) is the best (marked *)", label);
  const double best = metric(r.rows.front(), r.rank_by);
  const bool pruned =
      std::any_of(r.rows.begin(), r.rows.end(), [](const SweepRow& x) { return x.outcome == Outcome::PRUNED; });
  return fmt::format("  the scenario's own layout ({}) ranks {}{} (marked *): {}; the best is {:.1f}% better", label,
                     ordinal(it->rank), pruned ? " of those simulated" : "",
                     metric_text(metric(*it, r.rank_by), r.rank_by), 100.0 * (best / metric(*it, r.rank_by) - 1.0));
}

// The row's estimated step (blank where none was made).
std::string estimate_text(const SweepRow& row)
{
  return row.estimate_s > 0 ? core::format_time(row.estimate_s) : std::string();
}

// How far the estimates fell from the simulated steps of the layouts simulated (empty when none has both).
std::string estimate_error_text(const SweepResult& r)
{
  std::vector<double> errors;
  for (const auto& row : r.rows)
    if (row.outcome == Outcome::RANKED && row.estimate_s > 0 && row.step_time_s > 0)
      errors.push_back(row.estimate_s / row.step_time_s - 1.0);
  if (errors.empty())
    return "";
  std::vector<double> sizes(errors.size());
  std::transform(errors.begin(), errors.end(), sizes.begin(), [](double e) { return std::abs(e); });
  std::sort(sizes.begin(), sizes.end());
  const std::size_t n = sizes.size();
  const double median = n % 2 == 1 ? sizes[n / 2] : (sizes[n / 2 - 1] + sizes[n / 2]) / 2;
  const auto shorter = std::count_if(errors.begin(), errors.end(), [](double e) { return e < 0; });
  return fmt::format("  estimate (closed form, no simulation): {:.1f}% off the simulated step median, {:.1f}% worst, "
                     "over {} simulated layouts ({} of them short)",
                     100.0 * median, 100.0 * sizes.back(), n, shorter);
}

} // namespace

double metric(const SweepRow& row, RankBy by)
{
  return by == RankBy::TOKENS_PER_S ? row.tokens_per_s : row.tokens_per_usd;
}

std::string metric_text(double v, RankBy by)
{
  return by == RankBy::TOKENS_PER_S ? fmt::format("{:.0f} tokens/s", v) : fmt::format("{:.0f} tokens/$", v);
}

std::string ordinal(int n)
{
  const int tens = n % 100;
  const int ones = n % 10;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                       : ones == 1                ? "st"
                       : ones == 2                ? "nd"
                       : ones == 3                ? "rd"
                                                  : "th";
  return fmt::format("{}{}", n, suffix);
}

std::string_view outcome_name(Outcome o)
{
  return core::choice_name(o, outcome_choices);
}

std::string_view rank_by_name(RankBy r)
{
  return core::choice_name(r, rank_by_choices);
}

void rank_rows(SweepResult& r)
{
  std::stable_sort(r.rows.begin(), r.rows.end(), [&r](const SweepRow& a, const SweepRow& b) {
    const bool ra = a.outcome == Outcome::RANKED;
    const bool rb = b.outcome == Outcome::RANKED;
    if (ra != rb)
      return ra;
    if (ra && metric(a, r.rank_by) != metric(b, r.rank_by))
      return metric(a, r.rank_by) > metric(b, r.rank_by);
    return a.index < b.index;
  });
  int rank = 0;
  for (auto& row : r.rows)
    row.rank = row.outcome == Outcome::RANKED ? ++rank : 0;
}

SweepResult merge_sweeps(const std::vector<SweepResult>& parts)
{
  SweepResult merged;
  std::set<int> indices;
  for (const auto& p : parts) {
    if (merged.scenario.empty()) {
      merged.scenario = p.scenario;
      merged.rank_by = p.rank_by;
      merged.layouts_total = p.layouts_total;
      merged.top = p.top;
      merged.columns = p.columns;
      merged.digest = p.digest;
    } else if (p.rank_by != merged.rank_by || p.layouts_total != merged.layouts_total) {
      throw core::InputError(
          {"merge", "", ""}, "the parts are not shards of one sweep",
          fmt::format("{} layouts ranked by {}", p.layouts_total, rank_by_name(p.rank_by)),
          fmt::format("{} layouts ranked by {}", merged.layouts_total, rank_by_name(merged.rank_by)));
    }
    if (p.digest != merged.digest)
      throw core::InputError({"merge", "", ""},
                             "the parts are shards of sweeps of different scenarios (their files or "
                             "--set differ)",
                             fmt::format("digest {}", p.digest.empty() ? "none" : p.digest),
                             fmt::format("digest {}", merged.digest.empty() ? "none" : merged.digest));
    for (const auto& row : p.rows)
      if (indices.insert(row.index).second)
        merged.rows.push_back(row);
    for (const auto& v : p.validation)
      if (std::none_of(merged.validation.begin(), merged.validation.end(),
                       [&v](const Json& m) { return m.value("gpu", "") == v.value("gpu", ""); }))
        merged.validation.push_back(v);
  }
  std::sort(merged.validation.begin(), merged.validation.end(),
            [](const Json& x, const Json& y) { return x.value("gpu", "") < y.value("gpu", ""); });
  // Each shard marks its first layout equal to the scenario's own; the whole sweep's is the first of those.
  const SweepRow* first = nullptr;
  for (const auto& row : merged.rows)
    if (row.baseline && (!first || row.index < first->index))
      first = &row;
  for (auto& row : merged.rows)
    row.baseline = &row == first;
  rank_rows(merged);
  return merged;
}

std::string sweep_text(const SweepResult& r, const SweepTextOptions& options)
{
  std::string out;
  const auto line = [&out](const std::string& s) { out += s + "\n"; };
  std::map<Outcome, int> counts;
  for (const auto& row : r.rows)
    ++counts[row.outcome];
  line(fmt::format("sweep of {}: {} layouts{}", r.scenario, r.layouts_total,
                   r.shard.empty() ? "" : fmt::format(", shard {} ({} of them)", r.shard, r.rows.size())));
  for (const auto& v : r.validation)
    line("  " + report::accuracy_line(v));
  if (counts[Outcome::OUT_OF_MEMORY] > 0) {
    const SweepRow* closest = nullptr;
    for (const auto& row : r.rows)
      if (row.outcome == Outcome::OUT_OF_MEMORY && (!closest || row.memory_over_bytes < closest->memory_over_bytes))
        closest = &row;
    line(fmt::format("  {} {} not fit in GPU memory (closest: {}, over by {})", counts[Outcome::OUT_OF_MEMORY],
                     counts[Outcome::OUT_OF_MEMORY] == 1 ? "does" : "do", layout_label(closest->layout),
                     core::format_bytes(closest->memory_over_bytes)));
  }
  if (counts[Outcome::INVALID] > 0) {
    std::map<std::string, int> reasons;
    for (const auto& row : r.rows)
      if (row.outcome == Outcome::INVALID)
        ++reasons[row.reason];
    std::vector<std::pair<int, std::string>> sorted;
    for (const auto& [why, n] : reasons)
      sorted.emplace_back(-n, why);
    std::sort(sorted.begin(), sorted.end());
    line(fmt::format("  {} {}", counts[Outcome::INVALID],
                     counts[Outcome::INVALID] == 1 ? "is not a valid plan:" : "are not valid plans, most often:"));
    for (std::size_t i = 0; i < std::min<std::size_t>(3, sorted.size()); ++i)
      line(fmt::format("    {} x {}", -sorted[i].first, sorted[i].second));
  }
  const auto resumed = std::count_if(r.rows.begin(), r.rows.end(), [](const SweepRow& x) { return x.resumed; });
  line(fmt::format("  {} simulated{}{}", counts[Outcome::RANKED] + counts[Outcome::FAILED],
                   resumed > 0 ? fmt::format(" ({} of them taken from the sweep resumed)", resumed) : "",
                   counts[Outcome::PRUNED] > 0 ? fmt::format(", {} not simulated: their bound cannot beat the {} best",
                                                             counts[Outcome::PRUNED], ordinal(r.top))
                                               : ""));
  if (const auto estimates = estimate_error_text(r); !estimates.empty())
    line(estimates);
  std::set<std::string> bases;
  for (const auto& row : r.rows)
    if (row.outcome == Outcome::RANKED && !row.cost_basis.empty())
      bases.insert(row.cost_basis);
  if (bases.size() > 1)
    line(
        fmt::format("  warning: the layouts are priced on different bases ({}): tokens per dollar is not like for like",
                    fmt::join(bases, "; ")));
  if (counts[Outcome::INTERRUPTED] > 0)
    line(fmt::format("  {} not simulated: the sweep was interrupted (the ranking is of those simulated before)",
                     counts[Outcome::INTERRUPTED]));
  if (counts[Outcome::NOT_FOLDED] > 0)
    line(fmt::format("  {} left out by --fold-only: their GPUs would be simulated one by one",
                     counts[Outcome::NOT_FOLDED]));
  for (const auto& row : r.rows)
    if (row.outcome == Outcome::FAILED)
      line(fmt::format("  failed: {}: {}", layout_label(row.layout), row.reason));
  line(baseline_text(r));
  line("");
  const bool usd = std::any_of(r.rows.begin(), r.rows.end(), [](const SweepRow& x) { return x.tokens_per_usd > 0; });
  const bool budget =
      std::any_of(r.rows.begin(), r.rows.end(), [](const SweepRow& x) { return x.time_to_train_s > 0; });
  // The rows in the table: the top ranked ones, or every row in the order the layouts were given.
  std::vector<const SweepRow*> listed;
  for (const auto& row : r.rows)
    if (options.given_order || (row.rank > 0 && row.rank <= options.top))
      listed.push_back(&row);
  if (options.given_order)
    std::sort(listed.begin(), listed.end(), [](const SweepRow* a, const SweepRow* b) { return a->index < b->index; });
  // Columns that a listed row sets to a value (not just back to its default with null).
  std::vector<std::string> shown;
  std::vector<std::size_t> widths;
  std::string header = fmt::format("{:>4}", "rank");
  for (const auto& c : r.columns) {
    std::size_t w = heading(c).size();
    bool used = false;
    for (const auto* row : listed)
      for (const auto& v : column_values(*row, {c})) {
        w = std::max(w, v.size());
        used = used || (!v.empty() && v != "null");
      }
    if (!used)
      continue;
    shown.push_back(c);
    widths.push_back(w);
    header += fmt::format("  {:>{}}", heading(c), w);
  }
  header += fmt::format("  {:>11} {:>9} {:>10} {:>6} {:>14} {:>10} {:>11}{}", "step time", "estimate", "tokens/s",
                        "MFU", "bubble (th.)", "activations", "peak memory", usd ? "   tokens/$" : "");
  if (budget)
    header += fmt::format(" {:>14}{}", "time to train", usd ? fmt::format(" {:>13}", "cost to train") : "");
  if (listed.empty())
    return out;
  line(header);
  for (const auto* p : listed) {
    const SweepRow& row = *p;
    std::string text =
        fmt::format("{:>4}", (row.rank > 0 ? std::to_string(row.rank) : std::string("-")) + (row.baseline ? "*" : ""));
    const auto values = column_values(row, shown);
    for (std::size_t i = 0; i < values.size(); ++i)
      text += fmt::format("  {:>{}}", values[i], widths[i]);
    if (row.outcome != Outcome::RANKED) {
      line(fmt::format("{}  {}: {}", text, outcome_name(row.outcome), row.reason));
      continue;
    }
    text += fmt::format("  {:>11} {:>9} {:>10.0f} {:>5.1f}% {:>6.1f}% ({:>4.1f}%) {:>10} {:>11}",
                        core::format_time(row.step_time_s), estimate_text(row), row.tokens_per_s, 100.0 * row.mfu,
                        100.0 * row.bubble, 100.0 * row.bubble_theory, core::format_bytes(row.activation_bytes),
                        core::format_bytes(row.peak_memory_bytes));
    if (usd)
      text += fmt::format(" {:>11.0f}", row.tokens_per_usd);
    if (budget)
      text += fmt::format(" {:>14}{}", core::format_duration(row.time_to_train_s),
                          usd ? fmt::format(" {:>13}", core::format_usd(row.cost_to_train_usd)) : "");
    line(text);
  }
  return out;
}

std::string sweep_csv(const SweepResult& r)
{
  std::string out = "index,label";
  for (const auto& c : r.columns)
    out += "," + csv_field(c);
  out +=
      ",outcome,rank,baseline,schedule,virtual_stages,microbatches,step_time_s,tokens_per_s,mfu,bubble,bubble_theory,"
      "activation_bytes,peak_memory_bytes,"
      "memory_over_bytes,tokens_per_usd,time_to_train_s,cost_to_train_usd,bound_s,estimate_s,reason\n";
  for (const auto& row : r.rows) {
    out += fmt::format("{},{}", row.index, csv_field(layout_label(row.layout)));
    for (const auto& v : column_values(row, r.columns))
      out += "," + csv_field(v);
    // What was not simulated or not asked for (no price, no --tokens) is an empty field, not a zero.
    const bool simulated = row.outcome == Outcome::RANKED;
    const auto measured = [simulated](double v) { return simulated ? fmt::format("{}", v) : std::string(); };
    const auto given = [](double v) { return v > 0 ? fmt::format("{}", v) : std::string(); };
    out += fmt::format(",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", outcome_name(row.outcome),
                       row.rank, row.baseline, row.schedule, row.virtual_stages, row.microbatches,
                       measured(row.step_time_s), measured(row.tokens_per_s), measured(row.mfu), measured(row.bubble),
                       row.bubble_theory, given(row.activation_bytes), given(row.peak_memory_bytes),
                       given(row.memory_over_bytes), given(row.tokens_per_usd), given(row.time_to_train_s),
                       given(row.cost_to_train_usd), given(row.bound_s), given(row.estimate_s), csv_field(row.reason));
  }
  return out;
}

Json sweep_json(const SweepResult& r)
{
  Json rows = Json::array();
  for (const auto& row : r.rows)
    rows.push_back({{"index", row.index},
                    {"label", layout_label(row.layout)},
                    {"overrides", row.layout.overrides},
                    {"outcome", outcome_name(row.outcome)},
                    {"rank", row.rank},
                    {"baseline", row.baseline},
                    {"resumed", row.resumed},
                    {"schedule", row.schedule},
                    {"virtual_stages", row.virtual_stages},
                    {"microbatches", row.microbatches},
                    {"reason", row.reason},
                    {"step_time_s", row.step_time_s},
                    {"tokens_per_s", row.tokens_per_s},
                    {"mfu", row.mfu},
                    {"bubble", row.bubble},
                    {"bubble_theory", row.bubble_theory},
                    {"activation_bytes", row.activation_bytes},
                    {"peak_memory_bytes", row.peak_memory_bytes},
                    {"memory_over_bytes", row.memory_over_bytes},
                    {"tokens_per_usd", row.tokens_per_usd},
                    {"cost_basis", row.cost_basis},
                    {"time_to_train_s", row.time_to_train_s},
                    {"cost_to_train_usd", row.cost_to_train_usd},
                    {"bound_s", row.bound_s},
                    {"estimate_s", row.estimate_s}});
  return {{"kind", "sweep"},
          {"scenario", r.scenario},
          {"digest", r.digest},
          {"rank_by", rank_by_name(r.rank_by)},
          {"shard", r.shard},
          {"layouts_total", r.layouts_total},
          {"top", r.top},
          {"columns", r.columns},
          {"validation", r.validation},
          {"rows", rows}};
}

SweepResult sweep_from_json(const Json& j, const std::string& where)
{
  if (!j.is_object() || j.value("kind", "") != "sweep")
    throw core::InputError({where, "/kind", ""}, "not a sweep.json", R"(no "kind": "sweep")",
                           "the sweep.json of simtrain sweep --out");
  core::Provenance provenance;
  provenance.add_source("", where);
  core::ObjectReader file(core::Node(j, "", provenance));
  const double inf = std::numeric_limits<double>::infinity();
  const auto strings = [](const core::Node& list) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < list.array_size(); ++i)
      out.push_back(list.element(i).as_string());
    return out;
  };
  SweepResult r;
  file.allow({"kind"});
  r.scenario = file.text("scenario");
  r.digest = file.text_or("digest", ""); // absent from sweeps written before it was recorded
  r.rank_by = file.choice<RankBy>("rank_by", rank_by_choices);
  r.shard = file.text("shard");
  r.layouts_total = static_cast<int>(file.integer("layouts_total", 0, INT32_MAX));
  r.top = static_cast<int>(file.integer("top", 1, INT32_MAX));
  r.columns = strings(file.at("columns", "a list of paths"));
  if (const auto validation = file.find("validation")) { // absent from sweeps written before it was reported
    for (std::size_t i = 0; i < validation->array_size(); ++i)
      core::ObjectReader(validation->element(i)).text("gpu");
    r.validation = validation->json();
  }
  const core::Node rows = file.at("rows", "a list of layouts");
  for (std::size_t i = 0; i < rows.array_size(); ++i) {
    core::ObjectReader x(rows.element(i));
    SweepRow row;
    x.allow({"label"});
    row.index = static_cast<int>(x.integer("index", 0, INT32_MAX));
    row.layout.overrides = strings(x.at("overrides", "a list of PATH=VALUE"));
    row.outcome = x.choice<Outcome>("outcome", outcome_choices);
    row.reason = x.text("reason");
    row.rank = static_cast<int>(x.integer("rank", 0, INT32_MAX));
    row.baseline = x.at("baseline", "true or false").as_bool();
    row.resumed = x.flag_or("resumed", false);
    row.schedule = x.text("schedule");
    row.virtual_stages = static_cast<int>(x.integer("virtual_stages", 0, INT32_MAX));
    row.microbatches = static_cast<int>(x.integer("microbatches", 0, INT32_MAX));
    row.step_time_s = x.number("step_time_s", 0, inf);
    row.tokens_per_s = x.number("tokens_per_s", 0, inf);
    row.mfu = x.number("mfu", 0, inf);
    row.bubble = x.number("bubble", 0, 1);
    row.bubble_theory = x.number("bubble_theory", 0, 1);
    row.activation_bytes = x.number("activation_bytes", 0, inf);
    row.peak_memory_bytes = x.number("peak_memory_bytes", 0, inf);
    row.memory_over_bytes = x.number("memory_over_bytes", 0, inf);
    row.tokens_per_usd = x.number("tokens_per_usd", 0, inf);
    row.cost_basis = x.text_or("cost_basis", "");
    row.time_to_train_s = x.number("time_to_train_s", 0, inf);
    row.cost_to_train_usd = x.number("cost_to_train_usd", 0, inf);
    row.bound_s = x.number("bound_s", 0, inf);
    row.estimate_s = x.number_or("estimate_s", 0.0, 0, inf); // absent from sweeps written before it was estimated
    x.finish();
    r.rows.push_back(row);
  }
  file.finish();
  return r;
}

} // namespace sim::study
