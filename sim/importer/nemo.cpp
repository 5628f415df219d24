#include "importer/nemo.hpp"

#include "core/document.hpp"
#include "core/units.hpp"
#include "importer/megatron.hpp"
#include "importer/megatron_arguments.hpp"
#include "importer/nemo_arguments.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <yaml-cpp/yaml.h>

namespace sim::importer {
namespace {

// YAML text that JSON (UTF-8) can carry, or the line it is on refused.
std::string text_of(const YAML::Node& node, const std::string& file)
{
  const std::string& text = node.Scalar();
  if (!core::is_valid_utf8(text))
    throw core::InputError(core::Location{file, "", ""},
                           fmt::format("line {}: not valid UTF-8 text", node.Mark().line + 1),
                           core::escape_invalid_utf8(core::clip(text, 40)), "text");
  return text;
}

// The most values a configuration file may expand to: NeMo's largest recipes hold a few thousand. An alias is a
// reference, so nested ones (a "billion laughs") would expand without end.
constexpr std::size_t max_yaml_values = 1'000'000;

// The deepest a configuration file may nest: NeMo's recipes go a few levels down. An alias inside the node it names
// refers to itself, so it would nest without end.
constexpr int max_yaml_depth = 64;

// The document as JSON, each alias expanded; refused once it passes `budget` values or nests `max_yaml_depth` deep.
core::Json to_json(const YAML::Node& node, const std::string& file, std::size_t& budget, int depth = 0)
{
  if (budget-- == 0)
    throw core::InputError(core::Location{file, "", ""}, "expands to too many values (aliases nested in aliases?)",
                           fmt::format("more than {} values", max_yaml_values),
                           "a training configuration (a few thousand values)");
  if (depth > max_yaml_depth)
    throw core::InputError(core::Location{file, "", ""}, "nests too deeply (an alias inside the node it names?)",
                           fmt::format("more than {} levels", max_yaml_depth),
                           "a training configuration (a few levels)");
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      core::Json object = core::Json::object();
      for (const auto& item : node)
        object[text_of(item.first, file)] = to_json(item.second, file, budget, depth + 1);
      return object;
    }
    case YAML::NodeType::Sequence: {
      core::Json list = core::Json::array();
      for (const auto& item : node)
        list.push_back(to_json(item, file, budget, depth + 1));
      return list;
    }
    case YAML::NodeType::Scalar:
      return text_of(node, file);
    default:
      return "null";
  }
}

// The value at a dotted path from `root`, if it is a scalar.
std::optional<std::string> lookup(const core::Json& root, const std::string& path)
{
  const core::Json* at = &root;
  std::size_t from = 0;
  while (from <= path.size()) {
    const auto dot = path.find('.', from);
    const std::string key = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (!at->is_object() || !at->contains(key))
      return std::nullopt;
    at = &(*at)[key];
    if (dot == std::string::npos)
      break;
    from = dot + 1;
  }
  return at->is_string() ? std::optional<std::string>(at->get<std::string>()) : std::nullopt;
}

std::string integer_text(double v)
{
  return v == std::floor(v) && std::abs(v) < 9e15 ? fmt::format("{:.0f}", v) : fmt::format("{}", v);
}

// One interpolation's body ("multiply:4, 12288", ".hidden_size", "training.model.num_layers"): its value, if known.
std::optional<std::string> evaluate(const std::string& body, const core::Json& root, const std::string& parent)
{
  if (const auto colon = body.find(':'); colon != std::string::npos) {
    const std::string name = body.substr(0, colon);
    const auto comma = body.find(',', colon);
    if (comma == std::string::npos)
      return std::nullopt;
    auto operand = [](std::string_view text) { // an argument, spaces around it
      const auto first = text.find_first_not_of(' ');
      const auto last = text.find_last_not_of(' ');
      return first == std::string_view::npos ? std::nullopt : core::parse_number(text.substr(first, last - first + 1));
    };
    const std::string_view whole(body);
    const auto a = operand(whole.substr(colon + 1, comma - colon - 1));
    const auto b = operand(whole.substr(comma + 1));
    if (!a || !b)
      return std::nullopt;
    if (name == "multiply")
      return integer_text(*a * *b);
    if (name == "divide_ceil" && *b != 0)
      return integer_text(std::ceil(*a / *b));
    if (name == "divide_floor" && *b != 0)
      return integer_text(std::floor(*a / *b));
    return std::nullopt;
  }
  std::string path = body;
  if (path.starts_with("."))
    path = parent.empty() ? path.substr(1) : parent + path;
  else // the launcher composes each stage's file under its name
    for (const std::string_view stage : {"training.", "fine_tuning.", "peft."})
      if (path.starts_with(stage)) {
        path = path.substr(stage.size());
        break;
      }
  return lookup(root, path);
}

// `text` with its ${...} resolved from the innermost out; an unknown one is left as written.
std::string resolve(std::string text, const core::Json& root, const std::string& parent)
{
  for (int guard = 0; guard < 16; ++guard) {
    const auto open = text.rfind("${");
    if (open == std::string::npos)
      break;
    const auto close = text.find('}', open);
    if (close == std::string::npos)
      break;
    const auto value = evaluate(text.substr(open + 2, close - open - 2), root, parent);
    if (!value)
      break;
    text.replace(open, close - open + 1, *value);
  }
  return text;
}

