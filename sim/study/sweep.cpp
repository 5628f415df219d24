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
#include "workload/graph_size.hpp"
#include "workload/step_screen.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <utility>

namespace sim::study {
namespace {

using core::Json;

double number_at(const Json& j, const char* pointer)
{
  const Json::json_pointer p(pointer);
  return j.contains(p) && j.at(p).is_number() ? j.at(p).get<double>() : 0.0;
}

// What makes two plans one layout: the resolved plan, the distributed optimizer and ZeRO-1 counting as one (both shard
// the optimizer state, and simtrain simulates them alike). With the same setup (scenario::same_setup), the same
// layout.
std::string plan_fingerprint(const scenario::Scenario& s)
{
  Json plan = report::plan_json(s.plan);
  if (plan.value("distributed_optimizer", false))
    plan["zero_stage"] = std::max(1, plan.value("zero_stage", 0));
  plan.erase("distributed_optimizer");
  return plan.dump();
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
        if (seen.insert(override_path(e)).second)
          r.columns.push_back(override_path(e));
    for (std::size_t i = 0; i < o_.layouts.size(); ++i)
      if (static_cast<int>(i % static_cast<std::size_t>(o_.shard_count)) == o_.shard_index - 1) {
        SweepRow row;
        row.index = static_cast<int>(i);
        row.layout = o_.layouts[i];
        r.rows.push_back(row);
      }
    variants_.emplace(o_.scenario, scenario::LoadOptions{o_.data_dir, o_.base_overrides, true});
    base_plan_ = plan_fingerprint(base());
    r.digest = base().digest;
    const auto resumable = resumable_rows(r.digest);
    std::vector<std::size_t> candidates;
    std::vector<double> best; // metrics of the ranked rows, best first
    for (std::size_t k = 0; k < r.rows.size(); ++k) {
      if (stopping()) {
        interrupt(r.rows[k]);
        continue;
      }
      if (!screen(r.rows[k])) {
        // (not a candidate)
      } else if (const auto earlier = resumable.find(r.rows[k].layout.overrides); earlier != resumable.end()) {
        take_earlier(r.rows[k], *earlier->second);
        best.push_back(metric(r.rows[k], o_.rank_by));
      } else {
        candidates.push_back(k);
      }
      ++progress_.screened;
      if (progress_.screened % 64 == 0)
        report();
    }
    for (const auto& row : r.rows) // a dp derived again to keep the GPU count gets its column
      for (const auto& e : row.layout.overrides)
        if (seen.insert(override_path(e)).second)
          r.columns.push_back(override_path(e));
    progress_.candidates = static_cast<int>(candidates.size());
    progress_.may_run = progress_.candidates;
    progress_.screening_s = seconds_since_start();
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&r](std::size_t a, std::size_t b) { return r.rows[a].bound_metric > r.rows[b].bound_metric; });
    std::sort(best.begin(), best.end(), std::greater<>());
    for (const std::size_t k : candidates) // until simulated or pruned (the reason of one over memory kept)
      r.rows[k].outcome = Outcome::INTERRUPTED;
    checkpoint(r, true);
    if (o_.screen_only)
      for (const std::size_t k : candidates) {
        r.rows[k].outcome = Outcome::PRUNED;
        r.rows[k].reason = "screened only";
      }
    else
      simulate(r, candidates, std::move(best));
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
      if (const auto dp = keep_gpu_count(row.layout.overrides, base().plan.tp, base().plan.pp, base().gpus))
        row.layout.overrides.push_back(*dp);
    } catch (const core::InputError& e) {
      row.outcome = Outcome::INVALID;
      row.reason = e.problem();
      return false;
    }
    scenario::Scenario s;
    try {
      s = variants_->variant(row.layout.overrides);
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
    if (!base_found_ && plan_fingerprint(s) == base_plan_ && scenario::same_setup(s, base()))
      row.baseline = base_found_ = true;
    const auto memory = memory::estimate_memory(s.model, s.plan, s.cluster);
    for (const auto& st : memory.per_stage) {
      row.peak_memory_bytes = std::max(row.peak_memory_bytes, st.peak_bytes);
      row.activation_bytes = std::max(row.activation_bytes, st.activations_bytes);
    }
    if (memory.oom) {
      const auto& tightest = memory.per_stage[static_cast<std::size_t>(memory.peak_stage)];
      row.memory_over_bytes = tightest.peak_bytes - tightest.capacity_bytes;
      row.reason = fmt::format("needs {} of {} per GPU (over by {})", core::format_bytes(tightest.peak_bytes),
                               core::format_bytes(tightest.capacity_bytes), core::format_bytes(row.memory_over_bytes));
    } else if (memory.host_oom) {
      row.memory_over_bytes = memory.host_node_bytes - memory.host_capacity_bytes;
      row.reason = fmt::format(
          "offloads {} per node to {} of host memory (over by {})", core::format_bytes(memory.host_node_bytes),
          core::format_bytes(memory.host_capacity_bytes), core::format_bytes(row.memory_over_bytes));
    } else if (memory.nvme_oom) {
      row.memory_over_bytes = memory.nvme_node_bytes - memory.nvme_capacity_bytes;
      row.reason =
          fmt::format("swaps {} per node to {} of NVMe drives (over by {})", core::format_bytes(memory.nvme_node_bytes),
                      core::format_bytes(memory.nvme_capacity_bytes), core::format_bytes(row.memory_over_bytes));
    }
    if (!row.reason.empty() && !o_.allow_oom) { // (--allow-oom: simulated all the same, the reason kept)
      row.outcome = Outcome::OUT_OF_MEMORY;
      return false;
    }
    // With GPUs of several kinds, the bound of the fastest everywhere (a bound still).
    Screened& screened_graph = graph_of(s);
    row.bound_s = std::numeric_limits<double>::infinity();
    for (const auto* gpu : topology::gpu_kinds(s.cluster)) {
      const auto screened = workload::screen_step(s.model, s.plan, *gpu, screened_graph.cache, &memory);
      row.bound_s = std::min(row.bound_s, screened.bound_s);
      row.estimate_s = std::max(row.estimate_s, screened.estimate_s); // (the slowest part sets the pace)
    }
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

  // The ranked rows of the sweep resumed, by their layout's overrides; refused when it swept another scenario.
  std::map<std::vector<std::string>, const SweepRow*> resumable_rows(const std::string& digest) const
  {
    std::map<std::vector<std::string>, const SweepRow*> out;
    if (!o_.resume)
      return out;
    if (o_.resume->digest != digest)
      throw core::InputError(
          {o_.resume_file, "/digest", ""},
          "a sweep of another scenario, or of this one before its files or --set changed: its results cannot be reused",
          o_.resume->digest.empty() ? std::string("no digest (written before sweeps recorded one)") : o_.resume->digest,
          fmt::format("{} (this scenario's, as resolved with --set)", digest));
    for (const auto& row : o_.resume->rows)
      if (row.outcome == Outcome::RANKED)
        out.emplace(row.layout.overrides, &row);
    return out;
  }

  // A layout ranked by the sweep resumed: its simulated numbers, this sweep's screening (bound, memory) beside them.
  static void take_earlier(SweepRow& row, const SweepRow& earlier)
  {
    row.outcome = Outcome::RANKED;
    row.resumed = true;
    row.schedule = earlier.schedule;
    row.virtual_stages = earlier.virtual_stages;
    row.microbatches = earlier.microbatches;
    row.step_time_s = earlier.step_time_s;
    row.tokens_per_s = earlier.tokens_per_s;
    row.mfu = earlier.mfu;
    row.bubble = earlier.bubble;
    row.bubble_theory = earlier.bubble_theory;
    row.tokens_per_usd = earlier.tokens_per_usd;
    row.cost_basis = earlier.cost_basis;
    row.time_to_train_s = earlier.time_to_train_s;
    row.cost_to_train_usd = earlier.cost_to_train_usd;
  }

  // Hands the result as it stands to on_checkpoint: forced, or when a few seconds have passed since the last.
  void checkpoint(const SweepResult& r, bool force)
  {
    if (!o_.on_checkpoint)
      return;
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_checkpoint_ < std::chrono::seconds(2))
      return;
    last_checkpoint_ = now;
    SweepResult copy = r;
    for (auto& row : copy.rows)
      if (row.outcome == Outcome::INTERRUPTED)
        row.reason = "not simulated yet: the sweep was still running when this was written";
    rank_rows(copy);
    o_.on_checkpoint(copy);
  }

  void simulate(SweepResult& r, const std::vector<std::size_t>& candidates, std::vector<double> best)
  {
    const core::WorkDir work({}, "simtrain-sweep");
    core::ProcessPool pool(o_.jobs, o_.in_process);
    pool.stop_on_signal([this] { return stopping(); });
    std::map<int, std::size_t> running;
    std::map<int, double> reserved; // per running simulation, its graph's estimated bytes
    double reserved_total = 0;
    std::size_t next = 0;
    const auto kth = [&]() { return best.size() >= static_cast<std::size_t>(o_.top) ? best[o_.top - 1] : -1.0; };
    for (;;) {
      while (!stopping() && pool.has_room() && next < candidates.size()) {
        SweepRow& row = r.rows[candidates[next]];
        ++next;
        if (!o_.simulate_all && !row.baseline && kth() >= 0 && row.bound_metric <= kth()) {
          row.outcome = Outcome::PRUNED;
          row.reason =
              fmt::format("its bound (kernels, the collectives passes wait for, fill and drain) is {}, at most {}: not "
                          "better than the {} best ({})",
                          core::format_time(row.bound_s), metric_text(row.bound_metric, o_.rank_by), ordinal(o_.top),
                          metric_text(kth(), o_.rank_by));
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
      if (!result.ok() && stopping()) {
        interrupt(row);
        continue;
      }
      settle(row, result);
      if (result.ok())
        best.insert(std::upper_bound(best.begin(), best.end(), metric(row, o_.rank_by), std::greater<>()),
                    metric(row, o_.rank_by));
      // (Candidates are in order of their bounds, best first.)
      const auto rest = candidates.begin() + static_cast<std::ptrdiff_t>(next);
      progress_.may_run = static_cast<int>(kth() < 0 ? candidates.end() - rest
                                                     : std::partition_point(rest, candidates.end(), [&](std::size_t k) {
                                                         return r.rows[k].bound_metric > kth();
                                                       }) - rest);
      report();
      checkpoint(r, false);
    }
    for (; next < candidates.size(); ++next) // (none unless stopped)
      interrupt(r.rows[candidates[next]]);
  }

  const scenario::Scenario& base() const { return variants_->base(); } // the scenario's own layout

  // The cluster graph of a layout's scenario and what screening learnt of it: built once per node count for the
  // scenario's own cluster (every layout of `--auto` has it), afresh for a layout on another.
  struct Screened {
    Screened(topology::ClusterSpec spec, int nodes)
        : cluster(std::move(spec)), graph(topology::build_graph(cluster, nodes)), cache(graph, cluster)
    {}
    topology::ClusterSpec cluster;
    topology::ClusterGraph graph;
    workload::ScreenCache cache;
  };
  Screened& graph_of(const scenario::Scenario& s)
  {
    if (!(s.cluster == base().cluster)) {
      other_graph_ = std::make_unique<Screened>(s.cluster, s.nodes);
      return *other_graph_;
    }
    auto it = graphs_.find(s.nodes);
    if (it == graphs_.end())
      it = graphs_.emplace(s.nodes, std::make_unique<Screened>(s.cluster, s.nodes)).first;
    return *it->second;
  }

  bool stopping() const { return o_.stop_requested && o_.stop_requested(); }

  double seconds_since_start() const
  {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }

  static void interrupt(SweepRow& row)
  {
    row.outcome = Outcome::INTERRUPTED;
    row.reason = "not simulated: the sweep was interrupted";
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
    const auto s = variants_->variant(row.layout.overrides);
    const auto whole = workload::estimate_graph_size(s.model, s.plan, s.cluster, {.fold = false});
    const auto folded = workload::estimate_graph_size(s.model, s.plan, s.cluster, {.fold = true});
    Footprint& f = it->second;
    f.bytes = whole.bytes;
    if (!folded.folded || o_.fold_only || whole.bytes > o_.memory.available_bytes / (2.0 * o_.jobs)) {
      f.not_folded = workload::fold_blocker(s.model, s.plan, s.cluster, graph_of(s).graph);
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
    run.allow_oom = o_.allow_oom;
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
    row.cost_basis = j.value(Json::json_pointer("/cost/basis"), "");
    row.time_to_train_s = number_at(j, "/cost/time_to_train_s");
    row.cost_to_train_usd = number_at(j, "/cost/cost_to_train_usd");
  }

  void report()
  {
    if (!o_.on_progress)
      return;
    progress_.elapsed_s = seconds_since_start();
    o_.on_progress(progress_);
  }

  const SweepOptions& o_;
  std::map<int, Footprint> footprints_;             // by layout index, once asked
  std::map<int, std::unique_ptr<Screened>> graphs_; // of the scenario's own cluster, by node count
  std::unique_ptr<Screened> other_graph_;
  std::optional<scenario::ScenarioVariants> variants_; // the scenario and its layouts
  std::string base_plan_;                              // its plan_fingerprint
  bool base_found_ = false;
  std::set<std::string> gpus_; // of the valid layouts
  std::chrono::steady_clock::time_point last_checkpoint_;
  SweepProgress progress_;
  std::chrono::steady_clock::time_point started_;
};

} // namespace

SweepResult run_sweep(const SweepOptions& options)
{
  return Sweep(options).run();
}

} // namespace sim::study
