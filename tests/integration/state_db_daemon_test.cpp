// The daemon with --state-db against a real PostgreSQL 15 (clusters the
// test starts): it migrates the database, registers its node and shows the
// connection in status and /metrics; a password in the address is refused
// without being shown; a schema newer than the daemon's keeps it from
// starting; a database that is down at boot does not, and is joined once it
// is up.
#include <catch2/catch.hpp>

#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "integration/daemon_process.hpp"
#include "store/pg_client.hpp"
#include "support/async_wait.hpp"
#include "support/http_client.hpp"
#include "support/pg_test_client.hpp"
#include "support/postgres_cluster.hpp"

using namespace passepartout;
using namespace std::chrono_literals;
using passepartout::testing::DaemonProcess;
using passepartout::testing::PostgresCluster;

namespace {

nlohmann::json status_of(const DaemonProcess& daemon) {
  const auto run = testing::run_passepartout({"status", "--json", "--socket", daemon.socket_path().string()},
                                             testing::hermetic_env(daemon.dir()));
  INFO(run.out << run.err);
  REQUIRE(run.exit_status == 0);
  return nlohmann::json::parse(run.out);
}

}  // namespace

TEST_CASE("a daemon with a state database migrates it, registers its node and shows the connection",
          "[integration][postgres]") {
  PostgresCluster& cluster = testing::shared_postgres();
  const std::string database = cluster.create_database();
  DaemonProcess::Options options;
  options.script = "rules: []\n";
  options.extra_args = {"--state-db", cluster.conninfo(database), "--node-id", "node-a"};
  options.metrics_port = "0";
  DaemonProcess daemon(options);

  const nlohmann::json status = status_of(daemon);
  INFO(status.dump() << daemon.log());
  const nlohmann::json& db = status["state_db"];
  CHECK(db["connected"] == true);
  CHECK(db["node"] == "node-a");
  CHECK(db["schema"] == db["schema_target"]);
  CHECK(db["schema"].get<int>() >= 1);
  CHECK(db["target"].get<std::string>().find("dbname=" + database) != std::string::npos);

  const auto text = testing::run_passepartout({"status", "--socket", daemon.socket_path().string()},
                                              testing::hermetic_env(daemon.dir()));
  CHECK(text.out.find("node node-a: connected, schema ") != std::string::npos);

  testing::HttpConnection metrics(daemon.metrics_port());
  const std::string scraped = metrics.request("GET", "/metrics").body;
  CHECK(scraped.find("passepartout_state_db_up{node=\"node-a\"} 1") != std::string::npos);

  const PgOutcome nodes =
      testing::run_batch(cluster.conninfo(database), {{"SELECT node, version FROM passepartout_nodes", {}}});
  REQUIRE(nodes.ok());
  REQUIRE(nodes.results[0].rows.size() == 1);
  CHECK(nodes.results[0].at(0, "node") == std::optional<std::string_view>("node-a"));
}

TEST_CASE("a password in the state database's address is refused before the daemon starts, and not shown",
          "[integration][postgres]") {
  testing::TempDir dir;
  const auto run = testing::run_passepartout({"daemon", "--state-dir", (dir.path() / "state").string(), "--state-db",
                                              "postgresql://agent:s3cret-pass@127.0.0.1/fleet"},
                                             testing::hermetic_env(dir.path()));
  CHECK(run.exit_status == 2);
  CHECK(run.err.find("--state-db: the state database's address holds a password") != std::string::npos);
  CHECK(run.err.find("PGPASSWORD") != std::string::npos);
  CHECK(run.err.find("s3cret") == std::string::npos);
}

