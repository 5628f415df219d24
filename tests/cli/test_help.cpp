// `simtrain help [TOPIC]`: the repository's documentation, built into the binary.
#include "../unit/support.hpp"
#include "run_simtrain.hpp"

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace {

using test::Result;

// `simtrain ARGS` with its standard output and standard error together.
Result run(const std::string& args)
{
  return test::run_shell(std::string(SIMTRAIN_BINARY) + " " + args + " 2>&1");
}

std::vector<std::string> listed_topics()
{
  const auto listing = run("help");
  INFO(listing.out);
  REQUIRE(listing.status == 0);
  std::istringstream lines(listing.out);
  std::string line;
  std::getline(lines, line); // the heading line
  std::vector<std::string> topics;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string topic;
    words >> topic;
    topics.push_back(topic);
  }
  return topics;
}

} // namespace

TEST_CASE("simtrain help lists the topics, one line each, and prints every one")
{
  const auto topics = listed_topics();
  CHECK(topics.size() > 10);
  for (const char* expected : {"readme", "commands", "plan", "report", "validation", "tests", "tools"})
    CHECK(std::find(topics.begin(), topics.end(), expected) != topics.end());
  for (const auto& topic : topics) {
    const auto text = run("help " + topic);
    INFO(topic << ": " << text.out.substr(0, 300));
    CHECK(text.status == 0);
    CHECK(text.out.starts_with("#"));
    CHECK(text.out.size() > 500);
  }
}

TEST_CASE("simtrain help TOPIC prints the README text without its markers, or one section of it")
{
  const auto readme = run("help readme");
  REQUIRE(readme.status == 0);
  std::ifstream in(test::source_dir() / "README.md");
  std::string first_line;
  std::getline(in, first_line);
  CHECK(readme.out.starts_with(first_line + "\n"));
  CHECK(readme.out.find("<!--output") == std::string::npos);

  const auto whatif = run("help whatif");
  REQUIRE(whatif.status == 0);
  CHECK(whatif.out.find("What the export cap costs") != std::string::npos);
  CHECK(whatif.out.find("<!--n ") == std::string::npos);
  CHECK(whatif.out.find("<!-- equal-budget:begin -->") == std::string::npos);

  const auto plan = run("help plan");
  REQUIRE(plan.status == 0);
  CHECK(plan.out.starts_with("### plan\n"));
  CHECK(plan.out.find("| `tp` |") != std::string::npos);
  CHECK(plan.out.find("| `software` |") != std::string::npos);
  CHECK(plan.out.find("### scenario/v1") == std::string::npos); // the section, not the whole page
}

TEST_CASE("simtrain help refuses an unknown topic in one line, with the closest one")
{
  const auto r = run("help plann");
  CHECK(r.status == 1);
  INFO(r.out);
  CHECK(r.out.find("error: help: unknown topic; did you mean \"plan\"? (found \"plann\"; expected one of readme, ") ==
        0);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
}
