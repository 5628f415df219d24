#include "report/pipeline_view.hpp"

#include "core/units.hpp"
#include "plan/parallel_plan.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <tuple>

namespace sim::report {
namespace {

using workload::Category;
using workload::TaskId;
using workload::TaskKind;

std::string letter(const PassBox& b)
{
  return b.weight ? "W" : b.backward ? "B" : "F";
}

std::string mb_label(const scenario::Scenario& s, const PassBox& b)
{
  return s.plan.virtual_stages > 1 ? fmt::format("{}.{}", b.microbatch, b.chunk) : std::to_string(b.microbatch);
}

std::string escape(const std::string& text)
{
  std::string out;
  for (char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

} // namespace

std::vector<PassBox> pass_boxes(const scenario::Scenario& s, const workload::TaskGraph& g, const engine::Timeline& tl)
{
  std::map<std::tuple<int, int, int, bool, bool>, PassBox> boxes;
  std::vector<int> stage_of_rank(static_cast<std::size_t>(g.gpus), -1);
  for (int stage = 0; stage < s.plan.pp; ++stage)
    stage_of_rank[static_cast<std::size_t>(plan::rank_of(s.plan, {0, 0, stage}))] = stage;
  for (TaskId t = 0; t < g.size(); ++t) {
    const auto& task = g[t];
    if (task.kind != TaskKind::COMPUTE || task.category == Category::OPTIMIZER)
      continue;
    const int stage = stage_of_rank[static_cast<std::size_t>(task.rank)];
    if (stage < 0)
      continue;
    const bool backward = task.category != Category::FORWARD;
    const bool weight = task.category == Category::WEIGHT;
    const auto key = std::make_tuple(stage, task.chunk, task.microbatch, backward, weight);
    auto [it, inserted] = boxes.try_emplace(key);
    PassBox& b = it->second;
    if (inserted) {
      b = PassBox{stage, task.chunk, task.microbatch, backward, weight, tl.tasks[t].start_s, tl.tasks[t].end_s, 0};
    } else {
      b.start_s = std::min(b.start_s, tl.tasks[t].start_s);
      b.end_s = std::max(b.end_s, tl.tasks[t].end_s);
    }
    if (task.category == Category::RECOMPUTE)
      b.recompute_s += tl.tasks[t].end_s - tl.tasks[t].start_s;
  }
  std::vector<PassBox> out;
  for (const auto& [key, box] : boxes)
    out.push_back(box);
  std::sort(out.begin(), out.end(), [](const PassBox& a, const PassBox& b) {
    return std::tie(a.stage, a.start_s) < std::tie(b.stage, b.start_s);
  });
  return out;
}

std::string pipeline_svg(const scenario::Scenario& s, const Metrics& m, const std::vector<PassBox>& boxes)
{
  const int stages = s.plan.pp;
  const double left = 90;
  const double top = 60;
  const double row = 34;
  const double width = 1100;
  const double span = m.pipeline_time_s > 0 ? m.pipeline_time_s : 1.0;
  const double scale = width / span;
  const double height = top + stages * row + (s.plan.dualpipe() ? 90 : 70);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" font-family=\"Helvetica, Arial, "
      "sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      left + width + 30, height);
  const std::string schedule(core::choice_name(s.plan.schedule, plan::schedule_choices));
  svg += fmt::format(
      "<text x=\"{}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}: {} schedule, p = {}, m = {}{}</text>\n", left,
      escape(s.name), schedule, s.plan.pp, s.plan.microbatches(),
      s.plan.virtual_stages > 1 ? fmt::format(", v = {}", s.plan.virtual_stages) : "");
  svg +=
      fmt::format("<text x=\"{}\" y=\"42\" fill=\"#444\">bubble {:.1f}% measured (mean over stages), {:.1f}% textbook; "
                  "pipeline phase {}</text>\n",
                  left, 100 * m.bubble_mean, 100 * m.bubble_theory, core::format_time(m.pipeline_time_s));
  for (int stage = 0; stage < stages; ++stage) {
    const double y = top + stage * row;
    svg += fmt::format("<text x=\"8\" y=\"{:.1f}\">stage {}</text>\n", y + row / 2 + 4, stage);
    svg +=
        fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{}\" height=\"{:.1f}\" fill=\"#f4f4f4\" stroke=\"#ddd\"/>\n",
                    left, y + 3, width, row - 6);
  }
  for (const PassBox& b : boxes) {
    const double x = left + b.start_s * scale;
    const double w = std::max(0.5, (b.end_s - b.start_s) * scale);
    const double y = top + b.stage * row + 3;
    const char* fill = b.weight ? "#a1d99b" : b.backward ? "#74c476" : "#6baed6";
    svg +=
        fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\" stroke=\"white\" "
                    "stroke-width=\"0.5\"><title>stage {} {} micro-batch {}{}: {} to {}</title></rect>\n",
                    x, y, w, row - 6, fill, b.stage,
                    b.weight     ? "weight gradients"
                    : b.backward ? "backward"
                                 : "forward",
                    b.microbatch, s.plan.virtual_stages > 1 ? fmt::format(" chunk {}", b.chunk) : "",
                    core::format_time(b.start_s), core::format_time(b.end_s));
    if (b.recompute_s > 0)
      svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"4\" fill=\"#e6550d\"/>\n", x, y,
                         std::max(0.5, b.recompute_s * scale));
    if (w > 14)
      svg += fmt::format(
          "<text x=\"{:.2f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"white\" font-size=\"11\">{}</text>\n",
          x + w / 2, y + (row - 6) / 2 + 4, mb_label(s, b));
  }
  // Time axis.
  const double axis = top + stages * row + 10;
  svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#333\"/>\n", left, axis,
                     left + width, axis);
  for (int i = 0; i <= 10; ++i) {
    const double x = left + width * i / 10.0;
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#333\"/>\n", x, axis, x,
                       axis + 5);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#444\">{}</text>\n", x, axis + 18,
                       core::format_time(span * i / 10.0));
  }
  const double legend = axis + 38;
  svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"14\" height=\"10\" fill=\"#6baed6\"/><text x=\"{}\" "
                     "y=\"{:.1f}\">forward</text>\n",
                     left, legend - 9, left + 18, legend);
  svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"14\" height=\"10\" fill=\"#74c476\"/><text x=\"{}\" "
                     "y=\"{:.1f}\">backward</text>\n",
                     left + 90, legend - 9, left + 108, legend);
  svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"14\" height=\"4\" fill=\"#e6550d\"/><text x=\"{}\" "
                     "y=\"{:.1f}\">recomputation</text>\n",
                     left + 190, legend - 6, left + 208, legend);
  if (s.plan.dualpipe())
    svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"14\" height=\"10\" fill=\"#a1d99b\"/><text x=\"{}\" "
                       "y=\"{:.1f}\">weight gradients, later</text>\n",
                       left, legend + 9, left + 18, legend + 18);
  svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"#444\">grey: idle (bubble, or waiting for communication); "
                     "numbers: micro-batch{}</text>\n",
                     left + 320, legend, s.plan.virtual_stages > 1 ? ".chunk" : "");
  svg += "</svg>\n";
  return svg;
}

