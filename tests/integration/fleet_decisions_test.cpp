// A fleet's one decision log, with daemons on a PostgreSQL 15 cluster the
// tests start: a node killed with SIGKILL while it records and ships, then
// started again from its state folder, ships every decision it wrote exactly
// once; another node's decisions land beside them; `decisions --fleet`
// reads them back by node, and status shows the shipping.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/daemon_process.hpp"
#include "pipeline/decision_log.hpp"
#include "support/pg_test_client.hpp"
#include "support/postgres_cluster.hpp"

using namespace passepartout;
using namespace std::chrono_literals;
using passepartout::testing::DaemonProcess;

namespace {

constexpr std::string_view kScript = R"(rules:
  - match: '(?i)\bhello\b'
    reply: "Hello! How can I help?"
)";

DaemonProcess::Options node_options(const std::string& conninfo, const std::string& node,
                                    const std::filesystem::path& state_from = {}) {
  DaemonProcess::Options options;
  options.script = std::string(kScript);
  options.extra_args = {"--state-db", conninfo, "--node-id", node};
  options.state_from = state_from;
  return options;
}

// Every line of the node's spool, each with how often it occurs.
std::map<std::string, int> spool_lines(const DaemonProcess& daemon) {
  std::map<std::string, int> lines;
  for (const auto& file : decision_files_newest_first(daemon.state_dir() / "decisions")) {
    std::istringstream in(testing::read_text_file(file));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) ++lines[line];
    }
  }
  return lines;
}

// Every record of `node` in the fleet's table, each with how often it occurs.
std::map<std::string, int> shipped_lines(const std::string& conninfo, const std::string& node) {
  const PgOutcome asked =
      testing::run_batch(conninfo, {{"SELECT record FROM passepartout_decisions WHERE node = $1", {node}}});
  REQUIRE(asked.ok());
  std::map<std::string, int> lines;
  for (std::size_t i = 0; i < asked.results[0].rows.size(); ++i) {
    ++lines[std::string(asked.results[0].at(i, "record").value_or(""))];
  }
  return lines;
}

