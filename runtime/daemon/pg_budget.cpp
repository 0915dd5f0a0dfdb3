// PgSharedCaps: SharedCaps over the state database. Every statement is
// literal SQL; a call's holds go in as parallel arrays, unnested.
#include "daemon/pg_budget.hpp"

#include <fmt/format.h>

#include <mutex>
#include <utility>
#include <vector>

#include "base/log.hpp"
#include "store/pg_client.hpp"

namespace passepartout {
namespace {

constexpr std::string_view kComponent = "BUDGET";

// `values` as a float8[] parameter, each exactly (17 significant digits).
std::string numbers_array(const std::vector<double>& values) {
  std::vector<std::string> texts;
  texts.reserve(values.size());
  for (const double value : values) texts.emplace_back(fmt::format("{:.17g}", value));
  return pg_array(texts);
}

// The holds of one call as array parameters: $1 caps, $2 scopes, $3 windows, $4 amounts.
std::vector<std::optional<std::string>> hold_arrays(const std::vector<SharedCaps::Hold>& holds) {
  std::vector<std::string> caps, scopes, windows;
  std::vector<double> amounts;
  for (const SharedCaps::Hold& hold : holds) {
    caps.push_back(hold.cap);
    scopes.push_back(hold.scope);
    windows.push_back(std::to_string(hold.window_start));
    amounts.push_back(hold.amount);
  }
  return {pg_array(caps), pg_array(scopes), pg_array(windows), numbers_array(amounts)};
}

// Locks the rows of the holds in $1..$3, in one order for every node.
constexpr std::string_view kLockRows =
    "SELECT b.cap FROM passepartout_budget b JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS w(cap, scope, "
    "window_start) USING (cap, scope, window_start) ORDER BY b.cap, b.scope, b.window_start FOR UPDATE OF b";

class PgSharedCaps final : public SharedCaps {
 public:
  PgSharedCaps(PgClient& client, std::string node, std::chrono::milliseconds timeout)
      : client_(client), node_(std::move(node)), timeout_(timeout) {}

  // This node's holds from an earlier run, counted as spent, once (tried
  // again at each reservation while the database has not answered).
  void start() {
    const std::lock_guard lock(mutex_);
    recover();
  }

  Result<std::optional<Shortfall>> reserve(const std::string& id, const std::vector<Hold>& holds) override;
  void settle(const std::string& id, const std::vector<Hold>& holds, const std::vector<double>& used) override;
  void release(const std::string& id, const std::vector<Hold>& holds) override;

 private:
  // Takes the holds of `id` off the count, adding `used` (per hold) to what was spent.
  void end(const std::string& id, const std::vector<Hold>& holds, const std::vector<double>& used, const char* doing);
  void recover();  // under mutex_

