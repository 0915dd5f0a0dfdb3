// AuditLog: the durable, append-only SQLite record of skill changes, and the
// text and JSON renderings `passepartout skills history` prints.
#include <sqlite3.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/state_paths.hpp"
#include "cli/history_format.hpp"
#include "skills/audit_log.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using passepartout::testing::TempDir;
namespace fs = std::filesystem;

namespace {

SkillChange swap_change(std::string skill = "shell-guard") {
  SkillChange change;
  change.at_unix_ms = 1714572202123;
  change.requester = "sighup";
  change.action = "swap";
  change.skill = std::move(skill);
  change.from_version = "1.0.0";
  change.from_sha256 = "3f5a0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab";
  change.to_version = "1.1.0";
  change.to_sha256 = "9b0c0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab";
  change.outcome = "ok";
  change.duration_us = 12345;
  return change;
}

SkillChange failed_add(std::string skill = "policy") {
  SkillChange change;
  change.at_unix_ms = 1714572000000;
  change.requester = "cli";
  change.action = "add";
  change.skill = std::move(skill);
  change.to_version = "1.0.0";
  change.to_sha256 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  change.outcome = "failed";
  change.step = "self-test";
  change.error = "skill 'policy': self-test failed: rules missing";
  change.duration_us = 850;
  return change;
}

std::unique_ptr<AuditLog> open_log(const fs::path& file) {
  auto log = AuditLog::open(file);
  INFO((log ? std::string() : log.error().message));
  REQUIRE(log.has_value());
  return std::move(*log);
}

std::int64_t record(AuditLog& log, const SkillChange& change) {
  auto id = log.record(change);
  INFO((id ? std::string() : id.error().message));
  REQUIRE(id.has_value());
  return *id;
}

std::vector<SkillChange> list(const AuditLog& log, std::size_t limit = 100, std::string_view skill = {}) {
  auto changes = log.list(limit, skill);
  INFO((changes ? std::string() : changes.error().message));
  REQUIRE(changes.has_value());
  return std::move(*changes);
}

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string bytes(static_cast<std::size_t>(fs::file_size(file)), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

unsigned mode_of(const fs::path& path) {
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  return info.st_mode & 07777U;
}

// Runs SQL on the file behind the log's back, as another program would.
int raw_exec(const fs::path& file, const char* sql) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open(file.c_str(), &db);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  sqlite3_close(db);
  return rc;
}

// Sets (or unsets) an environment variable for one test, restoring it after.
class EnvOverride {
 public:
  EnvOverride(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
    if (name_ == "TZ") ::tzset();
  }
  ~EnvOverride() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
    if (name_ == "TZ") ::tzset();
  }
  EnvOverride(const EnvOverride&) = delete;
  EnvOverride& operator=(const EnvOverride&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("a recorded change reads back with every field", "[skills][audit]") {
  TempDir dir;
  auto log = open_log(dir.path() / "audit.sqlite3");
  SkillChange change = failed_add();
  change.from_version = "0.9.0";
  change.from_sha256 = "bbbb";
  change.error = "line one\nline two with \"quotes\" and 'apostrophes'; DROP TABLE skill_changes; --";
  change.from_fingerprint = "0123456789ab";
  change.to_fingerprint = "ba9876543210";
  change.details = "priority: 50 -> 60; config: api_token changed";
  change.state_handover = "import refused: no";
  const std::int64_t id = record(*log, change);
  CHECK(id > 0);

  auto changes = list(*log);
  REQUIRE(changes.size() == 1);
  change.id = id;
  CHECK(changes[0] == change);
}

TEST_CASE("a change recorded at time 0 is stamped with the current time", "[skills][audit]") {
  TempDir dir;
  auto log = open_log(dir.path() / "audit.sqlite3");
  SkillChange change = swap_change();
  change.at_unix_ms = 0;
  const auto before =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  record(*log, change);
  const auto after =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  auto changes = list(*log);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].at_unix_ms >= before);
  CHECK(changes[0].at_unix_ms <= after);
}

