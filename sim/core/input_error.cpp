#include "core/input_error.hpp"

namespace sim::core {
namespace {

std::string render(const Location& where, const std::string& problem, const std::string& found,
                   const std::string& expected)
{
  // What came from the user (names, values, --set text) is echoed at most ~80 characters long: one line stays
  // one readable line whatever the input.
  std::string line = format_location(where) + ": " + clip(problem, 240);
  if (!found.empty() || !expected.empty()) {
    line += " (";
    if (!found.empty())
      line += "found " + clip(found);
    if (!found.empty() && !expected.empty())
      line += "; ";
    if (!expected.empty())
      line += "expected " + expected;
    line += ")";
  }
  if (!where.set_by.empty())
    line += " [set by --set " + clip(where.set_by) + "]";
  return line;
}

} // namespace

std::string clip(const std::string& text, std::size_t max_length)
{
  if (text.size() <= max_length)
    return text;
  std::size_t cut = max_length - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) // not inside a UTF-8 character
    --cut;
  return text.substr(0, cut) + "...";
}

std::string format_location(const Location& where)
{
  if (where.pointer.empty())
    return clip(where.file, 160);
  return clip(where.file, 160) + ":" + clip(where.pointer);
}

std::string format_warning(const Warning& warning)
{
  std::string line = "warning: " + format_location(warning.where) + ": " + clip(warning.message, 240);
  if (!warning.where.set_by.empty())
    line += " [set by --set " + clip(warning.where.set_by) + "]";
  return line;
}

InputError::InputError(Location where, std::string problem, const std::string& found, const std::string& expected)
    : std::runtime_error(render(where, problem, found, expected)), where_(std::move(where)),
      problem_(std::move(problem))
{}

} // namespace sim::core
