// Megatron-LM's command line read as argparse reads it: the arguments given (NeMo's overrides as the arguments they
// stand for), typed access that names the argument in its errors, and what the model and plan readers share.
#pragma once

#include "importer/imported.hpp"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sim::importer {

// One argument as given: `--name v1 v2` or `--name=v`.
struct Given {
  std::string name{}; // without the dashes, '_' read as '-'
  std::vector<std::string> values{};
  bool used = false;
  std::string written{}; // as the command line spells it ("--nproc_per_node", "model.num_layers=32")
  bool idle = false;     // a NeMo override that changes nothing (a default, a learning rate): never matched

  // As the command line spells it: "--micro-batch-size 2", or the NeMo override as given.
  std::string spelt() const;
};

// Whether `token` is an option: --name or --name=value.
bool is_option(std::string_view token);

// argparse's way with a command line that has no positional arguments: an option takes the words up to the next
// option. Later repeats of an option win. NeMo's overrides stand for the Megatron-LM arguments they mean.
std::vector<Given> parse_arguments(std::span<const std::string> tokens);

// A whole number, written as such; nullopt for anything else.
std::optional<std::int64_t> parse_integer(const std::string& text);

// The arguments given, read by name: each read marks the argument understood; a value that does not fit throws an
// InputError naming the argument.
class Arguments {
 public:
  explicit Arguments(std::vector<Given> given) : given_(std::move(given)) {}

  // The last occurrence, marked as understood.
  Given* find(std::string_view name);
  bool flag(std::string_view name);
  std::optional<std::string> text(std::string_view name);
  std::optional<std::int64_t> integer(std::string_view name, std::int64_t min, std::int64_t max);
  std::int64_t integer_or(std::string_view name, std::int64_t fallback, std::int64_t min, std::int64_t max);
  std::int64_t required(std::string_view name, std::int64_t min, std::int64_t max);
  std::optional<double> number(std::string_view name, double min, double max);
  // A choice among `names`, spelt as Megatron-LM spells them.
  std::optional<std::string> choice(std::string_view name, std::initializer_list<std::string_view> names);

  [[noreturn]] static void fail(const Given& g, const std::string& problem, const std::string& found,
                                const std::string& expected);

  const std::vector<Given>& all() const { return given_; }

 private:
  std::vector<Given> given_;
};

// What the model and plan readers share: the arguments they read and the import they add to.
class MegatronReader {
 public:
  MegatronReader(Arguments& a, Imported& out) : a_(a), out_(out) {}

 protected:
  // --seq-length, else the required --decoder-seq-length.
  std::int64_t sequence_length();
  // Argument `name` is simulated otherwise than it says: noted with why, as the command line spells it.
  void not_simulated(std::string_view name, std::string why);
  // The scenario's value at `pointer` came from argument `name` (when given), so that a refusal can name it.
  void origin(const std::string& pointer, std::string_view name);

  Arguments& a_;
  Imported& out_;
};

} // namespace sim::importer
