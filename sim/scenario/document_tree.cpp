#include "scenario/document_tree.hpp"

#include "core/spelling.hpp"
#include "model/hf_config.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <regex>

namespace sim::scenario {
namespace fs = std::filesystem;
namespace {

std::string folder_of(ReferenceKind kind)
{
  switch (kind) {
    case ReferenceKind::MODEL:
      return "models";
    case ReferenceKind::TOPOLOGY:
      return "topologies";
    case ReferenceKind::GPU:
      return "topologies/gpus";
    case ReferenceKind::KERNELS:
      return "topologies/gpus/kernels";
  }
  return "";
}

std::string kind_name(ReferenceKind kind)
{
  switch (kind) {
    case ReferenceKind::MODEL:
      return "model";
    case ReferenceKind::TOPOLOGY:
      return "topology";
    case ReferenceKind::GPU:
      return "GPU";
    case ReferenceKind::KERNELS:
      return "kernel tables";
  }
  return "";
}

bool is_path_like(const std::string& ref)
{
  return ref.find('/') != std::string::npos || ref.ends_with(".json") || ref.starts_with(".");
}

} // namespace

std::vector<std::string> presets(const fs::path& data_dir, ReferenceKind kind)
{
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(data_dir / folder_of(kind), ec))
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

fs::path preset_path(const fs::path& data_dir, ReferenceKind kind, const std::string& name)
{
  return data_dir / folder_of(kind) / (name + ".json");
}

DocumentTree::DocumentTree(const fs::path& file, fs::path data_dir)
    : DocumentTree(core::read_json_file(file), file, std::move(data_dir))
{}

DocumentTree::DocumentTree(core::Json root, const fs::path& file, fs::path data_dir)
    : root_(std::move(root)), data_dir_(std::move(data_dir))
{
  provenance_.add_source("", core::display_path(file));
  dirs_[""] = file.parent_path();
}

fs::path DocumentTree::base_dir(const std::string& pointer) const
{
  fs::path best;
  std::size_t best_length = 0;
  bool found = false;
  for (const auto& [prefix, dir] : dirs_) {
    const bool below = prefix.empty() || pointer == prefix || pointer.starts_with(prefix + "/");
    if (below && (!found || prefix.size() >= best_length)) {
      best = dir;
      best_length = prefix.size();
      found = true;
    }
  }
  return best;
}

bool DocumentTree::has(const std::string& pointer) const
{
  return root_.contains(core::Json::json_pointer(pointer));
}

core::Node DocumentTree::node(const std::string& pointer) const
{
  return core::Node(root_.at(core::Json::json_pointer(pointer)), pointer, provenance_);
}

void DocumentTree::resolve(const std::string& pointer, ReferenceKind kind)
{
  if (!has(pointer))
    return;
  const core::Node where = node(pointer);
  if (kind == ReferenceKind::MODEL && model::looks_like_hf_config(where.json())) { // a config.json pasted inline
    const core::Location at = where.location();
    core::Provenance hf_provenance;
    hf_provenance.add_source("", at.file, at.pointer);
    auto converted = model::convert_hf_config(core::Node(where.json(), "", hf_provenance), "inline");
    for (const auto& [field, origin] : converted.origins)
      provenance_.add_source(pointer + field, at.file, at.pointer + origin);
    root_[core::Json::json_pointer(pointer)] = std::move(converted.model);
    return;
  }
  if (where.json().is_object() || (where.json().is_null() && kind == ReferenceKind::KERNELS))
    return; // kernel tables are optional: null drops them
  const std::string expected = fmt::format("a {} preset name, a path to a JSON file, or an object", kind_name(kind));
  if (!where.json().is_string())
    where.fail_found("wrong type", core::describe_type(where.json()), expected);
  const std::string ref = where.json().get<std::string>();

  fs::path path;
  if (is_path_like(ref)) {
    path = base_dir(pointer) / ref;
    std::error_code ec;
    if (kind == ReferenceKind::MODEL && fs::is_directory(path, ec))
      path /= "config.json";
    if (!fs::is_regular_file(path, ec))
      where.fail("no such file", fmt::format("a {} file (looked for {})", kind_name(kind), core::display_path(path)));
  } else {
    path = preset_path(data_dir_, kind, ref);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      const auto names = presets(data_dir_, kind);
      std::string expected_names =
          fmt::format("a path, or one of the {} presets: {}", kind_name(kind), core::join(names, ", "));
      if (auto match = core::closest_match(ref, names))
        where.fail(fmt::format("unknown {} preset; did you mean \"{}\"?", kind_name(kind), *match), expected_names);
      where.fail(fmt::format("unknown {} preset", kind_name(kind)), expected_names);
    }
  }

