// JSON documents and where each value came from: which file, which pointer, which --set override.
#pragma once

#include "core/input_error.hpp"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace sim::core {

using Json = nlohmann::json;

// RFC 6901 pointers: escapes `~` and `/` in keys.
std::string pointer_append(std::string_view pointer, std::string_view key);
std::string pointer_append(std::string_view pointer, std::size_t index);

// Maps pointers of a composed tree (a scenario with its model and topology inlined) back to files.
class Provenance {
 public:
  // Values at and below `tree_pointer` came from `file`, at `file_pointer` plus the rest of the path.
  void add_source(const std::string& tree_pointer, std::string file, std::string file_pointer = "");
  // The value at `tree_pointer` was put there by `--set expression`.
  void mark_set(const std::string& tree_pointer, std::string expression);
  // Forgets the sources recorded strictly below `tree_pointer` (its subtree is being replaced).
  void forget_below(const std::string& tree_pointer);
  // Forgets those at `tree_pointer` too (a value the command line put there came from no file).
  void forget_at_and_below(const std::string& tree_pointer);
  Location locate(std::string_view tree_pointer) const;

 private:
  struct Source {
    std::string file;
    std::string file_pointer;
  };
  std::map<std::string, Source, std::less<>> sources_;
  std::map<std::string, std::string, std::less<>> overrides_;
};

// How to name a file in messages: relative to the working directory when it lies below it.
std::string display_path(const std::filesystem::path& path);

// Parses a JSON file; rejects unreadable files, syntax errors and duplicate keys with an InputError.
Json read_json_file(const std::filesystem::path& path);

// Whether `text` is well-formed UTF-8 (what JSON text must be; command-line text is checked against it).
bool is_valid_utf8(std::string_view text);

// `text` with each byte that is not part of well-formed UTF-8 written as \xNN, for echoing it in a message.
std::string escape_invalid_utf8(std::string_view text);

// A short rendering of a JSON value for "found ..." in messages.
std::string render_value(const Json& value);

// "an integer", "a string", ... for "found ..." when the value's type is the problem.
std::string describe_type(const Json& value);

} // namespace sim::core
