// golden_check SIMTRAIN SCENARIO GOLDEN [--update]: runs `SIMTRAIN run SCENARIO --format json` and compares the report
// with the golden one, numbers within a relative tolerance; simtrain's own wall time and memory are not compared.
// --update (or a missing golden file with SIMTRAIN_UPDATE_GOLDEN=1) writes the golden file instead.
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

using nlohmann::json;

constexpr double tolerance = 1e-6;

std::string run(const std::string& command)
{
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr)
    return out;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    out.append(buffer.data(), n);
  if (pclose(pipe) != 0)
    out.clear();
  return out;
}

// The first difference between `expected` and `actual`, as "pointer: what", or "".
std::string compare(const json& expected, const json& actual, const std::string& pointer)
{
  if (expected.is_number() && actual.is_number()) {
    const double e = expected.get<double>();
    const double a = actual.get<double>();
    if (std::fabs(e - a) <= tolerance * std::max(std::fabs(e), std::fabs(a)) + 1e-12)
      return "";
    return pointer + ": " + expected.dump() + " became " + actual.dump();
  }
  if (expected.type() != actual.type())
    return pointer + ": type changed (" + expected.dump() + " became " + actual.dump() + ")";
  if (expected.is_object()) {
    for (const auto& [key, value] : expected.items()) {
      if (!actual.contains(key))
        return pointer + "/" + key + ": missing";
      if (auto d = compare(value, actual[key], pointer + "/" + key); !d.empty())
        return d;
    }
    for (const auto& [key, value] : actual.items())
      if (!expected.contains(key))
        return pointer + "/" + key + ": new key";
    return "";
  }
  if (expected.is_array()) {
    if (expected.size() != actual.size())
      return pointer + ": " + std::to_string(expected.size()) + " elements became " + std::to_string(actual.size());
    for (std::size_t i = 0; i < expected.size(); ++i)
      if (auto d = compare(expected[i], actual[i], pointer + "/" + std::to_string(i)); !d.empty())
        return d;
    return "";
  }
  return expected == actual ? "" : pointer + ": " + expected.dump() + " became " + actual.dump();
}

} // namespace

int main(int argc, char** argv)
{
  if (argc < 4) {
    std::cerr << "usage: golden_check SIMTRAIN SCENARIO GOLDEN [--update]\n";
    return 2;
  }
  const std::string output =
      run(std::string(argv[1]) + " --log-level off run " + argv[2] + " --format json 2>/dev/null");
  if (output.empty()) {
    std::cerr << argv[2] << ": simtrain failed\n";
    return 1;
  }
  json report = json::parse(output);
  report.erase("sim_wall_s");
  report.erase("sim_peak_rss_bytes");
  const bool update = (argc > 4 && std::string(argv[4]) == "--update");
  std::ifstream in(argv[3]);
  if (update || (!in && std::getenv("SIMTRAIN_UPDATE_GOLDEN") != nullptr)) {
    std::ofstream(argv[3]) << report.dump(2) << "\n";
    std::cout << "wrote " << argv[3] << "\n";
    return 0;
  }
  if (!in) {
    std::cerr << argv[3] << ": no golden report (tools/update-goldens writes it)\n";
    return 1;
  }
  const json golden = json::parse(in);
  if (const auto d = compare(golden, report, ""); !d.empty()) {
    std::cerr << argv[2] << " differs from " << argv[3] << " at " << d << "\n";
    return 1;
  }
  return 0;
}
