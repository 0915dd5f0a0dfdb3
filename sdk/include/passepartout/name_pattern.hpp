// passepartout/name_pattern.hpp: tool-name patterns, as a skill's config
// writes them (`mcp__fs__*: allow`) and as the host reads them back to show
// an operator what a table says: '*' matches any run of characters (none
// included), every other character itself. Header-only, no allocation.
#pragma once

#include <cstddef>
#include <string_view>

namespace passepartout {

// Whether `text` matches `pattern` as a whole: '*' any run of characters,
// and with `any_one` a '?' any one character; every other character itself.
constexpr bool wildcard_matches(std::string_view pattern, std::string_view text, bool any_one) noexcept {
  std::size_t p = 0;
  std::size_t n = 0;
  std::size_t star = std::string_view::npos;
  std::size_t resume = 0;
  const std::string_view name = text;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (p < pattern.size() && (pattern[p] == name[n] || (any_one && pattern[p] == '?'))) {
      ++p;
      ++n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// Whether `name` matches `pattern` as a whole ('*' any run; '?' is itself).
constexpr bool name_matches(std::string_view pattern, std::string_view name) noexcept {
  return wildcard_matches(pattern, name, false);
}

static_assert(name_matches("mcp__*", "mcp__fs__read") && name_matches("*", "") && !name_matches("mcp__*", "mcp_x") &&
              name_matches("a*b*c", "axxbyc") && !name_matches("a*b", "ab_") && !name_matches("a?", "ab") &&
              wildcard_matches("a?", "ab", true));

}  // namespace passepartout
