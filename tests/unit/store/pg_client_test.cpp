// PgClient against a real PostgreSQL 15 (a private cluster the test starts):
// batches as transactions, parameters and NULLs, the server's errors with
// their SQLSTATE, pipelined batches answered in order, LISTEN/NOTIFY, and a
// server restart: batches fail closed while it is away, the client comes
// back by itself, renews its LISTEN and says it reconnected.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/pg_client.hpp"
#include "support/async_wait.hpp"
#include "support/pg_test_client.hpp"
#include "support/postgres_cluster.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using passepartout::testing::PostgresCluster;
using namespace std::chrono_literals;

namespace {

using Loop = testing::PgLoop;
using testing::run_batch;

PgClient::Options options_for(const std::string& conninfo) {
  PgClient::Options options;
  options.conninfo = conninfo;
  options.initial_backoff = 50ms;
  options.max_backoff = 200ms;
  return options;
}

}  // namespace

TEST_CASE("a batch runs as one transaction with text parameters, NULLs and the server's errors", "[store][postgres]") {
  PostgresCluster& cluster = testing::shared_postgres();
  const std::string database = cluster.create_database();
  Loop loop;
  PgClient client(loop.context, options_for(cluster.conninfo(database)));
  client.start();

  PgOutcome created =
      run_batch(client, {{"CREATE TABLE notes (id bigint PRIMARY KEY, text text)", {}},
                         {"INSERT INTO notes VALUES ($1, $2), ($3, $4)", {"1", "one", "2", std::nullopt}}});
  INFO((created.error ? created.error->message : ""));
  REQUIRE(created.ok());
  CHECK(created.results[1].affected == 2);

  PgOutcome read = run_batch(client, {{"SELECT id, text FROM notes WHERE id >= $1 ORDER BY id", {"1"}}});
  REQUIRE(read.ok());
  REQUIRE(read.results[0].rows.size() == 2);
  CHECK(read.results[0].at(0, "text") == std::optional<std::string_view>("one"));
  CHECK(read.results[0].at(1, "text") == std::nullopt);  // NULL
  CHECK(read.results[0].at(1, "id") == std::optional<std::string_view>("2"));

  // The second statement fails: the first, which ran, is rolled back with it.
  PgOutcome failed = run_batch(client, {{"INSERT INTO notes VALUES (3, 'three')", {}},
                                        {"INSERT INTO notes VALUES (1, 'again')", {}},
                                        {"INSERT INTO notes VALUES (4, 'four')", {}}});
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error->sqlstate == "23505");  // unique_violation
  CHECK(failed.error->statement == 1);
  CHECK_FALSE(failed.error->connection);
  CHECK(failed.error->message.find("duplicate key") != std::string::npos);
  PgOutcome count = run_batch(client, {{"SELECT count(*) AS n FROM notes", {}}});
  REQUIRE(count.ok());
  CHECK(count.results[0].at(0, "n") == std::optional<std::string_view>("2"));

  // A syntax error is the server's too, and the connection goes on.
  PgOutcome bad = run_batch(client, {{"SELEC 1", {}}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error->sqlstate == "42601");
  CHECK(run_batch(client, {{"SELECT 1", {}}}).ok());
  CHECK(client.status().connected);
  CHECK(client.status().server_version >= 150000);
}

TEST_CASE("pipelined batches are answered in the order they were given", "[store][postgres][concurrency]") {
  PostgresCluster& cluster = testing::shared_postgres();
  const std::string database = cluster.create_database();
  Loop loop;
  PgClient client(loop.context, options_for(cluster.conninfo(database)));
  client.start();
  REQUIRE(run_batch(client, {{"CREATE TABLE counter (n bigint)", {}}, {"INSERT INTO counter VALUES (0)", {}}}).ok());

  constexpr int kBatches = 500;
  std::mutex mutex;
  std::vector<std::string> seen;
  std::promise<void> all;
  for (int i = 0; i < kBatches; ++i) {
    client.run({{"UPDATE counter SET n = n + 1 RETURNING n", {}}}, [&, i](PgOutcome&& outcome) {
      const std::lock_guard lock(mutex);
      seen.push_back(outcome.ok() ? std::string(*outcome.results[0].at(0, "n")) : "error");
      if (i == kBatches - 1) all.set_value();
    });
  }
  REQUIRE(all.get_future().wait_for(60s) == std::future_status::ready);
  REQUIRE(seen.size() == kBatches);
  for (int i = 0; i < kBatches; ++i) CHECK(seen[static_cast<std::size_t>(i)] == std::to_string(i + 1));
}

TEST_CASE("NOTIFY reaches a LISTEN, which is renewed after the server restarts, and batches fail closed meanwhile",
          "[store][postgres][concurrency]") {
  PostgresCluster cluster;  // its own: it is restarted
  Loop loop;
  PgClient client(loop.context, options_for(cluster.conninfo()));
  std::mutex mutex;
  std::vector<std::string> payloads;
  int connected = 0;
  client.listen("approvals", [&](std::string_view payload) {
    const std::lock_guard lock(mutex);
    payloads.emplace_back(payload);
  });
  client.on_connected([&] {
    const std::lock_guard lock(mutex);
    ++connected;
  });
  client.start();
  REQUIRE(run_batch(client, {{"SELECT pg_notify('approvals', $1)", {"id-1"}}}).ok());
  REQUIRE(testing::wait_until(
      [&] {
        const std::lock_guard lock(mutex);
        return payloads.size() == 1;
      },
      10s));
  CHECK(payloads[0] == "id-1");

  cluster.stop();
  PgOutcome down = run_batch(client, {{"SELECT 1", {}}});
  REQUIRE_FALSE(down.ok());
  CHECK(down.error->connection);
  CHECK(down.error->message.find("the state database is unavailable") == 0);
  CHECK_FALSE(client.status().connected);

  cluster.start();
  REQUIRE(testing::wait_until([&] { return client.status().connected; }, 30s));
  CHECK(client.status().connections >= 2);
  REQUIRE(testing::wait_until(
      [&] {
        const std::lock_guard lock(mutex);
        return connected >= 2;
      },
      10s));
  // The LISTEN was renewed on the new connection: a second client's NOTIFY arrives.
  Loop other_loop;
  PgClient other(other_loop.context, options_for(cluster.conninfo()));
  other.start();
  // The renewed LISTEN may still be in flight: notify until it is heard.
  REQUIRE(testing::wait_until(
      [&] {
        REQUIRE(run_batch(other, {{"SELECT pg_notify('approvals', 'id-2')", {}}}).ok());
        const std::lock_guard lock(mutex);
        return payloads.size() >= 2;
      },
      10s));
  CHECK(payloads[1] == "id-2");
}

TEST_CASE("a client that cannot connect fails its batches with the reason and keeps trying", "[store][postgres]") {
  testing::TempDir nowhere;
  Loop loop;
  PgClient client(loop.context, options_for("host=" + nowhere.path().string() + " port=5432 dbname=x user=x"));
  client.start();
  PgOutcome outcome = run_batch(client, {{"SELECT 1", {}}});
  REQUIRE_FALSE(outcome.ok());
  CHECK(outcome.error->connection);
  CHECK(outcome.error->message.find("No such file or directory") != std::string::npos);
  REQUIRE(testing::wait_until([&] { return client.status().failed >= 1 && !client.status().last_error.empty(); }, 5s));
}
