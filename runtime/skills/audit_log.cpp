// AuditLog over the SQLite C API: one connection, prepared statements with
// bound parameters, WAL journal, schema migrations keyed on PRAGMA user_version.
#include "skills/audit_log.hpp"

#include "base/sqlite_db.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <system_error>
#include <utility>

namespace passepartout {
namespace fs = std::filesystem;

namespace {

// "PPAL" in PRAGMA application_id: tells our files from other SQLite databases.
constexpr int kApplicationId = 0x5050414c;

// Migration i takes the schema from version i to i + 1 and sets user_version
// itself, so no value is ever formatted into SQL. Applied in one IMMEDIATE
// transaction; append-only, like the log itself.
constexpr std::array<const char*, AuditLog::kSchemaVersion> kMigrations = {
    R"sql(
CREATE TABLE skill_changes (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  at_unix_ms   INTEGER NOT NULL,
  requester    TEXT NOT NULL,
  action       TEXT NOT NULL,
  skill        TEXT NOT NULL,
  from_version TEXT NOT NULL,
  from_sha256  TEXT NOT NULL,
  to_version   TEXT NOT NULL,
  to_sha256    TEXT NOT NULL,
  outcome      TEXT NOT NULL,
  step         TEXT NOT NULL,
  error        TEXT NOT NULL,
  duration_us  INTEGER NOT NULL
);
CREATE INDEX skill_changes_by_skill ON skill_changes (skill, id);
CREATE TRIGGER skill_changes_no_update BEFORE UPDATE ON skill_changes
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER skill_changes_no_delete BEFORE DELETE ON skill_changes
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
PRAGMA application_id = 1347436876;
PRAGMA user_version = 1;
)sql",
    // 2: what tells swaps apart (fingerprints of the settings and config,
    // what changed) and the state hand-over. Rows of schema 1 read as empty.
    R"sql(
ALTER TABLE skill_changes ADD COLUMN from_fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE skill_changes ADD COLUMN to_fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE skill_changes ADD COLUMN details TEXT NOT NULL DEFAULT '';
ALTER TABLE skill_changes ADD COLUMN state_handover TEXT NOT NULL DEFAULT '';
PRAGMA user_version = 2;
)sql",
    // 3: a structured detail of the change (a promote's or a shadow stop's
    // shadow statistics, as JSON); the shadow, shadow-stop and promote
    // actions need no schema change. Rows of schema 2 read as empty.
    R"sql(
ALTER TABLE skill_changes ADD COLUMN detail TEXT NOT NULL DEFAULT '';
PRAGMA user_version = 3;
)sql",
};
static_assert(kApplicationId == 1347436876, "migration 0 writes the application id literally");

constexpr const char* kInsertSql =
    "INSERT INTO skill_changes (at_unix_ms, requester, action, skill, from_version, from_sha256, to_version, "
    "to_sha256, outcome, step, error, duration_us, from_fingerprint, to_fingerprint, details, state_handover, detail) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)";
constexpr const char* kColumns =
    "SELECT id, at_unix_ms, requester, action, skill, from_version, from_sha256, to_version, to_sha256, outcome, "
    "step, error, duration_us, from_fingerprint, to_fingerprint, details, state_handover, detail FROM skill_changes ";
constexpr const char* kListSql = "ORDER BY id DESC LIMIT ?1";
constexpr const char* kListSkillSql = "WHERE skill = ?2 ORDER BY id DESC LIMIT ?1";

constexpr std::array<std::string_view, 15> kActions = {
    "load",      "swap",        "add",         "remove",     "force-remove",
    "shadow",    "shadow-stop", "promote",     "quarantine", "mcp-tool-changed",
    "mcp-trust", "rule-add",    "rule-remove", "rule-carry", "rules-reload"};
constexpr std::array<std::string_view, 3> kOutcomes = {"ok", "refused", "failed"};

bool is_one_of(std::string_view value, const auto& allowed) {
  for (std::string_view a : allowed) {
    if (value == a) return true;
  }
  return false;
}

