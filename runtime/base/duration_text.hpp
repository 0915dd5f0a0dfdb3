// Spans of time as operators write them on a command line or in a rules file
// ("10m", "7d") and as messages show them ("7 d", "1 h 30 min").
#pragma once

#include <chrono>
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

}  // namespace passepartout
