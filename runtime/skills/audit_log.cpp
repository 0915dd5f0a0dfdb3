// AuditLog over the SQLite C API: one connection, prepared statements with
// bound parameters, WAL journal, schema migrations keyed on PRAGMA user_version.
#include "skills/audit_log.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

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
constexpr int kBusyTimeoutMs = 2000;

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
};
static_assert(kApplicationId == 1347436876, "migration 0 writes the application id literally");

constexpr const char* kInsertSql =
    "INSERT INTO skill_changes (at_unix_ms, requester, action, skill, from_version, from_sha256, to_version, "
    "to_sha256, outcome, step, error, duration_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";
constexpr const char* kColumns =
    "SELECT id, at_unix_ms, requester, action, skill, from_version, from_sha256, to_version, to_sha256, outcome, "
    "step, error, duration_us FROM skill_changes ";
constexpr const char* kListSql = "ORDER BY id DESC LIMIT ?1";
constexpr const char* kListSkillSql = "WHERE skill = ?2 ORDER BY id DESC LIMIT ?1";

constexpr std::array<std::string_view, 4> kActions = {"load", "swap", "add", "remove"};
constexpr std::array<std::string_view, 3> kOutcomes = {"ok", "refused", "failed"};

struct CloseDb {
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
struct FinalizeStatement {
  void operator()(sqlite3_stmt* statement) const noexcept { sqlite3_finalize(statement); }
};
using DbHandle = std::unique_ptr<sqlite3, CloseDb>;
using Statement = std::unique_ptr<sqlite3_stmt, FinalizeStatement>;

// Leaves a cached statement ready for its next use whichever way a call returns.
class ResetOnExit {
 public:
  explicit ResetOnExit(sqlite3_stmt* statement) : statement_(statement) {}
  ~ResetOnExit() {
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
  }
  ResetOnExit(const ResetOnExit&) = delete;
  ResetOnExit& operator=(const ResetOnExit&) = delete;

 private:
  sqlite3_stmt* statement_;
};

ErrorCode code_for(int sqlite_code) {
  switch (sqlite_code & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
      return ErrorCode::invalid_input;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return ErrorCode::refused;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_PROTOCOL:
      return ErrorCode::io_error;
    default:
      return ErrorCode::failed;
  }
}

// "<file>: <doing>: <sqlite's message>"; a file that is not a database, or is
// damaged, says so in the words the operator needs.
Unexpected<Error> sqlite_error(sqlite3* db, const fs::path& file, std::string_view doing) {
  const int code = db != nullptr ? sqlite3_errcode(db) : SQLITE_NOMEM;
  const char* message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
  if ((code & 0xff) == SQLITE_NOTADB || (code & 0xff) == SQLITE_CORRUPT) {
    return fail(ErrorCode::invalid_input, file.string() + " is not a Passepartout audit log: " + message);
  }
  return fail(code_for(code), file.string() + ": " + std::string(doing) + ": " + message);
}

Result<Statement> prepare(sqlite3* db, const fs::path& file, const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr) != SQLITE_OK) {
    sqlite3_finalize(raw);
    return sqlite_error(db, file, "cannot prepare a statement");
  }
  return Statement(raw);
}

Result<void> exec(sqlite3* db, const fs::path& file, const char* sql, std::string_view doing) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) return sqlite_error(db, file, doing);
  return {};
}

// Runs a statement expected to answer one integer (a pragma or a count).
Result<std::int64_t> query_int(sqlite3* db, const fs::path& file, const char* sql, std::string_view doing) {
  auto statement = prepare(db, file, sql);
  if (!statement) return fail(statement.error().code, statement.error().message);
  if (sqlite3_step(statement->get()) != SQLITE_ROW) return sqlite_error(db, file, doing);
  return sqlite3_column_int64(statement->get(), 0);
}

// The text is only borrowed: bindings are cleared (ResetOnExit) before the
// caller's strings go away, so SQLITE_STATIC (a null destructor) is enough.
bool bind_text(sqlite3_stmt* statement, int index, std::string_view text) {
  if (text.size() > static_cast<std::size_t>(INT_MAX)) return false;
  return sqlite3_bind_text(statement, index, text.data(), static_cast<int>(text.size()), nullptr) == SQLITE_OK;
}

std::string column_text(sqlite3_stmt* statement, int column) {
  const unsigned char* text = sqlite3_column_text(statement, column);
  if (text == nullptr) return {};
  const int bytes = sqlite3_column_bytes(statement, column);
  return std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(bytes));
}

bool is_one_of(std::string_view value, const auto& allowed) {
  for (std::string_view a : allowed) {
    if (value == a) return true;
  }
  return false;
}