// Waits until the table holds as many of `node`'s records as `want` (bounded).
bool wait_shipped(const std::string& conninfo, const std::string& node, std::size_t want) {
  const auto deadline = std::chrono::steady_clock::now() + testing::kProcessWait;
  while (std::chrono::steady_clock::now() < deadline) {
    std::size_t total = 0;
    for (const auto& [line, count] : shipped_lines(conninfo, node)) total += static_cast<std::size_t>(count);
    if (total >= want) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

// The test cluster's "host=DIR port=P user=U dbname=D" as the postgresql://
// address `verify --replay` takes: postgresql://U@:P/D?host=DIR.
std::string replay_uri(const std::string& conninfo) {
  std::map<std::string, std::string> parts;
  std::istringstream in(conninfo);
  for (std::string word; in >> word;) {
    const std::size_t eq = word.find('=');
    parts[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return "postgresql://" + parts["user"] + "@:" + parts["port"] + "/" + parts["dbname"] + "?host=" + parts["host"];
}

// A burst of greetings on a connection of its own; returns once the first
// is answered and the log's writer has begun to write them (the rest are
// still being answered, recorded and shipped).
void burst(const DaemonProcess& daemon, int n) {
  const std::filesystem::path current = current_decisions_file(daemon.state_dir() / "decisions");
  std::error_code ec;
  const auto before = std::filesystem::file_size(current, ec);
  testing::WireClient client = testing::WireClient::tcp(daemon.port());
  client.expect_handshake();
  for (int i = 0; i < n; ++i) client.send(testing::user_input("hello", "", daemon.token()));
  CHECK(client.expect_frame().path({"PAYLOAD", "TEXT"}).text() == "Hello! How can I help?");
  const auto deadline = std::chrono::steady_clock::now() + testing::kProcessWait;
  while (std::filesystem::file_size(current, ec) <= (ec ? 0 : before) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
}

}  // namespace

TEST_CASE("a node killed while it ships, started again, ships every decision it wrote exactly once",
          "[integration][postgres]") {
  auto& cluster = testing::shared_postgres();
  const std::string conninfo = cluster.conninfo(cluster.create_database());
  auto node = std::make_unique<DaemonProcess>(node_options(conninfo, "node-a"));
  for (int round = 0; round < 3; ++round) {
    burst(*node, 150);
    node->signal(SIGKILL);  // while it records and ships the burst
    CHECK_FALSE(node->wait_exit().has_value());
    const std::filesystem::path state = node->state_dir();
    auto next = std::make_unique<DaemonProcess>(node_options(conninfo, "node-a", state));
    node = std::move(next);
  }
  DaemonProcess other(node_options(conninfo, "node-b"));
  burst(other, 5);

  // Everything the killed processes wrote is in the spool the last one started from.
  const std::map<std::string, int> written = spool_lines(*node);
  std::size_t total = 0;
  for (const auto& [line, count] : written) {
    CHECK(count == 1);
    total += static_cast<std::size_t>(count);
  }
  CHECK(total > 3);
  REQUIRE(wait_shipped(conninfo, "node-a", total));
  const std::map<std::string, int> shipped = shipped_lines(conninfo, "node-a");
  CHECK(shipped.size() == written.size());
  CHECK(shipped == written);  // each line once: none lost, none twice

  // The fleet's log, read on any machine: both nodes, narrowed to one.
  REQUIRE(wait_shipped(conninfo, "node-b", 5));
  const std::vector<std::string> env = testing::hermetic_env(other.dir());
  const auto all = testing::run_passepartout({"decisions", "--state-db", conninfo, "--limit", "1000", "--json"}, env);
  INFO(all.out << all.err);
  REQUIRE(all.exit_status == 0);
  std::map<std::string, std::size_t> by_node;
  const nlohmann::json listed = nlohmann::json::parse(all.out);
  for (const auto& record : listed["decisions"]) ++by_node[record["node"].get<std::string>()];
  CHECK(by_node["node-a"] == total);
  CHECK(by_node["node-b"] >= 5);
  const auto one = testing::run_passepartout({"decisions", "--state-db", conninfo, "--node", "node-b"}, env);
  INFO(one.out << one.err);
  REQUIRE(one.exit_status == 0);
  CHECK(one.out.find("  node-b  passed") != std::string::npos);
  CHECK(one.out.find("node-a") == std::string::npos);

  // verify --replay reads the fleet's log: every node's records, oldest first.
  const std::string uri = replay_uri(conninfo);
  const auto replayed = testing::run_passepartout(
      {"verify", "--replay", uri, "--manifests", PP_MANIFEST_DIR, "--plugins", PP_PLUGIN_DIR, "--json"}, env);
  INFO(uri << replayed.out << replayed.err);
  REQUIRE(replayed.exit_status == 0);
  const nlohmann::json report = nlohmann::json::parse(replayed.out);
  CHECK(report["read"].get<std::size_t>() == by_node["node-a"] + by_node["node-b"]);
  CHECK(report["changed"] == 0);

  // doctor, on node-b's state folder and settings: every decision of the node shipped.
  std::vector<std::string> doctor_env = env;
  doctor_env.push_back("PASSEPARTOUT_STATE_DB=" + conninfo);
  doctor_env.push_back("PASSEPARTOUT_NODE_ID=node-b");
  const auto doctor = testing::run_passepartout(
      {"doctor", "--json", "--socket", other.socket_path().string(), "--state-dir", other.state_dir().string()},
      doctor_env);
  INFO(doctor.out << doctor.err);
  const nlohmann::json checks = nlohmann::json::parse(doctor.out);
  bool reported = false;
  for (const auto& check : checks["checks"]) {
    if (check["name"] != "state database") continue;
    reported = check["detail"].get<std::string>().find("every decision of this node shipped") != std::string::npos;
  }
  CHECK(reported);
  // With node-b's marks gone from the database, doctor names what waits.
  REQUIRE(testing::run_batch(conninfo, {{"DELETE FROM passepartout_decision_files WHERE node = 'node-b'", {}}}).ok());
  const auto behind = testing::run_passepartout(
      {"doctor", "--json", "--socket", other.socket_path().string(), "--state-dir", other.state_dir().string()},
      doctor_env);
  INFO(behind.out);
  CHECK(behind.out.find("decisions not shipped yet: ") != std::string::npos);

  // status shows the shipping.
  const auto status = testing::run_passepartout({"status", "--socket", other.socket_path().string()}, env);
  INFO(status.out << status.err);
  CHECK(status.out.find("decisions to the fleet") != std::string::npos);
}