  auto file = files_.find(path);
  if (file == files_.end())
    file = files_.emplace(path, core::read_json_file(path)).first;
  core::Json loaded = file->second;
  const std::string display = core::display_path(path);
  provenance_.forget_below(pointer);
  provenance_.add_source(pointer, display);
  dirs_[pointer] = path.parent_path();
  if (kind == ReferenceKind::MODEL && model::looks_like_hf_config(loaded)) {
    core::Provenance hf_provenance;
    hf_provenance.add_source("", display);
    const core::Node config(loaded, "", hf_provenance);
    std::string fallback_name = path.parent_path().filename().string();
    if (fallback_name.empty())
      fallback_name = path.stem().string();
    auto converted = model::convert_hf_config(config, fallback_name);
    for (const auto& [field, origin] : converted.origins)
      provenance_.add_source(pointer + field, display, origin);
    loaded = std::move(converted.model);
  }
  root_[core::Json::json_pointer(pointer)] = std::move(loaded);
}

void DocumentTree::set_path(const std::string& expression)
{
  if (!core::is_valid_utf8(expression)) // JSON text is UTF-8, and so must be what goes into the document
    throw core::InputError({"--set", "", ""}, "not valid UTF-8", "bytes that are not UTF-8 text",
                           "PATH=VALUE in UTF-8");
  const auto eq = expression.find('=');
  const core::Location cli{"--set " + expression, "", ""};
  if (eq == std::string::npos || eq == 0)
    throw core::InputError(cli, "malformed override", "\"" + expression + "\"", "PATH=VALUE, e.g. plan.tp=4");
  const std::string path = expression.substr(0, eq);
  const std::string text = expression.substr(eq + 1);

  std::vector<std::string> segments;
  std::size_t start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    segments.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  for (const auto& s : segments)
    if (s.empty())
      throw core::InputError(cli, "malformed path", "\"" + path + "\"", "dot-separated keys, e.g. plan.tp");

  std::string pointer;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    core::Json& parent = root_.at(core::Json::json_pointer(pointer));
    const std::string& key = segments[i];
    const bool last = i + 1 == segments.size();
    if (parent.is_array()) {
      const bool digits = std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits || std::stoul(key) >= parent.size())
        throw core::InputError(provenance_.locate(pointer), "cannot set " + path + ": no element " + key,
                               fmt::format("an array of {}", parent.size()), "an index below its length");
      pointer = core::pointer_append(pointer, key);
      continue;
    }
    if (!parent.is_object())
      throw core::InputError(provenance_.locate(pointer), "cannot set " + path + ": not an object here",
                             core::describe_type(parent), "an object");
    if (!last && !parent.contains(key))
      parent[key] = core::Json::object();
    pointer = core::pointer_append(pointer, key);
  }

  core::Json value;
  try {
    value = core::Json::parse(text);
  } catch (const core::Json::parse_error&) {
    value = text; // not JSON: a bare string such as gpipe or 400GBps
  } catch (const core::Json::out_of_range&) {
    // A number beyond a double ("1e400"), or text starting with one ("1e400GBps"): the latter is a string whose
    // quantity the reader will refuse.
    static const std::regex number(R"(^\s*-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?\s*$)");
    if (std::regex_match(text, number))
      throw core::InputError(cli, "a number beyond the range of a double", core::clip(text),
                             "numbers within about 1.8e308 (and plausible for what they describe)");
    value = text;
  }
  provenance_.forget_at_and_below(pointer);
  root_[core::Json::json_pointer(pointer)] = std::move(value);
  provenance_.mark_set(pointer, expression);
  // A path typed on the command line is relative to the working directory, like every other.
  for (auto it = dirs_.begin(); it != dirs_.end();)
    it = !it->first.empty() && (it->first == pointer || it->first.starts_with(pointer + "/")) ? dirs_.erase(it)
                                                                                              : std::next(it);
  std::error_code ec;
  dirs_[pointer] = fs::current_path(ec);
}

} // namespace sim::scenario