TEST_CASE("a state database whose schema is newer than the daemon's keeps it from starting",
          "[integration][postgres]") {
  PostgresCluster& cluster = testing::shared_postgres();
  const std::string database = cluster.create_database();
  REQUIRE(testing::run_batch(
              cluster.conninfo(database),
              {{"CREATE TABLE passepartout_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL "
                "DEFAULT now(), applied_by text NOT NULL)",
                {}},
               {"INSERT INTO passepartout_schema (version, applied_by) VALUES (99, 'future')", {}}})
              .ok());
  testing::TempDir dir;
  const auto run = testing::run_passepartout(
      {"daemon", "--state-dir", (dir.path() / "state").string(), "--socket", (dir.path() / "s.sock").string(), "--port",
       "0", "--state-db", cluster.conninfo(database)},
      testing::hermetic_env(dir.path()));
  INFO(run.err);
  CHECK(run.exit_status != 0);
  CHECK(run.err.find("the state database's schema is version 99, newer than this daemon's") != std::string::npos);
}

TEST_CASE("a daemon whose state database is down starts without it and joins it once it is up",
          "[integration][postgres]") {
  PostgresCluster cluster;  // its own: it is stopped
  cluster.stop();
  DaemonProcess::Options options;
  options.script = "rules: []\n";
  options.extra_args = {"--state-db", cluster.conninfo(), "--node-id", "late"};
  DaemonProcess daemon(options);
  nlohmann::json down = status_of(daemon);
  INFO(down.dump());
  CHECK(down["state_db"]["connected"] != true);  // NIL: null in JSON
  CHECK(down["state_db"]["schema"] == 0);
  CHECK(down["state_db"]["last_error"].get<std::string>().find("No such file or directory") != std::string::npos);
  CHECK(daemon.wait_for_log("serving without it"));

  cluster.start();
  REQUIRE(testing::wait_until(
      [&] {
        const nlohmann::json now = status_of(daemon);
        return now["state_db"]["connected"] == true && now["state_db"]["schema"].get<int>() >= 1;
      },
      30s));
}

TEST_CASE("doctor asks the state database for its schema and says what the daemon would do with it",
          "[integration][postgres]") {
  PostgresCluster& cluster = testing::shared_postgres();
  const std::string database = cluster.create_database();
  testing::TempDir home;
  auto env = testing::hermetic_env(home.path());
  env.push_back("PASSEPARTOUT_STATE_DB=" + cluster.conninfo(database));
  env.push_back("PASSEPARTOUT_NODE_ID=checker");
  const auto doctor = [&] {
    const auto run = testing::run_passepartout(
        {"doctor", "--json", "--socket", (home.path() / "absent.sock").string(), "--state-dir", home.path().string()},
        env);
    INFO(run.err);
    REQUIRE(run.exit_status >= 0);
    const nlohmann::json document = nlohmann::json::parse(run.out);
    for (const auto& check : document["checks"]) {
      if (check["name"] == "state database") return check;
    }
    FAIL("doctor has no state database row:\n" << run.out);
    return nlohmann::json();
  };

  // A fresh database: the daemon would create the schema.
  nlohmann::json fresh = doctor();
  INFO(fresh.dump());
  CHECK(fresh["status"] == "ok");
  CHECK(fresh["detail"].get<std::string>().find("node checker: schema version 0, the daemon migrates it to ") !=
        std::string::npos);

  // Newer than this build: a failure, with what to do.
  REQUIRE(testing::run_batch(cluster.conninfo(database),
                             {{"CREATE TABLE passepartout_schema (version integer PRIMARY KEY, applied_at timestamptz "
                               "NOT NULL DEFAULT now(), applied_by text NOT NULL)",
                               {}},
                              {"INSERT INTO passepartout_schema (version, applied_by) VALUES (99, 'future')", {}}})
              .ok());
  nlohmann::json newer = doctor();
  CHECK(newer["status"] == "fail");
  CHECK(newer["detail"].get<std::string>().find("schema version 99, newer than this build's") != std::string::npos);
  CHECK(newer["hint"].get<std::string>().find("upgrade") != std::string::npos);

  // Unreachable: a failure naming why.
  env.back() = "PASSEPARTOUT_NODE_ID=checker";
  env[env.size() - 2] = "PASSEPARTOUT_STATE_DB=host=" + (home.path() / "nowhere").string() + " dbname=x";
  nlohmann::json down = doctor();
  CHECK(down["status"] == "fail");
  CHECK(down["detail"].get<std::string>().find("No such file or directory") != std::string::npos);
}
