#include "validation/runner.hpp"

#include "core/input_error.hpp"
#include "core/process_pool.hpp"
#include "study/child_run.hpp"

#include <fmt/format.h>
#include <fstream>
#include <map>

namespace sim::validation {
namespace fs = std::filesystem;
namespace {

// {"source": ..., "median": 0.3, "worst": 0.4} entries: a cases file's own accuracy bounds.
std::vector<Target> read_targets(const core::Json& list, const std::string& where)
{
  std::vector<Target> targets;
  const auto bad = [&where](std::size_t i, const std::string& found) {
    throw core::InputError(core::Location{where, core::pointer_append("/targets", i), ""}, "not a target", found,
                           R"({"source": NAME, "median": FRACTION, "worst": FRACTION})");
  };
  if (!list.is_array())
    throw core::InputError(core::Location{where, "/targets", ""}, "not a list of targets", core::describe_type(list),
                           "an array");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& t = list[i];
    if (!t.is_object() || !t.contains("source") || !t["source"].is_string())
      bad(i, core::render_value(t));
    Target target{t["source"].get<std::string>(), 1.0, 1.0};
    for (const char* key : {"median", "worst"})
      if (t.contains(key)) {
        if (!t[key].is_number() || t[key].get<double>() <= 0)
          bad(i, core::render_value(t));
        (key[0] == 'm' ? target.median : target.worst) = t[key].get<double>();
      }
    targets.push_back(target);
  }
  return targets;
}

} // namespace

ValidationResult run_validation(const ValidateOptions& options)
{
  // A file's own targets replace the default ones (those of every file that has them, together).
  std::vector<Target> targets;
  bool own_targets = false;
  std::vector<CaseConversion> conversions;
  for (const auto& cases_file : options.cases_files) {
    const core::Json file = core::read_json_file(cases_file);
    const core::Json& cases = file.is_object() && file.contains("cases") ? file["cases"] : file;
    const std::string where = core::display_path(cases_file);
    if (!cases.is_array())
      throw core::InputError(core::Location{where, file.is_object() ? "/cases" : "", ""}, "not a list of cases",
                             core::describe_type(cases), "an array of validation cases, or {\"cases\": [...]}");
    if (file.is_object() && file.contains("targets")) {
      own_targets = true;
      for (auto& t : read_targets(file["targets"], where))
        targets.push_back(std::move(t));
    }
    for (const auto& c : cases) {
      const std::string id = c.is_object() && c.contains("id") && c["id"].is_string() ? c["id"].get<std::string>() : "";
      if (!options.only.empty() && id.find(options.only) == std::string::npos)
        continue;
      conversions.push_back(convert_case(c, options.data_dir));
    }
  }
  if (!own_targets)
    targets = options.targets;

  const core::WorkDir work(options.keep_dir, "simtrain-validate");
  std::vector<study::ChildRun> children;
  std::vector<std::string> names;
  for (const auto& c : conversions) {
    // What the conversion chose for what the case leaves open (and what it did not compare), beside its scenarios.
    core::Json record{{"id", c.id},           {"source", c.source},
                      {"gpu", c.gpu},         {"assumptions", c.assumptions},
                      {"ignored", c.ignored}, {"unsupported", c.unsupported}};
    std::ofstream(work.path() / (core::file_stem(c.id) + ".conversion.json")) << record.dump(2) << "\n";
    for (const auto& run : c.runs) {
      const fs::path stem = work.path() / core::file_stem(run.name);
      study::ChildRun child;
      child.command = run.simulate ? study::ChildCommand::RUN : study::ChildCommand::MEMORY;
      child.scenario = stem.string() + ".scenario.json";
      std::ofstream(child.scenario) << run.scenario.dump(2) << "\n";
      child.data_dir = options.data_dir;
      // A published run ran: where the memory model says it could not, that is its error, reported beside the time.
      child.allow_oom = run.simulate;
      child.overrides = options.overrides;
      child.stdout_file = stem.string() + ".report.json";
      child.stderr_file = stem.string() + ".log";
      child.simtrain = options.simtrain;
      children.push_back(std::move(child));
      names.push_back(run.name);
    }
  }

  const auto status = study::run_children(children, options.jobs, options.in_process);
  std::map<std::string, RunOutcome> outcomes;
  for (std::size_t i = 0; i < children.size(); ++i) {
    RunOutcome o;
    try {
      const auto result = study::read_child_result(children[i], status[i]);
      if (!result.ok()) {
        o.failure = result.status < 0 ? result.reason : fmt::format("exit {}: {}", result.status, result.reason);
      } else {
        o.report = result.report;
        o.ok = true;
      }
    } catch (const core::Json::exception& e) {
      o.failure = fmt::format("unreadable report: {}", e.what());
    }
    outcomes[names[i]] = std::move(o);
  }
  return compare(conversions, outcomes, targets);
}

} // namespace sim::validation
