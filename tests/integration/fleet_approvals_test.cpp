// Three daemons on one PostgreSQL 15 (clusters the tests start): an approval
// asked on one node is listed and approved on another and runs once, on the
// node that asked; when that node is killed, another takes the run over
// after the lease and runs it once; a decision whose notification is lost is
// found by the poll; approvals fail closed while the database is away, and
// what was decided once it is back still runs once. The shell command only
// prints a word.
#include <catch2/catch.hpp>

#include <csignal>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "integration/daemon_process.hpp"
#include "support/pg_test_client.hpp"
#include "support/postgres_cluster.hpp"

using namespace passepartout;
using namespace std::chrono_literals;
using passepartout::testing::DaemonProcess;

namespace {

constexpr std::string_view kScript = R"(rules:
  - match: 'greet the fleet'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "echo fleet-run" :EXPLANATION "Printing a greeting."))'
)";

// A node of the fleet: a short lease, so that a node gone silent is taken
// over within seconds.
DaemonProcess::Options node_options(const std::string& conninfo, const std::string& node) {
  DaemonProcess::Options options;
  options.script = std::string(kScript);
  options.extra_args = {"--state-db", conninfo, "--node-id", node, "--fleet-lease", "1.5"};
  return options;
}

// Asks `daemon`'s model for the greeting; the approval's token.
std::string ask_for_approval(const DaemonProcess& daemon) {
  return testing::ask_for_approval(daemon, "greet the fleet", "g1");
}

testing::ProcessRun cli(const DaemonProcess& daemon, std::vector<std::string> args) {
  args.emplace_back("--socket");
  args.push_back(daemon.socket_path().string());
  return testing::run_passepartout(args, testing::hermetic_env(daemon.dir()));
}

nlohmann::json shown(const DaemonProcess& daemon, const std::string& token) {
  const auto run = cli(daemon, {"approvals", "show", token, "--json"});
  INFO(run.out << run.err);
  REQUIRE(run.exit_status == 0);
  return nlohmann::json::parse(run.out);
}

// Asks `daemon` about `token` until its run is `state` (bounded).
bool wait_for_run(const DaemonProcess& daemon, const std::string& token, std::string_view state) {
  const auto deadline = std::chrono::steady_clock::now() + testing::kProcessWait;
  while (std::chrono::steady_clock::now() < deadline) {
    const nlohmann::json approval = shown(daemon, token)["approval"];
    if (approval.contains("run") && approval["run"] == state) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++count;
  return count;
}

// How many of `nodes` ran `token`, by their logs.
std::size_t runs_of(const std::vector<const DaemonProcess*>& nodes, const std::string& token) {
  std::size_t runs = 0;
  for (const DaemonProcess* node : nodes) runs += count_of(node->log(), "ACT: running approved action " + token);
  return runs;
}

}  // namespace

TEST_CASE("an approval asked on one node of a fleet is approved on another and runs once, on the node that asked",
          "[integration][postgres]") {
  auto& cluster = testing::shared_postgres();
  const std::string conninfo = cluster.conninfo(cluster.create_database());
  DaemonProcess a(node_options(conninfo, "node-a"));
  DaemonProcess b(node_options(conninfo, "node-b"));
  DaemonProcess c(node_options(conninfo, "node-c"));
  const std::string token = ask_for_approval(a);

  // Listed on every node, with the node that asked.
  const auto listed = cli(c, {"approvals", "list"});
  INFO(listed.out << listed.err);
  CHECK(listed.out.find(token) != std::string::npos);
  CHECK(listed.out.find("    asked on: node-a\n") != std::string::npos);
  const auto listed_json = cli(b, {"approvals", "list", "--json"});
  const nlohmann::json page = nlohmann::json::parse(listed_json.out);
  REQUIRE(page["approvals"].size() == 1);
  CHECK(page["approvals"][0]["node"] == "node-a");

  const auto approved = cli(b, {"approvals", "approve", token});
  INFO(approved.out << approved.err << a.log());
  REQUIRE(approved.exit_status == 0);
  CHECK(approved.out.find("node node-a, which asked, runs it") != std::string::npos);
  REQUIRE(wait_for_run(c, token, "done"));
  CHECK(runs_of({&a}, token) == 1);
  CHECK(runs_of({&b, &c}, token) == 0);
  CHECK(shown(b, token)["approval"]["decided_by"] != "");

  // Decided once, fleet-wide.
  const auto again = cli(c, {"approvals", "approve", token});
  CHECK(again.exit_status != 0);
  CHECK(again.err.find("already approved") != std::string::npos);
}

