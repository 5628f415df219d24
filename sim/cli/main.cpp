// simtrain's command line: sets up the app and its global options, fixes up the arguments, parses them with the
// subcommands (cli/subcommands.hpp) and maps errors to exit codes (0 ok, 1 bad input, 2 simulation failed,
// 3 internal error, 4 validation targets missed with --check).
#include "cli/commands.hpp"
#include "cli/subcommands.hpp"
#include "core/diagnostics.hpp"
#include "core/document.hpp"
#include "core/input_error.hpp"
#include "core/log.hpp"
#include "engine/replay.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <optional>

namespace {

struct GlobalOptions {
  std::string log_level = "warn";
  std::string log_format = "text";
};

void add_global_options(CLI::App& app, GlobalOptions& g)
{
  app.add_option("--log-level", g.log_level, "Diagnostics on stderr")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  app.add_option("--log-format", g.log_format,
                 "Errors, warnings, notes and progress on stderr as lines, or one JSON object per line (for pipelines)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

// Arguments end up in JSON reports and messages, which are UTF-8: the first one that is not (1-based).
std::optional<std::size_t> first_not_utf8(const std::vector<std::string>& args)
{
  for (std::size_t i = 0; i < args.size(); ++i)
    if (!sim::core::is_valid_utf8(args[i]))
      return i + 1;
  return std::nullopt;
}

// `import megatron ... -- ARGS` (or nemo, hf, accelerate): ARGS are the framework's, not simtrain's (CLI11 would read
// options among them). Takes them out of `args`.
std::vector<std::string> take_passthrough(std::vector<std::string>& args)
{
  std::vector<std::string> passthrough;
  if (const auto verb = std::find(args.begin(), args.end(), "import");
      verb != args.end() && std::next(verb) != args.end() &&
      (*std::next(verb) == "megatron" || *std::next(verb) == "nemo" || *std::next(verb) == "hf" ||
       *std::next(verb) == "accelerate")) {
    if (const auto dashes = std::find(verb, args.end(), "--"); dashes != args.end()) {
      passthrough.assign(std::next(dashes), args.end());
      args.erase(dashes, args.end());
    }
  }
  return passthrough;
}

bool is_command(const CLI::App& app, const std::string& word)
{
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == word)
      return true;
  return false;
}

// `simtrain` alone, or `simtrain SCENARIO.json`, runs the main job: `run` goes in after the global options.
void insert_default_run(std::vector<std::string>& args, const CLI::App& app)
{
  const bool has_subcommand =
      std::any_of(args.begin(), args.end(), [&app](const std::string& w) { return is_command(app, w); });
  const bool wants_help =
      std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "-h" || a == "--help"; });
  if (has_subcommand || wants_help)
    return;
  auto at = args.begin();
  while (at != args.end() && (*at == "--log-level" || *at == "--log-format"))
    at = std::next(at, std::min<std::ptrdiff_t>(2, std::distance(at, args.end())));
  args.insert(at, "run");
}

// `--data-dir DIR` before the command is the command's own option (`simtrain --data-dir D run ...`): moved after the
// command's name (after `import`'s framework).
void move_data_dir_after_command(std::vector<std::string>& args, const CLI::App& app)
{
  const auto command =
      std::find_if(args.begin(), args.end(), [&app](const std::string& w) { return is_command(app, w); });
  if (command == args.end())
    return;
  std::vector<std::string> moved;
  std::vector<std::string> before;
  for (auto it = args.begin(); it != command; ++it) {
    if (*it == "--data-dir" && std::next(it) != command) {
      moved.push_back(*it);
      moved.push_back(*++it);
    } else if (it->starts_with("--data-dir=")) {
      moved.push_back(*it);
    } else {
      before.push_back(*it);
    }
  }
  if (moved.empty())
    return;
  std::vector<std::string> after(command, args.end());
  const std::size_t at = after.size() > 1 && after.front() == "import" ? 2 : 1;
  after.insert(after.begin() + static_cast<std::ptrdiff_t>(at), moved.begin(), moved.end());
  before.insert(before.end(), after.begin(), after.end());
  args = std::move(before);
}

