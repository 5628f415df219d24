#include "validation/runner.hpp"

#include "core/input_error.hpp"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ; // NOLINT: POSIX

namespace sim::validation {
namespace fs = std::filesystem;
namespace {

pid_t start(const Command& c)
{
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, c.stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&files, STDERR_FILENO, c.stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (const auto& a : c.argv)
    argv.push_back(const_cast<char*>(a.c_str())); // NOLINT: posix_spawn's signature
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  return rc == 0 ? pid : -1;
}

std::string read_text(const fs::path& path)
{
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string first_line(const std::string& text)
{
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

// A file name for a run: its name with anything but letters, digits, '.', '-' and '_' replaced.
std::string file_stem(const std::string& run)
{
  std::string s = run;
  for (char& ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_'))
      ch = '_';
  return s;
}

class WorkDir {
 public:
  explicit WorkDir(const fs::path& keep)
  {
    if (!keep.empty()) {
      fs::create_directories(keep);
      path_ = keep;
      return;
    }
    std::string pattern = (fs::temp_directory_path() / "simtrain-validate-XXXXXX").string();
    if (!mkdtemp(pattern.data()))
      throw core::InputError(core::Location{pattern, "", ""}, "cannot create a temporary folder", "",
                             "a writable /tmp");
    path_ = pattern;
    temporary_ = true;
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  ~WorkDir()
  {
    std::error_code ec;
    if (temporary_)
      fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  bool temporary_ = false;
};

// {"source": ..., "median": 0.3, "worst": 0.4} entries: a cases file's own accuracy bounds.
std::vector<Target> read_targets(const core::Json& list, const std::string& where)
{
  std::vector<Target> targets;
  const auto bad = [&where](std::size_t i, const std::string& found) {
    throw core::InputError(core::Location{where, core::pointer_append("/targets", i), ""}, "not a target", found,
                           "{\"source\": NAME, \"median\": FRACTION, \"worst\": FRACTION}");
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

std::vector<int> run_commands(const std::vector<Command>& commands, int parallel)
{
  std::vector<int> status(commands.size(), -1);
  std::map<pid_t, std::size_t> running;
  std::size_t next = 0;
  while (next < commands.size() || !running.empty()) {
    while (static_cast<int>(running.size()) < std::max(parallel, 1) && next < commands.size()) {
      const pid_t pid = start(commands[next]);
      if (pid > 0)
        running[pid] = next;
      ++next;
    }
    if (running.empty())
      continue;
    int raw = 0;
    const pid_t done = waitpid(-1, &raw, 0);
    if (done < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    const auto it = running.find(done);
    if (it == running.end())
      continue;
    status[it->second] = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    running.erase(it);
  }
  return status;
}

ValidationResult run_validation(const ValidateOptions& options)
{
  const core::Json file = core::read_json_file(options.cases_file);
  const core::Json& cases = file.is_object() && file.contains("cases") ? file["cases"] : file;
  const std::string where = core::display_path(options.cases_file);
  if (!cases.is_array())
    throw core::InputError(core::Location{where, file.is_object() ? "/cases" : "", ""}, "not a list of cases",
                           core::describe_type(cases), "an array of validation cases, or {\"cases\": [...]}");
  std::vector<Target> targets = options.targets;
  if (file.is_object() && file.contains("targets"))
    targets = read_targets(file["targets"], where);

  std::vector<CaseConversion> conversions;
  for (const auto& c : cases) {
    const std::string id = c.is_object() && c.contains("id") && c["id"].is_string() ? c["id"].get<std::string>() : "";
    if (!options.only.empty() && id.find(options.only) == std::string::npos)
      continue;
    conversions.push_back(convert_case(c, options.data_dir));
  }

  const WorkDir work(options.keep_dir);
  std::vector<Command> commands;
  std::vector<std::string> names;
  for (const auto& c : conversions)
    for (const auto& run : c.runs) {
      const fs::path stem = work.path() / file_stem(run.name);
      const fs::path scenario_file = fs::path(stem.string() + ".scenario.json");
      std::ofstream(scenario_file) << run.scenario.dump(2) << "\n";
      commands.push_back({{options.simtrain.string(), run.simulate ? "run" : "memory", scenario_file.string(),
                           "--format", "json", "--data-dir", options.data_dir.string()},
                          fs::path(stem.string() + ".report.json"),
                          fs::path(stem.string() + ".log")});
      names.push_back(run.name);
    }

  const auto status = run_commands(commands, options.jobs);
  std::map<std::string, RunOutcome> outcomes;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    RunOutcome o;
    if (status[i] != 0) {
      const std::string log = first_line(read_text(commands[i].stderr_file));
      o.failure = status[i] < 0 ? "could not start simtrain" : fmt::format("exit {}: {}", status[i], log);
    } else {
      try {
        o.report = core::Json::parse(read_text(commands[i].stdout_file));
        o.ok = true;
      } catch (const core::Json::exception& e) {
        o.failure = fmt::format("unreadable report: {}", e.what());
      }
    }
    outcomes[names[i]] = std::move(o);
  }
  return compare(conversions, outcomes, targets);
}

} // namespace sim::validation
