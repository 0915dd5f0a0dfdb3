// The approval store's bounds, pages, session denials and run records, and
// its migration from files the previous version wrote; an injected clock.
#include <sqlite3.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/digest.hpp"
#include "base/log.hpp"
#include "pipeline/approvals.hpp"
#include "support/sexp.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

using testing::sexp;
using testing::TempDir;

const char* const kAction = "(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"echo hi\"))";

Value meta_of(std::string_view session) { return sexp("(:SOURCE :TUI :SESSION-ID \"" + std::string(session) + "\")"); }

// A store in a temp dir whose clock the test moves.
struct StoreRig {
  TempDir dir;
  std::int64_t now = 1'000'000;
  std::filesystem::path file = dir.path() / "approvals.sqlite3";

  ApprovalOptions options(std::size_t max_pending = ApprovalOptions::kDefaultMaxPending,
                          std::size_t per_session = ApprovalOptions::kDefaultMaxPendingPerSession) {
    return ApprovalOptions{std::chrono::hours(1), ApprovalOptions::kDefaultRetention, [this] { return now; },
                           max_pending, per_session};
  }
  std::unique_ptr<ApprovalStore> open(ApprovalOptions with) {
    auto store = ApprovalStore::open(file, std::move(with));
    REQUIRE(store.has_value());
    return std::move(*store);
  }
  std::unique_ptr<ApprovalStore> open() { return open(options()); }
};

std::string create_in(ApprovalStore& store, std::string_view session) {
  auto created = store.create(sexp(kAction), meta_of(session), {"dispatcher@1.0.0"}, "shell commands need a human");
  INFO((created ? std::string() : created.error().message));
  REQUIRE(created.has_value());
  return created->token;
}

// Runs SQL on the file behind the store's back, as an older passepartout would have.
void raw_exec(const std::filesystem::path& file, const std::string& sql) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open(file.c_str(), &db);
  char* message = nullptr;
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  INFO((message != nullptr ? message : ""));
  sqlite3_free(message);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

std::int64_t user_version(const std::filesystem::path& file) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &statement, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(statement) == SQLITE_ROW);
  const std::int64_t version = sqlite3_column_int64(statement, 0);
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return version;
}

}  // namespace

TEST_CASE("pending approvals are bounded per session and in all, and a refusal says which bound and what to do",
          "[approvals]") {
  StoreRig rig;
  auto store = rig.open(rig.options(5, 3));
  const std::string first = create_in(*store, "s1");
  create_in(*store, "s1");
  create_in(*store, "s1");

  auto refused = store->create(sexp(kAction), meta_of("s1"), {}, "");
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::limit_exceeded);
  CHECK(refused.error().message ==
        "approval refused: session 's1' already has 3 pending approvals (--max-pending-approvals-per-session); "
        "decide or deny them first: passepartout approvals deny --all-from s1");
  CHECK(store->refused_count() == 1);

  create_in(*store, "s2");
  create_in(*store, "s2");
  auto full = store->create(sexp(kAction), meta_of("s3"), {}, "");
  REQUIRE_FALSE(full.has_value());
  CHECK(full.error().code == ErrorCode::limit_exceeded);
  CHECK(full.error().message ==
        "approval refused: 5 approvals are pending, the most the daemon keeps (--max-pending-approvals); decide or "
        "deny them first: passepartout approvals list");
  CHECK(store->refused_count() == 2);
  CHECK(store->pending_count() == 5);

  SECTION("a decision makes room") {
    REQUIRE(store->deny(first, "test").has_value());
    create_in(*store, "s3");
    CHECK(store->pending_count() == 5);
  }
  SECTION("expired approvals do not count, marked yet or not") {
    rig.now += 3'600'000;
    create_in(*store, "s1");
    create_in(*store, "s1");
    CHECK(store->pending_count() == 2);
  }
  SECTION("a session id a shell would split is quoted in the hint; no session id is the internal session") {
    auto wide = rig.open(rig.options(100, 1));
    create_in(*wide, "it's mine");
    auto again = wide->create(sexp(kAction), meta_of("it's mine"), {}, "");
    REQUIRE_FALSE(again.has_value());
    CHECK(again.error().message.ends_with("--all-from 'it'\\''s mine'"));
    auto created = wide->create(sexp(kAction), Value(), {}, "");
    REQUIRE(created.has_value());
    CHECK(created->session_id == "internal");
    CHECK_FALSE(wide->create(sexp(kAction), sexp("(:SOURCE :SYSTEM)"), {}, "").has_value());
  }
  SECTION("bounds must be more than zero") {
    CHECK_FALSE(ApprovalStore::open(rig.file, rig.options(0, 1)).has_value());
    CHECK_FALSE(ApprovalStore::open(rig.file, rig.options(1, 0)).has_value());
  }
}

