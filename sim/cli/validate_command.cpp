#include "cli/commands.hpp"
#include "core/diagnostics.hpp"

#include "core/input_error.hpp"
#include "core/process_pool.hpp"
#include "scenario/document_tree.hpp"
#include "validation/ablation.hpp"
#include "validation/runner.hpp"
#include "validation/summary.hpp"

#include <chrono>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <sstream>

namespace sim::cli {
namespace fs = std::filesystem;
namespace {

// Replaces what lies between a Markdown file's `marker` lines (<!-- validation:begin --> ...; sim/validation/README.md)
// by `table`.
void update_readme(const fs::path& readme, const std::string& table, const std::string& marker = "validation")
{
  const std::string begin = fmt::format("<!-- {}:begin -->\n", marker);
  const std::string end = fmt::format("<!-- {}:end -->", marker);
  std::ifstream in(readme);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  const auto from = s.find(begin);
  const auto to = s.find(end);
  if (!in || from == std::string::npos || to == std::string::npos || to < from)
    throw sim::core::InputError({sim::core::display_path(readme), "", ""}, fmt::format("no {} section", marker), "",
                                fmt::format("the lines {}and {}", begin, end));
  s.replace(from + begin.size(), to - from - begin.size(), table);
  std::ofstream(readme) << s;
}

// Each validated GPU preset's catalogue name: "a100-sxm4-80gb" -> "A100-SXM4-80GB".
std::map<std::string, std::string> gpu_names(const sim::validation::ValidationResult& r, const fs::path& data_dir)
{
  std::map<std::string, std::string> names;
  for (const auto& c : r.comparisons)
    if (!names.count(c.gpu))
      names[c.gpu] =
          sim::core::read_json_file(sim::scenario::preset_path(data_dir, sim::scenario::ReferenceKind::GPU, c.gpu))
              .value("name", c.gpu);
  return names;
}

void write_summary(const fs::path& file, const ValidateArgs& a, const sim::validation::ValidationResult& r,
                   const fs::path& data_dir)
{
  std::string names; // the cases files' names, without folders
  for (const auto& c : a.cases)
    names += (names.empty() ? "" : " + ") + fs::path(c).filename().string();
  const auto summary = sim::validation::summarize(r, names, gpu_names(r, data_dir));
  if (file.has_parent_path())
    fs::create_directories(file.parent_path());
  std::ofstream out(file);
  out << sim::report::summary_json(summary).dump(2) << "\n";
  if (!out)
    throw sim::core::InputError({sim::core::display_path(file), "", ""}, "cannot be written");
}

// The validation once with every effect and once without each; the table of what each is worth.
int ablation(const ValidateArgs& a, const sim::validation::ValidateOptions& v)
{
  std::vector<sim::validation::AblationRow> rows;
  rows.push_back({"", sim::validation::run_validation(v)});
  for (const auto& effect : sim::validation::effects()) {
    const auto note = fmt::format("validating without {} ({})", effect.name, effect.what);
    sim::core::diagnose("progress", "simtrain: " + note, note);
    auto without = v;
    without.overrides.insert(without.overrides.end(), effect.overrides.begin(), effect.overrides.end());
    rows.push_back({effect.name, sim::validation::run_validation(without)});
  }
  const std::string table = sim::validation::render_ablation_markdown(rows);
  std::cout << table;
  if (!a.readme.empty())
    update_readme(a.readme, table, "ablation");
  return 0;
}

} // namespace

int validate(const ValidateArgs& a, const CommonOptions& o)
{
  const auto started = std::chrono::steady_clock::now();
  // The summary speaks for every case: a partial run must not write it.
  if (!a.summary.empty() && !a.only.empty())
    throw sim::core::InputError({"--summary", "", ""}, "needs a full run", "--only " + a.only,
                                "every case of the file (no --only)");
  // Every output is checked before the first case runs.
  if (!a.keep.empty())
    prepare_output_dir(a.keep, "--keep");
  for (const auto& [option, file] : {std::pair{"--markdown", a.markdown}, std::pair{"--summary", a.summary}})
    if (!file.empty() && fs::path(file).has_parent_path())
      prepare_output_dir(fs::path(file).parent_path(), option);
  sim::validation::ValidateOptions v;
  v.cases_files.assign(a.cases.begin(), a.cases.end());
  v.data_dir = o.data_dir;
  v.simtrain = core::self_path();
  v.jobs = a.jobs;
  v.only = a.only;
  v.keep_dir = a.keep;
  v.overrides = o.overrides;
  v.in_process = child_in_process();
  if (a.ablation)
    return ablation(a, v);
  const auto result = sim::validation::run_validation(v);
  if (o.format == "json") {
    std::cout << sim::validation::render_json(result).dump(2) << "\n";
  } else {
    std::cout << sim::validation::render_text(result);
    std::cout << fmt::format("\n{} cases, {} comparisons, {} not simulated, {} failed runs; {:.1f} s with {} jobs\n",
                             result.cases, result.comparisons.size(), result.unsupported.size(), result.failed.size(),
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), a.jobs);
  }
  if (!a.markdown.empty())
    std::ofstream(a.markdown) << sim::validation::render_markdown(result, {.per_case = true});
  if (!a.readme.empty())
    update_readme(a.readme, sim::validation::render_markdown(result));
  if (!a.brief_readme.empty())
    update_readme(a.brief_readme, sim::validation::render_markdown(result, {.brief = true}), "validation-brief");
  if (!a.summary.empty())
    write_summary(a.summary, a, result, o.data_dir);
  return a.check && !result.targets_met() ? 4 : 0;
}

} // namespace sim::cli
