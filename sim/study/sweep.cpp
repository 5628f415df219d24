#include "study/sweep.hpp"

#include "study/child_run.hpp"
#include "study/compare.hpp"

#include "core/input_error.hpp"
#include "core/process_pool.hpp"
#include "core/units.hpp"
#include "memory/memory_model.hpp"
#include "report/analysis.hpp"
#include "report/cost.hpp"
#include "topology/cluster_graph.hpp"
#include "workload/builder.hpp"
#include "workload/compute_bound.hpp"
#include "workload/graph_size.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <set>

namespace sim::study {
namespace {

using core::Json;

std::string path_of(const std::string& expression)
{
  return expression.substr(0, expression.find('='));
}

std::string value_of(const std::string& expression)
{
  const auto eq = expression.find('=');
  return eq == std::string::npos ? "" : expression.substr(eq + 1);
}

// Splits at `sep` outside brackets, braces and double quotes.
std::vector<std::string> split_values(const std::string& text, char sep = ',')
{
  std::vector<std::string> out;
  std::string current;
  int depth = 0;
  bool quoted = false;
  for (char c : text) {
    if (c == '"')
      quoted = !quoted;
    else if (!quoted && (c == '[' || c == '{'))
      ++depth;
    else if (!quoted && (c == ']' || c == '}'))
      --depth;
    if (c == sep && depth == 0 && !quoted) {
      out.push_back(current);
      current.clear();
      continue;
    }
    current += c;
  }
  out.push_back(current);
  return out;
}

double metric(const SweepRow& row, RankBy by)
{
  return by == RankBy::TOKENS_PER_S ? row.tokens_per_s : row.tokens_per_usd;
}

double number_at(const Json& j, const char* pointer)
{
  const Json::json_pointer p(pointer);
  return j.contains(p) && j.at(p).is_number() ? j.at(p).get<double>() : 0.0;
}

std::string metric_text(double v, RankBy by)
{
  return by == RankBy::TOKENS_PER_S ? fmt::format("{:.0f} tokens/s", v) : fmt::format("{:.0f} tokens/$", v);
}

// 1st, 2nd, 3rd, 4th, 11th, 21st
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

std::string csv_field(const std::string& s)
{
  if (s.find_first_of(",\"\n") == std::string::npos)
    return s;
  std::string out = "\"";
  for (char c : s)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string short_name(const std::string& path)
{
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
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
    values[path_of(o)] = value_of(o);
  std::vector<std::string> out;
  for (const auto& c : columns)
    out.push_back(values.count(c) ? values[c] : "");
  return out;
}

// What makes two scenarios one layout: everything but the plan (model, cluster, GPU, cost: the setup), the GPU count
// and the plan. The distributed optimizer and ZeRO-1 count as one: both shard the optimizer state, and simtrain
// simulates them alike.
std::string layout_fingerprint(const scenario::Scenario& s)
{
  Json plan = report::plan_json(s.plan);
  if (plan.value("distributed_optimizer", false))
    plan["zero_stage"] = std::max(1, plan.value("zero_stage", 0));
  plan.erase("distributed_optimizer");
  return fmt::format("{}|{}|{}", s.setup_hash, s.gpus, plan.dump());
}

// Where a simulated layout's report, trace and timeline go under --save-runs.
std::string run_folder(const SweepRow& row)
{
  return fmt::format("{:04d}-{}", row.index, core::file_stem(layout_label(row.layout)));
}

class Sweep {
 public:
  explicit Sweep(const SweepOptions& o) : o_(o), started_(std::chrono::steady_clock::now()) {}

  SweepResult run()
  {
    SweepResult r;
    r.scenario = core::display_path(o_.scenario);
    r.rank_by = o_.rank_by;
    r.top = o_.top;
    r.layouts_total = static_cast<int>(o_.layouts.size());
    if (o_.shard_count > 1)
      r.shard = fmt::format("{}/{}", o_.shard_index, o_.shard_count);
    std::set<std::string> seen;
    for (const auto& l : o_.layouts)
      for (const auto& e : l.overrides)
        if (seen.insert(path_of(e)).second)
          r.columns.push_back(path_of(e));
    for (std::size_t i = 0; i < o_.layouts.size(); ++i)
      if (static_cast<int>(i % static_cast<std::size_t>(o_.shard_count)) == o_.shard_index - 1) {
        SweepRow row;
        row.index = static_cast<int>(i);
        row.layout = o_.layouts[i];
        r.rows.push_back(row);
      }
    const auto base = scenario::load_scenario(o_.scenario, scenario::LoadOptions{o_.data_dir, o_.base_overrides, true});
    base_ = layout_fingerprint(base);
    base_tp_ = base.plan.tp;
    base_pp_ = base.plan.pp;
    base_gpus_ = base.gpus;
    std::vector<std::size_t> candidates;
    for (std::size_t k = 0; k < r.rows.size(); ++k) {
      if (screen(r.rows[k]))
        candidates.push_back(k);
      ++progress_.screened;
      if (progress_.screened % 64 == 0)
        report();
    }
    for (const auto& row : r.rows) // a dp derived again to keep the GPU count gets its column
      for (const auto& e : row.layout.overrides)
        if (seen.insert(path_of(e)).second)
          r.columns.push_back(path_of(e));
    progress_.candidates = static_cast<int>(candidates.size());
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&r](std::size_t a, std::size_t b) { return r.rows[a].bound_metric > r.rows[b].bound_metric; });
    simulate(r, candidates);
    rank_rows(r);
    for (const auto& gpu : gpus_)
      r.validation.push_back(report::gpu_validation(o_.summary, gpu));
    report();
    return r;
  }

