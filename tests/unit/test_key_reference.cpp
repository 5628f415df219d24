// Every key a reader accepts has a row in its reference table. The readers are strict: an unknown key fails with the
// list of every key the reader asks for at that object, so adding one to each object of each shipped file and
// reading the list from the error gives what the documentation must cover. The tables are the ones marked
// <!--keys SCHEMA POINTER--> in the repository's Markdown files, the key in the first column in backticks.
#include "cli/file_check.hpp"
#include "core/document.hpp"
#include "support.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* probe_key = "zz_probe";

// (schema, pointer with array indices as *): what a reader or a table says about one kind of object.
using Place = std::pair<std::string, std::string>;

std::string normalised(const std::vector<std::string>& segments)
{
  std::string pointer;
  for (const auto& s : segments)
    pointer +=
        "/" + (!s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; })
                   ? std::string("*")
                   : s);
  return pointer.empty() ? "/" : pointer;
}

std::string dotted(const std::vector<std::string>& segments)
{
  std::string path;
  for (const auto& s : segments)
    path += s + ".";
  return path + probe_key + "=1";
}

// Every object of a document, as the path of keys and indices that leads to it.
void objects(const Json& j, std::vector<std::string>& at, std::vector<std::vector<std::string>>& out)
{
  if (j.is_object()) {
    out.push_back(at);
    for (const auto& item : j.items()) {
      at.push_back(item.key());
      objects(item.value(), at, out);
      at.pop_back();
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      at.push_back(std::to_string(i));
      objects(j[i], at, out);
      at.pop_back();
    }
  }
}

// The keys the reader asks for at the object the override adds `zz_probe` to, from its "unknown key" error; nullopt
// when the object takes any key (a free-form map).
std::optional<std::vector<std::string>> accepted_keys(const fs::path& file, std::vector<std::string> overrides)
{
  const std::string message = test::error_of([&] { sim::cli::check_file(file, test::options(overrides)); });
  if (message.empty())
    return std::nullopt;
  const std::string marker = std::string("(found \"") + probe_key + "\"; expected one of ";
  const auto from = message.find(marker);
  INFO(file.string() << " with --set " << overrides.back() << ": " << message);
  REQUIRE(message.find("unknown key") != std::string::npos);
  REQUIRE(from != std::string::npos);
  const auto begin = from + marker.size();
  const auto end = message.find(')', begin);
  REQUIRE(end != std::string::npos);
  std::vector<std::string> keys;
  std::istringstream list(message.substr(begin, end - begin));
  for (std::string key; std::getline(list, key, ',');)
    keys.push_back(key.substr(key.find_first_not_of(' ')));
  return keys;
}

// The keys each marked table documents, by the object they belong to. A first-column `a.b.c` documents key a of the
// table's object, b of its a and c of a/b; `list[]` documents key list, `list[].k` also key k of list's elements;
// `.k` after `a.b.c` is a.b.k.
std::map<Place, std::set<std::string>> documented_keys(const fs::path& root)
{
  static const std::regex marker(R"re(<!--keys (\S+) (\S+)-->\s*)re");
  static const std::regex code("`([^`]+)`");
  std::map<Place, std::set<std::string>> out;
  for (const char* folder : {"sim", "models", "topologies", "scenarios", "tests", "tools"})
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      if (entry.path().extension() != ".md")
        continue;
      std::ifstream in(entry.path());
      std::vector<std::string> lines;
      for (std::string l; std::getline(in, l);)
        lines.push_back(l);
      for (std::size_t i = 0; i < lines.size(); ++i) {
        std::smatch m;
        if (!std::regex_match(lines[i], m, marker))
          continue;
        const std::string schema = m[1], pointer = m[2];
        std::size_t row = i + 1;
        while (row < lines.size() && lines[row].empty())
          ++row;
        row += 2; // the header and the separator
        for (; row < lines.size() && lines[row].starts_with("|"); ++row) {
          const auto cell_end = lines[row].find('|', 1);
          const std::string cell = lines[row].substr(1, cell_end - 1);
          std::string previous;
          for (auto it = std::sregex_iterator(cell.begin(), cell.end(), code); it != std::sregex_iterator(); ++it) {
            std::string name = (*it)[1];
            if (name.starts_with(".") && !previous.empty())
              name = previous.substr(0, previous.rfind('.')) + name;
            previous = name;
            std::vector<std::string> segments;
            std::istringstream parts(name);
            for (std::string s; std::getline(parts, s, '.');)
              segments.push_back(s);
            // Each segment is a key of the object the segments before it lead to.
            std::string object = pointer == "/" ? "" : pointer;
            for (auto segment : segments) {
              const bool list = segment.ends_with("[]");
              if (list)
                segment.resize(segment.size() - 2);
              out[{schema, object.empty() ? "/" : object}].insert(segment);
              object += "/" + segment + (list ? "/*" : "");
            }
          }
        }
      }
    }
  return out;
}

