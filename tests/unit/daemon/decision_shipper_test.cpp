// The fleet's decision log, against a real PostgreSQL 15: every decision a
// node writes reaches passepartout_decisions once, tagged with the node,
// across rotations, a shipper stopped mid-way and started again, and a
// database that was away; a torn line is passed over; `passepartout
// decisions --fleet` and `verify --replay postgresql://` read it back.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cli/decisions_command.hpp"
#include "cli/fleet_log.hpp"
#include "daemon/daemon_config.hpp"
#include "daemon/decision_shipper.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/signal.hpp"
#include "support/pg_test_client.hpp"
#include "support/postgres_cluster.hpp"
#include "support/sexp.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using passepartout::testing::migrated_client;
using passepartout::testing::run_batch;
using passepartout::testing::TempDir;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr auto kDrain = std::chrono::seconds(30);

std::string fresh_database(testing::PostgresCluster& cluster) {
  const std::string conninfo = cluster.conninfo(cluster.create_database());
  testing::PgLoop loop;
  auto client = migrated_client(loop, conninfo);
  return conninfo;
}

// A log in `folder`, small files (a few records each) so that it rotates,
// its files a spool for `shipper` when one is given.
std::unique_ptr<DecisionLog> open_log(const fs::path& folder, DecisionShipper* shipper, std::size_t max_files = 2) {
  DecisionLogOptions options;
  options.folder = folder;
  options.max_file_bytes = 2048;
  options.max_files = max_files;
  if (shipper != nullptr) {
    options.unshipped = [shipper](const fs::path& file) { return shipper->unshipped(file); };
    options.written = [shipper] { shipper->nudge(); };
  }
  auto log = DecisionLog::open(options);
  REQUIRE(log.has_value());
  return std::move(*log);
}

// `n` blocked decisions, their reasons "why <first>" ... "why <first + n - 1>".
void record(DecisionLog& log, int first, int n) {
  for (int i = first; i < first + n; ++i) {
    Verification v;
    v.outcome = VerifyOutcome::blocked;
    v.reason = Value::string("why " + std::to_string(i));
    v.trace.push_back(nullptr, GateResult::blocked, v.reason);
    GateTimes times;
    times.count = 0;
    const IntervalClock::Ticks now = IntervalClock::now();
    log.record(DecisionStage::last_mile, nullptr, testing::sexp("(:TYPE :REQUEST)"),
               user_input_signal("x", "s-" + std::to_string(i % 3)), v, times, now, now, {});
  }
  log.flush();
}

DecisionShipper::Options shipper_options(const std::string& conninfo, const std::string& node, const fs::path& folder) {
  DecisionShipper::Options options;
  options.conninfo = conninfo;
  options.node = node;
  options.folder = folder;
  options.interval = std::chrono::milliseconds(50);
  options.initial_backoff = std::chrono::milliseconds(20);
  options.max_backoff = std::chrono::milliseconds(200);
  options.connect_timeout = std::chrono::milliseconds(2000);
  return options;
}

struct Shipped {
  std::int64_t rows = 0;
  std::int64_t distinct = 0;  // distinct (node, reason): a line shipped twice counts once here
};

Shipped shipped(const std::string& conninfo, const std::string& node) {
  const PgOutcome asked = run_batch(
      conninfo, {{"SELECT count(*) AS n, count(DISTINCT record::json->>'reason') AS d FROM passepartout_decisions "
                  "WHERE node = $1",
                  {node}}});
  REQUIRE(asked.ok());
  return {asked.results[0].integer(0, "n"), asked.results[0].integer(0, "d")};
}

std::size_t files_in(const fs::path& folder) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(folder), fs::directory_iterator()));
}

}  // namespace

