#include "study/compare.hpp"

#include "core/input_error.hpp"
#include "core/units.hpp"
#include "report/validation_summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <set>

namespace sim::study {
namespace {

using core::Json;

double number_at(const Json& j, const Json::json_pointer& p)
{
  return j.contains(p) && j.at(p).is_number() ? j.at(p).get<double>() : 0.0;
}

// A link class as the two reports name it ("NVLink", "NVLink / Infinity Fabric" between an NVIDIA and an AMD cluster).
std::string link_name(const Json& a, const Json& b, const std::string& cls)
{
  const Json::json_pointer p("/links/" + cls + "/label");
  const auto label = [&](const Json& r) { return r.contains(p) ? r.at(p).get<std::string>() : cls; };
  const std::string la = label(a);
  const std::string lb = label(b);
  return la == lb ? la : la + " / " + lb;
}

double peak_memory(const Json& r)
{
  double peak = 0;
  for (const auto& s : r.at("memory").at("per_stage"))
    peak = std::max(peak, s.at("peak_bytes").get<double>());
  return peak;
}

std::string format(Unit unit, double v)
{
  switch (unit) {
    case Unit::TIME:
      return core::format_time(v);
    case Unit::RATE:
      return v >= 1e6   ? fmt::format("{:.2f}M", v / 1e6)
             : v >= 1e3 ? fmt::format("{:.1f}k", v / 1e3)
                        : fmt::format("{:.2f}", v);
    case Unit::FLOP_RATE:
      return fmt::format("{:.1f} TF/s", v / 1e12);
    case Unit::FRACTION:
      return fmt::format("{:.1f}%", 100.0 * v);
    case Unit::BYTES:
      return core::format_bytes(v);
    case Unit::COUNT:
      return fmt::format("{:.0f}", v);
    case Unit::DURATION:
      return core::format_duration(v);
    case Unit::USD:
      return core::format_usd(v);
  }
  return "";
}

std::string delta(Unit unit, double a, double b)
{
  double d = b - a;
  if (std::abs(d) <= 1e-9 * std::max(std::abs(a), std::abs(b)))
    d = 0;
  if (unit == Unit::FRACTION)
    return fmt::format("{:+.1f} pt", 100.0 * d);
  std::string abs = d == 0 ? "0" : (d > 0 ? "+" : "-") + format(unit, std::abs(d));
  if (a != 0)
    abs += fmt::format(" ({:+.1f}%)", 100.0 * d / a);
  return abs;
}

const std::vector<std::pair<std::string, std::string>>& parts()
{
  static const std::vector<std::pair<std::string, std::string>> p{{"compute", "compute"},
                                                                  {"tp_exposed", "exposed TP communication"},
                                                                  {"pp_exposed", "exposed PP communication"},
                                                                  {"dp_exposed", "exposed DP communication"},
                                                                  {"ep_exposed", "exposed EP all-to-all"},
                                                                  {"cp_exposed", "exposed CP communication"},
                                                                  {"bubble", "pipeline bubble"},
                                                                  {"optimizer", "optimizer"},
                                                                  {"host", "waiting for the host"},
                                                                  {"offload_exposed", "exposed offload (host)"}};
  return p;
}

// "16 x A100-SXM4-80GB, Llama-2 13B, TP 8 x PP 2 x DP 1, micro-batch 1, global batch 16, sequence 4096, 1f1b"
std::string setup_line(const Json& r)
{
  const Json::json_pointer gpus("/cluster/gpus");
  const Json::json_pointer gpu("/cluster/gpu");
  const Json::json_pointer model("/model/name");
  const Json& p = r.contains("plan") ? r.at("plan") : Json::object();
  const auto integer = [&p](const char* key) { return p.contains(key) ? p.at(key).dump() : std::string("?"); };
  // Nodes of another GPU kind follow the part: "(nodes 0-0: H800-SXM5-80GB)".
  std::string kinds;
  const Json::json_pointer node_gpus("/cluster/node_gpus");
  if (r.contains(node_gpus) && r.at(node_gpus).is_array())
    for (const auto& k : r.at(node_gpus)) {
      const auto& nodes = k.value("nodes", Json::array());
      if (nodes.is_array() && nodes.size() == 2)
        kinds += fmt::format("{}nodes {}-{}: {}", kinds.empty() ? " (" : ", ", nodes[0].dump(), nodes[1].dump(),
                             k.value("gpu", std::string("?")));
    }
  if (!kinds.empty())
    kinds += ")";
  // Fine-tuning: the adapters' rank and a quantized base.
  std::string training;
  const auto rank = p.find("lora_rank");
  if (rank != p.end() && rank->is_number() && rank->get<double>() > 0) {
    const auto base = p.find("base_quantization");
    training = fmt::format(", LoRA rank {}{}", rank->dump(), base != p.end() && *base == "nf4" ? " (NF4 base)" : "");
  }
  return fmt::format("{} x {}{}, {}, TP {} x PP {} x DP {}, micro-batch {}, global batch {}, sequence {}, {}{}",
                     r.contains(gpus) ? r.at(gpus).dump() : "?", r.value(gpu, std::string("?")), kinds,
                     r.value(model, std::string("?")), integer("tp"), integer("pp"), integer("dp"),
                     integer("micro_batch"), integer("global_batch"), integer("seq_length"),
                     p.value("schedule", std::string("?")), training);
}

std::vector<std::string> like_for_like_warnings(const Json& a, const Json& b)
{
  std::vector<std::string> out;
  const auto differs = [&](const char* pointer, const char* what) {
    const Json::json_pointer p(pointer);
    const Json va = a.contains(p) ? a.at(p) : Json();
    const Json vb = b.contains(p) ? b.at(p) : Json();
    if (va != vb)
      out.push_back(fmt::format("A and B differ in {} ({} vs {}): per-step numbers are not like for like", what,
                                va.is_string() ? va.get<std::string>() : va.dump(),
                                vb.is_string() ? vb.get<std::string>() : vb.dump()));
  };
  differs("/cluster/gpus", "GPU count");
  differs("/model/name", "model");
  differs("/plan/global_batch", "global batch");
  differs("/plan/seq_length", "sequence length");
  const Json::json_pointer basis("/cost/basis");
  if (a.contains(basis) && b.contains(basis) && a.at(basis) != b.at(basis))
    out.push_back(fmt::format("A and B are priced on different bases ({} vs {}): tokens per dollar is not like for "
                              "like",
                              a.at(basis).get<std::string>(), b.at(basis).get<std::string>()));
  return out;
}

} // namespace

Comparison compare_reports(const Json& a, const Json& b, std::string a_name, std::string b_name)
{
  Comparison c;
  c.a_name = std::move(a_name);
  c.b_name = std::move(b_name);
  c.a_setup = setup_line(a);
  c.b_setup = setup_line(b);
  c.warnings = like_for_like_warnings(a, b);
  c.validation_a = a.contains("validation") ? a["validation"] : Json();
  c.validation_b = b.contains("validation") ? b["validation"] : Json();
  const auto add = [&](const std::string& label, const char* pointer, Unit unit, int indent = 0) {
    const Json::json_pointer p(pointer);
    c.rows.push_back({label, number_at(a, p), number_at(b, p), unit, indent});
  };
  add("step time", "/step_time_s", Unit::TIME);
  add("tokens/s", "/tokens_per_s", Unit::RATE);
  add("TFLOP/s per GPU", "/tflops_per_gpu", Unit::COUNT);
  c.rows.back().a *= 1e12;
  c.rows.back().b *= 1e12;
  c.rows.back().unit = Unit::FLOP_RATE;
  add("MFU", "/mfu", Unit::FRACTION);
  add("pipeline bubble (mean)", "/bubble/mean", Unit::FRACTION);
  c.rows.push_back({"peak memory per GPU", peak_memory(a), peak_memory(b), Unit::BYTES, 0});
  c.rows.push_back({"where the step goes", 0, 0, Unit::TIME, -1});
  for (const auto& [key, label] : parts())
    add(label, ("/breakdown_s/" + key).c_str(), Unit::TIME, 1);
  c.rows.push_back({"communication in flight", 0, 0, Unit::TIME, -1});
  for (const auto& [kind, name] :
       {std::pair{"tp", "TP"}, {"pp", "PP"}, {"dp", "DP"}, {"ep", "EP all-to-all"}, {"cp", "CP"}})
    add(fmt::format("{} (overlapped or not)", name), (std::string("/comm_s/") + kind).c_str(), Unit::TIME, 1);
  std::set<std::string> classes; // those that carry something on either side (a host's idle links are left out)
  for (const auto* r : {&a, &b})
    for (const auto& [cls, value] : r->at("links").items())
      if (value.value("bytes", 0.0) > 0)
        classes.insert(cls);
  if (!classes.empty())
    c.rows.push_back({"links: bytes, average utilisation", 0, 0, Unit::TIME, -1});
  for (const auto& cls : classes) {
    const auto name = link_name(a, b, cls);
    add(name + " bytes", ("/links/" + cls + "/bytes").c_str(), Unit::BYTES, 1);
    add(name + " average utilisation", ("/links/" + cls + "/avg_util").c_str(), Unit::FRACTION, 1);
  }
  const auto has = [&](const char* p) {
    const Json::json_pointer ptr(p);
    return a.contains(ptr) && b.contains(ptr) && a.at(ptr).is_number() && b.at(ptr).is_number();
  };
  if (has("/cost/tokens_per_usd") && number_at(a, Json::json_pointer("/cost/tokens_per_usd")) > 0) {
    c.rows.push_back({"cost", 0, 0, Unit::TIME, -1});
    add("tokens per dollar", "/cost/tokens_per_usd", Unit::RATE, 1);
    if (has("/cost/usd_per_million_tokens"))
      add("$ per million tokens", "/cost/usd_per_million_tokens", Unit::USD, 1);
    add("cluster $ per hour", "/cost/cluster_usd_per_hour", Unit::USD, 1);
    if (has("/cost/power_usd_per_hour") && number_at(a, Json::json_pointer("/cost/power_usd_per_hour")) +
                                                   number_at(b, Json::json_pointer("/cost/power_usd_per_hour")) >
                                               0) {
      add("  of which capital", "/cost/capital_usd_per_hour", Unit::USD, 1);
      add("    of which network", "/cost/network_usd_per_hour", Unit::USD, 1);
      add("  of which power", "/cost/power_usd_per_hour", Unit::USD, 1);
    }
  }
  if (has("/cost/time_to_train_s"))
    add("time to train", "/cost/time_to_train_s", Unit::DURATION, 1);

  // Which parts of the step moved, and by how much of the difference.
  const double step_a = number_at(a, Json::json_pointer("/step_time_s"));
  const double step_b = number_at(b, Json::json_pointer("/step_time_s"));
  const double diff = step_b - step_a;
  for (const auto& [key, label] : parts()) {
    const Json::json_pointer p("/breakdown_s/" + key);
    const double d = number_at(b, p) - number_at(a, p);
    if (d != 0)
      c.contributions.push_back({label, d, diff != 0 ? d / diff : 0.0});
  }
  std::sort(c.contributions.begin(), c.contributions.end(), [](const Contribution& x, const Contribution& y) {
    return std::abs(x.delta_s) != std::abs(y.delta_s) ? std::abs(x.delta_s) > std::abs(y.delta_s) : x.part < y.part;
  });

  if (step_a <= 0 || std::abs(diff) < 1e-9 * step_a) {
    c.explanation = "B takes as long as A.";
    return c;
  }
  std::string text =
      fmt::format("B is {:.1f}% {} than A ({}{} per step)", 100.0 * std::abs(diff) / step_a,
                  diff > 0 ? "slower" : "faster", diff > 0 ? "+" : "-", core::format_time(std::abs(diff)));
  std::vector<std::string> reasons;
  double covered = 0;
  for (const auto& k : c.contributions) {
    if (covered >= 0.8 || reasons.size() == 3)
      break;
    if (k.share <= 0)
      continue;
    reasons.push_back(fmt::format("{} {}{} ({:.0f}% of the difference)", k.part, k.delta_s > 0 ? "+" : "-",
                                  core::format_time(std::abs(k.delta_s)), 100.0 * k.share));
    covered += k.share;
  }
  if (!reasons.empty())
    text += ": " + fmt::format("{}", fmt::join(reasons, "; "));
  // The link class whose utilisation moved most.
  std::string busiest;
  double moved = 0;
  for (const auto& cls : classes) {
    const Json::json_pointer p("/links/" + cls + "/avg_util");
    const double d = number_at(b, p) - number_at(a, p);
    if (std::abs(d) > std::abs(moved)) {
      moved = d;
      busiest = fmt::format("; {} links average {:.1f}% busy in A, {:.1f}% in B", link_name(a, b, cls),
                            100.0 * number_at(a, p), 100.0 * number_at(b, p));
    }
  }
  c.explanation = text + busiest + ".";
  const double mem_a = peak_memory(a);
  const double mem_b = peak_memory(b);
  const bool oom_a = a.at("memory").at("oom").get<bool>();
  const bool oom_b = b.at("memory").at("oom").get<bool>();
  if (oom_a != oom_b)
    c.explanation += fmt::format(" {} does not fit in GPU memory ({} per GPU).", oom_a ? "A" : "B",
                                 core::format_bytes(oom_a ? mem_a : mem_b));
  return c;
}

std::string comparison_text(const Comparison& c)
{
  std::string out;
  const auto line = [&out](const std::string& s) { out += s + "\n"; };
  line(fmt::format("A: {}", c.a_name));
  line(fmt::format("   {}", c.a_setup));
  line(fmt::format("B: {}", c.b_name));
  line(fmt::format("   {}", c.b_setup));
  for (const auto& w : c.warnings)
    line("WARNING: " + w);
  if (c.validation_a == c.validation_b && !c.validation_a.is_null()) {
    line(report::accuracy_line(c.validation_a));
  } else {
    if (!c.validation_a.is_null())
      line(report::accuracy_line(c.validation_a, " (A)"));
    if (!c.validation_b.is_null())
      line(report::accuracy_line(c.validation_b, " (B)"));
  }
  line("");
  line(fmt::format("{:<38} {:>14} {:>14}  {}", "", "A", "B", "B - A"));
  for (const auto& r : c.rows) {
    if (r.indent < 0) {
      line(r.label);
      continue;
    }
    const std::string label = std::string(static_cast<std::size_t>(2 * r.indent), ' ') + r.label;
    line(fmt::format("{:<38} {:>14} {:>14}  {}", label, format(r.unit, r.a), format(r.unit, r.b),
                     delta(r.unit, r.a, r.b)));
  }
  line("");
  line(c.explanation);
  return out;
}

Json comparison_json(const Comparison& c, const Json& a, const Json& b)
{
  Json contributions = Json::array();
  for (const auto& k : c.contributions)
    contributions.push_back({{"part", k.part}, {"delta_s", k.delta_s}, {"share", k.share}});
  Json rows = Json::array();
  for (const auto& r : c.rows)
    if (r.indent >= 0)
      rows.push_back({{"label", r.label}, {"a", r.a}, {"b", r.b}, {"delta", r.b - r.a}});
  return {{"kind", "comparison"},
          {"a_name", c.a_name},
          {"b_name", c.b_name},
          {"rows", rows},
          {"contributions", contributions},
          {"explanation", c.explanation},
          {"setup", {{"a", c.a_setup}, {"b", c.b_setup}}},
          {"warnings", c.warnings},
          {"validation", {{"a", c.validation_a}, {"b", c.validation_b}}},
          {"a", a},
          {"b", b}};
}

SplitOverrides split_overrides(const std::vector<std::string>& overrides)
{
  std::map<std::string, int> seen;
  for (const auto& o : overrides)
    ++seen[o.substr(0, o.find('='))];
  SplitOverrides s;
  std::map<std::string, int> used;
  bool any = false;
  for (const auto& o : overrides) {
    const std::string path = o.substr(0, o.find('='));
    if (seen[path] == 1) {
      s.a.push_back(o);
      s.b.push_back(o);
      continue;
    }
    if (seen[path] != 2)
      throw core::InputError({"--set " + o, "", ""}, fmt::format("{} is given {} times", path, seen[path]), "",
                             "a path given once (both sides) or twice (A's value, then B's)");
    any = true;
    (used[path]++ == 0 ? s.a : s.b).push_back(o);
  }
  if (!any)
    throw core::InputError({"compare", "", ""}, "nothing to compare", "one scenario and no --set path given twice",
                           "two scenarios, or one with a --set path given twice: --set plan.tp=4 --set plan.tp=8");
  return s;
}

std::optional<std::string> keep_gpu_count(const std::vector<std::string>& side, int tp, int pp, int gpus)
{
  bool changes_layout = false;
  std::string changed;
  for (const auto& o : side) {
    const std::string path = o.substr(0, o.find('='));
    const std::string value = o.find('=') == std::string::npos ? "" : o.substr(o.find('=') + 1);
    if (path == "plan.dp" || path == "gpus" || path == "plan")
      return std::nullopt; // the side says how many GPUs it wants
    if (path != "plan.tp" && path != "plan.pp")
      continue;
    int parsed = 0;
    try {
      std::size_t used = 0;
      parsed = std::stoi(value, &used);
      if (used != value.size())
        return std::nullopt; // not an integer: the scenario loader says what is wrong with it
    } catch (const std::exception&) {
      return std::nullopt;
    }
    (path == "plan.tp" ? tp : pp) = parsed;
    changes_layout = true;
    changed = o;
  }
  if (!changes_layout || tp <= 0 || pp <= 0)
    return std::nullopt;
  const std::int64_t per_replica = static_cast<std::int64_t>(tp) * pp;
  if (gpus % per_replica != 0)
    throw core::InputError(
        {"--set " + changed, "", ""},
        fmt::format("tp*pp = {}*{} = {} does not divide the scenario's {} GPUs", tp, pp, per_replica, gpus), "",
        "a layout of the same GPUs, or --set plan.dp (or gpus) on that side to change the count");
  return fmt::format("plan.dp={}", gpus / per_replica);
}

} // namespace sim::study
