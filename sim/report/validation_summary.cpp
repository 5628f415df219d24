#include "report/validation_summary.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <limits>
#include <set>

namespace sim::report {
namespace fs = std::filesystem;
namespace {

using core::Json;

constexpr const char* schema = "validation-summary/v1";
constexpr double inf = std::numeric_limits<double>::infinity();

Json accuracy_json(const Accuracy& a)
{
  return {{"runs", a.runs},
          {"comparisons", a.comparisons},
          {"median_abs_error", a.median_abs_error},
          {"worst_abs_error", a.worst_abs_error},
          {"bias", a.bias}};
}

Json group_json(const GroupAccuracy& g)
{
  Json j = accuracy_json(g.overall);
  j["sources"] = Json::array();
  for (const auto& s : g.sources) {
    Json x = accuracy_json(s.accuracy);
    x["source"] = s.source;
    x["quantity"] = s.quantity;
    j["sources"].push_back(x);
  }
  return j;
}

Accuracy read_accuracy(core::ObjectReader& r)
{
  Accuracy a;
  a.runs = static_cast<int>(r.integer("runs", 1, INT32_MAX));
  a.comparisons = static_cast<int>(r.integer("comparisons", a.runs, INT32_MAX));
  a.median_abs_error = r.number("median_abs_error", 0, inf);
  a.worst_abs_error = r.number("worst_abs_error", a.median_abs_error, inf);
  a.bias = r.number("bias", -1, inf); // predicted / measured - 1, and predictions are not negative
  return a;
}

GroupAccuracy read_group(const core::Node& node)
{
  core::ObjectReader r(node);
  GroupAccuracy g;
  g.overall = read_accuracy(r);
  const core::Node sources = r.at("sources", "a list of sources");
  for (std::size_t i = 0; i < sources.array_size(); ++i) {
    core::ObjectReader s(sources.element(i));
    const std::string source = s.text("source");
    const std::string quantity = s.text("quantity");
    g.sources.push_back({source, quantity, read_accuracy(s)});
    s.finish();
  }
  r.finish();
  return g;
}

GpuAccuracy read_gpu(const core::Node& node)
{
  core::ObjectReader r(node);
  GpuAccuracy g;
  g.preset = r.text("preset");
  g.runs = static_cast<int>(r.integer("runs", 1, INT32_MAX));
  g.comparisons = static_cast<int>(r.integer("comparisons", g.runs, INT32_MAX));
  if (auto time = r.find("time"))
    g.time = read_group(*time);
  if (auto memory = r.find("memory"))
    g.memory = read_group(*memory);
  if (!g.time && !g.memory)
    node.fail("no comparisons", R"(a "time" or a "memory" group)");
  if (auto kinds = r.find("kinds")) {
    if (!kinds->json().is_object())
      kinds->fail_found("wrong type", core::describe_type(kinds->json()), "an object: kind of run -> its accuracy");
    for (const auto& item : kinds->json().items()) {
      const core::Node kind = kinds->element_of(item.key());
      static const std::set<std::string> known{"dense", "MoE", "FP8", "CP"};
      if (known.count(item.key()) == 0)
        kind.fail_found("unknown kind of run", fmt::format("\"{}\"", item.key()), "dense, MoE, FP8 or CP");
      core::ObjectReader k(kind);
      g.kinds[item.key()] = read_accuracy(k);
      k.finish();
    }
  }
  r.finish();
  return g;
}

std::string percent(double x)
{
  return fmt::format("{:.1f}%", 100.0 * x);
}

// "1 published run", "93 published runs"
std::string runs_text(double runs, const char* what)
{
  return fmt::format("{:.0f} {}run{}", runs, what, runs == 1 ? "" : "s");
}

// "; MoE runs 15.5% off median, 59.1% worst over 8 published runs", or that none was validated.
std::string kinds_text(const Json& v)
{
  std::string out;
  if (!v.contains("kinds") || !v["kinds"].is_array())
    return out;
  for (const auto& k : v["kinds"]) {
    const std::string kind = k.value("kind", "?");
    if (!k.value("covered", false)) {
      out += fmt::format("; no published {} run validated on it", kind);
      continue;
    }
    out += fmt::format("; {} runs {} off median, {} worst over {}", kind, percent(k.value("median_abs_error", 0.0)),
                       percent(k.value("worst_abs_error", 0.0)), runs_text(k.value("runs", 0.0), "published "));
  }
  return out;
}

} // namespace

std::vector<std::string> run_kinds(bool moe, bool fp8, bool context_parallel)
{
  std::vector<std::string> kinds{moe ? "MoE" : "dense"};
  if (fp8)
    kinds.emplace_back("FP8");
  if (context_parallel)
    kinds.emplace_back("CP");
  return kinds;
}

Json summary_json(const Summary& s)
{
  Json gpus = Json::object();
  for (const auto& [name, g] : s.gpus) {
    Json j{{"preset", g.preset}, {"runs", g.runs}, {"comparisons", g.comparisons}};
    if (g.time)
      j["time"] = group_json(*g.time);
    if (g.memory)
      j["memory"] = group_json(*g.memory);
    if (!g.kinds.empty()) {
      j["kinds"] = Json::object();
      for (const auto& [kind, a] : g.kinds)
        j["kinds"][kind] = accuracy_json(a);
    }
    gpus[name] = j;
  }
  return {{"schema", schema},
          {"description", "written by `simtrain validate CASES --summary FILE` (tools/validate); the time group's "
                          "errors are errors of the step time"},
          {"cases_file", s.cases_file},
          {"cases", s.cases},
          {"comparisons", s.comparisons},
          {"unsupported", s.unsupported},
          {"failed", s.failed},
          {"gpus", gpus}};
}

Summary read_summary(const core::Node& root)
{
  core::ObjectReader r(root);
  core::expect_schema(r, schema);
  r.text_or("description", "");
  Summary s;
  s.cases_file = r.text("cases_file");
  s.cases = static_cast<int>(r.integer("cases", 0, INT32_MAX));
  s.comparisons = static_cast<int>(r.integer("comparisons", 0, INT32_MAX));
  s.unsupported = static_cast<int>(r.integer("unsupported", 0, s.cases));
  s.failed = static_cast<int>(r.integer("failed", 0, INT32_MAX));
  const std::string expected = "an object: GPU name -> its accuracy";
  const core::Node gpus = r.at("gpus", expected);
  if (!gpus.json().is_object())
    gpus.fail_found("wrong type", core::describe_type(gpus.json()), expected);
  for (const auto& item : gpus.json().items())
    s.gpus[item.key()] = read_gpu(gpus.element_of(item.key()));
  r.finish();
  return s;
}

fs::path summary_path(const fs::path& data_dir)
{
  return data_dir / "topologies" / "gpus" / "validation" / "summary.json";
}

SummaryFile load_summary(const fs::path& data_dir)
{
  const fs::path path = summary_path(data_dir);
  std::error_code ec;
  if (!fs::exists(path, ec))
    return {std::nullopt, "no validation summary (topologies/gpus/validation/summary.json; tools/validate writes it)",
            ""};
  try {
    const Json j = core::read_json_file(path);
    core::Provenance provenance;
    provenance.add_source("", core::display_path(path));
    return {read_summary(core::Node(j, "", provenance)), "", ""};
  } catch (const std::exception& e) {
    return {std::nullopt,
            "the validation summary is unreadable (simtrain check topologies/gpus/validation/summary.json)", e.what()};
  }
}

Json gpu_validation(const SummaryFile& file, const std::string& gpu, const std::vector<std::string>& kinds)
{
  Json j{{"gpu", gpu}, {"covered", false}, {"memory", nullptr}};
  if (!file.summary) {
    j["reason"] = file.problem;
    return j;
  }
  const auto it = file.summary->gpus.find(gpu);
  if (it == file.summary->gpus.end()) {
    j["reason"] = "no published run validates this GPU";
    return j;
  }
  if (it->second.memory)
    j["memory"] = group_json(*it->second.memory);
  if (!it->second.time) {
    j["reason"] = "no published run validates this GPU's step time";
    return j;
  }
  j.update(group_json(*it->second.time));
  j["covered"] = true;
  // The kinds of this run other than dense, where the summary tells kinds apart (one written before did not).
  const bool tells_kinds = std::any_of(file.summary->gpus.begin(), file.summary->gpus.end(),
                                       [](const auto& g) { return !g.second.kinds.empty(); });
  for (const auto& kind : kinds) {
    if (kind == "dense" || !tells_kinds)
      continue;
    const auto k = it->second.kinds.find(kind);
    Json entry = k == it->second.kinds.end() ? Json{{"covered", false}} : accuracy_json(k->second);
    entry["kind"] = kind;
    if (k != it->second.kinds.end())
      entry["covered"] = true;
    if (!j.contains("kinds"))
      j["kinds"] = Json::array();
    j["kinds"].push_back(entry);
  }
  return j;
}

std::string accuracy_line(const Json& v, const std::string& label)
{
  const auto number = [](const Json& j, const char* key) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
  };
  const auto text = [](const Json& j, const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string("?");
  };
  std::string memory;
  if (v.contains("memory") && v["memory"].is_object())
    memory = fmt::format("; memory within {} ({})", percent(number(v["memory"], "worst_abs_error")),
                         runs_text(number(v["memory"], "runs"), ""));
  const std::string head = fmt::format("accuracy{}: {}", label, text(v, "gpu"));
  if (!(v.contains("covered") && v["covered"].is_boolean() && v["covered"].get<bool>()))
    return fmt::format("{}: {}; treat step times as estimates{}", head, text(v, "reason"), memory);
  const double bias = number(v, "bias");
  const char* direction = bias < -0.01 ? " (mostly too short)" : bias > 0.01 ? " (mostly too long)" : "";
  return fmt::format("{} step times {} off median, {} worst over {}{}{}{}", head,
                     percent(number(v, "median_abs_error")), percent(number(v, "worst_abs_error")),
                     runs_text(number(v, "runs"), "published "), direction, kinds_text(v), memory);
}

} // namespace sim::report