// The most text the overrides may hold once resolved: each ${...} copies a value, and copies of copies would grow
// without end.
constexpr std::size_t max_override_bytes = 64U << 20U;

// What flattening a configuration writes, and how much more it may.
struct Flattened {
  const core::Json& root;
  const std::string& file;
  std::vector<std::string> out;
  std::size_t budget = max_override_bytes;
};

void flatten(const core::Json& node, const std::string& path, Flattened& f)
{
  if (node.is_object()) {
    for (const auto& [key, value] : node.items())
      flatten(value, path + "." + key, f);
    return;
  }
  auto& out = f.out;
  const auto spend = [&f, &path](std::size_t bytes) {
    std::string pointer = "/" + path;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    if (bytes > f.budget)
      throw core::InputError(
          core::Location{f.file, pointer, ""}, "resolves to too much text (interpolations copying interpolations?)",
          fmt::format("more than {} MiB", max_override_bytes >> 20U), "a training configuration (kilobytes)");
    f.budget -= bytes;
  };
  if (node.is_array()) { // LoRA's target modules read whole; data blends and the like listed, never matched
    out.push_back(path + "=" + (path.starts_with("model.peft.") ? node.dump() : core::clip(node.dump(), 60)));
    spend(out.back().size());
    return;
  }
  const std::string parent = path.substr(0, path.rfind('.'));
  out.push_back(path + "=" + resolve(node.get<std::string>(), f.root, parent));
  spend(out.back().size());
}

} // namespace

core::Json read_yaml_file(const std::filesystem::path& file)
{
  try {
    std::size_t budget = max_yaml_values;
    return to_json(YAML::LoadFile(file.string()), core::display_path(file), budget);
  } catch (const YAML::ParserException& e) {
    throw core::InputError(
        core::Location{core::display_path(file), "", ""},
        fmt::format("line {}, column {}: not valid YAML: {}", e.mark.line + 1, e.mark.column + 1, e.msg));
  } catch (const YAML::Exception& e) {
    throw core::InputError(core::Location{core::display_path(file), "", ""},
                           fmt::format("cannot be read as YAML: {}", e.msg));
  }
}

std::vector<std::string> nemo_overrides(const core::Json& config, const std::string& file)
{
  if (!config.is_object())
    return {};
  Flattened f{config, file, {}};
  for (const char* section : {"trainer", "model"})
    if (config.contains(section))
      flatten(config[section], section, f);
  return std::move(f.out);
}

Imported import_nemo(const core::Json& config, const std::string& file, const Target& target,
                     const std::vector<std::string>& extra, const std::optional<GivenModel>& model)
{
  if (!config.is_object() || !config.contains("model"))
    throw core::InputError(core::Location{file, "", ""}, "not a NeMo training configuration",
                           config.is_object() ? "no model section" : "not a mapping",
                           "a YAML file with model: (and trainer:) sections");
  auto arguments = nemo_overrides(config, file);
  // An override replaces the file's value of its key (an override that changes nothing, fused_adam for the file's
  // distributed optimizer, must not leave the file's in force); Hydra's ~key (the launcher's scripts take the file's
  // optimizer settings away so) removes the key and what is under it.
  auto forget = [&arguments](std::string_view key, bool under) {
    std::erase_if(arguments, [&](const std::string& a) {
      const std::string_view set = nemo_unstaged(a);
      return set.starts_with(key) && set.size() > key.size() &&
             (set[key.size()] == '=' || (under && set[key.size()] == '.'));
    });
  };
  std::vector<std::string> deletions;
  for (const auto& token : extra) {
    const std::string_view unstaged = nemo_unstaged(token);
    if (token.starts_with('~')) {
      forget(nemo_unstaged(std::string_view(token).substr(1, token.find('=') - 1)), true);
      deletions.push_back(token);
      continue;
    }
    if (is_nemo(token))
      forget(unstaged.substr(0, unstaged.find('=')), false);
    arguments.push_back(token);
  }
  // A fine-tuning configuration restores its model from a .nemo checkpoint (model.restore_from_path) and does not
  // describe it: the model is --model's.
  const auto given = parse_arguments(arguments);
  const bool described = std::any_of(given.begin(), given.end(), [](const Given& g) { return g.name == "num-layers"; });
  if (!model && !described)
    throw core::InputError(core::Location{file, "/model", ""}, "the configuration does not describe its model",
                           lookup(config, "model.restore_from_path")
                               ? "model.restore_from_path " + *lookup(config, "model.restore_from_path")
                               : "no model.num_layers",
                           "--model M (a preset, model/v1 file or HuggingFace config.json) for the model it trains");
  Imported imported = import_megatron(arguments, target, model);
  for (const auto& token : deletions)
    imported.assumptions.push_back(fmt::format("{}: the file's value taken away (Hydra's deletion)", token));
  imported.scenario["description"] = fmt::format("Imported by simtrain import nemo from {}", file);
  for (const auto& [section, value] : config.items()) // the launcher's run:, exp_manager:, hydra settings
    if (section != "model" && section != "trainer")
      imported.no_effect.push_back(Setting{fmt::format("{}:", section), ""});
  return imported;
}

} // namespace sim::importer