 private:
  // Loads the layout's scenario: an invalid plan or one that does not fit ends here; the rest get their bound.
  bool screen(SweepRow& row)
  {
    // A layout that changes tp or pp and says nothing of dp keeps the scenario's GPU count, as compare does.
    try {
      if (const auto dp = keep_gpu_count(row.layout.overrides, base_tp_, base_pp_, base_gpus_))
        row.layout.overrides.push_back(*dp);
    } catch (const core::InputError& e) {
      row.outcome = Outcome::INVALID;
      row.reason = e.problem();
      return false;
    }
    std::vector<std::string> overrides = o_.base_overrides;
    overrides.insert(overrides.end(), row.layout.overrides.begin(), row.layout.overrides.end());
    scenario::Scenario s;
    try {
      s = scenario::load_scenario(o_.scenario, scenario::LoadOptions{o_.data_dir, overrides, true});
    } catch (const core::InputError& e) {
      row.outcome = Outcome::INVALID;
      // The one-line error without the scenario's file name and the --set provenance: the row names its overrides.
      std::string reason = e.what();
      if (reason.starts_with(e.where().file + ":"))
        reason = reason.substr(e.where().file.size() + 1);
      row.reason = reason.substr(0, reason.find(" [set by "));
      return false;
    }
    for (const auto* gpu : topology::gpu_kinds(s.cluster)) // each part of a mixed cluster says how sure it is
      gpus_.insert(gpu->name);
    if (!base_found_ && layout_fingerprint(s) == base_)
      row.baseline = base_found_ = true;
    const auto memory = memory::estimate_memory(s.model, s.plan, s.cluster);
    for (const auto& st : memory.per_stage) {
      row.peak_memory_bytes = std::max(row.peak_memory_bytes, st.peak_bytes);
      row.activation_bytes = std::max(row.activation_bytes, st.activations_bytes);
    }
    if (memory.oom) {
      const auto& tightest = memory.per_stage[static_cast<std::size_t>(memory.peak_stage)];
      row.outcome = Outcome::OUT_OF_MEMORY;
      row.memory_over_bytes = tightest.peak_bytes - tightest.capacity_bytes;
      row.reason = fmt::format("needs {} of {} per GPU (over by {})", core::format_bytes(tightest.peak_bytes),
                               core::format_bytes(tightest.capacity_bytes), core::format_bytes(row.memory_over_bytes));
      return false;
    }
    // With GPUs of several kinds, the bound of the fastest everywhere (a bound still).
    const auto graph = topology::build_graph(s.cluster, s.nodes);
    row.bound_s = std::numeric_limits<double>::infinity();
    for (const auto* gpu : topology::gpu_kinds(s.cluster))
      row.bound_s = std::min(row.bound_s, workload::compute_lower_bound_s(s.model, s.plan, *gpu, graph));
    const double tokens = static_cast<double>(s.plan.global_batch) * static_cast<double>(s.plan.seq_length);
    row.bound_metric = tokens / row.bound_s;
    if (o_.rank_by == RankBy::TOKENS_PER_USD) {
      const auto cost = report::cost_metrics(s.economics, s.cluster, s.gpus, row.bound_metric);
      if (!cost.usd_per_gpu_hour)
        throw core::InputError({core::display_path(o_.scenario), "/cost", ""},
                               fmt::format("no price for {}: cannot rank by tokens per dollar", s.cluster.gpu.name), "",
                               "cost.usd_per_gpu_hour in the scenario, or list_price_usd in the GPU catalogue");
      row.bound_metric = cost.tokens_per_usd;
    }
    return true;
  }

