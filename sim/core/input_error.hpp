// Errors and warnings about user input: where (file, JSON pointer), what was found, what was expected.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace sim::core {

// Where a value came from. `set_by` names the command-line override that put it there, if any.
struct Location {
  std::string file;
  std::string pointer;
  std::string set_by;
  bool operator==(const Location&) const = default;
};

// Bad input. Renders as one line: `FILE:/pointer: problem (found X; expected Y)`.
class InputError : public std::runtime_error {
 public:
  InputError(Location where, std::string problem, const std::string& found = {}, const std::string& expected = {});

  const Location& where() const { return where_; }
  const std::string& problem() const { return problem_; }

 private:
  Location where_;
  std::string problem_;
};

// A plan or scenario that is well formed but cannot run as asked (indivisible layers, heads, batch).
class InfeasiblePlan : public InputError {
 public:
  using InputError::InputError;
};

// Something worth telling the user that does not stop the run (e.g. a TP group spanning nodes).
struct Warning {
  Location where;
  std::string message;
  bool operator==(const Warning&) const = default;
};

std::string format_location(const Location& where);
// `text` cut to `max_length` characters, with "..." where it was cut.
std::string clip(const std::string& text, std::size_t max_length = 80);
std::string format_warning(const Warning& warning);

} // namespace sim::core
