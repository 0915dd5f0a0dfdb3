// A text as a JSON string, for the JSON this runtime writes by hand where a
// document model would cost too much per line (log lines, decision records).
#pragma once

#include <string>
#include <string_view>

namespace passepartout {

// Appends `text` quoted as a JSON string: '"', '\\' and the control
// characters (below U+0020, and DEL) escaped, invalid UTF-8 repaired as
// replace_invalid_utf8() does (base/utf8.hpp). Valid text is not copied first.
void append_json_string(std::string& out, std::string_view text);

}  // namespace passepartout
