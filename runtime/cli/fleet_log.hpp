// What the fleet commands share: which state database they read (from
// --state-db, a --config file's state_db: or PASSEPARTOUT_STATE_DB, as the
// daemon resolves it), and the fleet's decision log read from it page by
// page (`passepartout decisions --state-db`, `verify --replay` of a
// postgresql:// address).
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace passepartout::cli {

struct FleetTarget {
  std::string conninfo;
  std::string shown;  // describe_pg_target's: host, port, database, user
  std::chrono::milliseconds lease{0};
};

// The state database the settings name. `lease` may be empty (the config's
// or the default). invalid_input: the settings are wrong, or name none.
Result<FleetTarget> resolve_fleet_target(const std::filesystem::path& config_file, const std::string& state_db,
                                         const std::string& lease = {});

// Which records to read; an empty field does not narrow.
struct FleetDecisionFilter {
  std::string node;
  std::string since;  // RFC 3339 UTC, as the log writes it
  std::string outcome;
  std::string session;
};

// Reads the fleet's decisions that pass `filter`, newest first or oldest
// first, `page` at a time (one connection each), and calls `each` with each
// record's node and line as it was written; `each` returns false to stop.
// io_error: the database could not be read (its message; it says when no
// daemon has created the tables yet).
Result<void> read_fleet_decisions(const FleetTarget& target, const FleetDecisionFilter& filter, bool newest_first,
                                  std::size_t page,
                                  const std::function<bool(std::string_view node, std::string_view line)>& each);

}  // namespace passepartout::cli
