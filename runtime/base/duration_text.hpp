// Spans of time as operators write them on a command line or in a rules file
// ("10m", "7d") and as messages show them ("7 d", "1 h 30 min"); points in
// time as a file written by hand holds them ("2026-12-31T23:59:00Z").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace passepartout {

// A whole number followed by a unit: s, m (minutes), h, d or w, or a bare
// number of seconds ("600"); more than zero and at most ten years. The error
// (invalid_input) quotes the text and says how to write one.
Result<std::chrono::milliseconds> parse_span(std::string_view text);

// The span in its two largest units: "45 s", "10 min", "1 h 30 min", "7 d", "2 d 3 h".
std::string span_text(std::chrono::milliseconds span);

// The system clock now, in Unix milliseconds.
std::int64_t unix_ms_now() noexcept;

// Unix milliseconds as UTC to the second: "2026-12-31T23:59:00Z".
std::string utc_timestamp(std::int64_t unix_ms);
// The same read back (exactly that form, seconds up to 60), or nullopt.
std::optional<std::int64_t> parse_utc_timestamp(std::string_view text);

}  // namespace passepartout
