// How `passepartout skills history` renders recorded skill changes: aligned
// text for people, one JSON document for programs. Defined in cli.cpp.
#pragma once

#include <string>
#include <vector>

#include "skills/audit_log.hpp"

namespace passepartout::cli {

// One line per change, in the order given, columns aligned: local time (ISO
// 8601 to the second, with the UTC offset), action, skill, `from -> to`
// versions (each with the first 12 hex digits of its sha256; `-` for none),
// outcome, duration, requester. A refused or failed change gets a second line,
// indented, `step: error`. Control characters are shown escaped (`\x1b`), so a
// recorded message cannot drive the terminal. Uses the process's time zone (TZ).
std::string format_history(const std::vector<SkillChange>& changes);

// `{"changes": [...]}` with every field of every change, pretty-printed;
// invalid UTF-8 in a field is replaced (U+FFFD) rather than refused.
std::string format_history_json(const std::vector<SkillChange>& changes);

}  // namespace passepartout::cli
