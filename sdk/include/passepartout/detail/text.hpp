// passepartout/detail/text.hpp: byte and name helpers shared by value.hpp and skill.hpp.
// Boundary plumbing: skill code never includes or names anything here.
#pragma once

#include <cstddef>
#include <string_view>

namespace passepartout::sdk_detail {

/// Pointer to hand the host for `text`: never NULL, even for an empty view
/// (a default-constructed std::string_view has a NULL data pointer).
inline const char* bytes_of(std::string_view text) noexcept { return text.data() != nullptr ? text.data() : ""; }

/// ASCII upper-case of `c`; other bytes (including UTF-8 sequences) unchanged.
constexpr char ascii_upper(char c) noexcept { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }

/// Whether keyword names `a` and `b` are equal ignoring ASCII case and one
/// optional leading ':' on either side (keywords compare that way, abi.h).
constexpr bool keyword_names_equal(std::string_view a, std::string_view b) noexcept {
  if (!a.empty() && a.front() == ':') a.remove_prefix(1);
  if (!b.empty() && b.front() == ':') b.remove_prefix(1);
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_upper(a[i]) != ascii_upper(b[i])) return false;
  }
  return true;
}

}  // namespace passepartout::sdk_detail