  PgClient& client_;
  std::string node_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  bool recovered_ = false;
};

void PgSharedCaps::recover() {
  if (recovered_) return;
  const PgOutcome outcome = pg_wait(
      client_,
      {{"WITH gone AS (DELETE FROM passepartout_budget_holds WHERE node = $1 RETURNING id, cap, scope, window_start, "
        "amount), moved AS (UPDATE passepartout_budget b SET reserved = greatest(0, b.reserved - g.amount), spent = "
        "b.spent + g.amount FROM (SELECT cap, scope, window_start, sum(amount) AS amount FROM gone GROUP BY cap, "
        "scope, window_start) g WHERE b.cap = g.cap AND b.scope = g.scope AND b.window_start = g.window_start "
        "RETURNING b.cap) SELECT count(DISTINCT id) AS calls FROM gone",
        {node_}}},
      timeout_);
  if (!outcome.ok()) {
    log_message(LogLevel::warn, kComponent, "the fleet's holds of node {} from its last run are not counted yet: {}",
                node_, outcome.error->message);
    return;
  }
  recovered_ = true;
  const auto calls = outcome.results[0].at(0, "calls");
  if (calls && *calls != "0") {
    log_message(LogLevel::warn, kComponent,
                "{} call(s) of node {} in flight when it last stopped are counted at their reserved worst case in the "
                "fleet's caps",
                *calls, node_);
  }
}

Result<std::optional<SharedCaps::Shortfall>> PgSharedCaps::reserve(const std::string& id,
                                                                   const std::vector<Hold>& holds) {
  start();
  auto params = hold_arrays(holds);
  std::vector<double> limits;
  limits.reserve(holds.size());
  for (const Hold& hold : holds) limits.push_back(hold.limit);
  params.emplace_back(numbers_array(limits));
  params.emplace_back(id);
  params.emplace_back(node_);
  // The rows exist, are locked in order, and are read as the raise sees them:
  // all of the call's holds fit, or none is taken.
  const PgOutcome outcome = pg_wait(
      client_,
      {{"INSERT INTO passepartout_budget (cap, scope, window_start) SELECT * FROM unnest($1::text[], $2::text[], "
        "$3::bigint[]) ON CONFLICT DO NOTHING",
        {params[0], params[1], params[2]}},
       {std::string(kLockRows), {params[0], params[1], params[2]}},
       {"WITH w AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::float8[], $5::float8[]) WITH "
        "ORDINALITY AS u(cap, scope, window_start, amount, cap_limit, i)), state AS (SELECT w.i, w.cap_limit - "
        "b.spent - b.reserved AS remaining, w.amount FROM w JOIN passepartout_budget b USING (cap, scope, "
        "window_start)), short AS (SELECT i, remaining FROM state WHERE amount > remaining ORDER BY i LIMIT 1), "
        "raised AS (UPDATE passepartout_budget b SET reserved = b.reserved + w.amount FROM w WHERE b.cap = w.cap AND "
        "b.scope = w.scope AND b.window_start = w.window_start AND NOT EXISTS (SELECT 1 FROM short) RETURNING b.cap), "
        "held AS (INSERT INTO passepartout_budget_holds (id, node, cap, scope, window_start, amount) SELECT $6, $7, "
        "w.cap, w.scope, w.window_start, w.amount FROM w WHERE NOT EXISTS (SELECT 1 FROM short) RETURNING id) "
        "SELECT (SELECT i FROM short) AS short, (SELECT remaining FROM short) AS remaining, (SELECT count(*) FROM "
        "raised) AS raised",
        params}},
      timeout_);
  if (!outcome.ok()) {
    return fail(ErrorCode::io_error, outcome.error->connection
                                         ? "the state database is unreachable (" + outcome.error->message + ")"
                                         : "the state database: " + outcome.error->message);
  }
  const PgRows& rows = outcome.results[2];
  const auto short_at = rows.at(0, "short");
  if (!short_at) return std::optional<Shortfall>();
  Shortfall shortfall;
  shortfall.hold = static_cast<std::size_t>(rows.integer(0, "short") - 1);
  const auto remaining = rows.at(0, "remaining");
  shortfall.remaining = remaining ? std::stod(std::string(*remaining)) : 0.0;
  return std::optional<Shortfall>(shortfall);
}

void PgSharedCaps::end(const std::string& id, const std::vector<Hold>& holds, const std::vector<double>& used,
                       const char* doing) {
  auto params = hold_arrays(holds);
  params.emplace_back(numbers_array(used));
  params.emplace_back(id);
  // Once: only while the call's hold rows are there, and they go with it.
  const PgOutcome outcome = pg_wait(
      client_,
      {{std::string(kLockRows), {params[0], params[1], params[2]}},
       {"WITH gone AS (DELETE FROM passepartout_budget_holds WHERE id = $6 RETURNING cap, scope, window_start, "
        "amount) UPDATE passepartout_budget b SET reserved = greatest(0, b.reserved - g.amount), spent = b.spent + "
        "w.used FROM gone g JOIN unnest($1::text[], $2::text[], $3::bigint[], $4::float8[], $5::float8[]) AS w(cap, "
        "scope, window_start, amount, used) USING (cap, scope, window_start) WHERE b.cap = g.cap AND b.scope = "
        "g.scope AND b.window_start = g.window_start",
        params}},
      timeout_);
  if (!outcome.ok()) {
    // The hold stays counted at its worst case until this node starts again.
    log_message(LogLevel::warn, kComponent, "the fleet's count: cannot {} a call ({}); its hold stays counted", doing,
                outcome.error->message);
  }
}

void PgSharedCaps::settle(const std::string& id, const std::vector<Hold>& holds, const std::vector<double>& used) {
  end(id, holds, used, "settle");
}

void PgSharedCaps::release(const std::string& id, const std::vector<Hold>& holds) {
  end(id, holds, std::vector<double>(holds.size(), 0.0), "release");
}

}  // namespace

std::shared_ptr<SharedCaps> make_pg_shared_caps(PgClient& client, std::string node, std::chrono::milliseconds timeout) {
  auto caps = std::make_shared<PgSharedCaps>(client, std::move(node), timeout);
  caps->start();
  return caps;
}

}  // namespace passepartout
