// UTF-8 validation and code-point counting for text that crosses the wire
// (frame lengths count Unicode code points, not bytes).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace passepartout {

// Offset of the first byte of the first ill-formed sequence in `text`, or
// nullopt when all of it is well-formed UTF-8. Overlong forms, surrogates
// (U+D800..U+DFFF), code points above U+10FFFF and truncated sequences are
// ill-formed. NUL bytes are valid.
std::optional<std::size_t> find_invalid_utf8(std::string_view text) noexcept;

// Where validation of a text ended: `invalid_at`, the offset of the first
// ill-formed sequence (nullopt when there is none), and the number of code
// points before it.
struct Utf8Scan {
  std::optional<std::size_t> invalid_at;
  std::size_t code_points = 0;
};

// Validates and counts in one pass (the two questions a frame asks).
Utf8Scan scan_utf8(std::string_view text) noexcept;

inline bool is_valid_utf8(std::string_view text) noexcept { return !find_invalid_utf8(text).has_value(); }

// `text` with every ill-formed UTF-8 sequence replaced by U+FFFD, so untrusted
// bytes (a model's reply, an echoed HTTP body) can become a Value.
std::string replace_invalid_utf8(std::string_view text);

// Byte length of the first `n` code points of `text` (valid UTF-8), or
// std::string_view::npos when `text` holds fewer than `n` code points.
std::size_t byte_length_of_code_points(std::string_view text, std::size_t n) noexcept;

// `text` cut to at most `max_bytes` on a UTF-8 boundary, followed by a note of
// how many bytes were left out ("\n[... 1234 more bytes left out]"); `text`
// itself when it fits.
std::string bounded_text(std::string_view text, std::size_t max_bytes);

}  // namespace passepartout