std::string errno_text(int error) {
  return std::generic_category().message(error);
}

// Creates the missing folders of `dir` (mode 0700), leaving existing ones alone.
Result<void> create_private_dirs(const fs::path& dir) {
  if (dir.empty()) return {};
  std::vector<fs::path> missing;
  for (fs::path p = dir; !p.empty(); p = p.parent_path()) {
    struct stat info {};
    if (::stat(p.c_str(), &info) == 0) {
      if (!S_ISDIR(info.st_mode)) return fail(ErrorCode::io_error, p.string() + " is not a folder");
      break;
    }
    if (errno != ENOENT) return fail(ErrorCode::io_error, "cannot inspect " + p.string() + ": " + errno_text(errno));
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;  // another process got there first; its folder, its mode
      return fail(ErrorCode::io_error, "cannot create the folder " + it->string() + ": " + errno_text(errno));
    }
    // mkdir's mode is filtered by the umask; the audit trail is private whatever it is.
    if (::chmod(it->c_str(), 0700) != 0) {
      return fail(ErrorCode::io_error, "cannot set the mode of " + it->string() + ": " + errno_text(errno));
    }
  }
  return {};
}

// Creates `file` empty with mode 0600 unless it exists. SQLite gives its -wal
// and -shm files the mode of the database, so they are private too.
Result<void> create_private_file(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return {};
    return fail(ErrorCode::io_error, "cannot create " + file.string() + ": " + errno_text(errno));
  }
  const bool mode_set = ::fchmod(fd, 0600) == 0;
  const int saved = errno;
  ::close(fd);
  if (!mode_set) return fail(ErrorCode::io_error, "cannot set the mode of " + file.string() + ": " + errno_text(saved));
  return {};
}

// What the file says about itself, read before anything is written to it.
struct Header {
  std::int64_t application_id = 0;
  std::int64_t schema_version = 0;
  std::int64_t objects = 0;  // tables, indexes, triggers, views
};

Result<Header> read_header(sqlite3* db, const fs::path& file) {
  auto application_id = query_int(db, file, "PRAGMA application_id", "cannot read the application id");
  if (!application_id) return fail(application_id.error().code, application_id.error().message);
  auto schema_version = query_int(db, file, "PRAGMA user_version", "cannot read the schema version");
  if (!schema_version) return fail(schema_version.error().code, schema_version.error().message);
  auto objects = query_int(db, file, "SELECT count(*) FROM sqlite_schema", "cannot read the schema");
  if (!objects) return fail(objects.error().code, objects.error().message);
  return Header{*application_id, *schema_version, *objects};
}

Unexpected<Error> newer_schema(const fs::path& file, std::int64_t version) {
  return fail(ErrorCode::refused, file.string() + ": the audit log has schema version " + std::to_string(version) +
                                      ", newer than this passepartout supports (" +
                                      std::to_string(AuditLog::kSchemaVersion) + "); use a newer passepartout");
}

// Whether the file is ours (or a fresh, empty database a writer may set up).
Result<void> check_header(const Header& header, const fs::path& file, bool read_only) {
  const bool is_empty = header.application_id == 0 && header.schema_version == 0 && header.objects == 0;
  if (is_empty) {
    if (read_only) return fail(ErrorCode::not_found, file.string() + " holds no audit log yet");
    return {};
  }
  if (header.application_id != kApplicationId) {
    return fail(ErrorCode::invalid_input,
                file.string() + " is not a Passepartout audit log: it is another application's SQLite database");
  }
  if (header.schema_version > AuditLog::kSchemaVersion) {
    return newer_schema(file, header.schema_version);
  }
  if (read_only && header.schema_version < AuditLog::kSchemaVersion) {
    return fail(ErrorCode::refused, file.string() + ": the audit log has schema version " +
                                        std::to_string(header.schema_version) + ", older than this passepartout's (" +
                                        std::to_string(AuditLog::kSchemaVersion) +
                                        "); open it once for writing (start the daemon) to migrate it");
  }
  return {};
}

// Brings the schema to kSchemaVersion. The version is read again inside the
// write transaction: another process may have migrated since the header was read.
Result<void> migrate(sqlite3* db, const fs::path& file) {
  if (auto begun = exec(db, file, "BEGIN IMMEDIATE", "cannot start the schema migration"); !begun) return begun;
  auto version = query_int(db, file, "PRAGMA user_version", "cannot read the schema version");
  Result<void> migrated;
  if (!version) {
    migrated = fail(version.error().code, version.error().message);
  } else if (*version > AuditLog::kSchemaVersion) {
    migrated = newer_schema(file, *version);
  } else {
    for (auto v = static_cast<std::size_t>(*version); v < kMigrations.size() && migrated; ++v) {
      migrated = exec(db, file, kMigrations[v], "cannot migrate the schema to version " + std::to_string(v + 1));
    }
  }
  if (!migrated) {
    // Best effort: the failure being reported matters more, and closing the
    // connection rolls back anyway.
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    return migrated;
  }
  return exec(db, file, "COMMIT", "cannot commit the schema migration");
}

