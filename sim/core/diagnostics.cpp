#include "core/diagnostics.hpp"

#include <iostream>
#include <nlohmann/json.hpp>

namespace sim::core {
namespace {

DiagnosticFormat format_in_use = DiagnosticFormat::TEXT;

} // namespace

void set_diagnostic_format(DiagnosticFormat format)
{
  format_in_use = format;
}

DiagnosticFormat diagnostic_format()
{
  return format_in_use;
}

void diagnose(const std::string& level, const std::string& text, const std::string& message, const Location* where)
{
  if (format_in_use == DiagnosticFormat::TEXT) {
    std::cerr << text << "\n";
    return;
  }
  nlohmann::ordered_json j{{"level", level}, {"message", message}};
  if (where != nullptr) {
    if (!where->file.empty())
      j["file"] = where->file;
    if (!where->pointer.empty())
      j["pointer"] = where->pointer;
    if (!where->set_by.empty())
      j["set_by"] = where->set_by;
  }
  std::cerr << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void diagnose_error(const InputError& e)
{
  // The message is the line without its location, which JSON gives apart.
  std::string message = e.what();
  const std::string location = format_location(e.where());
  if (message.starts_with(location + ": "))
    message = message.substr(location.size() + 2);
  diagnose("error", std::string("error: ") + e.what(), message, &e.where());
}

void diagnose_warning(const Warning& w)
{
  diagnose("warning", format_warning(w), w.message, &w.where);
}

} // namespace sim::core
