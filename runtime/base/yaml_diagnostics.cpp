// The shared pieces of the YAML readers' diagnostics.
#include "base/yaml_diagnostics.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "base/ascii.hpp"

namespace passepartout {

std::string in_quotes(std::string_view s) {
  constexpr std::size_t kShown = 60;
  if (s.size() <= kShown) return "'" + std::string(s) + "'";
  std::size_t cut = kShown;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // whole code points
  return "'" + std::string(s.substr(0, cut)) + "...'";
}

std::string location(const std::string& where, const YAML::Mark& mark) {
  const int line = mark.line < 0 ? 0 : mark.line;
  const int column = mark.column < 0 ? 0 : mark.column;
  return where + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1);
}

std::string located(const std::string& where, const YAML::Mark& mark, const std::string& what) {
  return location(where, mark) + ": " + what;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string unknown_key_message(std::string_view key, std::span<const std::string_view> known, std::string_view where,
                                std::span<const std::pair<std::string_view, std::string_view>> aliases) {
  std::string message = "unknown key " + in_quotes(key) + std::string(where);
  const std::string folded = ascii_lower(key);
  std::string_view best;
  for (auto [alias, target] : aliases) {
    if (folded == alias && std::find(known.begin(), known.end(), target) != known.end()) best = target;
  }
  if (best.empty()) {
    std::size_t best_distance = std::numeric_limits<std::size_t>::max();
    for (std::string_view candidate : known) {
      const std::size_t d = edit_distance(folded, candidate);
      // Close means a slip of the keyboard, not a different word.
      const bool close = d <= 1 || (d == 2 && folded.size() >= 5) || d * 3 <= candidate.size();
      if (close && d < best_distance) {
        best_distance = d;
        best = candidate;
      }
    }
  }
  if (!best.empty()) return message + "; did you mean '" + std::string(best) + "'?";
  message += "; allowed keys are ";
  for (std::size_t i = 0; i < known.size(); ++i) message += (i == 0 ? "" : ", ") + std::string(known[i]);
  return message;
}

std::string YamlProblems::message() const {
  std::string joined;
  for (const std::string& p : problems_) joined += (joined.empty() ? "" : "\n") + p;
  return joined;
}

}  // namespace passepartout