  void simulate(SweepResult& r, const std::vector<std::size_t>& candidates)
  {
    const core::WorkDir work({}, "simtrain-sweep");
    core::ProcessPool pool(o_.jobs);
    std::vector<double> best; // metrics of the ranked rows, best first
    std::map<int, std::size_t> running;
    std::map<int, double> reserved; // per running simulation, its graph's estimated bytes
    double reserved_total = 0;
    std::size_t next = 0;
    const auto kth = [&]() { return best.size() >= static_cast<std::size_t>(o_.top) ? best[o_.top - 1] : -1.0; };
    for (;;) {
      while (pool.has_room() && next < candidates.size()) {
        SweepRow& row = r.rows[candidates[next]];
        ++next;
        if (!o_.simulate_all && !row.baseline && kth() >= 0 && row.bound_metric <= kth()) {
          row.outcome = Outcome::PRUNED;
          row.reason = fmt::format("its bound (kernels, all-to-alls, pipeline fill and drain) is {}, at most {}: not "
                                   "better than the {} best ({})",
                                   core::format_time(row.bound_s), metric_text(row.bound_metric, o_.rank_by),
                                   ordinal(o_.top), metric_text(kth(), o_.rank_by));
          ++progress_.pruned;
          continue;
        }
        const Footprint& f = footprint(row);
        if (o_.fold_only && !f.not_folded.empty()) {
          row.outcome = Outcome::NOT_FOLDED;
          row.reason = f.not_folded;
          continue;
        }
        // Beside the simulations running, its graph must fit in what they may take together; alone, it runs (and
        // is refused with the numbers if it cannot fit at all).
        if (!running.empty() && reserved_total + f.bytes > o_.memory.available_bytes) {
          --next;
          break;
        }
        const auto run = child_run(row, work.path());
        if (!pool.start(row.index, child_command(run))) {
          settle(row, read_child_result(run, -1));
          continue;
        }
        running[row.index] = candidates[next - 1];
        reserved[row.index] = f.bytes;
        reserved_total += f.bytes;
        ++progress_.running;
      }
      if (!pool.busy())
        break;
      const auto done = pool.wait_any();
      if (!done)
        break;
      SweepRow& row = r.rows[running.at(done->first)];
      running.erase(done->first);
      reserved_total = running.empty() ? 0.0 : reserved_total - reserved.at(done->first);
      reserved.erase(done->first);
      --progress_.running;
      ++progress_.simulated;
      const auto result = read_child_result(child_run(row, work.path()), done->second);
      settle(row, result);
      if (result.ok())
        best.insert(std::upper_bound(best.begin(), best.end(), metric(row, o_.rank_by), std::greater<>()),
                    metric(row, o_.rank_by));
      report();
    }
  }

