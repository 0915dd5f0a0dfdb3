#include "store/pg_schema.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace passepartout {
namespace {

// The advisory lock every daemon of a fleet takes to migrate (any constant
// they agree on; released when the transaction ends).
constexpr std::string_view kLock = "SELECT pg_advisory_xact_lock(7061737365706172)";
constexpr std::string_view kVersionTable =
    "CREATE TABLE IF NOT EXISTS passepartout_schema ("
    " version integer PRIMARY KEY,"
    " applied_at timestamptz NOT NULL DEFAULT now(),"
    " applied_by text NOT NULL)";
constexpr std::string_view kCurrent = "SELECT coalesce(max(version), 0) AS version FROM passepartout_schema";

// Version 1: the node registry, which every later table names its rows by.
constexpr std::string_view kNodes[] = {
    "CREATE TABLE passepartout_nodes ("
    " node text PRIMARY KEY,"
    " version text NOT NULL,"
    " started_at timestamptz NOT NULL,"
    " seen_at timestamptz NOT NULL)"};

// Version 2: the fleet's approvals (daemon/pg_approvals.cpp). `seq` orders
// approvals made in the same millisecond; a run is claimed by a node with a
// fencing number that each claim raises, and a lease.
constexpr std::string_view kApprovals[] = {
    "CREATE TABLE passepartout_approvals ("
    " token text PRIMARY KEY,"
    " seq bigserial NOT NULL,"
    " action text NOT NULL,"
    " action_sha256 text NOT NULL,"
    " gates text NOT NULL,"
    " reason text NOT NULL,"
    " meta text NOT NULL,"
    " session_id text NOT NULL,"
    " node text NOT NULL,"
    " created_unix_ms bigint NOT NULL,"
    " expires_unix_ms bigint NOT NULL,"
    " state text NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired')),"
    " decided_unix_ms bigint NOT NULL DEFAULT 0,"
    " decided_by text NOT NULL DEFAULT '',"
    " run_state text NOT NULL DEFAULT 'none'"
    "  CHECK (run_state IN ('none', 'claimed', 'running', 'done', 'failed', 'interrupted')),"
    " run_error text NOT NULL DEFAULT '',"
    " run_unix_ms bigint NOT NULL DEFAULT 0,"
    " run_node text NOT NULL DEFAULT '',"
    " run_fence bigint NOT NULL DEFAULT 0,"
    " run_lease_until_ms bigint NOT NULL DEFAULT 0)",
    "CREATE INDEX passepartout_approvals_by_state ON passepartout_approvals (state, created_unix_ms, seq)",
    "CREATE INDEX passepartout_approvals_by_session ON passepartout_approvals (session_id, state)"};

// Version 3: the fleet's count against the budget's caps (daemon/pg_budget.cpp):
// what every node spent and holds per cap, scope (a session cap's session)
// and window; and each call's holds, by node, until it is settled or released.
constexpr std::string_view kBudget[] = {
    "CREATE TABLE passepartout_budget ("
    " cap text NOT NULL,"
    " scope text NOT NULL,"
    " window_start bigint NOT NULL,"
    " spent double precision NOT NULL DEFAULT 0,"
    " reserved double precision NOT NULL DEFAULT 0,"
    " PRIMARY KEY (cap, scope, window_start))",
    "CREATE TABLE passepartout_budget_holds ("
    " id text NOT NULL,"
    " node text NOT NULL,"
    " cap text NOT NULL,"
    " scope text NOT NULL,"
    " window_start bigint NOT NULL,"
    " amount double precision NOT NULL,"
    " held_at timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (id, cap, scope, window_start))",
    "CREATE INDEX passepartout_budget_holds_by_node ON passepartout_budget_holds (node)"};

// Version 4: the fleet's decision log (daemon/decision_shipper.cpp). Each
// record is the line its node's spool holds, as written; `time`, `outcome`
// and `session` are read from it to filter on. A node's spool files are
// named by the digest of their first line, and `shipped` is how many of a
// file's bytes are in passepartout_decisions: both change in one
// transaction, which is how no line is shipped twice.
constexpr std::string_view kDecisions[] = {
    "CREATE TABLE passepartout_decisions ("
    " node text NOT NULL,"
    " id text NOT NULL,"
    " time timestamptz NOT NULL,"
    " outcome text NOT NULL,"
    " session text NOT NULL,"
    " record text NOT NULL,"
    " shipped_at timestamptz NOT NULL DEFAULT clock_timestamp())",
    "CREATE INDEX passepartout_decisions_by_time ON passepartout_decisions (time)",
    "CREATE INDEX passepartout_decisions_by_node ON passepartout_decisions (node, time)",
    "CREATE TABLE passepartout_decision_files ("
    " node text NOT NULL,"
    " file text NOT NULL,"
    " shipped bigint NOT NULL DEFAULT 0,"
    " lines bigint NOT NULL DEFAULT 0,"
    " updated_at timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (node, file))"};

// Version 5: skill rollouts (daemon/rollout_agent.cpp, cli/fleet_command.cpp).
// A release is a skill's manifest and library as published, with their
// digests and, when signed, an Ed25519 signature; a rollout moves one
// release through its stages, at most one running per skill; each node
// reports what it did in each rollout in a row of its own, and every
// change of a rollout is an event.
constexpr std::string_view kRollouts[] = {
    "CREATE TABLE passepartout_releases ("
    " name text NOT NULL,"
    " version text NOT NULL,"
    " manifest text NOT NULL,"
    " library bytea NOT NULL,"
    " manifest_sha256 text NOT NULL,"
    " library_sha256 text NOT NULL,"
    " signature text NOT NULL DEFAULT '',"
    " published_at timestamptz NOT NULL DEFAULT now(),"
    " published_by text NOT NULL,"
    " PRIMARY KEY (name, version))",
    "CREATE TABLE passepartout_rollouts ("
    " id bigserial PRIMARY KEY,"
    " name text NOT NULL,"
    " version text NOT NULL,"
    " stages text NOT NULL,"
    " stage integer NOT NULL DEFAULT 0,"
    " state text NOT NULL CHECK (state IN ('running', 'done', 'halted')),"
    " dwell_ms bigint NOT NULL,"
    " min_verifications bigint NOT NULL,"
    " max_disagreements double precision NOT NULL,"
    " max_failures double precision NOT NULL,"
    " max_blocks double precision NOT NULL,"
    " started_at timestamptz NOT NULL DEFAULT now(),"
    " stage_started_at timestamptz NOT NULL DEFAULT now(),"
    " finished_at timestamptz,"
    " reason text NOT NULL DEFAULT '',"
    " started_by text NOT NULL,"
    " FOREIGN KEY (name, version) REFERENCES passepartout_releases (name, version))",
    "CREATE UNIQUE INDEX passepartout_rollouts_one_running ON passepartout_rollouts (name) WHERE state = 'running'",
    "CREATE TABLE passepartout_rollout_reports ("
    " rollout bigint NOT NULL REFERENCES passepartout_rollouts (id),"
    " node text NOT NULL,"
    " stage integer NOT NULL,"
    " state text NOT NULL,"
    " step text NOT NULL DEFAULT '',"
    " error text NOT NULL DEFAULT '',"
    " verifications bigint NOT NULL DEFAULT 0,"
    " disagreements bigint NOT NULL DEFAULT 0,"
    " failures bigint NOT NULL DEFAULT 0,"
    " blocks bigint NOT NULL DEFAULT 0,"
    " updated_at timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (rollout, node))",
    "CREATE TABLE passepartout_rollout_events ("
    " rollout bigint NOT NULL REFERENCES passepartout_rollouts (id),"
    " at timestamptz NOT NULL DEFAULT clock_timestamp(),"
    " node text NOT NULL,"
    " event text NOT NULL,"
    " detail text NOT NULL)",
    "ALTER TABLE passepartout_nodes ADD COLUMN skills text NOT NULL DEFAULT ''"};

constexpr std::span<const std::string_view> kStateMigrations[] = {kNodes, kApprovals, kBudget, kDecisions, kRollouts};

int version_of(const PgOutcome& outcome) { return static_cast<int>(outcome.results.back().integer(0, "version")); }

struct Migration : std::enable_shared_from_this<Migration> {
  PgClient& client;
  const PgSchema& schema;
  std::string node;
  std::function<void(Result<PgSchemaOutcome>)> done;
  int found = -1;
  int attempts = 0;