namespace {

// A stage's passes in the order they ran, split where the schedule's phases change (Megatron-LM's names): warm-up,
// the forwards before the first one-forward-one-backward pair; steady state, the pairs; cool-down, the backwards
// after the last pair. A schedule without pairs (GPipe) has its forwards as warm-up and backwards as cool-down.
struct Phases {
  std::vector<const PassBox*> warmup, steady, cooldown;
};

Phases phases_of(const std::vector<const PassBox*>& passes)
{
  const std::size_t n = passes.size();
  std::size_t leading = 0; // forwards before the first backward
  while (leading < n && !passes[leading]->backward)
    ++leading;
  std::size_t trailing = 0; // backwards after the last forward
  while (trailing < n && passes[n - 1 - trailing]->backward)
    ++trailing;
  const bool pairs = leading + trailing < n; // forwards after the first backward
  const std::size_t warmup = pairs ? leading - 1 : leading;
  const std::size_t cooldown = pairs ? trailing - 1 : trailing;
  Phases p;
  for (std::size_t i = 0; i < n; ++i)
    (i < warmup ? p.warmup : i >= n - cooldown ? p.cooldown : p.steady).push_back(passes[i]);
  return p;
}

// "F3 B0 F4" within `width` characters: the first and last passes, and how many were left out between them.
std::string pass_list(const scenario::Scenario& s, const std::vector<const PassBox*>& passes, std::size_t width)
{
  std::vector<std::string> labels;
  for (const PassBox* b : passes)
    labels.push_back(letter(*b) + mb_label(s, *b));
  const auto joined = [&labels](std::size_t from, std::size_t to) {
    std::string out;
    for (std::size_t i = from; i < to; ++i)
      out += (out.empty() ? "" : " ") + labels[i];
    return out;
  };
  std::string all = joined(0, labels.size());
  if (all.size() <= width || labels.size() < 4)
    return all;
  std::size_t keep = 1;
  while (2 * (keep + 1) < labels.size() &&
         joined(0, keep + 1).size() + joined(labels.size() - keep - 1, labels.size()).size() + 16 <= width)
    ++keep;
  return fmt::format("{} ...{} more... {}", joined(0, keep), labels.size() - 2 * keep,
                     joined(labels.size() - keep, labels.size()));
}

} // namespace