  // What a layout's simulation will hold: its task graph's estimated bytes, folded or not, and why it does not fold
  // (empty when it does). Whether a graph that may fold does is known only from its folded graph (never the whole
  // one), built where it matters: under --fold-only, or when the unfolded graph would take a share of the memory.
  struct Footprint {
    double bytes = 0;
    std::string not_folded;
  };
  const Footprint& footprint(const SweepRow& row)
  {
    const auto [it, inserted] = footprints_.try_emplace(row.index);
    if (!inserted)
      return it->second;
    std::vector<std::string> overrides = o_.base_overrides;
    overrides.insert(overrides.end(), row.layout.overrides.begin(), row.layout.overrides.end());
    const auto s = scenario::load_scenario(o_.scenario, scenario::LoadOptions{o_.data_dir, overrides, true});
    const auto whole = workload::estimate_graph_size(s.model, s.plan, s.cluster, false);
    const auto folded = workload::estimate_graph_size(s.model, s.plan, s.cluster, true);
    Footprint& f = it->second;
    f.bytes = whole.bytes;
    if (!folded.folded || o_.fold_only || whole.bytes > o_.memory.available_bytes / (2.0 * o_.jobs)) {
      f.not_folded = workload::fold_blocker(s.model, s.plan, s.cluster, topology::build_graph(s.cluster, s.nodes));
      if (f.not_folded.empty())
        f.bytes = folded.bytes;
    }
    return f;
  }

  // The child `simtrain run` that simulates the row's layout, its report and log in `work`.
  ChildRun child_run(const SweepRow& row, const std::filesystem::path& work) const
  {
    ChildRun run;
    run.log_level = "off";
    run.scenario = o_.scenario;
    run.data_dir = o_.data_dir;
    run.overrides = o_.base_overrides;
    run.overrides.insert(run.overrides.end(), row.layout.overrides.begin(), row.layout.overrides.end());
    if (std::isfinite(o_.memory.available_bytes))
      run.memory_bytes = o_.memory.available_bytes;
    if (!o_.runs_dir.empty())
      run.out_dir = o_.runs_dir / run_folder(row);
    const auto stem = work / fmt::format("{}", row.index);
    run.stdout_file = stem.string() + ".json";
    run.stderr_file = stem.string() + ".log";
    return run;
  }

  // A simulated row: ranked from its report, or failed with the first line of its log.
  static void settle(SweepRow& row, const ChildResult& result)
  {
    if (!result.ok()) {
      row.outcome = Outcome::FAILED;
      row.reason = result.reason;
      return;
    }
    read_report(row, result.report);
  }

  static void read_report(SweepRow& row, const Json& j)
  {
    row.outcome = Outcome::RANKED;
    row.schedule = j.value(Json::json_pointer("/plan/schedule"), "");
    row.virtual_stages = static_cast<int>(number_at(j, "/plan/virtual_stages"));
    row.microbatches = static_cast<int>(number_at(j, "/plan/microbatches"));
    row.step_time_s = number_at(j, "/step_time_s");
    row.tokens_per_s = number_at(j, "/tokens_per_s");
    row.mfu = number_at(j, "/mfu");
    row.bubble = number_at(j, "/bubble/mean");
    row.bubble_theory = number_at(j, "/bubble/theory");
    row.tokens_per_usd = number_at(j, "/cost/tokens_per_usd");
    row.time_to_train_s = number_at(j, "/cost/time_to_train_s");
    row.cost_to_train_usd = number_at(j, "/cost/cost_to_train_usd");
  }

  void report()
  {
    if (!o_.on_progress)
      return;
    progress_.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    o_.on_progress(progress_);
  }

