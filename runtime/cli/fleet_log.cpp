// The fleet commands' state database, and the fleet's decision log read from it.
#include "cli/fleet_log.hpp"

#include <optional>
#include <vector>

#include "daemon/daemon_config.hpp"
#include "store/pg_client.hpp"

namespace passepartout::cli {

namespace {

constexpr std::chrono::milliseconds kWait{10000};

std::optional<std::string> given(const std::string& text) {
  return text.empty() ? std::nullopt : std::optional<std::string>(text);
}

}  // namespace

Result<FleetTarget> resolve_fleet_target(const std::filesystem::path& config_file, const std::string& state_db,
                                         const std::string& lease) {
  SettingSources sources;
  sources.config_file = config_file;
  sources.env = process_env;
  if (!state_db.empty()) sources.command_line["state-db"] = state_db;
  if (!lease.empty()) sources.command_line["fleet-lease"] = lease;
  const auto config = resolve_daemon_config(sources);
  if (!config) return fail(ErrorCode::invalid_input, config.error().message);
  if (config->state_db.empty()) {
    return fail(ErrorCode::invalid_input,
                "no state database: give --state-db URL, PASSEPARTOUT_STATE_DB, or a --config file with state_db:");
  }
  return FleetTarget{config->state_db, config->state_db_shown, config->fleet_lease};
}

Result<void> read_fleet_decisions(const FleetTarget& target, const FleetDecisionFilter& filter, bool newest_first,
                                  std::size_t page,
                                  const std::function<bool(std::string_view node, std::string_view line)>& each) {
  // Keyset pages on (time, node, id): each page starts past the last row
  // of the one before, so rows shipped meanwhile neither repeat nor shift it.
  const std::string order = newest_first ? "DESC" : "ASC";
  const std::string past = newest_first ? "<" : ">";
  const std::string sql =
      "SELECT node, id, record, to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS at "
      "FROM passepartout_decisions WHERE ($1::text IS NULL OR node = $1) AND ($2::timestamptz IS NULL OR time >= $2) "
      "AND ($3::text IS NULL OR outcome = $3) AND ($4::text IS NULL OR session = $4) AND ($5::timestamptz IS NULL OR "
      "(time, node, id) " +
      past + " ($5::timestamptz, $6, $7)) ORDER BY time " + order + ", node " + order + ", id " + order +
      " LIMIT $8::bigint";
  std::optional<std::string> after_time;
  std::optional<std::string> after_node;
  std::optional<std::string> after_id;
  for (;;) {
    PgOutcome asked = pg_run_once(target.conninfo,
                                  {{sql,
                                    {given(filter.node), given(filter.since), given(filter.outcome),
                                     given(filter.session), after_time, after_node, after_id, std::to_string(page)}}},
                                  kWait);
    if (!asked.ok()) {
      return fail(ErrorCode::io_error, target.shown + ": " + asked.error->message +
                                           (asked.error->sqlstate == "42P01"
                                                ? " (no daemon of this version has migrated the database yet: start "
                                                  "one with --state-db)"
                                                : ""));
    }
    const PgRows& rows = asked.results[0];
    for (std::size_t i = 0; i < rows.rows.size(); ++i) {
      if (!each(rows.at(i, "node").value_or(""), rows.at(i, "record").value_or(""))) return {};
    }
    if (rows.rows.size() < page) return {};
    const std::size_t last = rows.rows.size() - 1;
    after_time = std::string(rows.at(last, "at").value_or(""));
    after_node = std::string(rows.at(last, "node").value_or(""));
    after_id = std::string(rows.at(last, "id").value_or(""));
  }
}

}  // namespace passepartout::cli