TEST_CASE("the log lists newest first, at most the limit, and filters by skill", "[skills][audit]") {
  TempDir dir;
  auto log = open_log(dir.path() / "audit.sqlite3");
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    SkillChange change = swap_change(i % 2 == 0 ? "shell-guard" : "policy");
    change.to_version = "1." + std::to_string(i) + ".0";
    ids.push_back(record(*log, change));
  }
  for (std::size_t i = 1; i < ids.size(); ++i) CHECK(ids[i] > ids[i - 1]);

  SECTION("newest first") {
    auto changes = list(*log);
    REQUIRE(changes.size() == 5);
    for (std::size_t i = 0; i < changes.size(); ++i) CHECK(changes[i].id == ids[ids.size() - 1 - i]);
    CHECK(changes[0].to_version == "1.4.0");
  }
  SECTION("at most the limit") {
    auto changes = list(*log, 2);
    REQUIRE(changes.size() == 2);
    CHECK(changes[0].to_version == "1.4.0");
    CHECK(changes[1].to_version == "1.3.0");
    CHECK(list(*log, 0).empty());
  }
  SECTION("only one skill") {
    auto changes = list(*log, 100, "policy");
    REQUIRE(changes.size() == 2);
    CHECK(changes[0].to_version == "1.3.0");
    CHECK(changes[1].to_version == "1.1.0");
    CHECK(list(*log, 1, "shell-guard").at(0).to_version == "1.4.0");
    CHECK(list(*log, 100, "no-such-skill").empty());
  }
}

TEST_CASE("changes recorded together are written all in one transaction, or none", "[skills][audit]") {
  TempDir dir;
  auto log = open_log(dir.path() / "audit.sqlite3");
  const std::int64_t before = record(*log, swap_change("first"));

  std::vector<SkillChange> boot = {swap_change("a"), failed_add("b"), swap_change("c")};
  auto ids = log->record_all(boot);
  INFO((ids ? std::string() : ids.error().message));
  REQUIRE(ids.has_value());
  REQUIRE(ids->size() == 3);
  CHECK((*ids)[0] > before);
  CHECK((*ids)[1] > (*ids)[0]);
  CHECK((*ids)[2] > (*ids)[1]);
  auto changes = list(*log);
  REQUIRE(changes.size() == 4);
  CHECK(changes[0].skill == "c");
  CHECK(changes[1].skill == "b");
  CHECK(changes[1].error == failed_add("b").error);
  CHECK(changes[2].skill == "a");

  // One bad change refuses the whole batch, naming what is wrong, and writes nothing.
  std::vector<SkillChange> bad = {swap_change("d"), swap_change("e")};
  bad[1].outcome = "maybe";
  auto refused = log->record_all(bad);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::invalid_input);
  CHECK(refused.error().message.find("maybe") != std::string::npos);
  CHECK(list(*log).size() == 4);

  // An empty batch writes nothing and succeeds.
  auto none = log->record_all({});
  REQUIRE(none.has_value());
  CHECK(none->empty());
  CHECK(list(*log).size() == 4);
}

TEST_CASE("recorded changes survive closing and reopening the log", "[skills][audit]") {
  TempDir dir;
  const fs::path file = dir.path() / "audit.sqlite3";
  {
    auto log = open_log(file);
    record(*log, failed_add());
    record(*log, swap_change());
  }
  auto log = open_log(file);
  auto changes = list(*log);
  REQUIRE(changes.size() == 2);
  CHECK(changes[0].action == "swap");
  CHECK(changes[1].action == "add");
  const std::int64_t next = record(*log, swap_change());
  CHECK(next > changes[0].id);
}

TEST_CASE("the log creates its folders with mode 0700 and its file with mode 0600", "[skills][audit]") {
  TempDir dir;
  const fs::path state = dir.path() / "state" / "passepartout";
  const fs::path file = audit_file(state);
  CHECK(file == state / "audit.sqlite3");
  auto log = open_log(file);
  record(*log, swap_change());
  CHECK(mode_of(dir.path() / "state") == 0700U);
  CHECK(mode_of(state) == 0700U);
  CHECK(mode_of(file) == 0600U);
  // SQLite gives the journal files the database's mode.
  if (fs::exists(file.string() + "-wal")) CHECK(mode_of(file.string() + "-wal") == 0600U);
  if (fs::exists(file.string() + "-shm")) CHECK(mode_of(file.string() + "-shm") == 0600U);
}

TEST_CASE("a new log is built whole, in WAL mode, and leaves no temporary file behind", "[skills][audit]") {
  TempDir dir;
  const fs::path file = dir.path() / "audit.sqlite3";
  {
    auto log = open_log(file);
    record(*log, swap_change());
  }
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    CHECK(entry.path().filename().string().find(".new-") == std::string::npos);
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  const auto text = [db](const char* sql) {
    sqlite3_stmt* statement = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql, -1, &statement, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(statement) == SQLITE_ROW);
    std::string value(reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)));
    sqlite3_finalize(statement);
    return value;
  };
  CHECK(text("PRAGMA journal_mode") == "wal");
  CHECK(text("PRAGMA application_id") == "1347436876");
  CHECK(text("SELECT count(*) FROM skill_changes") == "1");
  sqlite3_close(db);
}