  const SweepOptions& o_;
  std::map<int, Footprint> footprints_; // by layout index, once asked
  std::string base_;                    // the scenario's own layout
  int base_tp_ = 1;
  int base_pp_ = 1;
  int base_gpus_ = 1;
  bool base_found_ = false;
  std::set<std::string> gpus_; // of the valid layouts
  SweepProgress progress_;
  std::chrono::steady_clock::time_point started_;
};

} // namespace

std::string layout_label(const Layout& layout)
{
  std::string out;
  for (const auto& e : layout.overrides) {
    std::string value = value_of(e);
    if (value == "null")
      continue;
    if (!out.empty())
      out += ' ';
    out += short_name(path_of(e)) + "=" + value;
  }
  return out;
}

std::vector<Layout> vary_layouts(const std::vector<std::string>& specs)
{
  std::vector<Layout> layouts{Layout{}};
  for (const auto& spec : specs) {
    const auto eq = spec.find('=');
    const auto paths = split_values(spec.substr(0, eq), ':');
    const auto values = eq == std::string::npos ? std::vector<std::string>{} : split_values(spec.substr(eq + 1));
    const auto empty = [](const std::string& v) { return v.empty(); };
    bool ok = !values.empty() && std::none_of(paths.begin(), paths.end(), empty);
    std::vector<std::vector<std::string>> tuples; // one value per path
    for (const auto& v : values) {
      tuples.push_back(split_values(v, ':'));
      ok =
          ok && tuples.back().size() == paths.size() && std::none_of(tuples.back().begin(), tuples.back().end(), empty);
    }
    if (!ok)
      throw core::InputError({"--vary " + spec, "", ""}, "not a variation", spec,
                             "PATH=V1,V2,... such as plan.tp=2,4,8, or linked paths P1:P2=A1:A2,B1:B2");
    std::vector<Layout> next;
    for (const auto& l : layouts)
      for (const auto& tuple : tuples) {
        Layout x = l;
        for (std::size_t i = 0; i < paths.size(); ++i)
          x.overrides.push_back(paths[i] + "=" + tuple[i]);
        next.push_back(x);
      }
    layouts = std::move(next);
  }
  return layouts;
}

// Expert layouts to try on tp x dp GPUs of a stage (dp: its data- and context-parallel ranks), as (ep, etp): experts
// split like the attention (etp = tp) or whole (etp = 1) where the expert FFN allows it, and expert-parallel sizes that
// are powers of two dividing the GPUs left and the expert count. A dense model has one: (1, tp).
std::vector<std::pair<int, int>> expert_layouts(const model::ModelSpec& m, int tp, int dp)
{
  if (!m.moe)
    return {{1, tp}};
  std::vector<std::pair<int, int>> out;
  for (int etp : tp > 1 ? std::vector<int>{tp, 1} : std::vector<int>{1}) {
    if (m.moe->expert_ffn_hidden_size % etp != 0)
      continue;
    const int left = tp * dp / etp;
    for (int ep = 1; ep <= left; ep *= 2)
      if (left % ep == 0 && m.moe->num_experts % ep == 0)
        out.emplace_back(ep, etp);
  }
  return out;
}

// Context-parallel sizes to try: powers of two leaving each GPU at least 4K tokens of a sequence (so short sequences
// try none), for the models simtrain runs context parallelism on (without MLA or sliding windows).
std::vector<int> context_parallel_sizes(const model::ModelSpec& m, std::int64_t seq_length)
{
  std::vector<int> out{1};
  if (!m.mla && m.sliding_window == 0)
    for (int cp = 2; seq_length / cp >= 4096 && seq_length % (2 * cp) == 0; cp *= 2)
      out.push_back(cp);
  return out;
}