// Leftover arguments are collected, not thrown: CLI11 would list them in reverse.
void allow_extras(CLI::App& app)
{
  app.allow_extras();
  for (auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    sub->allow_extras();
    for (auto* nested : sub->get_subcommands([](const CLI::App*) { return true; }))
      nested->allow_extras();
  }
}

// Parses `args` in order (CLI11's vector overload wants them reversed, and lists leftovers so); an exit code when the
// command line was refused, or answered (--help).
std::optional<int> parse(CLI::App& app, char* program, std::vector<std::string>& args)
{
  std::vector<char*> argv{program};
  for (auto& a : args)
    argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) // --help: answered
      return app.exit(e);
    // One line, the shape of every other error (CLI11's own adds "Run with --help" on a second line, no "error:").
    sim::core::diagnose("error", fmt::format("error: {} (--help lists the options)", e.what()), e.what());
    return 1;
  }
  if (auto extra = app.remaining(true); !extra.empty()) {
    std::vector<std::string> in_order;
    for (const auto& a : args)
      if (const auto it = std::find(extra.begin(), extra.end(), a); it != extra.end()) {
        in_order.push_back(sim::core::clip(a, 40));
        extra.erase(it);
      }
    const std::string message = fmt::format("The following argument{} not expected: {}",
                                            in_order.size() == 1 ? " was" : "s were", fmt::join(in_order, " "));
    sim::core::diagnose("error", fmt::format("error: {} (--help lists the options)", message), message);
    return 1;
  }
  return std::nullopt;
}

// Runs the chosen subcommand; an error is printed and becomes its exit code.
int run(const std::vector<sim::cli::Subcommand>& subcommands, const GlobalOptions& g)
{
  try {
    sim::core::set_log_level(g.log_level);
    // (Both ways: a forked child runs its own command line in a copy of its parent's settings.)
    sim::core::set_diagnostic_format(g.log_format == "json" ? sim::core::DiagnosticFormat::JSON
                                                            : sim::core::DiagnosticFormat::TEXT);
    for (const auto& sub : subcommands)
      if (*sub.app)
        return sub.run();
  } catch (const sim::core::InputError& e) {
    sim::core::diagnose_error(e);
    return 1;
  } catch (const sim::engine::SimulationError& e) {
    sim::core::diagnose("error", std::string("simulation failed: ") + e.what(), e.what());
    return 2;
  } catch (const std::exception& e) {
    sim::core::diagnose("error", std::string("internal error: ") + e.what(), e.what());
    return 3;
  }
  return 0;
}

} // namespace

int sim::cli::command_line(std::vector<std::string> args)
{
  if (const auto bad = first_not_utf8(args)) {
    std::cerr << fmt::format("error: argument {}: not valid UTF-8 (expected text)\n", *bad);
    return 1;
  }
  const auto passthrough = take_passthrough(args);

  CLI::App app{"simtrain: a discrete-event simulator of large-model training clusters", "simtrain"};
  app.require_subcommand(1);
  GlobalOptions global;
  add_global_options(app, global);
  const auto subcommands = sim::cli::add_subcommands(app, passthrough);
  insert_default_run(args, app);
  move_data_dir_after_command(args, app);

  // Known before parsing, so that a command line CLI11 refuses is reported in the format asked for.
  sim::core::set_diagnostic_format(sim::core::DiagnosticFormat::TEXT);
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--log-format" && args[i + 1] == "json")
      sim::core::set_diagnostic_format(sim::core::DiagnosticFormat::JSON);

  allow_extras(app);
  std::string program = "simtrain";
  if (const auto refused = parse(app, program.data(), args))
    return *refused;
  return run(subcommands, global);
}

sim::core::InProcess sim::cli::child_in_process()
{
  if (const char* exec = std::getenv("SIMTRAIN_CHILD_EXEC");
      exec != nullptr && *exec != '\0' && exec != std::string("0"))
    return {};
  return [](const std::vector<std::string>& args) { return command_line(args); };
}

int main(int argc, char** argv)
{
  return sim::cli::command_line(std::vector<std::string>(argv + 1, argv + argc));
}
