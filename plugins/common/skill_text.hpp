// Text helpers the bundled skills share: ASCII case, the names a target or a
// tool arrives under, numbers and errno values in messages. Inline and
// header-only; a skill library hides them (it exports only its entry point).
#pragma once

#include <passepartout/value.hpp>

#include <algorithm>
#include <concepts>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace passepartout::bundled {

inline char ascii_lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), ascii_lower);
  return out;
}

// True for the kinds whose text() is meaningful: string, keyword and symbol.
inline bool is_text(const ValueRef& value) { return value.is_string() || value.is_keyword() || value.is_symbol(); }

// True for :NAME, NAME, "name" or ":name" in any case: targets and tool names
// arrive in all of these forms, and the host reads a string's or symbol's
// leading ':' as a keyword's (a gate that did not would pass what the host
// then sends to that actuator). Allocates nothing: gates run on every action.
inline bool is_named(const ValueRef& value, std::string_view name) {
  if (!is_text(value)) return false;
  std::string_view text = value.text();
  if (!text.empty() && text.front() == ':') text.remove_prefix(1);
  return text.size() == name.size() && std::equal(text.begin(), text.end(), name.begin(),
                                                  [](char a, char b) { return ascii_lower(a) == ascii_lower(b); });
}

// `n` in decimal. (std::to_string would export a libstdc++ template static
// from the library, and a skill library exports nothing but its entry point.)
template <std::integral Integer>
std::string decimal(Integer n) {
  char buffer[32];
  if constexpr (std::is_signed_v<Integer>) {
    std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(n));
  } else {
    std::snprintf(buffer, sizeof buffer, "%llu", static_cast<unsigned long long>(n));
  }
  return buffer;
}

// The text of errno value `error`.
inline std::string error_text(int error) {
  char buffer[256];
  return ::strerror_r(error, buffer, sizeof buffer);  // the GNU variant returns the text
}

}  // namespace passepartout::bundled