std::string pipeline_text(const scenario::Scenario& s, const Metrics& m, const std::vector<PassBox>& boxes, int width)
{
  const double span = m.pipeline_time_s > 0 ? m.pipeline_time_s : 1.0;
  const auto w = static_cast<std::size_t>(std::max(width, 10));
  std::vector<std::vector<const PassBox*>> by_stage(static_cast<std::size_t>(s.plan.pp));
  for (const PassBox& b : boxes)
    by_stage[static_cast<std::size_t>(b.stage)].push_back(&b);

  // The timeline: each pass over the columns of its time; its label where the whole label fits in its own columns,
  // else its letter alone; never one label over another.
  std::string out = fmt::format("pipeline: {} across {} columns ({} per column); F forward, B backward, {}then the "
                                "micro-batch{}; -, ={} the rest of a pass, . idle\n",
                                core::format_time(span), w, core::format_time(span / static_cast<double>(w)),
                                s.plan.dualpipe() ? "W weight gradients left for later, " : "",
                                s.plan.virtual_stages > 1 ? ".chunk" : "", s.plan.dualpipe() ? ", ~" : " and");
  for (std::size_t st = 0; st < by_stage.size(); ++st) {
    std::string row(w, '.');
    std::vector<int> owner(w, -1);
    const auto& passes = by_stage[st];
    std::vector<std::pair<std::size_t, std::size_t>> cells(passes.size());
    for (std::size_t i = 0; i < passes.size(); ++i) {
      const PassBox& b = *passes[i];
      const double ws = static_cast<double>(w);
      const auto c0 =
          static_cast<std::size_t>(std::clamp(std::lround(b.start_s / span * ws), 0L, static_cast<long>(w) - 1));
      const auto c1 = static_cast<std::size_t>(
          std::clamp(std::lround(b.end_s / span * ws), static_cast<long>(c0) + 1, static_cast<long>(w)));
      cells[i] = {c0, c1};
      for (std::size_t c = c0; c < c1; ++c) {
        row[c] = b.weight ? '~' : b.backward ? '=' : '-';
        owner[c] = static_cast<int>(i);
      }
    }
    for (std::size_t i = 0; i < passes.size(); ++i) {
      const auto [c0, c1] = cells[i];
      std::size_t from = c0;
      while (from < c1 && owner[from] != static_cast<int>(i))
        ++from;
      std::size_t to = from;
      while (to < c1 && owner[to] == static_cast<int>(i))
        ++to;
      if (from == to)
        continue;
      const std::string label = letter(*passes[i]) + mb_label(s, *passes[i]);
      const std::string shown = label.size() <= to - from ? label : label.substr(0, 1);
      row.replace(from, shown.size(), shown);
    }
    out += fmt::format("stage {:>3} |{}|\n", st, row);
  }

  // The order of passes on each stage, phase by phase: what the timeline has no room to number.
  out += "order of passes per stage: warm-up | steady state | cool-down\n";
  for (std::size_t st = 0; st < by_stage.size(); ++st) {
    const Phases ph = phases_of(by_stage[st]);
    const std::size_t room = std::max<std::size_t>(w / 4, 20);
    out +=
        fmt::format("stage {:>3}  {} forward | {} | {} backward\n", st, ph.warmup.size(),
                    ph.steady.empty() ? std::string("no steady state") : fmt::format("{} pairs", ph.steady.size() / 2),
                    ph.cooldown.size());
    out += fmt::format("           {} | {} | {}\n", ph.warmup.empty() ? "-" : pass_list(s, ph.warmup, room),
                       ph.steady.empty() ? "-" : pass_list(s, ph.steady, 2 * room),
                       ph.cooldown.empty() ? "-" : pass_list(s, ph.cooldown, room));
  }
  out += fmt::format("bubble: {:.1f}% measured (mean over stages), {:.1f}% textbook\n", 100 * m.bubble_mean,
                     100 * m.bubble_theory);
  return out;
}

