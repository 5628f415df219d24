// Running a command from a CLI test: its exit status and what it printed.
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace test {

struct Result {
  int status = 0;
  std::string out;
};

// A shell command line's exit status and standard output.
inline Result run_shell(const std::string& command)
{
  Result r;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    r.out.append(buffer.data(), n);
  r.status = WEXITSTATUS(pclose(pipe));
  return r;
}

} // namespace test