std::vector<Layout> auto_layouts(const scenario::Scenario& base)
{
  const auto& m = base.model;
  const int gpus = base.gpus;
  const std::int64_t global_batch = base.plan.global_batch;
  std::vector<Layout> out;
  for (int tp = 1; tp <= base.cluster.node.gpus && tp <= gpus; tp *= 2) {
    if (m.num_attention_heads % tp != 0 || m.num_kv_heads % tp != 0 ||
        (m.ffn_hidden_size % tp != 0 && m.moe_layers() < m.num_layers) ||
        (m.moe && m.moe->shared_expert_ffn_hidden_size % tp != 0))
      continue;
    for (const int cp : context_parallel_sizes(m, base.plan.seq_length))
      for (int pp = 1; pp <= m.num_layers && tp * pp * cp <= gpus; ++pp) {
        if (gpus % (tp * pp * cp) != 0)
          continue;
        const int dp = gpus / (tp * pp * cp);
        if (global_batch % dp != 0)
          continue;
        for (int mbs : {1, 2, 4, 8, 16}) {
          if ((global_batch / dp) % mbs != 0)
            continue;
          const std::int64_t microbatches = global_batch / dp / mbs;
          std::vector<std::pair<std::string, int>> schedules{{"1f1b", 1}};
          if (pp > 1)
            for (int v : {2, 4})
              if (m.num_layers % (pp * v) == 0 && microbatches % pp == 0)
                schedules.emplace_back("interleaved", v);
          for (const auto& [schedule, v] : schedules)
            for (int zero = 0; zero <= (pp == 1 && cp == 1 && !base.plan.fp8() ? 3 : 1); ++zero)
              for (const char* recompute : {"none", "selective", "full"})
                for (bool sp : tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})
                  for (const auto& [ep, etp] : expert_layouts(m, tp, dp * cp)) {
                    if (m.moe && tp > 1 && !sp) // Megatron-core's MoE layers need sequence parallelism with TP
                      continue;
                    Layout l{{fmt::format("plan.tp={}", tp), fmt::format("plan.pp={}", pp),
                              fmt::format("plan.dp={}", dp), fmt::format("plan.micro_batch={}", mbs),
                              fmt::format("plan.schedule={}", schedule), fmt::format("plan.virtual_stages={}", v),
                              fmt::format("plan.zero_stage={}", zero), fmt::format("plan.recompute={}", recompute),
                              fmt::format("plan.sequence_parallel={}", sp ? "true" : "false"),
                              "plan.distributed_optimizer=null", "plan.layers_per_stage=null"}};
                    if (m.moe) {
                      l.overrides.push_back(fmt::format("plan.ep={}", ep));
                      l.overrides.push_back(fmt::format("plan.etp={}", etp));
                    }
                    if (base.plan.fp8_param_gather) // needs the distributed optimizer, which layouts leave out
                      l.overrides.push_back("plan.fp8_param_gather=null");
                    if (cp > 1 || base.plan.cp > 1)
                      l.overrides.push_back(fmt::format("plan.cp={}", cp));
                    out.push_back(std::move(l));
                  }
        }
      }
  }
  return out;
}

std::vector<Layout> combine(const std::vector<Layout>& a, const std::vector<Layout>& b)
{
  if (a.empty())
    return b;
  if (b.empty())
    return a;
  std::vector<Layout> out;
  for (const auto& x : a)
    for (const auto& y : b) {
      Layout l;
      bool agree = true;
      for (const auto& e : x.overrides) {
        const auto same = std::find_if(y.overrides.begin(), y.overrides.end(),
                                       [&](const std::string& f) { return path_of(f) == path_of(e); });
        if (same == y.overrides.end())
          l.overrides.push_back(e);
        else
          agree = agree && value_of(*same) == value_of(e);
      }
      if (!agree)
        continue;
      l.overrides.insert(l.overrides.end(), y.overrides.begin(), y.overrides.end());
      out.push_back(l);
    }
  return out;
}

std::string_view outcome_name(Outcome o)
{
  return core::choice_name(o, outcome_choices);
}

std::string_view rank_by_name(RankBy r)
{
  return core::choice_name(r, rank_by_choices);
}

