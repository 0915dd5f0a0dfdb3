// passepartout/name_pattern.hpp: tool-name patterns, as a skill's config
// writes them (`mcp__fs__*: allow`) and as the host reads them back to show
// an operator what a table says: '*' matches any run of characters (none
// included), every other character itself. Header-only, no allocation.
#pragma once

#include <cstddef>
#include <string_view>

namespace passepartout {

// Whether `name` matches `pattern` as a whole.
constexpr bool name_matches(std::string_view pattern, std::string_view name) noexcept {
  std::size_t p = 0;
  std::size_t n = 0;
  std::size_t star = std::string_view::npos;
  std::size_t resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
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

static_assert(name_matches("mcp__*", "mcp__fs__read") && name_matches("*", "") && !name_matches("mcp__*", "mcp_x") &&
              name_matches("a*b*c", "axxbyc") && !name_matches("a*b", "ab_"));

}  // namespace passepartout
