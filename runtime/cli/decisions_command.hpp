// `passepartout decisions`: reads the decision log's files (<state dir>/decisions/,
// docs/decision-log.md) directly, so it works whether a daemon runs or not;
// or, with --fleet, the fleet's one log in the state database.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

namespace passepartout::cli {

struct DecisionQuery {
  std::filesystem::path folder;  // <state dir>/decisions
  std::string since;             // RFC 3339 time; the earliest "time" shown ("": no bound)
  std::string skill;             // a gate's name ("": any)
  std::string verdict;           // "passed", "blocked", "failed", "approval" ("": any)
  std::string session;           // ("": any)
  std::size_t limit = 50;
  bool json = false;
  // The fleet's log instead of the folder's (the state database: --state-db,
  // a --config file's state_db:, PASSEPARTOUT_STATE_DB), narrowed to `node`.
  bool fleet = false;
  std::string state_db;
  std::filesystem::path config_file;
  std::string node;  // ("": any)
};

// "1h", "30m", "2d", "45s" before `now_unix_s`, or an RFC 3339 time as it
// is, as the RFC 3339 UTC text the log's "time" compares with; nullopt when
// `text` is neither.
std::optional<std::string> since_time(std::string_view text, std::int64_t now_unix_s);

// Prints the matching decisions, newest first, to `out` (one line each, or
// with `json` {"decisions": [...]}; a fleet's records carry their "node");
// malformed lines are skipped and named on `err`. Returns the exit status.
int list_decisions(const DecisionQuery& query, std::ostream& out, std::ostream& err);

}  // namespace passepartout::cli