TEST_CASE("an empty file where the log belongs is set up in place", "[skills][audit]") {
  TempDir dir;
  const fs::path file = dir.path() / "audit.sqlite3";
  std::ofstream(file).close();  // as a crash right after creating it would leave it
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  auto log = open_log(file);
  record(*log, swap_change());
  CHECK(list(*log).size() == 1);
}

TEST_CASE("a read-only handle sees what another handle wrote and cannot write", "[skills][audit]") {
  TempDir dir;
  const fs::path file = dir.path() / "audit.sqlite3";

  SECTION("the writer still open") {
    auto writer = open_log(file);
    record(*writer, failed_add());
    auto reader = AuditLog::open_read_only(file);
    REQUIRE(reader.has_value());
    CHECK((*reader)->is_read_only());
    CHECK(list(**reader).size() == 1);
    record(*writer, swap_change());
    auto changes = list(**reader);
    REQUIRE(changes.size() == 2);
    CHECK(changes[0].action == "swap");

    auto refused = (*reader)->record(swap_change());
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == ErrorCode::refused);
    CHECK(refused.error().message == file.string() + ": cannot record a change: the log was opened read-only");
    const std::vector<SkillChange> batch = {swap_change()};
    auto refused_batch = (*reader)->record_all(batch);
    REQUIRE_FALSE(refused_batch.has_value());
    CHECK(refused_batch.error().code == ErrorCode::refused);
    CHECK(list(**reader).size() == 2);
  }
  SECTION("the writer closed") {
    open_log(file)->record(swap_change()).value();
    auto reader = AuditLog::open_read_only(file);
    INFO((reader ? std::string() : reader.error().message));
    REQUIRE(reader.has_value());
    CHECK(list(**reader).size() == 1);
  }
}

TEST_CASE("opening an absent log read-only is not_found and creates nothing", "[skills][audit]") {
  TempDir dir;
  const fs::path file = dir.path() / "missing" / "audit.sqlite3";
  auto reader = AuditLog::open_read_only(file);
  REQUIRE_FALSE(reader.has_value());
  CHECK(reader.error().code == ErrorCode::not_found);
  CHECK(reader.error().message == "no audit log at " + file.string());
  CHECK_FALSE(fs::exists(file.parent_path()));
}

TEST_CASE("a file that is not a database is refused precisely and left unchanged", "[skills][audit]") {
  TempDir dir;
  const fs::path file = dir.path() / "audit.sqlite3";
  const std::string garbage(3000, 'x');
  std::ofstream(file, std::ios::binary) << "not a database\n" << garbage;
  const std::string before = read_bytes(file);

  auto log = GENERATE(false, true) ? AuditLog::open_read_only(file) : AuditLog::open(file);
  REQUIRE_FALSE(log.has_value());
  CHECK(log.error().code == ErrorCode::invalid_input);
  CHECK(log.error().message == file.string() + " is not a Passepartout audit log: file is not a database");
  CHECK(read_bytes(file) == before);
  CHECK_FALSE(fs::exists(file.string() + "-wal"));
  CHECK_FALSE(fs::exists(file.string() + "-shm"));
  CHECK_FALSE(fs::exists(file.string() + "-journal"));
}

TEST_CASE("another application's SQLite database is refused and left unchanged", "[skills][audit]") {
  TempDir dir;
  const fs::path file = dir.path() / "other.sqlite3";
  REQUIRE(raw_exec(file, "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('keep me');") == SQLITE_OK);
  const std::string before = read_bytes(file);
  auto log = AuditLog::open(file);
  REQUIRE_FALSE(log.has_value());
  CHECK(log.error().code == ErrorCode::invalid_input);
  CHECK(log.error().message ==
        file.string() + " is not a Passepartout audit log: it is another application's SQLite database");
  CHECK(read_bytes(file) == before);
}

