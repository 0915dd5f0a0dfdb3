// SqliteDb over the SQLite C API.
#include "base/sqlite_db.hpp"
#include "base/errno_text.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>  // renameat2 (glibc declares it in stdio.h)

#include <cerrno>
#include <climits>
#include <ranges>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "base/file_io.hpp"

namespace passepartout {
namespace fs = std::filesystem;

namespace {

constexpr int kBusyTimeoutMs = 2000;

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

// A file that is not a database, or is damaged, says so in the words the operator needs.
Unexpected<Error> sqlite_error(sqlite3* db, const fs::path& file, std::string_view what, std::string_view doing) {
  const int code = db != nullptr ? sqlite3_errcode(db) : SQLITE_NOMEM;
  const char* message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
  if ((code & 0xff) == SQLITE_NOTADB || (code & 0xff) == SQLITE_CORRUPT) {
    return fail(ErrorCode::invalid_input,
                file.string() + " is not a Passepartout " + std::string(what) + ": " + message);
  }
  return fail(code_for(code), file.string() + ": " + std::string(doing) + ": " + message);
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
  std::reverse(missing.begin(), missing.end());  // outermost first
  for (const fs::path& folder : missing) {
    if (::mkdir(folder.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;  // another process got there first; its folder, its mode
      return fail(ErrorCode::io_error, "cannot create the folder " + folder.string() + ": " + errno_text(errno));
    }
    // mkdir's mode is filtered by the umask; state is private whatever it is.
    if (::chmod(folder.c_str(), 0700) != 0) {
      return fail(ErrorCode::io_error, "cannot set the mode of " + folder.string() + ": " + errno_text(errno));
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

}  // namespace

void SqliteDb::FinalizeStatement::operator()(sqlite3_stmt* statement) const noexcept { sqlite3_finalize(statement); }

StatementReset::~StatementReset() {
  sqlite3_reset(statement_);
  sqlite3_clear_bindings(statement_);
}

bool bind_text(sqlite3_stmt* statement, int index, std::string_view text) {
  if (text.size() > static_cast<std::size_t>(INT_MAX)) return false;
  // An empty view may have no data, which SQLite would bind as NULL.
  const char* data = text.data() != nullptr ? text.data() : "";
  return sqlite3_bind_text(statement, index, data, static_cast<int>(text.size()), nullptr) == SQLITE_OK;
}

std::string column_text(sqlite3_stmt* statement, int column) {
  const unsigned char* text = sqlite3_column_text(statement, column);
  if (text == nullptr) return {};
  const int bytes = sqlite3_column_bytes(statement, column);
  return {reinterpret_cast<const char*>(text), static_cast<std::size_t>(bytes)};
}

SqliteDb::SqliteDb(fs::path file, sqlite3* db, std::string_view what) : file_(std::move(file)), db_(db), what_(what) {}

SqliteDb::SqliteDb(SqliteDb&& other) noexcept
    : file_(std::move(other.file_)), db_(std::exchange(other.db_, nullptr)), what_(std::move(other.what_)) {}

SqliteDb& SqliteDb::operator=(SqliteDb&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    file_ = std::move(other.file_);
    db_ = std::exchange(other.db_, nullptr);
    what_ = std::move(other.what_);
  }
  return *this;
}

SqliteDb::~SqliteDb() {
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

sqlite3* SqliteDb::handle() const noexcept { return db_; }

Unexpected<Error> SqliteDb::error(std::string_view doing) const { return sqlite_error(db_, file_, what_, doing); }

Result<SqliteDb::Statement> SqliteDb::prepare(std::string_view sql) const {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &raw, nullptr) !=
      SQLITE_OK) {
    sqlite3_finalize(raw);
    return error("cannot prepare a statement");
  }
  return Statement(raw);
}

void SqliteDb::rollback() const noexcept { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }

Result<void> SqliteDb::exec(const char* sql, std::string_view doing) const {
  if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) return error(doing);
  return {};
}

namespace {

// Runs a statement expected to answer one integer (a pragma or a count).
Result<std::int64_t> query_int(const SqliteDb& db, const char* sql, std::string_view doing) {
  auto statement = db.prepare(sql);
  if (!statement) return fail(statement.error().code, statement.error().message);
  if (sqlite3_step(statement->get()) != SQLITE_ROW) return db.error(doing);
  return sqlite3_column_int64(statement->get(), 0);
}

Unexpected<Error> newer_schema(const fs::path& file, const SqliteSchema& schema, std::int64_t version) {
  return fail(ErrorCode::refused, file.string() + ": the " + std::string(schema.what) + " has schema version " +
                                      std::to_string(version) + ", newer than this passepartout supports (" +
                                      std::to_string(schema.migrations.size()) + "); use a newer passepartout");
}

// Whether the file is ours (or a fresh, empty database a writer may set up).
// Only reads: a file that is not ours is left as it was.
Result<void> check_header(const SqliteDb& db, const SqliteSchema& schema, bool read_only) {
  const fs::path& file = db.file();
  auto application_id = query_int(db, "PRAGMA application_id", "cannot read the application id");
  if (!application_id) return fail(application_id.error().code, application_id.error().message);
  auto version = query_int(db, "PRAGMA user_version", "cannot read the schema version");
  if (!version) return fail(version.error().code, version.error().message);
  auto objects = query_int(db, "SELECT count(*) FROM sqlite_schema", "cannot read the schema");
  if (!objects) return fail(objects.error().code, objects.error().message);

  const auto latest = static_cast<std::int64_t>(schema.migrations.size());
  if (*application_id == 0 && *version == 0 && *objects == 0) {
    if (read_only) return fail(ErrorCode::not_found, file.string() + " holds no " + std::string(schema.what) + " yet");
    return {};
  }
  if (*application_id != schema.application_id) {
    return fail(ErrorCode::invalid_input, file.string() + " is not a Passepartout " + std::string(schema.what) +
                                              ": it is another application's SQLite database");
  }
  if (*version > latest) return newer_schema(file, schema, *version);
  if (read_only && *version < latest) {
    return fail(ErrorCode::refused, file.string() + ": the " + std::string(schema.what) + " has schema version " +
                                        std::to_string(*version) + ", older than this passepartout's (" +
                                        std::to_string(latest) +
                                        "); open it once for writing (start the daemon) to migrate it");
  }
  return {};
}

// Brings the schema up to date. The version is read again inside the write
// transaction: another process may have migrated since the header was read.
Result<void> migrate(const SqliteDb& db, const SqliteSchema& schema) {
  return db.in_transaction("cannot migrate the schema", [&]() -> Result<void> {
    auto version = query_int(db, "PRAGMA user_version", "cannot read the schema version");
    if (!version) return fail(version.error().code, version.error().message);
    if (*version > static_cast<std::int64_t>(schema.migrations.size()))
      return newer_schema(db.file(), schema, *version);
    for (auto v = static_cast<std::size_t>(*version); v < schema.migrations.size(); ++v) {
      auto migrated = db.exec(schema.migrations[v], "cannot migrate the schema to version " + std::to_string(v + 1));
      if (!migrated) return migrated;
    }
    return {};
  });
}

}  // namespace

Result<SqliteDb> SqliteDb::open_with(const fs::path& file, const SqliteSchema& schema, bool read_only) {
  const int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOFOLLOW;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(file.c_str(), &raw, flags, nullptr);
  SqliteDb db(file, raw, schema.what);  // owns the handle from here, even on failure
  if (rc != SQLITE_OK) return db.error("cannot open");
  if (sqlite3_busy_timeout(raw, kBusyTimeoutMs) != SQLITE_OK) return db.error("cannot set the busy timeout");
  // Refuse schema tricks (writable_schema, shadow-table writes, functions with
  // side effects in triggers) a damaged or hostile file could otherwise use.
  if (sqlite3_db_config(raw, SQLITE_DBCONFIG_DEFENSIVE, 1, static_cast<int*>(nullptr)) != SQLITE_OK ||
      sqlite3_db_config(raw, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, static_cast<int*>(nullptr)) != SQLITE_OK) {
    return db.error("cannot configure the connection");
  }
  if (auto checked = check_header(db, schema, read_only); !checked) {
    return fail(checked.error().code, checked.error().message);
  }
  if (read_only) return db;

  auto mode = db.prepare("PRAGMA journal_mode = WAL");
  if (!mode) return fail(mode.error().code, mode.error().message);
  if (sqlite3_step(mode->get()) != SQLITE_ROW) return db.error("cannot switch to WAL");
  if (std::string got = column_text(mode->get(), 0); got != "wal") {
    return fail(ErrorCode::io_error, file.string() + ": cannot switch to the WAL journal (SQLite kept '" + got +
                                         "'; is the folder on a network file system?)");
  }
  mode.value().reset();
  if (auto sync = db.exec("PRAGMA synchronous = FULL", "cannot set synchronous=FULL"); !sync) {
    return fail(sync.error().code, sync.error().message);
  }
  if (auto migrated = migrate(db, schema); !migrated) return fail(migrated.error().code, migrated.error().message);
  return db;
}

namespace {

Result<void> synced(const fs::path& path, bool is_folder) {
  if (const int error = sync_path(path, is_folder); error != 0) {
    return fail(ErrorCode::io_error, "cannot sync " + path.string() + ": " + errno_text(error));
  }
  return {};
}

}  // namespace

// A database that does not exist yet is built whole under a temporary name,
// where nothing else can see it, without a journal or a sync; then it is
// synced once and renamed into place, and the folder synced. Switching an
// empty file to WAL and migrating it in place synced seven times, which a
// first start of the daemon paid twice. A file that appears meanwhile (another
// process made it) wins: ours is removed and theirs opened.
Result<void> SqliteDb::create_fresh(const fs::path& file, const SqliteSchema& schema) {
  struct stat info {};
  if (::lstat(file.c_str(), &info) == 0) return {};
  if (errno != ENOENT) return fail(ErrorCode::io_error, "cannot inspect " + file.string() + ": " + errno_text(errno));
  const fs::path temp = file.string() + ".new-" + std::to_string(::getpid());
  const auto remove_temp = [&temp] {
    for (const char* suffix : {"", "-journal", "-wal", "-shm"}) ::unlink((temp.string() + suffix).c_str());
  };
  remove_temp();  // a leftover of a killed process that had our pid
  if (auto created = create_private_file(temp); !created) return created;
  Result<void> built = [&]() -> Result<void> {
    sqlite3* raw = nullptr;
    const int rc = sqlite3_open_v2(temp.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, nullptr);
    const SqliteDb db(file, raw, schema.what);  // errors name the real file
    if (rc != SQLITE_OK) return db.error("cannot create");
    if (auto off = db.exec("PRAGMA journal_mode = OFF", "cannot create"); !off) return off;
    if (auto off = db.exec("PRAGMA synchronous = OFF", "cannot create"); !off) return off;
    if (auto migrated = migrate(db, schema); !migrated) return migrated;
    // Persistent in the file's header; closing then removes the empty WAL.
    return db.exec("PRAGMA journal_mode = WAL", "cannot switch to WAL");
  }();
  if (built) built = synced(temp, false);
  if (built && ::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, file.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno != EEXIST) {
      built = fail(ErrorCode::io_error,
                   "cannot rename " + temp.string() + " to " + file.string() + ": " + errno_text(errno));
    }
  }
  remove_temp();  // nothing left when renamed; the file when another process won or a step failed
  if (!built) return built;
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  return synced(dir, true);
}

Result<SqliteDb> SqliteDb::open(const fs::path& file, const SqliteSchema& schema) {
  if (file.empty()) return fail(ErrorCode::invalid_input, "the " + std::string(schema.what) + " needs a file name");
  if (auto dirs = create_private_dirs(file.parent_path()); !dirs) return fail(dirs.error().code, dirs.error().message);
  // Afterwards the file exists: made now, by another process meanwhile, or before.
  if (auto created = create_fresh(file, schema); !created) return fail(created.error().code, created.error().message);
  return open_with(file, schema, false);
}

Result<SqliteDb> SqliteDb::open_read_only(const fs::path& file, const SqliteSchema& schema) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return fail(ErrorCode::io_error, "cannot inspect " + file.string() + ": " + ec.message());
    }
    return fail(ErrorCode::not_found, "no " + std::string(schema.what) + " at " + file.string());
  }
  return open_with(file, schema, true);
}

}  // namespace passepartout
