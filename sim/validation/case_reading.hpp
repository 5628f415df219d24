// What every part of a validation case's conversion shares: the case's fields read leniently (a missing, null or
// mistyped value reads as none), and the conversion in progress, which collects what it assumed and why it stops.
#pragma once

#include "core/document.hpp"
#include "validation/case_conversion.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sim::validation {

std::string lower(std::string s);
// Whether `text`, in lower case, contains `what` (given in lower case).
bool mentions(const std::string& text, std::string_view what);

// A section of a case ("model", "plan"): an empty object when it is missing or not an object.
const core::Json& section(const core::Json& c, std::string_view key);
// A member of `j`; null when it is missing or null.
const core::Json* member(const core::Json& j, std::string_view key);
std::optional<double> number(const core::Json& j, std::string_view key);
// A whole, non-negative number.
std::optional<std::int64_t> integer(const core::Json& j, std::string_view key);
// A string as written, any other value as JSON; "" when missing.
std::string text(const core::Json& j, std::string_view key);
std::optional<bool> flag(const core::Json& j, std::string_view key);

// The first field of `section` outside `known`, as "name.field" ("field" for the case's top level, name ""); "" when
// every field is known.
std::string unknown_field(const core::Json& section, std::string_view name, const std::set<std::string>& known);

// One case being converted: the case, where the presets are, and the CaseConversion its parts fill in.
class Conversion {
 public:
  Conversion(const core::Json& c, std::filesystem::path data_dir);

  const core::Json& case_json() const { return c_; }
  const std::filesystem::path& data_dir() const { return data_dir_; }
  const std::string& id() const { return out_.id; }
  CaseConversion& out() { return out_; }

  void assume(std::string what);
  // simtrain cannot express the case: says why, and drops the runs found so far.
  void refuse(std::string why);
  bool refused() const { return !out_.unsupported.empty(); }

  // A field that is present must be understood; `choices` maps its lowered text's prefix to the scenario's value.
  // Refuses the case when no prefix matches.
  std::optional<std::string> choice(const core::Json& j, std::string_view key,
                                    const std::vector<std::pair<std::string, std::string>>& choices);

 private:
  const core::Json& c_;
  std::filesystem::path data_dir_;
  CaseConversion out_;
};

} // namespace sim::validation
