#include "validation/case_reading.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>

namespace sim::validation {

using core::Json;

std::string lower(std::string s)
{
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool mentions(const std::string& text, std::string_view what)
{
  return lower(text).find(what) != std::string::npos;
}

const Json& section(const Json& c, std::string_view key)
{
  static const Json empty = Json::object();
  const auto it = c.is_object() ? c.find(key) : c.end();
  return it != c.end() && it->is_object() ? *it : empty;
}

const Json* member(const Json& j, std::string_view key)
{
  if (!j.is_object())
    return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const Json& j, std::string_view key)
{
  const Json* m = member(j, key);
  return m && m->is_number() ? std::optional<double>(m->get<double>()) : std::nullopt;
}

std::optional<std::int64_t> integer(const Json& j, std::string_view key)
{
  const auto n = number(j, key);
  return n && *n == std::floor(*n) && *n >= 0 ? std::optional<std::int64_t>(static_cast<std::int64_t>(*n))
                                              : std::nullopt;
}

std::string text(const Json& j, std::string_view key)
{
  const Json* m = member(j, key);
  if (!m)
    return "";
  return m->is_string() ? m->get<std::string>() : m->dump();
}

std::optional<bool> flag(const Json& j, std::string_view key)
{
  const Json* m = member(j, key);
  return m && m->is_boolean() ? std::optional<bool>(m->get<bool>()) : std::nullopt;
}

std::string unknown_field(const Json& section, std::string_view name, const std::set<std::string>& known)
{
  if (!section.is_object())
    return "";
  for (const auto& [key, value] : section.items())
    if (!known.contains(key))
      return name.empty() ? key : fmt::format("{}.{}", name, key);
  return "";
}

Conversion::Conversion(const Json& c, std::filesystem::path data_dir) : c_(c), data_dir_(std::move(data_dir))
{
  out_.id = text(c, "id");
  out_.source = short_source(text(c, "source"));
}

void Conversion::assume(std::string what)
{
  out_.assumptions.push_back(std::move(what));
}

void Conversion::refuse(std::string why)
{
  out_.unsupported = std::move(why);
  out_.runs.clear();
}

std::optional<std::string> Conversion::choice(const Json& j, std::string_view key,
                                              const std::vector<std::pair<std::string, std::string>>& choices)
{
  const std::string value = lower(text(j, key));
  for (const auto& [prefix, chosen] : choices)
    if (value.starts_with(prefix))
      return chosen;
  std::string expected;
  for (const auto& [prefix, chosen] : choices)
    expected += (expected.empty() ? "" : ", ") + prefix;
  refuse(fmt::format("{} \"{}\" is not understood (expected one of: {})", key, text(j, key), expected));
  return std::nullopt;
}

} // namespace sim::validation
