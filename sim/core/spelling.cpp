#include "core/spelling.hpp"

#include <algorithm>
#include <cctype>

namespace sim::core {
namespace {

std::string lower(std::string_view s)
{
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

} // namespace

std::size_t edit_distance(std::string_view a, std::string_view b)
{
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i)
    d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j)
    d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates)
{
  const std::string w = lower(word);
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const auto& candidate : candidates) {
    const std::string c = lower(candidate);
    std::size_t distance = edit_distance(w, c);
    // A word that contains the candidate (or the reverse) is a likely intent: `layers` for `num_layers`.
    if (c.size() >= 3 && w.size() >= 3 && (c.find(w) != std::string::npos || w.find(c) != std::string::npos))
      distance = std::min(distance, std::size_t{2});
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  const std::size_t tolerance = std::max<std::size_t>(2, w.size() / 3);
  if (best && best_distance <= tolerance)
    return best;
  return std::nullopt;
}

std::string join(const std::vector<std::string>& items, std::string_view separator)
{
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0)
      out += separator;
    out += items[i];
  }
  return out;
}

} // namespace sim::core