TEST_CASE("every decision a node writes reaches the fleet's table once, with its node, across rotations",
          "[daemon][fleet][decisions]") {
  const std::string conninfo = fresh_database(testing::shared_postgres());
  TempDir dir;
  DecisionShipper shipper(shipper_options(conninfo, "node-a", dir.path()));
  auto log = open_log(dir.path(), &shipper);
  shipper.start();
  record(*log, 0, 120);
  REQUIRE(shipper.drain(kDrain));
  const Shipped got = shipped(conninfo, "node-a");
  CHECK(got.rows == 120);
  CHECK(got.distinct == 120);
  // The row is the line as written, its columns read from it.
  const PgOutcome row = run_batch(conninfo, {{"SELECT outcome, session, record FROM passepartout_decisions WHERE "
                                              "record::json->>'reason' = 'why 7'",
                                              {}}});
  REQUIRE(row.ok());
  REQUIRE(row.results[0].rows.size() == 1);
  CHECK(row.results[0].at(0, "outcome") == std::optional<std::string_view>("blocked"));
  CHECK(row.results[0].at(0, "session") == std::optional<std::string_view>("s-1"));
  const json line = json::parse(row.results[0].at(0, "record").value_or(""));
  CHECK(line["stage"] == "last-mile");
  // doctor's reading: nothing waits by the database's marks, everything by none.
  const PgOutcome marks =
      run_batch(conninfo, {{"SELECT file, shipped FROM passepartout_decision_files WHERE node = 'node-a'", {}}});
  REQUIRE(marks.ok());
  std::map<std::string, std::uint64_t> shipped_marks;
  for (std::size_t i = 0; i < marks.results[0].rows.size(); ++i) {
    shipped_marks[std::string(marks.results[0].at(i, "file").value_or(""))] =
        static_cast<std::uint64_t>(marks.results[0].integer(i, "shipped"));
  }
  CHECK(spool_backlog(dir.path(), shipped_marks).bytes == 0);
  std::uintmax_t total = 0;
  for (const auto& file : decision_files_newest_first(dir.path())) total += fs::file_size(file);
  const SpoolBacklog none = spool_backlog(dir.path(), {});
  CHECK(none.bytes == total);
  CHECK(none.files == decision_files_newest_first(dir.path()).size());
  CHECK(none.oldest_seconds < 60);
  const DecisionShipper::Figures figures = shipper.figures();
  CHECK(figures.connected);
  CHECK(figures.shipped == 120);
  CHECK(figures.spool_bytes == 0);
  CHECK(figures.lag_seconds == 0);
  CHECK(figures.last_error.empty());
}

TEST_CASE("a shipper stopped and started again goes on where the database says, shipping nothing twice",
          "[daemon][fleet][decisions]") {
  const std::string conninfo = fresh_database(testing::shared_postgres());
  TempDir dir;
  {
    auto log = open_log(dir.path(), nullptr, 100);  // written with no shipper running: all of it waits
    record(*log, 0, 300);
  }
  DecisionShipper::Options options = shipper_options(conninfo, "node-a", dir.path());
  options.batch_bytes = 1024;  // a transaction for every few lines
  for (int attempt = 0; attempt < 3; ++attempt) {
    DecisionShipper shipper(options);
    shipper.start();
    // Stopped after a few transactions, wherever it is.
    const auto deadline = std::chrono::steady_clock::now() + kDrain;
    while (shipper.figures().batches < 5 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    shipper.stop(std::chrono::milliseconds(0));
  }
  const Shipped part = shipped(conninfo, "node-a");
  CHECK(part.rows == part.distinct);
  CHECK(part.rows < 300);
  DecisionShipper last(options);
  last.start();
  REQUIRE(last.drain(kDrain));
  const Shipped all = shipped(conninfo, "node-a");
  CHECK(all.rows == 300);
  CHECK(all.distinct == 300);
  CHECK(last.figures().shipped == static_cast<std::uint64_t>(300 - part.rows));
}

TEST_CASE("while the database is away the spool is kept, and shipped once when it is back",
          "[daemon][fleet][decisions]") {
  testing::PostgresCluster cluster;  // its own: stopped and started
  const std::string conninfo = fresh_database(cluster);
  TempDir dir;
  DecisionShipper shipper(shipper_options(conninfo, "node-a", dir.path()));
  auto log = open_log(dir.path(), &shipper);
  shipper.start();
  record(*log, 0, 20);
  REQUIRE(shipper.drain(kDrain));

  cluster.stop();
  record(*log, 20, 100);
  // The rotated files are kept past max_files: none is shipped yet.
  CHECK(files_in(dir.path()) > 2);
  CHECK_FALSE(shipper.drain(std::chrono::milliseconds(300)));
  DecisionShipper::Figures away = shipper.figures();
  CHECK_FALSE(away.connected);
  CHECK(away.spool_bytes > 0);
  CHECK(away.spool_files > 1);
  CHECK_FALSE(away.last_error.empty());
  CHECK(away.failures > 0);

  const std::size_t kept = files_in(dir.path());

  cluster.start();
  REQUIRE(shipper.drain(kDrain));
  const Shipped got = shipped(conninfo, "node-a");
  CHECK(got.rows == 120);
  CHECK(got.distinct == 120);
  CHECK(shipper.figures().spool_bytes == 0);
  // Shipped, the kept files go at the next rotation.
  record(*log, 120, 10);
  CHECK(files_in(dir.path()) < kept);
  REQUIRE(shipper.drain(kDrain));
  CHECK(shipped(conninfo, "node-a").distinct == 130);
}

TEST_CASE("a line a killed writer left unended is passed over, and the next record is shipped",
          "[daemon][fleet][decisions]") {
  const std::string conninfo = fresh_database(testing::shared_postgres());
  TempDir dir;
  {
    auto log = open_log(dir.path(), nullptr);
    record(*log, 0, 2);
  }
  {
    std::ofstream torn(current_decisions_file(dir.path()), std::ios::app | std::ios::binary);
    torn << R"({"v":1,"id":"0000-9","time":"2026-12-04T10:00:00.000001Z","stage":"rea)";
  }
  DecisionShipper shipper(shipper_options(conninfo, "node-a", dir.path()));
  auto log = open_log(dir.path(), &shipper);  // ends the torn line
  shipper.start();
  record(*log, 2, 1);
  REQUIRE(shipper.drain(kDrain));
  CHECK(shipped(conninfo, "node-a").distinct == 3);
  CHECK(shipper.figures().skipped == 1);
}

