// The approval store's bounds, pages, session denials and run records, in
// SQLite and in the state database a fleet shares (a real PostgreSQL), and
// the SQLite file's migration from files the previous version wrote; an
// injected clock.
#include <sqlite3.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/digest.hpp"
#include "base/log.hpp"
#include "daemon/pg_approvals.hpp"
#include "pipeline/approvals.hpp"
#include "store/pg_client.hpp"
#include "store/pg_schema.hpp"
#include "support/pg_test_client.hpp"
#include "support/postgres_cluster.hpp"
#include "support/sexp.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

using testing::sexp;
using testing::TempDir;

const char* const kAction = "(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"echo hi\"))";

Value meta_of(std::string_view session) { return sexp("(:SOURCE :TUI :SESSION-ID \"" + std::string(session) + "\")"); }

// Where a rig's stores keep their approvals: every test but the SQLite
// file's own migration runs against both.
enum class Backend { sqlite, postgres };

// A store whose clock the test moves: in a temp dir, or in a database of
// its own on the shared PostgreSQL cluster, migrated, as node `node`.
struct StoreRig {
  explicit StoreRig(Backend which = Backend::sqlite) : backend(which) {
    if (backend != Backend::postgres) return;
    auto& cluster = testing::shared_postgres();
    conninfo = cluster.conninfo(cluster.create_database());
    loop = std::make_unique<testing::PgLoop>();
    client = connect();
  }

  Backend backend;
  TempDir dir;
  std::int64_t now = 1'000'000;
  std::filesystem::path file = dir.path() / "approvals.sqlite3";
  std::string conninfo;
  std::unique_ptr<testing::PgLoop> loop;
  std::unique_ptr<PgClient> client;

  // Another connection to the rig's database, on its loop, migrated.
  std::unique_ptr<PgClient> connect() {
    PgClient::Options settings;
    settings.conninfo = conninfo;
    auto made = std::make_unique<PgClient>(loop->context, settings);
    made->start();
    std::promise<Result<PgSchemaOutcome>> migrated;
    auto answer = migrated.get_future();
    migrate(*made, state_schema(), "test",
            [&migrated](Result<PgSchemaOutcome> outcome) { migrated.set_value(std::move(outcome)); });
    REQUIRE(answer.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    const auto outcome = answer.get();
    INFO((outcome ? std::string() : outcome.error().message));
    REQUIRE(outcome.has_value());
    return made;
  }

  ApprovalOptions options(std::size_t max_pending = ApprovalOptions::kDefaultMaxPending,
                          std::size_t per_session = ApprovalOptions::kDefaultMaxPendingPerSession) {
    return ApprovalOptions{std::chrono::hours(1), ApprovalOptions::kDefaultRetention, [this] { return now; },
                           max_pending, per_session};
  }
  Result<std::unique_ptr<ApprovalStore>> try_open(ApprovalOptions with, const std::string& node = "node-a") {
    if (backend == Backend::postgres) return open_pg_approvals(*client, {node}, std::move(with));
    return ApprovalStore::open(file, std::move(with));
  }
  std::unique_ptr<ApprovalStore> open(ApprovalOptions with, const std::string& node = "node-a") {
    auto store = try_open(std::move(with), node);
    INFO((store ? std::string() : store.error().message));
    REQUIRE(store.has_value());
    return std::move(*store);
  }
  std::unique_ptr<ApprovalStore> open() { return open(options()); }
};

Backend either_backend() { return GENERATE(Backend::sqlite, Backend::postgres); }

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
  StoreRig rig(either_backend());
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
    CHECK_FALSE(rig.try_open(rig.options(0, 1)).has_value());
    CHECK_FALSE(rig.try_open(rig.options(1, 0)).has_value());
  }
}