TEST_CASE("pending approvals are read a page at a time, newest first, with the total", "[approvals]") {
  StoreRig rig;
  auto store = rig.open();
  std::vector<std::string> created;  // oldest first
  for (int i = 0; i < 7; ++i) {
    created.push_back(create_in(*store, "s" + std::to_string(i % 3)));
    rig.now += i % 2;  // some share a millisecond: they come newest first all the same
  }
  auto page = store->pending_page(3, 0);
  REQUIRE(page.has_value());
  CHECK(page->total == 7);
  REQUIRE(page->approvals.size() == 3);
  CHECK(page->approvals[0].token == created[6]);
  CHECK(page->approvals[1].token == created[5]);
  CHECK(page->approvals[2].token == created[4]);
  CHECK(page->approvals[0].session_id == "s0");

  std::vector<std::string> seen;
  for (std::size_t offset = 0;; offset += 3) {
    auto next = store->pending_page(3, offset);
    REQUIRE(next.has_value());
    CHECK(next->total == 7);
    if (next->approvals.empty()) break;
    for (const Approval& approval : next->approvals) seen.push_back(approval.token);
  }
  CHECK(seen == std::vector<std::string>(created.rbegin(), created.rend()));

  REQUIRE(store->deny(created[6], "test").has_value());
  rig.now += 3'600'000 - 3;  // the first created (at 1'000'000) have expired, the last not yet
  page = store->pending_page(100, 0);
  REQUIRE(page.has_value());
  CHECK(page->total == page->approvals.size());
  for (const Approval& approval : page->approvals) {
    CHECK(approval.state == Approval::State::pending);
    CHECK(approval.token != created[6]);
  }
  CHECK(page->total < 6);
}

TEST_CASE("denying a session denies all its pending approvals at once and no other session's", "[approvals]") {
  StoreRig rig;
  auto store = rig.open();
  const std::string a = create_in(*store, "s1");
  const std::string b = create_in(*store, "s1");
  const std::string c = create_in(*store, "s1");
  const std::string other = create_in(*store, "s2");
  REQUIRE(store->approve(c, "test").has_value());  // decided already: stays approved

  auto denied = store->deny_session("s1", "wire");
  REQUIRE(denied.has_value());
  CHECK(*denied == 2);
  for (const std::string& token : {a, b}) {
    auto found = store->find(token);
    REQUIRE(found.has_value());
    CHECK(found->state == Approval::State::denied);
    CHECK(found->decided_by == "wire");
  }
  CHECK(store->find(c)->state == Approval::State::approved);
  CHECK(store->find(other)->state == Approval::State::pending);
  CHECK(store->pending_count() == 1);
  CHECK(store->approve(a, "test").error().message.find("already denied") != std::string::npos);

  auto none = store->deny_session("s1", "wire");
  REQUIRE(none.has_value());
  CHECK(*none == 0);
  CHECK(*store->deny_session("nobody", "wire") == 0);
}