TEST_CASE("the fleet's log is read back newest first with each record's node, and narrowed to one node",
          "[daemon][fleet][decisions]") {
  const std::string conninfo = fresh_database(testing::shared_postgres());
  TempDir a;
  TempDir b;
  const std::vector<std::tuple<std::string, fs::path, int>> nodes_of{{"node-a", a.path(), 0},
                                                                     {"node-b", b.path(), 100}};
  for (const auto& [node, folder, first] : nodes_of) {
    DecisionShipper shipper(shipper_options(conninfo, node, folder));
    auto log = open_log(folder, &shipper, 100);
    shipper.start();
    record(*log, first, 5);
    REQUIRE(shipper.drain(kDrain));
  }

  cli::DecisionQuery query;
  query.fleet = true;
  query.state_db = conninfo;
  query.json = true;
  std::ostringstream out;
  std::ostringstream err;
  REQUIRE(cli::list_decisions(query, out, err) == 0);
  const json all = json::parse(out.str());
  REQUIRE(all["decisions"].size() == 10);
  std::set<std::string> nodes;
  for (const json& record : all["decisions"]) nodes.insert(record["node"].get<std::string>());
  CHECK(nodes == std::set<std::string>{"node-a", "node-b"});
  // Newest first: node-b's were written last.
  CHECK(all["decisions"][0]["node"] == "node-b");
  CHECK(all["decisions"][0]["reason"] == "why 104");

  query.node = "node-a";
  query.limit = 3;
  std::ostringstream narrowed;
  REQUIRE(cli::list_decisions(query, narrowed, err) == 0);
  const json some = json::parse(narrowed.str());
  REQUIRE(some["decisions"].size() == 3);
  for (const json& record : some["decisions"]) CHECK(record["node"] == "node-a");
  CHECK(some["decisions"][0]["reason"] == "why 4");

  // Paged oldest first, as a replay reads it: every record once, in order.
  const auto target = cli::resolve_fleet_target({}, conninfo);
  REQUIRE(target.has_value());
  std::vector<std::string> reasons;
  const auto read = cli::read_fleet_decisions(*target, {}, false, 3, [&](std::string_view, std::string_view line) {
    reasons.push_back(json::parse(line)["reason"].get<std::string>());
    return true;
  });
  REQUIRE(read.has_value());
  REQUIRE(reasons.size() == 10);
  CHECK(reasons.front() == "why 0");
  CHECK(reasons.back() == "why 104");
  CHECK(std::set<std::string>(reasons.begin(), reasons.end()).size() == 10);
}

TEST_CASE("the fleet's log names the database that cannot be read", "[daemon][fleet][decisions]") {
  TempDir dir;
  cli::DecisionQuery query;
  query.fleet = true;
  query.state_db = "host=" + dir.path().string() + " dbname=none connect_timeout=2";
  std::ostringstream out;
  std::ostringstream err;
  CHECK(cli::list_decisions(query, out, err) == 1);
  CHECK(err.str().find("passepartout decisions: ") != std::string::npos);
  CHECK(err.str().find(dir.path().string()) != std::string::npos);
  CHECK(out.str().empty());

  cli::DecisionQuery none;
  none.fleet = true;
  std::ostringstream usage;
  // No state database given anywhere (the test's environment names none).
  if (!process_env("PASSEPARTOUT_STATE_DB")) {
    CHECK(cli::list_decisions(none, out, usage) == 2);
    CHECK(usage.str().find("no state database") != std::string::npos);
  }
}