void write_trace(std::ostream& out, const scenario::Scenario& s, const workload::TaskGraph& g,
                 const topology::ClusterGraph& cluster, const engine::Timeline& tl)
{
  const auto& p = s.plan;
  // Keep the trace openable: beyond a million tasks, only data-parallel replica 0.
  const bool all = g.size() <= 1000000;
  std::vector<bool> simulated(static_cast<std::size_t>(g.gpus), false);
  for (int r : g.simulated)
    simulated[static_cast<std::size_t>(r)] = true;
  auto shown = [&](int rank) {
    return simulated[static_cast<std::size_t>(rank)] && (all || plan::coords_of(p, rank).dp == 0);
  };
  auto us = [](double seconds) { return seconds * 1e6; };
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  auto emit = [&](const core::Json& e) {
    out << (first ? "" : ",\n") << e.dump();
    first = false;
  };
  const bool offload = p.offload_optimizer != plan::OffloadDevice::NONE || p.offload_activations;
  const std::array<std::pair<int, const char*>, 7> streams{{{0, "compute"},
                                                            {1, "tp comm"},
                                                            {2, "pp comm"},
                                                            {3, "dp comm"},
                                                            {4, "ep comm"},
                                                            {5, "cp comm"},
                                                            {6, "host (offload)"}}};
  for (int r = 0; r < g.gpus; ++r) {
    if (!shown(r))
      continue;
    const auto c = plan::coords_of(p, r);
    emit({{"ph", "M"},
          {"name", "process_name"},
          {"pid", r},
          {"args", {{"name", fmt::format("GPU {} (stage {}, tp {}, dp {})", r, c.pp, c.tp, c.dp)}}}});
    emit({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r}, {"args", {{"sort_index", r}}}});
    for (const auto& [tid, name] : streams)
      if (tid < 6 || offload)
        emit({{"ph", "M"}, {"name", "thread_name"}, {"pid", r}, {"tid", tid}, {"args", {{"name", name}}}});
  }
  for (TaskId t = 0; t < g.size(); ++t) {
    const auto& task = g[t];
    if (task.kind == TaskKind::SYNC || !shown(task.rank))
      continue;
    const auto& timing = tl.tasks[t];
    core::Json e{{"ph", "X"},
                 {"pid", task.rank},
                 {"ts", us(timing.start_s)},
                 {"dur", us(timing.end_s - timing.start_s)},
                 {"name", g.label_text(task.label)},
                 {"cat", core::choice_name(task.category, workload::category_choices)}};
    core::Json args;
    if (task.microbatch >= 0)
      args["microbatch"] = task.microbatch;
    if (task.layer >= 0)
      args["layer"] = task.layer;
    if (task.kind == TaskKind::COMPUTE) {
      e["tid"] = 0;
      args["flops"] = task.flops;
    } else if (task.kind == TaskKind::HOST_COMPUTE || task.kind == TaskKind::HOST_COPY) {
      e["tid"] = 6;
      if (task.kind == TaskKind::HOST_COPY) {
        args["to"] = workload::is_nvme(task.peer) ? (workload::nvme_reads(task.peer) ? "host memory from nvme" : "nvme")
                     : task.peer == workload::copy_to_host ? "host memory"
                                                           : "gpu";
        if (workload::is_nvme(task.peer))
          args["drive"] = workload::nvme_drive(task.peer);
        args["bytes"] = task.bytes;
      }
    } else {
      e["tid"] = task.category == Category::TP   ? 1
                 : task.category == Category::PP ? 2
                 : task.category == Category::EP ? 4
                 : task.category == Category::CP ? 5
                                                 : 3;
      args["to"] = g.gpu_of(task.peer);
      args["bytes"] = task.bytes;
    }
    e["args"] = args.is_null() ? core::Json::object() : args;
    emit(e);
  }
  // Counters: the utilisation over time of the measured links that carried traffic (both directions summed).
  const auto& graph = cluster.graph;
  std::map<std::size_t, std::pair<std::string, double>> names; // link id -> name, bandwidth
  for (auto [e, end] = boost::edges(graph); e != end; ++e)
    names[graph[*e].id] = {cluster.link_name(*e), graph[*e].bandwidth};
  const int links_pid = g.gpus;
  bool announced = false;
  std::map<std::size_t, std::vector<std::pair<double, double>>> by_link;
  for (const auto& u : tl.usage)
    if (u.peak > 0)
      for (const auto& [time, rate] : *u.changes)
        by_link[u.link].emplace_back(time, u.forward ? rate : -rate - 1.0); // tag direction, merged below
  for (auto& [id, list] : by_link) {
    if (!announced) {
      emit({{"ph", "M"}, {"name", "process_name"}, {"pid", links_pid}, {"args", {{"name", "links (utilisation)"}}}});
      announced = true;
    }
    std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    double up = 0;
    double down = 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (list[i].second >= 0)
        up = list[i].second;
      else
        down = -list[i].second - 1.0;
      if (i + 1 < list.size() && list[i + 1].first == list[i].first)
        continue;
      emit({{"ph", "C"},
            {"pid", links_pid},
            {"name", names[id].first},
            {"ts", us(list[i].first)},
            {"args", {{"out", up / names[id].second}, {"in", down / names[id].second}}}});
    }
  }
  out << "\n]}\n";
}

} // namespace sim::report
