// The state database's migrations against a real PostgreSQL 15: a fresh
// database is brought to this build's version, once; three daemons
// migrating at once apply each migration once; a failing migration changes
// nothing; a schema newer than this build's is refused.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store/pg_schema.hpp"
#include "support/pg_test_client.hpp"
#include "support/postgres_cluster.hpp"

using namespace passepartout;
using namespace std::chrono_literals;

namespace {

using Loop = testing::PgLoop;
using testing::run_batch;

std::unique_ptr<PgClient> client_for(Loop& loop, const std::string& conninfo) {
  PgClient::Options options;
  options.conninfo = conninfo;
  auto client = std::make_unique<PgClient>(loop.context, options);
  client->start();
  return client;
}

Result<PgSchemaOutcome> migrated(PgClient& client, const PgSchema& schema, const std::string& node) {
  std::promise<Result<PgSchemaOutcome>> promise;
  auto future = promise.get_future();
  migrate(client, schema, node, [&promise](Result<PgSchemaOutcome> outcome) { promise.set_value(std::move(outcome)); });
  REQUIRE(future.wait_for(30s) == std::future_status::ready);
  return future.get();
}

constexpr std::string_view kFirst[] = {"CREATE TABLE one (a int)"};
constexpr std::string_view kSecond[] = {"CREATE TABLE two (b int)", "INSERT INTO two VALUES (2)"};
constexpr std::span<const std::string_view> kTwo[] = {kFirst, kSecond};
constexpr std::string_view kBroken[] = {"CREATE TABLE three (c int)", "INSERT INTO nowhere VALUES (1)"};
constexpr std::span<const std::string_view> kThree[] = {kFirst, kSecond, kBroken};

}  // namespace

TEST_CASE("a fresh state database is migrated to this build's schema once", "[store][postgres]") {
  auto& cluster = testing::shared_postgres();
  const std::string database = cluster.create_database();
  Loop loop;
  auto client = client_for(loop, cluster.conninfo(database));
  const auto first = migrated(*client, state_schema(), "node-a");
  INFO((first ? "" : first.error().message));
  REQUIRE(first);
  CHECK(first->found == 0);
  CHECK(first->version == static_cast<int>(state_schema().migrations.size()));
  const auto again = migrated(*client, state_schema(), "node-b");
  REQUIRE(again);
  CHECK(again->found == again->version);
  const PgOutcome rows =
      run_batch(*client, {{"SELECT version, applied_by FROM passepartout_schema ORDER BY version", {}}});
  REQUIRE(rows.ok());
  REQUIRE(rows.results[0].rows.size() == state_schema().migrations.size());
  CHECK(rows.results[0].at(0, "applied_by") == std::optional<std::string_view>("node-a"));
}

TEST_CASE("three daemons migrating one database at once apply each migration once", "[store][postgres]") {
  auto& cluster = testing::shared_postgres();
  const std::string database = cluster.create_database();
  const PgSchema schema{kTwo};
  Loop loop;
  std::vector<std::unique_ptr<PgClient>> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(client_for(loop, cluster.conninfo(database)));
  std::vector<std::promise<Result<PgSchemaOutcome>>> promises(3);
  for (int i = 0; i < 3; ++i) {
    migrate(*clients[static_cast<std::size_t>(i)], schema, "node-" + std::to_string(i),
            [&promises, i](Result<PgSchemaOutcome> outcome) {
              promises[static_cast<std::size_t>(i)].set_value(std::move(outcome));
            });
  }
  for (auto& promise : promises) {
    auto future = promise.get_future();
    REQUIRE(future.wait_for(30s) == std::future_status::ready);
    const auto outcome = future.get();
    INFO((outcome ? "" : outcome.error().message));
    REQUIRE(outcome);
    CHECK(outcome->version == 2);
  }
  const PgOutcome rows = run_batch(
      *clients[0], {{"SELECT count(*) AS n FROM passepartout_schema", {}}, {"SELECT count(*) AS n FROM two", {}}});
  REQUIRE(rows.ok());
  CHECK(rows.results[0].at(0, "n") == std::optional<std::string_view>("2"));
  CHECK(rows.results[1].at(0, "n") == std::optional<std::string_view>("1"));  // the INSERT ran once
}

TEST_CASE("a failing migration changes nothing, and a newer schema is refused", "[store][postgres]") {
  auto& cluster = testing::shared_postgres();
  const std::string database = cluster.create_database();
  Loop loop;
  auto client = client_for(loop, cluster.conninfo(database));
  REQUIRE(migrated(*client, PgSchema{kTwo}, "a"));

  const auto broken = migrated(*client, PgSchema{kThree}, "a");
  REQUIRE_FALSE(broken);
  CHECK(broken.error().code == ErrorCode::io_error);
  CHECK(broken.error().message.find("from version 2 to 3 failed") != std::string::npos);
  CHECK(broken.error().message.find("\"nowhere\" does not exist") != std::string::npos);
  const PgOutcome three = run_batch(*client, {{"SELECT to_regclass('three') IS NULL AS absent", {}}});
  REQUIRE(three.ok());
  CHECK(three.results[0].at(0, "absent") == std::optional<std::string_view>("t"));  // rolled back with it

  constexpr std::span<const std::string_view> kOne[] = {kFirst};
  const auto older = migrated(*client, PgSchema{kOne}, "old");
  REQUIRE_FALSE(older);
  CHECK(older.error().code == ErrorCode::refused);
  CHECK(older.error().message ==
        "the state database's schema is version 2, newer than this daemon's 1: a newer passepartout migrated it; "
        "upgrade this daemon to join");
}
