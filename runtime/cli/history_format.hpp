// How `passepartout skills history` renders recorded skill changes: aligned
// text for people, one JSON document for programs. Defined in cli.cpp.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "skills/audit_log.hpp"

namespace passepartout::cli {

// One line per change, in the order given, columns aligned: local time (ISO
// 8601 to the second, with the UTC offset), action, skill, `from -> to`
// versions (each with the first 12 hex digits of its sha256 and, when known,
// `cfg <fingerprint>` of its settings; `-` for none), outcome, duration,
// requester. Under it, indented: `changed: <details>` and `state: <hand-over>`
// when recorded, and for a refused or failed change `step: error`. Control characters are shown escaped (`\x1b`), so a
// recorded message cannot drive the terminal. Uses the process's time zone (TZ).
std::string format_history(const std::vector<SkillChange>& changes);

// `{"changes": [...]}` with every field of every change, pretty-printed;
// invalid UTF-8 in a field is replaced (U+FFFD) rather than refused. With a
// `source`, `{"source": ..., "changes": [...]}`: where the changes were read
// ("daemon <endpoint>" or "folder <state dir>").
std::string format_history_json(const std::vector<SkillChange>& changes, std::string_view source = {});

// Where and what `passepartout skills history` reads.
struct HistoryRequest {
  std::filesystem::path state_dir;  // empty: ask the daemon, else read the default state folder
  std::string skill;                // empty: every skill
  std::size_t limit = 100;
};

// Prints the changes recorded in `state_dir`'s audit log (read-only), with
// `source` ("folder <dir>") in the JSON document; `note`, when not empty, goes
// to standard error first in text mode. Defined in cli.cpp.
int run_local_history(const std::filesystem::path& state_dir, const HistoryRequest& request, bool as_json,
                      const std::string& note);

}  // namespace passepartout::cli