TEST_CASE("pending approvals are read a page at a time, newest first, with the total", "[approvals]") {
  StoreRig rig(either_backend());
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
  StoreRig rig(either_backend());
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
  StoreRig rig(either_backend());
  std::string crashed, finished, broken, waiting;
  {
    auto store = rig.open();
    crashed = create_in(*store, "s1");
    finished = create_in(*store, "s1");
    broken = create_in(*store, "s1");
    waiting = create_in(*store, "s1");
    for (const std::string& token : {crashed, finished, broken}) REQUIRE(store->approve(token, "cli").has_value());

    auto unapproved = store->claim_run(waiting);
    REQUIRE(unapproved.has_value());
    CHECK_FALSE(unapproved->has_value());
    std::map<std::string, std::int64_t> fences;
    for (const std::string& token : {crashed, finished, broken}) {
      auto claim = store->claim_run(token);
      REQUIRE(claim.has_value());
      REQUIRE(claim->has_value());
      fences[token] = **claim;
    }
    CHECK(store->record_run(waiting, Approval::Run::running, 1).error().code == ErrorCode::refused);  // not approved
    CHECK(store->record_run(finished, Approval::Run::done, fences[finished]).error().code ==
          ErrorCode::refused);  // never started
    for (const std::string& token : {crashed, finished, broken}) {
      REQUIRE(store->record_run(token, Approval::Run::running, fences[token]).has_value());
    }
    CHECK(store->claim_run(finished)->has_value() == false);  // running: nobody claims it again
    CHECK(store->record_run(finished, Approval::Run::running, fences[finished]).error().message ==
          "approval " + finished + " is approved and its run running; it cannot be recorded as running under claim " +
              std::to_string(fences[finished]));
    REQUIRE(store->record_run(finished, Approval::Run::done, fences[finished]).has_value());
    REQUIRE(store->record_run(broken, Approval::Run::failed, fences[broken], "exit status 1").has_value());
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

TEST_CASE("in a fleet an approval asked on one node is listed and decided on another, which says who asked",
          "[approvals][postgres]") {
  StoreRig rig(Backend::postgres);
  auto a = rig.open(rig.options(), "node-a");
  auto second = rig.connect();
  auto b = open_pg_approvals(*second, {"node-b"}, rig.options());
  REQUIRE(b.has_value());
  auto& on_b = **b;

  // Every decision's token reaches whoever listens, once it has committed.
  auto listener = rig.connect();
  std::mutex heard_mutex;
  std::vector<std::string> heard;
  std::promise<void> heard_one;
  listener->listen(std::string(kApprovalsChannel), [&](std::string_view token) {
    const std::lock_guard lock(heard_mutex);
    heard.emplace_back(token);
    if (heard.size() == 1) heard_one.set_value();
  });
  testing::run_batch(*listener, {{"SELECT 1", {}}});  // the LISTEN has been sent before it

  const std::string token = create_in(*a, "s1");
  auto listed = on_b.pending();
  REQUIRE(listed.has_value());
  REQUIRE(listed->size() == 1);
  CHECK(listed->front().token == token);
  CHECK(listed->front().node == "node-a");
  CHECK(listed->front().action == sexp(kAction));
  CHECK(on_b.pending_count() == 1);

  auto approved = on_b.approve(token, "cli");
  REQUIRE(approved.has_value());
  CHECK(approved->state == Approval::State::approved);
  CHECK(approved->node == "node-a");
  CHECK(on_b.approved_count() == 1);
  REQUIRE(heard_one.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  {
    const std::lock_guard lock(heard_mutex);
    CHECK(heard == std::vector<std::string>{token});
  }
  // The node that asked sees the decision, and cannot make another.
  CHECK(a->find(token)->state == Approval::State::approved);
  CHECK(a->deny(token, "wire").error().message.find("already approved by cli") != std::string::npos);

  SECTION("a run left running is interrupted only when its own node opens again") {
    auto claim = a->claim_run(token);
    REQUIRE(claim.has_value());
    REQUIRE(claim->has_value());
    REQUIRE(a->record_run(token, Approval::Run::running, **claim).has_value());
    a.reset();
    auto another = open_pg_approvals(*second, {"node-b"}, rig.options());
    REQUIRE(another.has_value());
    CHECK((*another)->find(token)->run == Approval::Run::running);  // node-a's, perhaps still going on
    auto again = rig.open(rig.options(), "node-a");
    CHECK(again->find(token)->run == Approval::Run::interrupted);
  }
}

TEST_CASE(
    "a fleet's run is claimed once, a claim not started is taken over after its lease, and the node that "
    "lost it records nothing",
    "[approvals][postgres]") {
  StoreRig rig(Backend::postgres);
  auto a = rig.open(rig.options(), "node-a");
  auto second = rig.connect();
  auto opened = open_pg_approvals(*second, {"node-b"}, rig.options());
  REQUIRE(opened.has_value());
  ApprovalStore& b = **opened;
  const std::string token = create_in(*a, "s1");
  REQUIRE(b.approve(token, "cli").has_value());
  // node-a is alive (its row was renewed just now): its approval is its own to run.
  testing::run_batch(*rig.client, {{"INSERT INTO passepartout_nodes VALUES ('node-a', 'test', now(), now())", {}}});
  const auto claim = [](ApprovalStore& store, const std::string& which) {
    auto claimed = store.claim_run(which);
    REQUIRE(claimed.has_value());
    return *claimed;
  };
  CHECK_FALSE(claim(b, token).has_value());
  CHECK(b.claimable()->empty());
  CHECK(*a->claimable() == std::vector<std::string>{token});
  const auto first = claim(*a, token);
  REQUIRE(first.has_value());
  CHECK_FALSE(claim(*a, token).has_value());  // held, within its lease
  CHECK(b.find(token)->run == Approval::Run::claimed);

  SECTION("a start outside the lease is refused, and the node may claim again") {
    testing::run_batch(*rig.client, {{"UPDATE passepartout_approvals SET run_lease_until_ms = 0", {}}});
    CHECK(a->record_run(token, Approval::Run::running, *first).error().code == ErrorCode::refused);
    const auto again = claim(*a, token);
    REQUIRE(again.has_value());
    CHECK(*again == *first + 1);
    REQUIRE(a->record_run(token, Approval::Run::running, *again).has_value());
    REQUIRE(a->record_run(token, Approval::Run::done, *again).has_value());
  }
  SECTION("a node paused past its lease and its liveness loses the run to another, and then records nothing") {
    testing::run_batch(
        *rig.client, {{"UPDATE passepartout_approvals SET run_lease_until_ms = 0", {}},
                      {"UPDATE passepartout_nodes SET seen_at = now() - interval '1 hour' WHERE node = 'node-a'", {}}});
    CHECK(*b.claimable() == std::vector<std::string>{token});
    const auto taken = claim(b, token);
    REQUIRE(taken.has_value());
    CHECK(*taken == *first + 1);
    CHECK(a->record_run(token, Approval::Run::running, *first).error().code == ErrorCode::refused);
    CHECK(a->record_run(token, Approval::Run::failed, *first, "late").error().code == ErrorCode::refused);
    REQUIRE(b.record_run(token, Approval::Run::running, *taken).has_value());
    CHECK(a->record_run(token, Approval::Run::done, *first).error().code == ErrorCode::refused);
    REQUIRE(b.record_run(token, Approval::Run::done, *taken).has_value());
    CHECK(a->find(token)->run == Approval::Run::done);
    CHECK_FALSE(claim(*a, token).has_value());
    CHECK_FALSE(claim(b, token).has_value());
  }
}

TEST_CASE("the bounds on pending approvals hold for the fleet, whichever nodes ask at once", "[approvals][postgres]") {
  StoreRig rig(Backend::postgres);
  constexpr int kNodes = 3;
  constexpr int kPerNode = 8;
  std::vector<std::unique_ptr<PgClient>> clients;
  std::vector<std::unique_ptr<ApprovalStore>> stores;
  for (int i = 0; i < kNodes; ++i) {
    clients.push_back(rig.connect());
    auto store = open_pg_approvals(*clients.back(), {"node-" + std::to_string(i)}, rig.options(100, 5));
    REQUIRE(store.has_value());
    stores.push_back(std::move(*store));
  }
  std::vector<std::future<int>> made;
  for (int i = 0; i < kNodes; ++i) {
    // Made here: Catch's assertions (sexp's) belong to the test's thread.
    std::vector<std::pair<Value, Value>> asks;
    for (int j = 0; j < kPerNode; ++j) asks.emplace_back(sexp(kAction), meta_of("shared"));
    made.push_back(
        std::async(std::launch::async, [&store = *stores[static_cast<std::size_t>(i)], asks = std::move(asks)] {
          int created = 0;
          for (const auto& [action, meta] : asks) {
            if (store.create(action, meta, {}, "").has_value()) ++created;
          }
          return created;
        }));
  }
  int created = 0;
  for (auto& count : made) created += count.get();
  CHECK(created == 5);
  std::uint64_t refused = 0;
  for (const auto& store : stores) refused += store->refused_count();
  CHECK(refused == kNodes * kPerNode - 5);
  auto page = stores[0]->pending_page(100, 0);
  REQUIRE(page.has_value());
  CHECK(page->total == 5);
}

TEST_CASE("while the state database is away approvals fail closed, saying so, and serve again once it is back",
          "[approvals][postgres]") {
  testing::PostgresCluster cluster;
  const std::string database = cluster.create_database();
  testing::PgLoop loop;
  PgClient::Options settings;
  settings.conninfo = cluster.conninfo(database);
  settings.initial_backoff = std::chrono::milliseconds(20);
  settings.max_backoff = std::chrono::milliseconds(100);
  PgClient client(loop.context, settings);
  client.start();
  std::promise<Result<PgSchemaOutcome>> migrated;
  auto answer = migrated.get_future();
  migrate(client, state_schema(), "test", [&](Result<PgSchemaOutcome> outcome) { migrated.set_value(outcome); });
  REQUIRE(answer.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  REQUIRE(answer.get().has_value());
  std::int64_t now = 1'000'000;
  ApprovalOptions options{std::chrono::hours(1), ApprovalOptions::kDefaultRetention, [&now] { return now; }};
  auto opened = open_pg_approvals(client, {"node-a"}, options);
  REQUIRE(opened.has_value());
  ApprovalStore& store = **opened;
  const std::string token = create_in(store, "s1");

  cluster.stop();
  auto refused = store.create(sexp(kAction), meta_of("s1"), {}, "");
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::io_error);
  CHECK(refused.error().message.starts_with("cannot record an approval: the state database is unreachable ("));
  CHECK(refused.error().message.ends_with("); nothing was recorded or decided"));
  auto undecided = store.approve(token, "cli");
  REQUIRE_FALSE(undecided.has_value());
  CHECK(undecided.error().message.starts_with("cannot record the decision: the state database is unreachable"));

  std::promise<void> reconnected;
  client.on_connected([&reconnected, once = std::make_shared<std::once_flag>()] {
    std::call_once(*once, [&reconnected] { reconnected.set_value(); });
  });
  cluster.start();
  REQUIRE(reconnected.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  auto approved = store.approve(token, "cli");
  INFO((approved ? std::string() : approved.error().message));
  REQUIRE(approved.has_value());
  CHECK(approved->state == Approval::State::approved);
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