Result<DbHandle> open_connection(const fs::path& file, bool read_only) {
  const int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOFOLLOW;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(file.c_str(), &raw, flags, nullptr);
  DbHandle db(raw);
  if (rc != SQLITE_OK) return sqlite_error(db.get(), file, "cannot open");
  if (sqlite3_busy_timeout(db.get(), kBusyTimeoutMs) != SQLITE_OK) {
    return sqlite_error(db.get(), file, "cannot set the busy timeout");
  }
  // Refuse schema tricks (writable_schema, shadow-table writes, functions with
  // side effects in triggers) a damaged or hostile file could otherwise use.
  if (sqlite3_db_config(db.get(), SQLITE_DBCONFIG_DEFENSIVE, 1, static_cast<int*>(nullptr)) != SQLITE_OK ||
      sqlite3_db_config(db.get(), SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, static_cast<int*>(nullptr)) != SQLITE_OK) {
    return sqlite_error(db.get(), file, "cannot configure the connection");
  }
  return db;
}

}  // namespace

struct AuditLog::State {
  fs::path file;
  bool read_only = false;
  // Guards the connection and the cached statements: one SQLite connection
  // must not run two statements at once from two threads.
  mutable std::mutex connection_mutex;
  DbHandle db;  // declared first: closed after the statements are finalised
  Statement insert;
  Statement list_all;
  Statement list_skill;
};

AuditLog::AuditLog(std::unique_ptr<State> state) : state_(std::move(state)) {}
AuditLog::~AuditLog() = default;

const fs::path& AuditLog::file() const noexcept {
  return state_->file;
}
bool AuditLog::is_read_only() const noexcept {
  return state_->read_only;
}

Result<std::unique_ptr<AuditLog>> AuditLog::open_with(const fs::path& file, bool read_only) {
  auto state = std::make_unique<State>();
  state->file = file;
  state->read_only = read_only;

  auto db = open_connection(file, read_only);
  if (!db) return fail(db.error().code, db.error().message);
  state->db = std::move(*db);
  sqlite3* handle = state->db.get();

  // Everything up to here only reads: a file that is not ours is left as it was.
  auto header = read_header(handle, file);
  if (!header) return fail(header.error().code, header.error().message);
  if (auto checked = check_header(*header, file, read_only); !checked) {
    return fail(checked.error().code, checked.error().message);
  }

  if (!read_only) {
    auto mode = prepare(handle, file, "PRAGMA journal_mode = WAL");
    if (!mode) return fail(mode.error().code, mode.error().message);
    if (sqlite3_step(mode->get()) != SQLITE_ROW) return sqlite_error(handle, file, "cannot switch to WAL");
    if (std::string got = column_text(mode->get(), 0); got != "wal") {
      return fail(ErrorCode::io_error, file.string() + ": cannot switch to the WAL journal (SQLite kept '" + got +
                                           "'; is the folder on a network file system?)");
    }
    mode.value().reset();
    if (auto sync = exec(handle, file, "PRAGMA synchronous = FULL", "cannot set synchronous=FULL"); !sync) {
      return fail(sync.error().code, sync.error().message);
    }
    if (auto migrated = migrate(handle, file); !migrated) return fail(migrated.error().code, migrated.error().message);

    auto insert = prepare(handle, file, kInsertSql);
    if (!insert) return fail(insert.error().code, insert.error().message);
    state->insert = std::move(*insert);
  }

  auto list_all = prepare(handle, file, std::string(kColumns) + kListSql);
  if (!list_all) return fail(list_all.error().code, list_all.error().message);
  state->list_all = std::move(*list_all);
  auto list_skill = prepare(handle, file, std::string(kColumns) + kListSkillSql);
  if (!list_skill) return fail(list_skill.error().code, list_skill.error().message);
  state->list_skill = std::move(*list_skill);
  return std::unique_ptr<AuditLog>(new AuditLog(std::move(state)));
}

