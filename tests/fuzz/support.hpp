// What every fuzz target shares: the fuzzed bytes as a file (the loaders read files, as the command line does), and
// the rule that bad input may only ever be refused with a core::InputError. Anything else escaping is a bug: the
// target aborts, and libFuzzer (or the replay driver) reports the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace fuzz {

// Where the repository's presets live (models/, topologies/).
std::filesystem::path data_dir();

// The bytes written to this process's scratch file with `extension`; the same file each call.
std::filesystem::path write_input(const std::uint8_t* data, std::size_t size, const std::string& extension = ".json");

// Runs `body`; an InputError (bad input, refused properly) returns normally, any other exception aborts.
template <class Body>
void only_input_errors(Body&& body);

[[noreturn]] void fail(const char* what);

} // namespace fuzz

#include "core/input_error.hpp"

#include <exception>

template <class Body>
void fuzz::only_input_errors(Body&& body)
{
  try {
    body();
  } catch (const sim::core::InputError&) {
    // Refused with a one-line error: what bad input must get.
  } catch (const std::exception& e) {
    fail(e.what());
  }
}
