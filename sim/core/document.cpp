#include "core/document.hpp"

#include <cctype>

#include <fmt/format.h>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace sim::core {

std::string pointer_append(std::string_view pointer, std::string_view key)
{
  std::string out(pointer);
  out += '/';
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string pointer_append(std::string_view pointer, std::size_t index)
{
  return std::string(pointer) + "/" + std::to_string(index);
}

namespace {

bool is_at_or_below(std::string_view pointer, std::string_view prefix)
{
  if (prefix.empty())
    return true;
  if (pointer.substr(0, prefix.size()) != prefix)
    return false;
  return pointer.size() == prefix.size() || pointer[prefix.size()] == '/';
}

} // namespace

void Provenance::add_source(const std::string& tree_pointer, std::string file, std::string file_pointer)
{
  sources_[tree_pointer] = Source{std::move(file), std::move(file_pointer)};
}

void Provenance::mark_set(const std::string& tree_pointer, std::string expression)
{
  overrides_[tree_pointer] = std::move(expression);
}

void Provenance::forget_below(const std::string& tree_pointer)
{
  for (auto it = sources_.begin(); it != sources_.end();) {
    if (it->first != tree_pointer && is_at_or_below(it->first, tree_pointer))
      it = sources_.erase(it);
    else
      ++it;
  }
}

void Provenance::forget_at_and_below(const std::string& tree_pointer)
{
  forget_below(tree_pointer);
  sources_.erase(tree_pointer);
}

Location Provenance::locate(std::string_view tree_pointer) const
{
  Location where{"<input>", std::string(tree_pointer), {}};
  std::size_t best = 0;
  bool found = false;
  for (const auto& [prefix, source] : sources_) {
    if (is_at_or_below(tree_pointer, prefix) && (!found || prefix.size() >= best)) {
      best = prefix.size();
      found = true;
      where.file = source.file;
      where.pointer = source.file_pointer + std::string(tree_pointer.substr(prefix.size()));
    }
  }
  for (const auto& [prefix, expression] : overrides_)
    if (is_at_or_below(tree_pointer, prefix))
      where.set_by = expression;
  return where;
}

std::string display_path(const std::filesystem::path& path)
{
  std::error_code ec;
  const auto relative = std::filesystem::proximate(path, ec);
  if (ec || relative.empty() || *relative.begin() == "..")
    return path.lexically_normal().string();
  return relative.string();
}

namespace {

struct Frame {
  bool is_array = false;
  std::set<std::string> keys;
  std::string key;
  std::size_t index = 0;
};

std::string frames_pointer(const std::vector<Frame>& frames, std::size_t depth)
{
  std::string pointer;
  for (std::size_t i = 0; i < depth; ++i)
    pointer = frames[i].is_array ? pointer_append(pointer, frames[i].index) : pointer_append(pointer, frames[i].key);
  return pointer;
}

void line_and_column(const std::string& text, std::size_t byte, std::size_t& line, std::size_t& column)
{
  line = 1;
  column = 1;
  for (std::size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
}

// The length of the well-formed UTF-8 sequence at text[i], or 0 when it is not one.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i)
{
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80)
    return 1;
  std::size_t extra = 0;
  unsigned min = 0;
  unsigned code = 0;
  if ((c & 0xE0) == 0xC0) {
    extra = 1;
    min = 0x80;
    code = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    extra = 2;
    min = 0x800;
    code = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    extra = 3;
    min = 0x10000;
    code = c & 0x07;
  } else {
    return 0;
  }
  if (i + extra >= text.size()) // its continuation bytes run past the end
    return 0;
  for (std::size_t k = 1; k <= extra; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80)
      return 0;
    code = (code << 6) | (b & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
    return 0;
  return extra + 1;
}

} // namespace

bool is_valid_utf8(std::string_view text)
{
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence_length(text, i);
    if (n == 0)
      return false;
    i += n;
  }
  return true;
}

std::string escape_invalid_utf8(std::string_view text)
{
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      out += fmt::format("\\x{:02X}", static_cast<unsigned char>(text[i]));
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

Json read_json_file(const std::filesystem::path& path)
{
  const std::string name = display_path(path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError({name, "", ""}, "cannot read file", "a folder", "a JSON file");
  if (!std::filesystem::exists(path, ec)) {
    // A missing file clears `ec`; a path that cannot be followed (a symbolic link loop, a folder without
    // permission) says why.
    std::string why = ec ? ec.message() : "no such file";
    if (!why.empty())
      why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
    throw InputError({name, "", ""}, "cannot read file", why, "a JSON file");
  }
  if (!std::filesystem::is_regular_file(path, ec))
    throw InputError({name, "", ""}, "cannot read file", "not a regular file", "a JSON file");
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (!in && !in.eof())
    throw InputError({name, "", ""}, "cannot read file");
  const std::string text = buffer.str();

  std::vector<Frame> frames;
  auto after_value = [&frames] {
    if (!frames.empty() && frames.back().is_array)
      ++frames.back().index;
  };
  Json::parser_callback_t callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        frames.push_back(Frame{});
        break;
      case Json::parse_event_t::array_start:
        frames.push_back(Frame{true, {}, {}, 0});
        break;
      case Json::parse_event_t::key: {
        Frame& top = frames.back();
        const std::string key = parsed.get<std::string>();
        top.key = key;
        if (!top.keys.insert(key).second)
          throw InputError({name, frames_pointer(frames, frames.size()), ""}, "duplicate key", "\"" + key + "\"",
                           "each key once per object");
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        frames.pop_back();
        after_value();
        break;
      case Json::parse_event_t::value:
        after_value();
        break;
    }
    return true;
  };
  try {
    return Json::parse(text, callback);
  } catch (const Json::out_of_range& e) {
    // nlohmann names the number in quotes ("number overflow parsing '1e400'"); the open frames say where it is.
    const std::string what = e.what();
    const auto open = what.find('\'');
    const auto close = what.rfind('\'');
    const std::string found = open < close ? what.substr(open + 1, close - open - 1) : std::string{};
    throw InputError({name, frames_pointer(frames, frames.size()), ""}, "a number beyond the range of a double", found,
                     "numbers within about 1.8e308 (and plausible for what they describe)");
  } catch (const Json::parse_error& e) {
    std::size_t line = 0;
    std::size_t column = 0;
    line_and_column(text, e.byte, line, column);
    // nlohmann: "[json.exception.parse_error.101] parse error at line L, column C: PROBLEM[; last read: 'TEXT']".
    std::string what = e.what();
    if (const auto at = what.find(": ", what.find("column")); at != std::string::npos)
      what = what.substr(at + 2);
    std::string found;
    if (const auto last = what.find("; last read: '"); last != std::string::npos) {
      found = what.substr(last + 14);
      if (!found.empty() && found.back() == '\'')
        found.pop_back();
      found = escape_invalid_utf8(found);
      what.erase(last);
    }
    throw InputError({name + ":" + std::to_string(line) + ":" + std::to_string(column), "", ""},
                     "invalid JSON: " + escape_invalid_utf8(what), found);
  }
}

namespace {

// JSON text of `value`, stopping once `out` holds `budget` characters: never deeper than that, so that a value nested
// a million levels deep renders in constant stack.
void render_into(const Json& value, std::string& out, std::size_t budget)
{
  if (out.size() >= budget)
    return;
  if (value.is_array() || value.is_object()) {
    out += value.is_array() ? '[' : '{';
    bool first = true;
    for (auto it = value.begin(); it != value.end() && out.size() < budget; ++it) {
      if (!first)
        out += ", ";
      first = false;
      if (value.is_object())
        out += Json(it.key()).dump() + ": ";
      render_into(*it, out, budget);
    }
    if (out.size() < budget)
      out += value.is_array() ? ']' : '}';
    return;
  }
  out += value.dump();
}

} // namespace

std::string render_value(const Json& value)
{
  constexpr std::size_t max_length = 60;
  std::string text;
  render_into(value, text, max_length + 1);
  return clip(text, max_length);
}

std::string describe_type(const Json& value)
{
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "a boolean " + value.dump();
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "a number " + value.dump();
    case Json::value_t::string:
      return "a string " + render_value(value);
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    default:
      return "a value";
  }
}

} // namespace sim::core
