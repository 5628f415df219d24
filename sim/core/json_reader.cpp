#include "core/json_reader.hpp"

#include "core/spelling.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace sim::core {

std::string suggestion_for(std::string_view word, const std::vector<std::string>& candidates)
{
  if (auto match = closest_match(word, candidates))
    return "; did you mean \"" + *match + "\"?";
  return "";
}

void Node::fail(const std::string& problem, const std::string& expected) const
{
  throw InputError(location(), problem, render_value(json()), expected);
}

void Node::fail_found(const std::string& problem, const std::string& found, const std::string& expected) const
{
  throw InputError(location(), problem, found, expected);
}

std::string Node::choice_expected(const std::vector<std::string>& names) const
{
  return "one of " + sim::core::join(names, ", ");
}

std::int64_t Node::as_integer(std::int64_t min, std::int64_t max) const
{
  const std::string expected =
      max == INT64_MAX ? fmt::format("an integer >= {}", min) : fmt::format("an integer from {} to {}", min, max);
  const Json& v = json();
  std::int64_t result = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      fail("out of range", expected);
    result = v.get<std::int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::floor(d) != d || std::fabs(d) > 9.0e15)
      fail("not an integer", expected);
    result = static_cast<std::int64_t>(d);
  } else {
    fail_found("wrong type", describe_type(v), expected);
  }
  if (result < min || result > max)
    fail("out of range", expected);
  return result;
}

double Node::as_number(double min, double max) const
{
  const std::string expected = fmt::format("a number from {} to {}", min, max);
  if (!json().is_number())
    fail_found("wrong type", describe_type(json()), expected);
  const double v = json().get<double>();
  if (!(v >= min && v <= max))
    fail("out of range", expected);
  return v;
}

bool Node::as_bool() const
{
  if (!json().is_boolean())
    fail_found("wrong type", describe_type(json()), "true or false");
  return json().get<bool>();
}

std::string Node::as_string() const
{
  if (!json().is_string())
    fail_found("wrong type", describe_type(json()), "a string");
  return json().get<std::string>();
}

double Node::as_quantity(Dimension dimension) const
{
  if (!json().is_string()) {
    if (json().is_number())
      fail("a bare number has no unit", describe(dimension));
    fail_found("wrong type", describe_type(json()), describe(dimension));
  }
  const auto value = parse_quantity(json().get<std::string>(), dimension);
  if (!value)
    fail("not a valid quantity", describe(dimension));
  if (!(*value > 0.0))
    fail("must be positive", describe(dimension));
  const Range range = plausible_range(dimension);
  if (*value < range.min || *value > range.max)
    fail("out of the plausible range", fmt::format("{} {}", describe(dimension), range.text));
  return *value;
}

Node Node::element(std::size_t index) const
{
  return Node(json().at(index), pointer_append(pointer_, index), *provenance_);
}

Node Node::element_of(std::string_view key) const
{
  return Node(json().at(key), pointer_append(pointer_, key), *provenance_);
}

std::size_t Node::array_size() const
{
  if (!json().is_array())
    fail_found("wrong type", describe_type(json()), "an array");
  return json().size();
}

ObjectReader::ObjectReader(Node node) : node_(std::move(node))
{
  if (!node_.json().is_object())
    node_.fail_found("wrong type", describe_type(node_.json()), "an object");
}

void ObjectReader::remember(std::string_view key)
{
  if (std::find(known_.begin(), known_.end(), key) == known_.end())
    known_.emplace_back(key);
}

void ObjectReader::allow(std::initializer_list<std::string_view> keys)
{
  for (auto k : keys)
    remember(k);
}

bool ObjectReader::has(std::string_view key)
{
  remember(key);
  return node_.json().contains(key);
}

std::optional<Node> ObjectReader::find(std::string_view key)
{
  remember(key);
  const auto it = node_.json().find(key);
  if (it == node_.json().end() || it->is_null())
    return std::nullopt;
  return Node(*it, pointer_append(node_.pointer(), key), node_.provenance());
}

Node ObjectReader::at(std::string_view key, const std::string& expected)
{
  auto n = find(key);
  if (!n) {
    const Location where = node_.provenance().locate(pointer_append(node_.pointer(), key));
    // A key spelt almost like the missing one is most likely it, mistyped.
    std::vector<std::string> present;
    if (node_.json().is_object())
      for (const auto& [k, v] : node_.json().items())
        present.push_back(k);
    const auto typo = closest_match(key, present);
    throw InputError(where,
                     typo ? fmt::format("missing required key; is \"{}\" meant to be it?", clip(*typo, 40))
                          : std::string("missing required key"),
                     "nothing", expected);
  }
  return *n;
}

std::int64_t ObjectReader::integer(std::string_view key, std::int64_t min, std::int64_t max)
{
  return at(key, fmt::format("an integer >= {}", min)).as_integer(min, max);
}

std::int64_t ObjectReader::integer_or(std::string_view key, std::int64_t fallback, std::int64_t min, std::int64_t max)
{
  auto n = find(key);
  return n ? n->as_integer(min, max) : fallback;
}

double ObjectReader::number(std::string_view key, double min, double max)
{
  return at(key, fmt::format("a number from {} to {}", min, max)).as_number(min, max);
}

double ObjectReader::number_or(std::string_view key, double fallback, double min, double max)
{
  auto n = find(key);
  return n ? n->as_number(min, max) : fallback;
}

bool ObjectReader::flag_or(std::string_view key, bool fallback)
{
  auto n = find(key);
  return n ? n->as_bool() : fallback;
}

std::string ObjectReader::text(std::string_view key)
{
  return at(key, "a string").as_string();
}

std::string ObjectReader::text_or(std::string_view key, std::string fallback)
{
  auto n = find(key);
  return n ? n->as_string() : std::move(fallback);
}

double ObjectReader::quantity(std::string_view key, Dimension dimension)
{
  return at(key, describe(dimension)).as_quantity(dimension);
}

double ObjectReader::quantity_or(std::string_view key, Dimension dimension, double fallback)
{
  auto n = find(key);
  return n ? n->as_quantity(dimension) : fallback;
}

std::optional<double> ObjectReader::optional_quantity(std::string_view key, Dimension dimension)
{
  auto n = find(key);
  if (!n)
    return std::nullopt;
  return n->as_quantity(dimension);
}

std::string ObjectReader::join(const std::vector<std::string>& items, std::string_view sep)
{
  return sim::core::join(items, sep);
}

void ObjectReader::finish() const
{
  std::vector<std::string> present;
  for (const auto& item : node_.json().items())
    present.push_back(item.key());
  std::sort(present.begin(), present.end());
  for (const auto& key : present) {
    if (std::find(known_.begin(), known_.end(), key) != known_.end())
      continue;
    const Location where = node_.provenance().locate(pointer_append(node_.pointer(), key));
    auto sorted = known_;
    std::sort(sorted.begin(), sorted.end());
    if (auto match = closest_match(key, sorted))
      throw InputError(where, "unknown key; did you mean \"" + *match + "\"?", "\"" + key + "\"",
                       "one of " + sim::core::join(sorted, ", "));
    throw InputError(where, "unknown key", "\"" + key + "\"", "one of " + sim::core::join(sorted, ", "));
  }
}

void expect_schema(ObjectReader& reader, std::string_view expected)
{
  const Node n = reader.at("schema", "\"" + std::string(expected) + "\"");
  if (!n.json().is_string() || n.json().get<std::string>() != expected)
    n.fail("unsupported schema", "\"" + std::string(expected) + "\"");
}

} // namespace sim::core
