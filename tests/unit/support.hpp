// Helpers shared by the unit tests: the repository's presets, temporary JSON files, error capture.
#pragma once

#include "core/input_error.hpp"
#include "scenario/scenario.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace test {

inline std::filesystem::path source_dir()
{
  return SIMTRAIN_SOURCE_DIR;
}

inline sim::scenario::LoadOptions options(std::vector<std::string> overrides = {})
{
  return sim::scenario::LoadOptions{source_dir(), std::move(overrides)};
}

// A scratch folder per test case, emptied first.
inline std::filesystem::path scratch_dir()
{
  std::string name = Catch::getResultCapture().getCurrentTestName();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)))
      c = '_';
  auto dir = std::filesystem::temp_directory_path() / "simtrain-tests" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::filesystem::path write_json(const std::filesystem::path& path, const nlohmann::json& value)
{
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << value.dump(2);
  return path;
}

inline std::filesystem::path write_text(const std::filesystem::path& path, const std::string& text)
{
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
  return path;
}

// The message of the InputError that `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f)
{
  try {
    f();
  } catch (const sim::core::InputError& e) {
    return e.what();
  }
  return "";
}

// A scenario on dgx-a100 with the given plan fields, written to the scratch folder.
inline nlohmann::json scenario_json(const std::string& model, nlohmann::json plan,
                                    const std::string& topology = "dgx-a100")
{
  if (plan.is_null())
    plan = nlohmann::json::object();
  return {{"schema", "scenario/v1"}, {"model", model}, {"topology", topology}, {"plan", std::move(plan)}};
}

} // namespace test
