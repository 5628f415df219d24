#include "importer/megatron_arguments.hpp"

#include "core/input_error.hpp"
#include "core/units.hpp"
#include "importer/nemo_arguments.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace sim::importer {

std::string Given::spelt() const
{
  if (written.find('=') != std::string::npos)
    return written; // a NeMo override, as given
  const std::string option = written.empty() ? "--" + name : written;
  return values.empty() ? option : fmt::format("{} {}", option, fmt::join(values, " "));
}

bool is_option(std::string_view token)
{
  return token.size() > 2 && token.starts_with("--");
}

std::vector<Given> parse_arguments(std::span<const std::string> tokens)
{
  std::vector<Given> given;
  for (const auto& token : tokens) {
    if (is_nemo(token)) {
      const auto meant = nemo_override(token);
      given.insert(given.end(), meant.begin(), meant.end());
      given.push_back(Given{.used = true, .idle = true}); // ends the override: a following word is not its value
    } else if (is_option(token)) {
      Given g;
      const auto eq = token.find('=');
      g.name = token.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      g.written = "--" + g.name;
      std::replace(g.name.begin(), g.name.end(), '_', '-');
      if (eq != std::string::npos)
        g.values.push_back(token.substr(eq + 1));
      given.push_back(std::move(g));
    } else if (given.empty() || given.back().idle) {
      given.push_back(Given{.values = {token}}); // a stray word: reported as not understood
    } else {
      given.back().values.push_back(token);
    }
  }
  return given;
}

std::optional<std::int64_t> parse_integer(const std::string& text)
{
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return v;
}

Given* Arguments::find(std::string_view name)
{
  Given* last = nullptr;
  for (auto& g : given_)
    if (g.name == name) {
      g.used = true;
      last = &g;
    }
  return last;
}

bool Arguments::flag(std::string_view name)
{
  Given* g = find(name);
  if (g && !g->values.empty())
    fail(*g, "is a flag and takes no value", fmt::format("{}", fmt::join(g->values, " ")), "the flag alone");
  return g != nullptr;
}

std::optional<std::string> Arguments::text(std::string_view name)
{
  Given* g = find(name);
  if (!g)
    return std::nullopt;
  if (g->values.size() != 1)
    fail(*g, "takes one value", g->values.empty() ? "none" : fmt::format("{}", fmt::join(g->values, " ")), "one value");
  return g->values.front();
}

std::optional<std::int64_t> Arguments::integer(std::string_view name, std::int64_t min, std::int64_t max)
{
  const auto t = text(name);
  if (!t)
    return std::nullopt;
  const auto v = parse_integer(*t);
  if (!v || *v < min || *v > max)
    fail(*find(name), v ? "out of range" : "not an integer", *t, fmt::format("an integer from {} to {}", min, max));
  return v;
}

std::int64_t Arguments::integer_or(std::string_view name, std::int64_t fallback, std::int64_t min, std::int64_t max)
{
  return integer(name, min, max).value_or(fallback);
}

std::int64_t Arguments::required(std::string_view name, std::int64_t min, std::int64_t max)
{
  if (const auto v = integer(name, min, max))
    return *v;
  throw core::InputError(core::Location{"megatron arguments", "", ""}, fmt::format("--{} is missing", name),
                         "no such argument", fmt::format("--{} (Megatron-LM requires it)", name));
}

std::optional<double> Arguments::number(std::string_view name, double min, double max)
{
  const auto t = text(name);
  if (!t)
    return std::nullopt;
  const auto v = core::parse_number(*t);
  if (!v || *v < min || *v > max)
    fail(*find(name), v ? "out of range" : "not a number", *t, fmt::format("a number from {} to {}", min, max));
  return v;
}

std::optional<std::string> Arguments::choice(std::string_view name, std::initializer_list<std::string_view> names)
{
  auto t = text(name);
  if (t && std::find(names.begin(), names.end(), *t) == names.end())
    fail(*find(name), "not one of Megatron-LM's choices", *t, fmt::format("one of {}", fmt::join(names, ", ")));
  return t;
}

void Arguments::fail(const Given& g, const std::string& problem, const std::string& found, const std::string& expected)
{
  const bool nemo = g.written.find('=') != std::string::npos;
  throw core::InputError(core::Location{nemo ? "nemo override " + g.written.substr(0, g.written.find('='))
                                             : "megatron argument --" + g.name,
                                        "", ""},
                         problem, found, expected);
}

std::int64_t MegatronReader::sequence_length()
{
  if (const auto s = a_.integer("seq-length", 1, 1 << 24))
    return *s;
  return a_.required("decoder-seq-length", 1, 1 << 24);
}

void MegatronReader::not_simulated(std::string_view name, std::string why)
{
  const Given* g = a_.find(name);
  out_.not_simulated.push_back(Setting{g ? g->spelt() : std::string(name), std::move(why)});
}

void MegatronReader::origin(const std::string& pointer, std::string_view name)
{
  if (const Given* g = a_.find(name))
    out_.origins.emplace_back(pointer, g->spelt());
}

} // namespace sim::importer
