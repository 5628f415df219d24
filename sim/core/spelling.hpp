// "Did you mean" suggestions for misspelt keys, values and preset names.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sim::core {

// Edit distance with adjacent transpositions (optimal string alignment).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, if it is close enough to be a plausible typo.
std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates);

// `a, b, c` for messages.
std::string join(const std::vector<std::string>& items, std::string_view separator = ", ");

} // namespace sim::core
