// The layers of sim/ (sim/layers.txt): every include points down, so no folder knows one above it and no two folders
// include each other.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path sim_dir = fs::path(SIMTRAIN_SOURCE_DIR) / "sim";

// Folder -> its line in the layers file (0: the lowest).
std::map<std::string, int> read_layers(const fs::path& file)
{
  std::ifstream in(file);
  std::map<std::string, int> layer;
  std::string line;
  int index = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() == '#')
      continue;
    std::istringstream words(line);
    for (std::string folder; words >> folder;)
      layer[folder] = index;
    ++index;
  }
  return layer;
}

struct Include {
  std::string file; // relative to sim/
  int line = 0;
  std::string folder; // of the included header
};

std::vector<Include> project_includes(const fs::path& file)
{
  static const std::regex include(R"re(^\s*#\s*include\s+"([a-z_]+)/[^"]+")re");
  std::vector<Include> out;
  std::ifstream in(file);
  std::string text;
  for (int n = 1; std::getline(in, text); ++n)
    if (std::smatch m; std::regex_search(text, m, include))
      out.push_back({fs::relative(file, sim_dir).string(), n, m[1]});
  return out;
}

std::vector<std::string> violations(const std::map<std::string, int>& layer)
{
  std::vector<std::string> problems;
  for (const auto& folder : fs::directory_iterator(sim_dir)) {
    if (!folder.is_directory())
      continue;
    const std::string name = folder.path().filename().string();
    const auto own = layer.find(name);
    if (own == layer.end()) {
      problems.push_back("sim/" + name + "/ is not in sim/layers.txt");
      continue;
    }
    for (const auto& entry : fs::recursive_directory_iterator(folder.path())) {
      const auto ext = entry.path().extension();
      if (ext != ".hpp" && ext != ".cpp")
        continue;
      for (const auto& inc : project_includes(entry.path())) {
        if (inc.folder == name)
          continue;
        const auto to = layer.find(inc.folder);
        if (to == layer.end())
          problems.push_back("sim/" + inc.file + ":" + std::to_string(inc.line) + " includes from " + inc.folder +
                             "/, which is not in sim/layers.txt");
        else if (to->second >= own->second)
          problems.push_back("sim/" + inc.file + ":" + std::to_string(inc.line) + " includes from " + inc.folder +
                             "/, which is not below " + name + "/");
      }
    }
  }
  return problems;
}

} // namespace

TEST_CASE("every include in sim/ points down the layers")
{
  const auto layer = read_layers(sim_dir / "layers.txt");
  REQUIRE(layer.size() >= 10);
  for (const auto& problem : violations(layer))
    FAIL_CHECK(problem);
}

TEST_CASE("the layer check finds an include that climbs")
{
  // core is the lowest layer: with cli placed below it, cli's includes of core climb.
  auto layer = read_layers(sim_dir / "layers.txt");
  layer["cli"] = -1;
  const auto problems = violations(layer);
  CHECK(std::any_of(problems.begin(), problems.end(), [](const std::string& p) {
    return p.starts_with("sim/cli/") && p.ends_with("includes from core/, which is not below cli/");
  }));
}
