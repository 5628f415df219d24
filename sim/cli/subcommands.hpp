// simtrain's subcommands on the command line: each registers itself and its options on the CLI11 app, holds them,
// and runs its command (cli/commands.hpp) once the command line is parsed. A new command is one more add_* function
// in subcommands.cpp and its line in add_subcommands.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
} // namespace CLI

namespace sim::cli {

struct Subcommand {
  CLI::App* app = nullptr;  // chosen when *app is true after parsing
  std::function<int()> run; // its exit code; throws what main maps to one
};

// Every subcommand, in the order --help lists them. `passthrough`: the arguments after `--` of `import megatron` or
// `import nemo` (the framework's own, which simtrain does not parse).
std::vector<Subcommand> add_subcommands(CLI::App& app, const std::vector<std::string>& passthrough);

} // namespace sim::cli