constexpr SqliteSchema kSchema{"audit log", kApplicationId, kMigrations};

}  // namespace

struct AuditLog::State {
  explicit State(SqliteDb database) : db(std::move(database)) {}
  bool read_only = false;
  // Guards the connection and the cached statements: one SQLite connection
  // must not run two statements at once from two threads.
  mutable std::mutex connection_mutex;
  SqliteDb db;  // declared first: closed after the statements are finalised
  SqliteDb::Statement insert;
  SqliteDb::Statement list_all;
  SqliteDb::Statement list_skill;
};

AuditLog::AuditLog(std::unique_ptr<State> state) : state_(std::move(state)) {}
AuditLog::~AuditLog() = default;

const fs::path& AuditLog::file() const noexcept { return state_->db.file(); }
bool AuditLog::is_read_only() const noexcept { return state_->read_only; }

Result<std::unique_ptr<AuditLog>> AuditLog::open_with(const fs::path& file, bool read_only) {
  auto db = read_only ? SqliteDb::open_read_only(file, kSchema) : SqliteDb::open(file, kSchema);
  if (!db) return fail(db.error().code, db.error().message);
  auto state = std::make_unique<State>(std::move(*db));
  state->read_only = read_only;
  if (!read_only) {
    auto insert = state->db.prepare(kInsertSql);
    if (!insert) return fail(insert.error().code, insert.error().message);
    state->insert = std::move(*insert);
  }
  auto list_all = state->db.prepare(std::string(kColumns) + kListSql);
  if (!list_all) return fail(list_all.error().code, list_all.error().message);
  state->list_all = std::move(*list_all);
  auto list_skill = state->db.prepare(std::string(kColumns) + kListSkillSql);
  if (!list_skill) return fail(list_skill.error().code, list_skill.error().message);
  state->list_skill = std::move(*list_skill);
  return std::unique_ptr<AuditLog>(new AuditLog(std::move(state)));
}

Result<std::unique_ptr<AuditLog>> AuditLog::open(const fs::path& file) { return open_with(file, false); }

Result<std::unique_ptr<AuditLog>> AuditLog::open_read_only(const fs::path& file) { return open_with(file, true); }

namespace {

// What record() refuses before touching the database.
Result<void> check_change(const SkillChange& change) {
  if (!is_one_of(change.action, kActions)) {
    return fail(ErrorCode::invalid_input,
                "audit: unknown action '" + change.action +
                    "' (load, swap, add, remove, force-remove, shadow, shadow-stop, promote, quarantine, "
                    "mcp-tool-changed, mcp-trust, rule-add, rule-remove, rule-carry, rules-reload)");
  }
  if (!is_one_of(change.outcome, kOutcomes)) {
    return fail(ErrorCode::invalid_input, "audit: unknown outcome '" + change.outcome + "' (ok, refused, failed)");
  }
  if (change.at_unix_ms < 0 || change.duration_us < 0) {
    return fail(ErrorCode::invalid_input, "audit: negative time or duration for skill '" + change.skill + "'");
  }
  return {};
}

}  // namespace

// One INSERT of a checked change, under connection_mutex; its row id.
Result<std::int64_t> AuditLog::insert_locked(const SkillChange& change) {
  const std::int64_t at =
      change.at_unix_ms != 0
          ? change.at_unix_ms
          : std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
  sqlite3_stmt* insert = state_->insert.get();
  StatementReset reset(insert);
  const bool bound = sqlite3_bind_int64(insert, 1, at) == SQLITE_OK && bind_text(insert, 2, change.requester) &&
                     bind_text(insert, 3, change.action) && bind_text(insert, 4, change.skill) &&
                     bind_text(insert, 5, change.from_version) && bind_text(insert, 6, change.from_sha256) &&
                     bind_text(insert, 7, change.to_version) && bind_text(insert, 8, change.to_sha256) &&
                     bind_text(insert, 9, change.outcome) && bind_text(insert, 10, change.step) &&
                     bind_text(insert, 11, change.error) &&
                     sqlite3_bind_int64(insert, 12, change.duration_us) == SQLITE_OK &&
                     bind_text(insert, 13, change.from_fingerprint) && bind_text(insert, 14, change.to_fingerprint) &&
                     bind_text(insert, 15, change.details) && bind_text(insert, 16, change.state_handover) &&
                     bind_text(insert, 17, change.detail);
  if (!bound || sqlite3_step(insert) != SQLITE_DONE) {
    return state_->db.error("cannot record a change of skill '" + change.skill + "'");
  }
  return sqlite3_last_insert_rowid(state_->db.handle());
}