TEST_CASE("fleet status lists every node, alive or gone, and where the fleet's approvals stand",
          "[integration][postgres]") {
  auto& cluster = testing::shared_postgres();
  const std::string conninfo = cluster.conninfo(cluster.create_database());
  auto a = std::make_unique<DaemonProcess>(node_options(conninfo, "node-a"));
  DaemonProcess b(node_options(conninfo, "node-b"));
  ask_for_approval(b);
  const std::vector<std::string> env = testing::hermetic_env(b.dir());
  const auto fleet = [&] {
    const auto run =
        testing::run_passepartout({"fleet", "status", "--json", "--state-db", conninfo, "--fleet-lease", "1.5"}, env);
    INFO(run.out << run.err);
    REQUIRE(run.exit_status == 0);
    return nlohmann::json::parse(run.out);
  };
  nlohmann::json status = fleet();
  REQUIRE(status["nodes"].size() == 2);
  CHECK(status["nodes"][0]["node"] == "node-a");
  CHECK(status["nodes"][0]["alive"] == true);
  CHECK(status["nodes"][1]["node"] == "node-b");
  CHECK(status["approvals"]["pending"] == 1);
  CHECK(status["schema"].get<int>() >= 3);

  a->signal(SIGKILL);
  CHECK_FALSE(a->wait_exit().has_value());
  // Gone once a lease has passed without its heartbeat.
  const auto deadline = std::chrono::steady_clock::now() + testing::kProcessWait;
  while (status["nodes"][0]["alive"] == true && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
    status = fleet();
  }
  CHECK(status["nodes"][0]["alive"] == false);
  CHECK(status["nodes"][1]["alive"] == true);

  const auto text = testing::run_passepartout({"fleet", "status", "--state-db", conninfo}, env);
  INFO(text.out << text.err);
  CHECK(text.out.find("  node-b: alive, version ") != std::string::npos);
  CHECK(text.out.find("Approvals: 1 pending, 0 approved and waiting for their node, 0 claimed, 0 running\n") !=
        std::string::npos);

  const auto none = testing::run_passepartout({"fleet", "status"}, env);
  CHECK(none.exit_status == 2);
  CHECK(none.err.find("no state database: give --state-db URL") != std::string::npos);
}

TEST_CASE("when the node that asked is killed, another node takes its approved run over after the lease, once",
          "[integration][postgres]") {
  auto& cluster = testing::shared_postgres();
  const std::string conninfo = cluster.conninfo(cluster.create_database());
  auto a = std::make_unique<DaemonProcess>(node_options(conninfo, "node-a"));
  DaemonProcess b(node_options(conninfo, "node-b"));
  DaemonProcess c(node_options(conninfo, "node-c"));
  const std::string token = ask_for_approval(*a);
  a->signal(SIGKILL);
  CHECK_FALSE(a->wait_exit().has_value());

  const auto approved = cli(b, {"approvals", "approve", token});
  INFO(approved.out << approved.err);
  REQUIRE(approved.exit_status == 0);
  REQUIRE(wait_for_run(c, token, "done"));
  INFO(b.log() << c.log());
  CHECK(runs_of({&b, &c}, token) == 1);
}

TEST_CASE("a decision whose notification was lost is found by the poll and runs once", "[integration][postgres]") {
  auto& cluster = testing::shared_postgres();
  const std::string database = cluster.create_database();
  const std::string conninfo = cluster.conninfo(database);
  DaemonProcess a(node_options(conninfo, "node-a"));
  DaemonProcess b(node_options(conninfo, "node-b"));
  const std::string token = ask_for_approval(a);
  // Approved behind the fleet's back: no node is told.
  const PgOutcome decided =
      testing::run_batch(conninfo, {{"UPDATE passepartout_approvals SET state = 'approved', decided_by = 'sql', "
                                     "decided_unix_ms = (extract(epoch from now()) * 1000)::bigint WHERE token = $1",
                                     {token}}});
  REQUIRE(decided.ok());
  REQUIRE(decided.results[0].affected == 1);
  REQUIRE(wait_for_run(b, token, "done"));
  CHECK(runs_of({&a}, token) == 1);
  CHECK(runs_of({&b}, token) == 0);
}

TEST_CASE("while PostgreSQL is down approvals fail closed, and what is approved once it is back runs once",
          "[integration][postgres]") {
  testing::PostgresCluster cluster;
  const std::string conninfo = cluster.conninfo(cluster.create_database());
  DaemonProcess a(node_options(conninfo, "node-a"));
  DaemonProcess b(node_options(conninfo, "node-b"));
  const std::string token = ask_for_approval(a);

  cluster.stop();
  const auto refused = cli(b, {"approvals", "approve", token});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_status != 0);
  CHECK(refused.err.find("the state database is unreachable") != std::string::npos);
  // Still served meanwhile: what does not need the database.
  CHECK(cli(a, {"status"}).exit_status == 0);

  cluster.start();
  // Both nodes reconnect on their own (with backoff): approved as soon as B is back.
  testing::ProcessRun approved;
  const auto deadline = std::chrono::steady_clock::now() + testing::kProcessWait;
  do {
    approved = cli(b, {"approvals", "approve", token});
    if (approved.exit_status == 0) break;
    std::this_thread::sleep_for(100ms);
  } while (std::chrono::steady_clock::now() < deadline);
  INFO(approved.out << approved.err << a.log());
  REQUIRE(approved.exit_status == 0);
  REQUIRE(wait_for_run(b, token, "done"));
  CHECK(runs_of({&a}, token) == 1);
  CHECK(runs_of({&b}, token) == 0);
}