TEST_CASE("an approved run is recorded as running, then done or failed, one the process left running is interrupted",
          "[approvals]") {
  StoreRig rig;
  std::string crashed, finished, broken, waiting;
  {
    auto store = rig.open();
    crashed = create_in(*store, "s1");
    finished = create_in(*store, "s1");
    broken = create_in(*store, "s1");
    waiting = create_in(*store, "s1");
    for (const std::string& token : {crashed, finished, broken}) REQUIRE(store->approve(token, "cli").has_value());

    CHECK(store->record_run(waiting, Approval::Run::running).error().code == ErrorCode::refused);  // not approved
    CHECK(store->record_run(finished, Approval::Run::done).error().code == ErrorCode::refused);    // never started
    for (const std::string& token : {crashed, finished, broken}) {
      REQUIRE(store->record_run(token, Approval::Run::running).has_value());
    }
    CHECK(store->record_run(finished, Approval::Run::running).error().message ==
          "approval " + finished + " is approved and its run running; it cannot be recorded as running");
    REQUIRE(store->record_run(finished, Approval::Run::done).has_value());
    REQUIRE(store->record_run(broken, Approval::Run::failed, "exit status 1").has_value());
    CHECK(store->find(crashed)->run == Approval::Run::running);
    // The store closes with `crashed` still running, as when the daemon dies during its run.
  }
  LogCapture logs;
  rig.now += 1000;
  auto store = rig.open();
  auto found = store->find(crashed);
  REQUIRE(found.has_value());
  CHECK(found->state == Approval::State::approved);
  CHECK(found->run == Approval::Run::interrupted);
  CHECK(found->run_error == "the daemon stopped while the action ran; whether it completed is not known");
  CHECK(found->run_unix_ms == rig.now);
  CHECK(store->find(finished)->run == Approval::Run::done);
  CHECK(store->find(broken)->run == Approval::Run::failed);
  CHECK(store->find(broken)->run_error == "exit status 1");
  CHECK(store->find(waiting)->run == Approval::Run::none);
  CHECK(store->approve(crashed, "cli").error().message ==
        "approval " + crashed +
            " was already approved by cli (its run: interrupted, the daemon stopped while the action ran; whether it "
            "completed is not known); an approval is decided only once");
  const auto lines = logs.lines();
  CHECK(std::count_if(lines.begin(), lines.end(), [&](const std::string& line) {
          return line.find("recorded as interrupted") != std::string::npos && line.find(crashed) != std::string::npos;
        }) == 1);

  store.reset();
  rig.open();  // already interrupted: not logged again
  const auto later = logs.lines();
  CHECK(std::count_if(later.begin(), later.end(), [](const std::string& line) {
          return line.find("recorded as interrupted") != std::string::npos;
        }) == 1);
}

TEST_CASE("a store the previous version wrote opens: its approvals get their sessions and run nothing twice",
          "[approvals]") {
  StoreRig rig;
  const std::string printed = to_sexp(sexp(kAction));
  const std::string sha = sha256_hex(printed);
  // Version 1's schema, as it shipped: a copy on purpose, not the store's
  // first migration, so that an edit to that migration cannot change what
  // this test upgrades from.
  raw_exec(rig.file, R"sql(
CREATE TABLE approvals (
  token TEXT PRIMARY KEY NOT NULL,
  action TEXT NOT NULL,
  action_sha256 TEXT NOT NULL,
  gates TEXT NOT NULL,
  reason TEXT NOT NULL,
  meta TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL,
  expires_unix_ms INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired')),
  decided_unix_ms INTEGER NOT NULL DEFAULT 0,
  decided_by TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX approvals_by_state ON approvals (state, created_unix_ms);
PRAGMA application_id = 1347436880;
PRAGMA user_version = 1;
)sql");
  const std::string values = "', '" + printed + "', '" + sha + "', 'dispatcher@1.0.0', 'r', ";
  raw_exec(rig.file, "INSERT INTO approvals VALUES ('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + values +
                         "'(:SOURCE :TUI :SESSION-ID \"old\")', 1000000, 9000000, 'pending', 0, '');"
                         "INSERT INTO approvals VALUES ('bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" +
                         values +
                         "'(:SOURCE :TUI)', 1000000, 9000000, 'pending', 0, '');"
                         "INSERT INTO approvals VALUES ('cccccccccccccccccccccccccccccccc" +
                         values +
                         "'(:SOURCE :TUI :SESSION-ID \"old\")', 1000000, 9000000, 'approved', 1000500, 'cli');");
  REQUIRE(user_version(rig.file) == 1);

  auto store = rig.open();
  CHECK(user_version(rig.file) == 2);
  auto page = store->pending_page(10, 0);
  REQUIRE(page.has_value());
  REQUIRE(page->total == 2);
  std::set<std::string> sessions;
  for (const Approval& approval : page->approvals) sessions.insert(approval.session_id);
  CHECK(sessions == std::set<std::string>{"old", "internal"});
  // Approved under version 1: nothing says it started, so it is not taken for interrupted.
  auto approved = store->find("cccccccccccccccccccccccccccccccc");
  REQUIRE(approved.has_value());
  CHECK(approved->run == Approval::Run::none);
  CHECK(approved->session_id == "old");
  CHECK(*store->deny_session("old", "wire") == 1);
  CHECK(store->pending_count() == 1);
}

}  // namespace passepartout
