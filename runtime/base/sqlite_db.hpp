// SqliteDb: one private, durable SQLite database of ours (the audit log, the
// approvals): created 0600 in 0700 folders, told apart from other databases by
// its application id, WAL with synchronous=FULL, schema migrations keyed on
// PRAGMA user_version, and errors that name the file and say what to do.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/result.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace passepartout {

// What kind of database a file must hold.
struct SqliteSchema {
  std::string_view what;        // "audit log", for messages: "<file> is not a Passepartout audit log"
  std::int32_t application_id;  // PRAGMA application_id
  // Migration i takes the schema from version i to i + 1 and sets
  // application_id and user_version itself (literally: nothing is formatted
  // into SQL). The schema version is migrations.size().
  std::span<const char* const> migrations;
};

class SqliteDb {
 public:
  struct FinalizeStatement {
    void operator()(sqlite3_stmt* statement) const noexcept;
  };
  using Statement = std::unique_ptr<sqlite3_stmt, FinalizeStatement>;

  // Opens `file` for reading and writing: creates missing folders (mode 0700)
  // and the file (mode 0600), then migrates the schema. Refuses, changing
  // nothing, a file that is not SQLite, another application's database, or a
  // schema newer than this build's.
  static Result<SqliteDb> open(const std::filesystem::path& file, const SqliteSchema& schema);
  // Opens an existing database read-only; not_found when the file is absent or empty.
  static Result<SqliteDb> open_read_only(const std::filesystem::path& file, const SqliteSchema& schema);

  SqliteDb(SqliteDb&&) noexcept;
  SqliteDb& operator=(SqliteDb&&) noexcept;
  ~SqliteDb();

  sqlite3* handle() const noexcept;
  const std::filesystem::path& file() const noexcept { return file_; }

  // A statement kept for repeated use.
  Result<Statement> prepare(std::string_view sql) const;
  // Runs SQL without results ("BEGIN IMMEDIATE", ...).
  Result<void> exec(const char* sql, std::string_view doing) const;
  // "<file>: <doing>: <sqlite's message>", with the right ErrorCode.
  Unexpected<Error> error(std::string_view doing) const;
  // Runs `body` (returning Result<void>) in one write transaction (BEGIN
  // IMMEDIATE ... COMMIT); rolled back when it or the commit fails, and its
  // failure returned. `doing` names the work in messages.
  template <class Body>
  Result<void> in_transaction(std::string_view doing, Body body) const {
    if (auto begun = exec("BEGIN IMMEDIATE", doing); !begun) return begun;
    Result<void> done = body();
    if (done) done = exec("COMMIT", doing);
    if (!done) rollback();
    return done;
  }
  // Rolls back the transaction in progress; best effort (the failure being
  // reported matters more, and closing the connection rolls back anyway).
  void rollback() const noexcept;

 private:
  SqliteDb(std::filesystem::path file, sqlite3* db, std::string_view what);
  static Result<SqliteDb> open_with(const std::filesystem::path& file, const SqliteSchema& schema, bool read_only);
  // Builds a missing database whole under a temporary name and renames it into place.
  static Result<void> create_fresh(const std::filesystem::path& file, const SqliteSchema& schema);
  std::filesystem::path file_;
  sqlite3* db_;
  std::string what_;
};

// Leaves a cached statement ready for its next use whichever way a call returns.
class StatementReset {
 public:
  explicit StatementReset(sqlite3_stmt* statement) : statement_(statement) {}
  ~StatementReset();
  StatementReset(const StatementReset&) = delete;
  StatementReset& operator=(const StatementReset&) = delete;

 private:
  sqlite3_stmt* statement_;
};

// Binds borrowed text (bindings are cleared by StatementReset before the
// caller's strings go away). False when it cannot.
bool bind_text(sqlite3_stmt* statement, int index, std::string_view text);
// Column `column` of the current row as text ("" for NULL).
std::string column_text(sqlite3_stmt* statement, int column);

}  // namespace passepartout
