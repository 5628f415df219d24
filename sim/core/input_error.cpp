#include "core/input_error.hpp"

namespace sim::core {
namespace {

std::string render(const Location& where, const std::string& problem, const std::string& found,
                   const std::string& expected)
{
  std::string line = format_location(where) + ": " + problem;
  if (!found.empty() || !expected.empty()) {
    line += " (";
    if (!found.empty())
      line += "found " + found;
    if (!found.empty() && !expected.empty())
      line += "; ";
    if (!expected.empty())
      line += "expected " + expected;
    line += ")";
  }
  if (!where.set_by.empty())
    line += " [set by --set " + where.set_by + "]";
  return line;
}

} // namespace

std::string format_location(const Location& where)
{
  if (where.pointer.empty())
    return where.file;
  return where.file + ":" + where.pointer;
}

std::string format_warning(const Warning& warning)
{
  std::string line = "warning: " + format_location(warning.where) + ": " + warning.message;
  if (!warning.where.set_by.empty())
    line += " [set by --set " + warning.where.set_by + "]";
  return line;
}

InputError::InputError(Location where, std::string problem, const std::string& found, const std::string& expected)
    : std::runtime_error(render(where, problem, found, expected)), where_(std::move(where)),
      problem_(std::move(problem))
{}

} // namespace sim::core