  Migration(PgClient& c, const PgSchema& s, std::string n, std::function<void(Result<PgSchemaOutcome>)> d)
      : client(c), schema(s), node(std::move(n)), done(std::move(d)) {}

  int target() const { return static_cast<int>(schema.migrations.size()); }

  void read() {
    client.run({{std::string(kLock), {}}, {std::string(kVersionTable), {}}, {std::string(kCurrent), {}}},
               [self = shared_from_this()](PgOutcome&& outcome) { self->read_done(std::move(outcome)); });
  }

  void read_done(PgOutcome&& outcome) {
    if (!outcome.ok()) {
      done(fail(ErrorCode::io_error, "the state database's schema could not be read: " + outcome.error->message));
      return;
    }
    const int version = version_of(outcome);
    if (found < 0) found = version;
    if (version > target()) {
      done(fail(ErrorCode::refused, "the state database's schema is version " + std::to_string(version) +
                                        ", newer than this daemon's " + std::to_string(target()) +
                                        ": a newer passepartout migrated it; upgrade this daemon to join"));
      return;
    }
    if (version == target()) {
      done(PgSchemaOutcome{found, version});
      return;
    }
    apply(version);
  }

  // Migration `from` and its version row, in one transaction.
  void apply(int from) {
    // The version row first: a daemon that got there before fails here
    // (its row is the primary key's), before any of the migration runs.
    std::vector<PgStatement> statements{
        {std::string(kLock), {}},
        {"INSERT INTO passepartout_schema (version, applied_by) VALUES ($1, $2)", {std::to_string(from + 1), node}}};
    for (const std::string_view sql : schema.migrations[static_cast<std::size_t>(from)]) {
      statements.push_back({std::string(sql), {}});
    }
    statements.push_back({std::string(kCurrent), {}});
    client.run(std::move(statements),
               [self = shared_from_this(), from](PgOutcome&& outcome) { self->applied(from, std::move(outcome)); });
  }

  void applied(int from, PgOutcome&& outcome) {
    if (outcome.ok()) {
      read_done(std::move(outcome));
      return;
    }
    // Another daemon applied it first (its version row is there): read the
    // version again (a few times at most).
    const bool raced = outcome.error->sqlstate == "23505";
    if (raced && ++attempts < 5) {
      read();
      return;
    }
    done(fail(ErrorCode::io_error, "migrating the state database from version " + std::to_string(from) + " to " +
                                       std::to_string(from + 1) + " failed: " + outcome.error->message));
  }
};

}  // namespace

const PgSchema& state_schema() {
  static const PgSchema kSchema{kStateMigrations};
  return kSchema;
}

void migrate(PgClient& client, const PgSchema& schema, std::string node,
             std::function<void(Result<PgSchemaOutcome>)> done) {
  std::make_shared<Migration>(client, schema, std::move(node), std::move(done))->read();
}

}  // namespace passepartout
