#include "core/units.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <map>

namespace sim::core {
namespace {

using UnitTable = std::map<std::string, double, std::less<>>;

UnitTable size_units()
{
  UnitTable t;
  const std::array<std::pair<const char*, double>, 6> decimal{
      {{"", 1.0}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}}};
  const std::array<std::pair<const char*, double>, 5> binary{
      {{"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0}, {"Pi", 1125899906842624.0}}};
  for (const auto& [prefix, factor] : decimal) {
    t[std::string(prefix) + "B"] = factor;
    t[std::string(prefix) + "b"] = factor / 8.0;
  }
  t["KB"] = 1e3; // a common spelling of kB
  t["Kb"] = 1e3 / 8.0;
  for (const auto& [prefix, factor] : binary) {
    t[std::string(prefix) + "B"] = factor;
    t[std::string(prefix) + "b"] = factor / 8.0;
  }
  return t;
}

UnitTable rate_units()
{
  UnitTable t;
  for (const auto& [unit, factor] : size_units()) {
    t[unit + "ps"] = factor;
    t[unit + "/s"] = factor;
  }
  return t;
}

UnitTable time_units()
{
  return UnitTable{{"s", 1.0},  {"ms", 1e-3},  {"us", 1e-6},  {"\xC2\xB5s", 1e-6}, {"ns", 1e-9},   {"ps", 1e-12},
                   {"m", 60.0}, {"min", 60.0}, {"h", 3600.0}, {"d", 86400.0},      {"w", 604800.0}};
}

UnitTable flop_rate_units()
{
  UnitTable t;
  const std::array<std::pair<const char*, double>, 7> prefixes{
      {{"", 1.0}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18}}};
  for (const auto& [prefix, factor] : prefixes) {
    const std::string p(prefix);
    for (const char* suffix : {"f", "flops", "FLOPS", "FLOP/s", "flop/s"})
      t[p + suffix] = factor;
  }
  t["Kf"] = 1e3;
  return t;
}

UnitTable power_units()
{
  return UnitTable{{"W", 1.0}, {"kW", 1e3}, {"MW", 1e6}};
}

const UnitTable& units_of(Dimension dimension)
{
  static const UnitTable bytes = size_units();
  static const UnitTable rates = rate_units();
  static const UnitTable times = time_units();
  static const UnitTable flops = flop_rate_units();
  static const UnitTable power = power_units();
  switch (dimension) {
    case Dimension::BYTES:
      return bytes;
    case Dimension::BANDWIDTH:
      return rates;
    case Dimension::TIME:
      return times;
    case Dimension::FLOP_RATE:
      return flops;
    case Dimension::POWER:
      return power;
  }
  return bytes;
}

std::string trim_number(double v, int significant)
{
  std::string s = fmt::format("{:.{}g}", v, significant);
  return s;
}

} // namespace

std::optional<double> parse_number(std::string_view text)
{
  double number = 0.0;
  const auto [rest, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc{} || rest != text.data() + text.size() || text.empty() || !std::isfinite(number))
    return std::nullopt;
  return number;
}

std::optional<double> parse_quantity(std::string_view text, Dimension dimension)
{
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  double number = 0.0;
  auto [rest, ec] = std::from_chars(begin, end, number);
  if (ec != std::errc{} || rest == begin || !std::isfinite(number))
    return std::nullopt;
  std::string_view unit(rest, static_cast<std::size_t>(end - rest));
  if (!unit.empty() && unit.front() == ' ')
    unit.remove_prefix(1);
  const auto& table = units_of(dimension);
  const auto it = table.find(unit);
  if (it == table.end())
    return std::nullopt;
  return number * it->second;
}

Range plausible_range(Dimension dimension)
{
  switch (dimension) {
    case Dimension::BYTES:
      return {1.0, 1e15, "from 1B to 1PB"};
    case Dimension::BANDWIDTH:
      return {1e6, 1e15, "from 1MBps to 1PBps"};
    case Dimension::TIME:
      return {1e-12, 365.0 * 86400.0, "from 1ps to 365d"};
    case Dimension::FLOP_RATE:
      return {1e9, 1e19, "from 1Gf to 10Ef"};
    case Dimension::POWER:
      return {1.0, 1e9, "from 1W to 1GW"};
  }
  return {0.0, 0.0, ""};
}

std::string describe(Dimension dimension)
{
  switch (dimension) {
    case Dimension::BYTES:
      return R"(a size such as "80GiB" or "25MB")";
    case Dimension::BANDWIDTH:
      return R"(a bandwidth such as "450GBps" or "400Gbps")";
    case Dimension::TIME:
      return R"(a time such as "2us" or "1.5ms")";
    case Dimension::FLOP_RATE:
      return R"(a FLOP rate such as "989Tf" or "312TFLOPS")";
    case Dimension::POWER:
      return R"(a power such as "700W" or "1.2kW")";
  }
  return "a quantity with a unit";
}

std::string format_quantity(double v, Dimension dimension)
{
  const double a = std::fabs(v);
  switch (dimension) {
    case Dimension::BYTES: {
      constexpr std::array<const char*, 6> names{"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
      double scaled = v;
      std::size_t i = 0;
      while (std::fabs(scaled) >= 1024.0 && i + 1 < names.size()) {
        scaled /= 1024.0;
        ++i;
      }
      return i == 0 ? fmt::format("{:.0f} B", scaled) : fmt::format("{:.2f} {}", scaled, names[i]);
    }
    case Dimension::BANDWIDTH: {
      if (a >= 1e13)
        return trim_number(v / 1e12, 4) + " TB/s";
      if (a >= 1e9)
        return trim_number(v / 1e9, 4) + " GB/s";
      if (a >= 1e6)
        return trim_number(v / 1e6, 4) + " MB/s";
      return trim_number(v, 4) + " B/s";
    }
    case Dimension::TIME: {
      if (a >= 1.0 || a == 0.0)
        return fmt::format("{:.3f} s", v);
      if (a >= 1e-3)
        return fmt::format("{:.3f} ms", v * 1e3);
      if (a >= 1e-6)
        return fmt::format("{:.3f} us", v * 1e6);
      return fmt::format("{:.1f} ns", v * 1e9);
    }
    case Dimension::FLOP_RATE: {
      if (a >= 1e15)
        return trim_number(v / 1e15, 4) + " PFLOP/s";
      if (a >= 1e12)
        return trim_number(v / 1e12, 4) + " TFLOP/s";
      return trim_number(v / 1e9, 4) + " GFLOP/s";
    }
    case Dimension::POWER: {
      if (a >= 1e6)
        return trim_number(v / 1e6, 4) + " MW";
      if (a >= 1e3)
        return trim_number(v / 1e3, 4) + " kW";
      return trim_number(v, 4) + " W";
    }
  }
  return trim_number(v, 6);
}

std::string format_count(double count)
{
  const double a = std::fabs(count);
  if (a >= 1e12)
    return fmt::format("{:.2f}T", count / 1e12);
  if (a >= 1e9)
    return fmt::format("{:.2f}B", count / 1e9);
  if (a >= 1e6)
    return fmt::format("{:.2f}M", count / 1e6);
  if (a >= 1e3)
    return fmt::format("{:.2f}K", count / 1e3);
  return fmt::format("{:.0f}", count);
}

std::string format_duration(double s)
{
  if (s >= 2 * 86400.0)
    return fmt::format("{:.1f} days", s / 86400.0);
  if (s >= 2 * 3600.0)
    return fmt::format("{:.1f} h", s / 3600.0);
  if (s >= 120.0)
    return fmt::format("{:.0f} min", s / 60.0);
  return format_time(s);
}

std::string format_usd(double usd)
{
  if (usd >= 1e6)
    return fmt::format("${:.2f}M", usd / 1e6);
  if (usd >= 1e4)
    return fmt::format("${:.1f}k", usd / 1e3);
  return fmt::format("${:.2f}", usd);
}

} // namespace sim::core