SweepResult run_sweep(const SweepOptions& options)
{
  return Sweep(options).run();
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
    } else if (p.rank_by != merged.rank_by || p.layouts_total != merged.layouts_total) {
      throw core::InputError(
          {"merge", "", ""}, "the parts are not shards of one sweep",
          fmt::format("{} layouts ranked by {}", p.layouts_total, rank_by_name(p.rank_by)),
          fmt::format("{} layouts ranked by {}", merged.layouts_total, rank_by_name(merged.rank_by)));
    }
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

std::string sweep_text(const SweepResult& r, int top, bool given_order)
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
  line(fmt::format("  {} simulated{}", counts[Outcome::RANKED] + counts[Outcome::FAILED],
                   counts[Outcome::PRUNED] > 0 ? fmt::format(", {} not simulated: their bound cannot beat the {} best",
                                                             counts[Outcome::PRUNED], ordinal(r.top))
                                               : ""));
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
    if (given_order || (row.rank > 0 && row.rank <= top))
      listed.push_back(&row);
  if (given_order)
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
  header += fmt::format("  {:>11} {:>10} {:>6} {:>14} {:>10} {:>11}{}", "step time", "tokens/s", "MFU", "bubble (th.)",
                        "activations", "peak memory", usd ? "   tokens/$" : "");
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
    text += fmt::format("  {:>11} {:>10.0f} {:>5.1f}% {:>6.1f}% ({:>4.1f}%) {:>10} {:>11}",
                        core::format_time(row.step_time_s), row.tokens_per_s, 100.0 * row.mfu, 100.0 * row.bubble,
                        100.0 * row.bubble_theory, core::format_bytes(row.activation_bytes),
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
      "memory_over_bytes,tokens_per_usd,time_to_train_s,cost_to_train_usd,bound_s,reason\n";
  for (const auto& row : r.rows) {
    out += fmt::format("{},{}", row.index, csv_field(layout_label(row.layout)));
    for (const auto& v : column_values(row, r.columns))
      out += "," + csv_field(v);
    // What was not simulated or not asked for (no price, no --tokens) is an empty field, not a zero.
    const bool simulated = row.outcome == Outcome::RANKED;
    const auto measured = [simulated](double v) { return simulated ? fmt::format("{}", v) : std::string(); };
    const auto given = [](double v) { return v > 0 ? fmt::format("{}", v) : std::string(); };
    out += fmt::format(",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", outcome_name(row.outcome),
                       row.rank, row.baseline, row.schedule, row.virtual_stages, row.microbatches,
                       measured(row.step_time_s), measured(row.tokens_per_s), measured(row.mfu), measured(row.bubble),
                       row.bubble_theory, given(row.activation_bytes), given(row.peak_memory_bytes),
                       given(row.memory_over_bytes), given(row.tokens_per_usd), given(row.time_to_train_s),
                       given(row.cost_to_train_usd), given(row.bound_s), csv_field(row.reason));
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
                    {"time_to_train_s", row.time_to_train_s},
                    {"cost_to_train_usd", row.cost_to_train_usd},
                    {"bound_s", row.bound_s}});
  return {{"kind", "sweep"},      {"scenario", r.scenario},           {"rank_by", rank_by_name(r.rank_by)},
          {"shard", r.shard},     {"layouts_total", r.layouts_total}, {"top", r.top},
          {"columns", r.columns}, {"validation", r.validation},       {"rows", rows}};
}

SweepResult sweep_from_json(const Json& j, const std::string& where)
{
  if (!j.is_object() || j.value("kind", "") != "sweep")
    throw core::InputError({where, "/kind", ""}, "not a sweep.json", "no \"kind\": \"sweep\"",
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
    row.time_to_train_s = x.number("time_to_train_s", 0, inf);
    row.cost_to_train_usd = x.number("cost_to_train_usd", 0, inf);
    row.bound_s = x.number("bound_s", 0, inf);
    x.finish();
    r.rows.push_back(row);
  }
  file.finish();
  return r;
}

} // namespace sim::study
