// How commands show text that came from elsewhere (the daemon, the audit log)
// on a terminal: escaped control characters, widths, times. Defined in cli.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace passepartout::cli {

// `text` with control characters (C0, DEL and C1, which some terminals obey
// even UTF-8 encoded) as \xNN escapes, so it cannot drive the terminal. With
// `keep_layout`, newlines and tabs stay as they are (for multi-line replies).
std::string printable(std::string_view text, bool keep_layout = false);
// Width in code points, so a non-ASCII name does not shift the columns after it.
std::size_t display_width(std::string_view text);
// Local time, ISO 8601 to the second with the UTC offset: 2024-05-01T14:03:22+02:00.
std::string local_iso8601(std::int64_t unix_ms);
// 850 us, 12.3 ms, 1.25 s.
std::string format_duration(std::int64_t us);

}  // namespace passepartout::cli