Result<std::int64_t> AuditLog::record(const SkillChange& change) {
  if (state_->read_only) {
    return fail(ErrorCode::refused, file().string() + ": cannot record a change: the log was opened read-only");
  }
  if (auto ok = check_change(change); !ok) return fail(ok.error().code, ok.error().message);
  std::lock_guard lock(state_->connection_mutex);
  // In autocommit mode the step is the whole transaction: with WAL and
  // synchronous=FULL the log is synced before it returns SQLITE_DONE.
  return insert_locked(change);
}

Result<std::vector<std::int64_t>> AuditLog::record_all(std::span<const SkillChange> changes) {
  if (state_->read_only) {
    return fail(ErrorCode::refused, file().string() + ": cannot record changes: the log was opened read-only");
  }
  for (const SkillChange& change : changes) {
    if (auto ok = check_change(change); !ok) return fail(ok.error().code, ok.error().message);
  }
  std::vector<std::int64_t> ids;
  ids.reserve(changes.size());
  std::lock_guard lock(state_->connection_mutex);
  // One commit, one sync, for all of them.
  auto recorded = state_->db.in_transaction("cannot record the changes", [&]() -> Result<void> {
    for (const SkillChange& change : changes) {
      auto id = insert_locked(change);
      if (!id) return fail(id.error().code, id.error().message);
      ids.push_back(*id);
    }
    return {};
  });
  if (!recorded) return fail(recorded.error().code, recorded.error().message);
  return ids;
}

Result<std::vector<SkillChange>> AuditLog::list(std::size_t limit, std::string_view skill) const {
  std::vector<SkillChange> changes;
  if (limit == 0) return changes;
  const auto bounded = static_cast<std::int64_t>(
      std::min<std::size_t>(limit, static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())));

  std::lock_guard lock(state_->connection_mutex);
  sqlite3_stmt* query = skill.empty() ? state_->list_all.get() : state_->list_skill.get();
  StatementReset reset(query);
  if (sqlite3_bind_int64(query, 1, bounded) != SQLITE_OK || (!skill.empty() && !bind_text(query, 2, skill))) {
    return state_->db.error("cannot list the changes");
  }
  int rc = SQLITE_OK;
  while ((rc = sqlite3_step(query)) == SQLITE_ROW) {
    SkillChange change;
    change.id = sqlite3_column_int64(query, 0);
    change.at_unix_ms = sqlite3_column_int64(query, 1);
    change.requester = column_text(query, 2);
    change.action = column_text(query, 3);
    change.skill = column_text(query, 4);
    change.from_version = column_text(query, 5);
    change.from_sha256 = column_text(query, 6);
    change.to_version = column_text(query, 7);
    change.to_sha256 = column_text(query, 8);
    change.outcome = column_text(query, 9);
    change.step = column_text(query, 10);
    change.error = column_text(query, 11);
    change.duration_us = sqlite3_column_int64(query, 12);
    change.from_fingerprint = column_text(query, 13);
    change.to_fingerprint = column_text(query, 14);
    change.details = column_text(query, 15);
    change.state_handover = column_text(query, 16);
    change.detail = column_text(query, 17);
    changes.push_back(std::move(change));
  }
  if (rc != SQLITE_DONE) return state_->db.error("cannot list the changes");
  return changes;
}

fs::path audit_file(const fs::path& state_dir) { return state_dir / "audit.sqlite3"; }

}  // namespace passepartout
