// Strict, typed reading of JSON input: unknown keys are errors with a "did you mean", every problem is an
// InputError naming the file, the pointer, what was found and what was expected.
#pragma once

#include "core/document.hpp"
#include "core/units.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sim::core {

// "; did you mean \"x\"?" when one candidate is close to `word`, else empty.
std::string suggestion_for(std::string_view word, const std::vector<std::string>& candidates);

// One member of a closed set as it is spelt in JSON.
template <class E>
struct Choice {
  std::string_view name;
  E value;
};

template <class E, class Choices>
std::string_view choice_name(E value, const Choices& choices)
{
  for (const auto& c : choices)
    if (c.value == value)
      return c.name;
  return "?";
}

// A value inside a composed document, with the means to report problems about it.
class Node {
 public:
  Node(const Json& value, std::string pointer, const Provenance& provenance)
      : value_(&value), pointer_(std::move(pointer)), provenance_(&provenance)
  {}

  const Json& json() const { return *value_; }
  const std::string& pointer() const { return pointer_; }
  const Provenance& provenance() const { return *provenance_; }
  Location location() const { return provenance_->locate(pointer_); }

  // An error about this value; `found` defaults to the value itself.
  [[noreturn]] void fail(const std::string& problem, const std::string& expected) const;
  [[noreturn]] void fail_found(const std::string& problem, const std::string& found, const std::string& expected) const;
  Warning warning(std::string message) const { return Warning{location(), std::move(message)}; }

  // Conversions with range checks.
  std::int64_t as_integer(std::int64_t min, std::int64_t max = INT64_MAX) const;
  double as_number(double min, double max) const;
  bool as_bool() const;
  std::string as_string() const;
  double as_quantity(Dimension dimension) const; // positive
  template <class E>
  E as_choice(std::span<const Choice<E>> choices) const;

  Node element(std::size_t index) const;
  Node element_of(std::string_view key) const; // a member of an object that must be present
  std::size_t array_size() const;              // fails unless an array

 private:
  std::string choice_expected(const std::vector<std::string>& names) const;
  const Json* value_;
  std::string pointer_;
  const Provenance* provenance_;
};

// Reads an object key by key; `finish()` rejects keys that no accessor asked for.
class ObjectReader {
 public:
  explicit ObjectReader(Node node);

  const Node& node() const { return node_; }
  bool has(std::string_view key);
  std::optional<Node> find(std::string_view key);
  Node at(std::string_view key, const std::string& expected);

  std::int64_t integer(std::string_view key, std::int64_t min = 1, std::int64_t max = INT64_MAX);
  std::int64_t integer_or(std::string_view key, std::int64_t fallback, std::int64_t min = 1,
                          std::int64_t max = INT64_MAX);
  double number(std::string_view key, double min, double max);
  double number_or(std::string_view key, double fallback, double min, double max);
  bool flag_or(std::string_view key, bool fallback);
  std::string text(std::string_view key);
  std::string text_or(std::string_view key, std::string fallback);
  double quantity(std::string_view key, Dimension dimension);
  double quantity_or(std::string_view key, Dimension dimension, double fallback);
  std::optional<double> optional_quantity(std::string_view key, Dimension dimension);

  template <class E>
  E choice(std::string_view key, std::span<const Choice<E>> choices)
  {
    return at(key, "one of " + names(choices)).template as_choice<E>(choices);
  }
  template <class E>
  E choice_or(std::string_view key, std::span<const Choice<E>> choices, E fallback)
  {
    auto n = find(key);
    return n ? n->template as_choice<E>(choices) : fallback;
  }

  // Declares keys that are allowed but read elsewhere (e.g. documentation fields).
  void allow(std::initializer_list<std::string_view> keys);

  // Fails on the first key (in sorted order) that no accessor asked for.
  void finish() const;

 private:
  template <class E>
  static std::string names(std::span<const Choice<E>> choices)
  {
    std::vector<std::string> out;
    for (const auto& c : choices)
      out.emplace_back(c.name);
    return join(out, ", ");
  }
  static std::string join(const std::vector<std::string>& items, std::string_view sep);
  void remember(std::string_view key);

  Node node_;
  std::vector<std::string> known_;
};

// The schema line every simtrain file starts with: fails unless `/schema` equals `expected`.
void expect_schema(ObjectReader& reader, std::string_view expected);

template <class E>
E Node::as_choice(std::span<const Choice<E>> choices) const
{
  std::vector<std::string> names;
  for (const auto& c : choices)
    names.emplace_back(c.name);
  if (!json().is_string())
    fail_found("wrong type", describe_type(json()), choice_expected(names));
  const auto text = json().template get<std::string>();
  for (const auto& c : choices)
    if (c.name == text)
      return c.value;
  fail("unknown value", choice_expected(names) + suggestion_for(text, names));
}

} // namespace sim::core