Result<std::unique_ptr<AuditLog>> AuditLog::open(const fs::path& file) {
  if (file.empty()) return fail(ErrorCode::invalid_input, "the audit log needs a file name");
  if (auto dirs = create_private_dirs(file.parent_path()); !dirs) return fail(dirs.error().code, dirs.error().message);
  if (auto created = create_private_file(file); !created) return fail(created.error().code, created.error().message);
  return open_with(file, false);
}

Result<std::unique_ptr<AuditLog>> AuditLog::open_read_only(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return fail(ErrorCode::io_error, "cannot inspect " + file.string() + ": " + ec.message());
    }
    return fail(ErrorCode::not_found, "no audit log at " + file.string());
  }
  return open_with(file, true);
}

Result<std::int64_t> AuditLog::record(const SkillChange& change) {
  if (state_->read_only) {
    return fail(ErrorCode::refused, state_->file.string() + ": cannot record a change: the log was opened read-only");
  }
  if (!is_one_of(change.action, kActions)) {
    return fail(ErrorCode::invalid_input, "audit: unknown action '" + change.action + "' (load, swap, add, remove)");
  }
  if (!is_one_of(change.outcome, kOutcomes)) {
    return fail(ErrorCode::invalid_input, "audit: unknown outcome '" + change.outcome + "' (ok, refused, failed)");
  }
  if (change.at_unix_ms < 0 || change.duration_us < 0) {
    return fail(ErrorCode::invalid_input, "audit: negative time or duration for skill '" + change.skill + "'");
  }
  const std::int64_t at =
      change.at_unix_ms != 0
          ? change.at_unix_ms
          : std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();

  std::lock_guard lock(state_->connection_mutex);
  sqlite3* db = state_->db.get();
  sqlite3_stmt* insert = state_->insert.get();
  ResetOnExit reset(insert);
  const bool bound = sqlite3_bind_int64(insert, 1, at) == SQLITE_OK && bind_text(insert, 2, change.requester) &&
                     bind_text(insert, 3, change.action) && bind_text(insert, 4, change.skill) &&
                     bind_text(insert, 5, change.from_version) && bind_text(insert, 6, change.from_sha256) &&
                     bind_text(insert, 7, change.to_version) && bind_text(insert, 8, change.to_sha256) &&
                     bind_text(insert, 9, change.outcome) && bind_text(insert, 10, change.step) &&
                     bind_text(insert, 11, change.error) &&
                     sqlite3_bind_int64(insert, 12, change.duration_us) == SQLITE_OK;
  if (!bound) return sqlite_error(db, state_->file, "cannot record a change of skill '" + change.skill + "'");
  // In autocommit mode the step is the whole transaction: with WAL and
  // synchronous=FULL the log is synced before it returns SQLITE_DONE.
  if (sqlite3_step(insert) != SQLITE_DONE) {
    return sqlite_error(db, state_->file, "cannot record a change of skill '" + change.skill + "'");
  }
  return sqlite3_last_insert_rowid(db);
}

Result<std::vector<SkillChange>> AuditLog::list(std::size_t limit, std::string_view skill) const {
  std::vector<SkillChange> changes;
  if (limit == 0) return changes;
  const auto bounded = static_cast<std::int64_t>(
      std::min<std::size_t>(limit, static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())));

  std::lock_guard lock(state_->connection_mutex);
  sqlite3* db = state_->db.get();
  sqlite3_stmt* query = skill.empty() ? state_->list_all.get() : state_->list_skill.get();
  ResetOnExit reset(query);
  if (sqlite3_bind_int64(query, 1, bounded) != SQLITE_OK || (!skill.empty() && !bind_text(query, 2, skill))) {
    return sqlite_error(db, state_->file, "cannot list the changes");
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
    changes.push_back(std::move(change));
  }
  if (rc != SQLITE_DONE) return sqlite_error(db, state_->file, "cannot list the changes");
  return changes;
}

fs::path default_state_dir() {
  auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value != nullptr ? std::string(value) : std::string();
  };
  if (std::string dir = env("PASSEPARTOUT_STATE_DIR"); !dir.empty()) return dir;
  // The XDG base-directory spec says to ignore a relative value.
  if (fs::path xdg = env("XDG_STATE_HOME"); xdg.is_absolute()) return xdg / "passepartout";
  fs::path home = env("HOME");
  if (home.empty()) {
    std::array<char, 4096> buffer{};
    struct passwd entry {};
    struct passwd* found = nullptr;
    if (::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr &&
        found->pw_dir != nullptr) {
      home = found->pw_dir;
    }
  }
  return home / ".local" / "state" / "passepartout";
}

fs::path audit_file(const fs::path& state_dir) {
  return state_dir / "audit.sqlite3";
}

}  // namespace passepartout