TEST_CASE("a log with a newer schema is refused with the versions", "[skills][audit]") {
  TempDir dir;
  const fs::path file = dir.path() / "audit.sqlite3";
  open_log(file)->record(swap_change()).value();
  REQUIRE(raw_exec(file, "PRAGMA user_version = 7") == SQLITE_OK);
  const std::string expected = file.string() +
                               ": the audit log has schema version 7, newer than this passepartout supports (3); "
                               "use a newer passepartout";
  auto writer = AuditLog::open(file);
  REQUIRE_FALSE(writer.has_value());
  CHECK(writer.error().code == ErrorCode::refused);
  CHECK(writer.error().message == expected);
  auto reader = AuditLog::open_read_only(file);
  REQUIRE_FALSE(reader.has_value());
  CHECK(reader.error().message == expected);
}

TEST_CASE("a log of schema 1 is migrated in place, its rows kept with the new fields empty", "[skills][audit]") {
  TempDir dir;
  const fs::path file = dir.path() / "audit.sqlite3";
  // Schema 1 as the first release wrote it, with one row.
  REQUIRE(raw_exec(file, R"sql(
CREATE TABLE skill_changes (
  id INTEGER PRIMARY KEY AUTOINCREMENT, at_unix_ms INTEGER NOT NULL, requester TEXT NOT NULL,
  action TEXT NOT NULL, skill TEXT NOT NULL, from_version TEXT NOT NULL, from_sha256 TEXT NOT NULL,
  to_version TEXT NOT NULL, to_sha256 TEXT NOT NULL, outcome TEXT NOT NULL, step TEXT NOT NULL,
  error TEXT NOT NULL, duration_us INTEGER NOT NULL);
CREATE TRIGGER skill_changes_no_update BEFORE UPDATE ON skill_changes
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
INSERT INTO skill_changes (at_unix_ms, requester, action, skill, from_version, from_sha256, to_version, to_sha256,
  outcome, step, error, duration_us) VALUES (1714572202123, 'wire', 'swap', 'shell-guard', '1.0.0', 'aa', '1.0.0',
  'aa', 'ok', '', '', 10);
PRAGMA application_id = 1347436876;
PRAGMA user_version = 1;
)sql") == SQLITE_OK);

  // A reader of this build asks for the migration; the writer does it.
  auto reader = AuditLog::open_read_only(file);
  REQUIRE_FALSE(reader.has_value());
  CHECK(reader.error().message.find("schema version 1, older than this passepartout's (3)") != std::string::npos);

  auto log = open_log(file);
  auto before = list(*log);
  REQUIRE(before.size() == 1);
  CHECK(before[0].skill == "shell-guard");
  CHECK(before[0].requester == "wire");
  CHECK(before[0].from_fingerprint.empty());
  CHECK(before[0].details.empty());
  CHECK(before[0].state_handover.empty());
  CHECK(before[0].detail.empty());

  SkillChange next = swap_change();
  next.from_fingerprint = "0123456789ab";
  next.to_fingerprint = "ba9876543210";
  next.details = "priority: 50 -> 60";
  next.state_handover = "12 bytes";
  next.id = record(*log, next);
  auto after = list(*log);
  REQUIRE(after.size() == 2);
  CHECK(after[0] == next);
  CHECK(after[1] == before[0]);
}

TEST_CASE("a log of schema 2 gains the detail column, and a promote's statistics are kept in it", "[skills][audit]") {
  TempDir dir;
  const fs::path file = dir.path() / "audit.sqlite3";
  {
    // Schema 1, then migration 2 as the previous release applied it, with one row.
    REQUIRE(raw_exec(file, R"sql(
CREATE TABLE skill_changes (
  id INTEGER PRIMARY KEY AUTOINCREMENT, at_unix_ms INTEGER NOT NULL, requester TEXT NOT NULL,
  action TEXT NOT NULL, skill TEXT NOT NULL, from_version TEXT NOT NULL, from_sha256 TEXT NOT NULL,
  to_version TEXT NOT NULL, to_sha256 TEXT NOT NULL, outcome TEXT NOT NULL, step TEXT NOT NULL,
  error TEXT NOT NULL, duration_us INTEGER NOT NULL);
ALTER TABLE skill_changes ADD COLUMN from_fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE skill_changes ADD COLUMN to_fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE skill_changes ADD COLUMN details TEXT NOT NULL DEFAULT '';
ALTER TABLE skill_changes ADD COLUMN state_handover TEXT NOT NULL DEFAULT '';
INSERT INTO skill_changes (at_unix_ms, requester, action, skill, from_version, from_sha256, to_version, to_sha256,
  outcome, step, error, duration_us, details, state_handover) VALUES (1714572202123, 'wire', 'swap', 'shell-guard',
  '1.0.0', 'aa', '1.1.0', 'bb', 'ok', '', '', 10, 'priority: 1 -> 2', '12 bytes');
PRAGMA application_id = 1347436876;
PRAGMA user_version = 2;
)sql") == SQLITE_OK);
  }
  auto log = open_log(file);
  auto before = list(*log);
  REQUIRE(before.size() == 1);
  CHECK(before[0].details == "priority: 1 -> 2");
  CHECK(before[0].state_handover == "12 bytes");
  CHECK(before[0].detail.empty());

  SkillChange promote = swap_change();
  promote.action = "promote";
  promote.detail = R"({"seen":3,"agreements":1,"candidate-blocks":2})";
  promote.id = record(*log, promote);
  auto after = list(*log);
  REQUIRE(after.size() == 2);
  CHECK(after[0] == promote);
  CHECK(after[0].detail == promote.detail);
  CHECK(after[1] == before[0]);
}

TEST_CASE("rows in the log cannot be updated or deleted", "[skills][audit]") {
  TempDir dir;
  const fs::path file = dir.path() / "audit.sqlite3";
  open_log(file)->record(swap_change()).value();
  CHECK(raw_exec(file, "UPDATE skill_changes SET outcome = 'ok'") == SQLITE_CONSTRAINT);
  CHECK(raw_exec(file, "DELETE FROM skill_changes") == SQLITE_CONSTRAINT);
  CHECK(list(*open_log(file)).size() == 1);
}

TEST_CASE("a change with an unknown action or outcome is refused", "[skills][audit]") {
  TempDir dir;
  auto log = open_log(dir.path() / "audit.sqlite3");
  SkillChange change = swap_change();
  SECTION("action") {
    change.action = "reload";
    auto id = log->record(change);
    REQUIRE_FALSE(id.has_value());
    CHECK(id.error().code == ErrorCode::invalid_input);
    CHECK(id.error().message ==
          "audit: unknown action 'reload' (load, swap, add, remove, force-remove, shadow, shadow-stop, promote, "
          "quarantine, mcp-tool-changed, mcp-trust, rule-add, rule-remove, rule-carry, rules-reload)");
  }
  SECTION("outcome") {
    change.outcome = "maybe";
    auto id = log->record(change);
    REQUIRE_FALSE(id.has_value());
    CHECK(id.error().message == "audit: unknown outcome 'maybe' (ok, refused, failed)");
  }
  CHECK(list(*log).empty());
}

TEST_CASE("changes recorded from 4 threads all land with unique ids", "[skills][audit][concurrency]") {
  TempDir dir;
  const fs::path file = dir.path() / "audit.sqlite3";
  auto log = open_log(file);
  constexpr int kThreads = 4;
  constexpr int kEach = 25;
  std::vector<std::vector<std::int64_t>> ids(kThreads);
  std::vector<std::string> errors(kThreads);
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          SkillChange change = swap_change("skill-" + std::to_string(t));
          change.to_version = "1." + std::to_string(i) + ".0";
          auto id = log->record(change);
          if (!id) {
            errors[static_cast<std::size_t>(t)] = id.error().message;
            return;
          }
          ids[static_cast<std::size_t>(t)].push_back(*id);
          if (i % 5 == 0) (void)log->list(3);  // readers interleave with writers
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }
  std::set<std::int64_t> unique;
  for (int t = 0; t < kThreads; ++t) {
    CHECK(errors[static_cast<std::size_t>(t)].empty());
    unique.insert(ids[static_cast<std::size_t>(t)].begin(), ids[static_cast<std::size_t>(t)].end());
  }
  CHECK(unique.size() == static_cast<std::size_t>(kThreads * kEach));

  log.reset();
  auto reopened = open_log(file);
  auto changes = list(*reopened, 1000);
  CHECK(changes.size() == static_cast<std::size_t>(kThreads * kEach));
  for (int t = 0; t < kThreads; ++t) {
    CHECK(list(*reopened, 1000, "skill-" + std::to_string(t)).size() == static_cast<std::size_t>(kEach));
  }
}

TEST_CASE("the state folder comes from PASSEPARTOUT_STATE_DIR, XDG_STATE_HOME, then HOME", "[skills][audit]") {
  EnvOverride home("HOME", "/home/operator");
  SECTION("PASSEPARTOUT_STATE_DIR first") {
    EnvOverride state("PASSEPARTOUT_STATE_DIR", "/var/lib/pp");
    EnvOverride xdg("XDG_STATE_HOME", "/xdg");
    CHECK(default_state_dir() == fs::path("/var/lib/pp"));
  }
  SECTION("then XDG_STATE_HOME") {
    EnvOverride state("PASSEPARTOUT_STATE_DIR", nullptr);
    EnvOverride xdg("XDG_STATE_HOME", "/xdg");
    CHECK(default_state_dir() == fs::path("/xdg/passepartout"));
  }
  SECTION("a relative XDG_STATE_HOME is ignored") {
    EnvOverride state("PASSEPARTOUT_STATE_DIR", nullptr);
    EnvOverride xdg("XDG_STATE_HOME", "relative");
    CHECK(default_state_dir() == fs::path("/home/operator/.local/state/passepartout"));
  }
  SECTION("then the home folder") {
    EnvOverride state("PASSEPARTOUT_STATE_DIR", "");
    EnvOverride xdg("XDG_STATE_HOME", nullptr);
    CHECK(default_state_dir() == fs::path("/home/operator/.local/state/passepartout"));
  }
}

TEST_CASE("history text has aligned columns, newest first, and the failed step", "[skills][audit]") {
  EnvOverride tz("TZ", "UTC");
  SkillChange swap = swap_change();
  swap.id = 2;
  SkillChange add = failed_add();
  add.id = 1;
  const std::string text = cli::format_history({swap, add});
  CHECK(text ==
        "2024-05-01T14:03:22+00:00  swap  shell-guard  1.0.0 (3f5a01234567) -> 1.1.0 (9b0c01234567)  ok      12.3 ms  "
        "sighup\n"
        "2024-05-01T14:00:00+00:00  add   policy       - -> 1.0.0 (aaaaaaaaaaaa)                     failed   850 us  "
        "cli\n"
        "    self-test: skill 'policy': self-test failed: rules missing\n");
  CHECK(cli::format_history({}).empty());
}

TEST_CASE("history text shows the offset, long durations, removals and escapes control characters", "[skills][audit]") {
  EnvOverride tz("TZ", "CET-1CEST,M3.5.0,M10.5.0/3");
  SkillChange remove;
  remove.at_unix_ms = 1714572202000;
  remove.requester = "api";
  remove.action = "remove";
  remove.skill = "shell-guard";
  remove.from_version = "1.1.0";
  remove.outcome = "refused";
  remove.step = "dependencies";
  remove.error = "needed by 'x'\n\x1b[31mred\x1b[0m";
  remove.duration_us = 2'050'000;
  CHECK(cli::format_history({remove}) ==
        "2024-05-01T16:03:22+02:00  remove  shell-guard  1.1.0 -> -  refused  2.05 s  api\n"
        "    dependencies: needed by 'x'\n"
        "    \\x1b[31mred\\x1b[0m\n");
}

TEST_CASE("history JSON carries every field of every change", "[skills][audit]") {
  SkillChange add = failed_add();
  add.id = 41;
  add.from_version = "0.1.0";
  add.from_sha256 = "cc";
  add.error += "\xff";  // invalid UTF-8 is replaced, not refused
  const auto document = nlohmann::json::parse(cli::format_history_json({add}));
  REQUIRE(document.at("changes").size() == 1);
  const auto& c = document.at("changes").at(0);
  CHECK(c.size() == 18);
  CHECK(c.at("id") == 41);
  CHECK(c.at("at_unix_ms") == 1714572000000);
  CHECK(c.at("requester") == "cli");
  CHECK(c.at("action") == "add");
  CHECK(c.at("skill") == "policy");
  CHECK(c.at("from_version") == "0.1.0");
  CHECK(c.at("from_sha256") == "cc");
  CHECK(c.at("to_version") == "1.0.0");
  CHECK(c.at("to_sha256") == add.to_sha256);
  CHECK(c.at("outcome") == "failed");
  CHECK(c.at("step") == "self-test");
  CHECK(c.at("error") == "skill 'policy': self-test failed: rules missing\xef\xbf\xbd");
  CHECK(c.at("duration_us") == 850);
  CHECK(c.at("from_fingerprint") == "");
  CHECK(c.at("details") == "");
  CHECK(c.at("detail") == "");
  CHECK(nlohmann::json::parse(cli::format_history_json({})) == nlohmann::json{{"changes", nlohmann::json::array()}});
}