// A table's pointer matches an object's when each segment is equal or the table's is `*` (any index or member).
bool matches(const std::string& pattern, const std::string& pointer)
{
  std::istringstream a(pattern), b(pointer);
  std::string x, y;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, x, '/'));
    const bool more_b = static_cast<bool>(std::getline(b, y, '/'));
    if (!more_a || !more_b)
      return more_a == more_b;
    if (x != "*" && x != y)
      return false;
  }
}

bool is_documented(const std::map<Place, std::set<std::string>>& documented, const Place& place, const std::string& key)
{
  for (const auto& [table, keys] : documented)
    if (table.first == place.first && matches(table.second, place.second) && keys.count(key) != 0)
      return true;
  return false;
}

struct Probe {
  fs::path file;
  std::vector<std::string> setup; // overrides that make the object exist
  std::vector<std::string> at;    // the object
};

// Objects no shipped file has: made with --set on a file that lacks them.
std::vector<Probe> constructed_probes(const fs::path& root)
{
  const auto scenario = root / "scenarios" / "default.json";
  return {
      {scenario, {R"(reliability={"gpu_failures_per_day": 0.0027, "checkpoint_interval": "1h"})"}, {"reliability"}},
      {scenario, {R"(stragglers=[{"node": 1, "compute": 0.9}])"}, {"stragglers", "0"}},
      {scenario, {R"(node_gpus=[{"nodes": [1, 1], "gpu": "a100-sxm4-40gb"}])"}, {"node_gpus", "0"}},
      {scenario, {R"(cost={"usd_per_gpu_hour": 2})"}, {"cost"}},
  };
}

// Objects whose keys are not a closed set: a source per field of the entry (checked against the fields instead).
const std::set<Place> free_form = {
    {"gpu/v1", "/sources"},
    {"kernels/v1", "/sources"},
};

} // namespace

TEST_CASE("every key a reader accepts has a row in its reference table")
{
  const fs::path root = test::source_dir();
  std::vector<Probe> probes;
  std::map<fs::path, std::string> schema_of;
  for (const auto& [folder, recursive] : std::vector<std::pair<const char*, bool>>{{"models", false},
                                                                                   {"topologies", false},
                                                                                   {"topologies/gpus", false},
                                                                                   {"topologies/gpus/kernels", false},
                                                                                   {"scenarios", true}}) {
    std::vector<fs::path> files;
    const auto add = [&](const fs::directory_entry& e) {
      if (e.path().extension() == ".json")
        files.push_back(e.path());
    };
    if (recursive)
      std::for_each(fs::recursive_directory_iterator(root / folder), fs::recursive_directory_iterator(), add);
    else
      std::for_each(fs::directory_iterator(root / folder), fs::directory_iterator(), add);
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      const Json doc = sim::core::read_json_file(file);
      schema_of[file] = doc.value("schema", "");
      std::vector<std::string> at;
      std::vector<std::vector<std::string>> found;
      objects(doc, at, found);
      for (auto& o : found)
        probes.push_back({file, {}, std::move(o)});
    }
  }
  for (auto& p : constructed_probes(root)) {
    schema_of[p.file] = sim::core::read_json_file(p.file).value("schema", "");
    probes.push_back(std::move(p));
  }

  const auto documented = documented_keys(root);
  std::map<Place, std::set<std::string>> accepted;
  std::map<Place, fs::path> example;
  for (const auto& p : probes) {
    const Place place{schema_of[p.file], normalised(p.at)};
    if (free_form.count(place) != 0)
      continue;
    if (std::any_of(p.at.begin(), p.at.end(), [](const std::string& k) { return k.find('.') != std::string::npos; })) {
      FAIL_CHECK(place.second << ": a key with a dot cannot be reached with --set");
      continue;
    }
    auto overrides = p.setup;
    overrides.push_back(dotted(p.at));
    const auto keys = accepted_keys(p.file, overrides);
    if (!keys) {
      FAIL_CHECK(fs::relative(p.file, root).string() << ": " << place.first << " " << place.second
                                                     << " takes any key; list it as free-form if that is meant");
      continue;
    }
    accepted[place].insert(keys->begin(), keys->end());
    example.emplace(place, fs::relative(p.file, root));
  }

  std::vector<std::string> missing;
  for (const auto& [place, keys] : accepted)
    for (const auto& key : keys)
      if (!is_documented(documented, place, key))
        missing.push_back(place.first + " " + place.second + ": `" + key + "` (read from " + example[place].string() +
                          ")");
  std::ostringstream list;
  for (const auto& m : missing)
    list << "\n  " << m;
  INFO("keys without a row in a table marked <!--keys SCHEMA POINTER--> (see sim/README.md):" << list.str());
  CHECK(missing.empty());
  CHECK(accepted.size() > 20);
}
