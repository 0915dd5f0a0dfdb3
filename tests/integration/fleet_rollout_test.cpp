// Skill rollouts across three daemons on one PostgreSQL 15: shadow-gate
// 1.0.0 (passes) is live on every node, 2.0.0 is published with a setting
// and rolled out. A good release reaches every node; one that disagrees in
// shadow halts the rollout before any node applies it; a canary whose gate
// fails is rolled back on its own; a release whose signature or digest does
// not check is refused, and no node loads it. The traffic is a greeting.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/digest.hpp"
#include "daemon/fleet_rollout.hpp"
#include "integration/daemon_process.hpp"
#include "support/pg_test_client.hpp"
#include "support/postgres_cluster.hpp"

using namespace passepartout;
using namespace std::chrono_literals;
using passepartout::testing::DaemonProcess;
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kScript = R"(rules:
  - match: '(?i)\bhello\b'
    reply: "Hello! How can I help?"
)";

// A node: the bundled skills and shadow-gate 1.0.0 (passes), in folders of its own.
struct Node {
  testing::TempDir root;
  std::unique_ptr<DaemonProcess> daemon;

  Node(const std::string& conninfo, const std::string& name, const std::string& trusted_key = {}) {
    const fs::path plugins = root.path() / "plugins";
    const fs::path manifests = root.path() / "manifests";
    testing::copy_bundled_skills(plugins, manifests);
    fs::copy_file(fs::path(PP_FIXTURE_DIR) / "libshadow-gate-1.so", plugins / "libshadow-gate-1.so");
    std::ofstream(manifests / "shadow-gate.yaml")
        << "name: shadow-gate\nversion: 1.0.0\nlibrary: libshadow-gate-1.so\nabi: 1\npriority: 999\n"
           "isolation: in-process\nconfig: { mode: pass }\n";
    std::vector<std::string> args{"--state-db", conninfo,    "--node-id",      name,          "--fleet-lease",
                                  "1.5",        "--plugins", plugins.string(), "--manifests", manifests.string()};
    if (!trusted_key.empty()) args.insert(args.end(), {"--fleet-trusted-key", trusted_key});
    options.script = std::string(kScript);
    options.extra_args = std::move(args);
    daemon = std::make_unique<DaemonProcess>(options);
    REQUIRE(daemon->started());
  }

  // Stopped and started again from its state folder (the same folders and settings).
  void restart() {
    DaemonProcess::Options again = options;
    again.state_from = daemon->state_dir();
    auto next = std::make_unique<DaemonProcess>(again);
    daemon.reset();
    daemon = std::move(next);
    REQUIRE(daemon->started());
  }

  DaemonProcess::Options options;
};

struct Fleet {
  std::string conninfo;
  testing::TempDir work;
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<std::string> env;

  explicit Fleet(const std::string& trusted_key = {}) {
    auto& cluster = testing::shared_postgres();
    conninfo = cluster.conninfo(cluster.create_database());
    for (const char* name : {"node-a", "node-b", "node-c"}) {
      nodes.push_back(std::make_unique<Node>(conninfo, name, trusted_key));
    }
    env = testing::hermetic_env(nodes.front()->daemon->dir());
  }

  testing::ProcessRun fleet(std::vector<std::string> args) const {
    args.insert(args.begin(), "fleet");
    args.insert(args.end(), {"--state-db", conninfo});
    return testing::run_passepartout(args, env);
  }

  // shadow-gate 2.0.0 with `mode`, published (signed with `key` when given).
  void publish(const std::string& mode, const fs::path& key = {}) const {
    const fs::path manifest = work.path() / "shadow-gate.yaml";
    std::ofstream(manifest) << "name: shadow-gate\nversion: 2.0.0\nlibrary: libshadow-gate-2.so\nabi: 1\n"
                               "priority: 999\nisolation: in-process\nconfig: { mode: "
                            << mode << " }\n";
    std::vector<std::string> args{"publish", manifest.string(),
                                  (fs::path(PP_FIXTURE_DIR) / "libshadow-gate-2.so").string()};
    if (!key.empty()) args.insert(args.end(), {"--sign-key", key.string()});
    const auto run = fleet(args);
    INFO(run.out << run.err);
    REQUIRE(run.exit_status == 0);
  }

  nlohmann::json status() const {
    const auto run = fleet({"status", "--json", "--fleet-lease", "1.5"});
    INFO(run.out << run.err);
    REQUIRE(run.exit_status == 0);
    return nlohmann::json::parse(run.out);
  }

  // Greets every node (their gates verify each reply) until the rollout of
  // shadow-gate is no longer running; its last state, "" on timeout.
  std::string drive(std::vector<std::string>* seen_states = nullptr) const {
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    int n = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      for (const auto& node : nodes) testing::ask(*node->daemon, "hello", "r" + std::to_string(++n));
      const nlohmann::json now = status();
      for (const auto& rollout : now["rollouts"]) {
        if (rollout["name"] != "shadow-gate") continue;
        if (seen_states != nullptr) {
          for (const auto& report : rollout["nodes"]) seen_states->push_back(report["state"].get<std::string>());
        }
        if (rollout["state"] != "running") return rollout["state"].get<std::string>();
      }
    }
    return "";
  }

  // Each node's skills as fleet status shows them, once every node has
  // reported what `predicate` wants (bounded).
  bool every_node(const std::function<bool(const std::string& skills)>& predicate) const {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      const nlohmann::json now = status();
      bool all = now["nodes"].size() == nodes.size();
      for (const auto& node : now["nodes"]) all = all && predicate(node["skills"].get<std::string>());
      if (all) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
};

bool runs(const std::string& skills, const std::string& version) {
  return skills.find("shadow-gate@" + version) != std::string::npos;
}

}  // namespace

TEST_CASE("a signed release goes through shadow and a canary to every node", "[integration][postgres][rollout]") {
  testing::TempDir keys;
  const fs::path key = keys.path() / "release.key";
  std::string trusted;
  {
    const auto made = testing::run_passepartout({"fleet", "keygen", key.string()}, testing::hermetic_env(keys.path()));
    REQUIRE(made.exit_status == 0);
    trusted = made.out.substr(made.out.find("Public key:  ") + 13, 64);
  }
  const Fleet fleet(trusted);
  fleet.publish("pass", key);
  const auto started = fleet.fleet(
      {"rollout", "shadow-gate", "2.0.0", "--stages", "shadow,33%,100%", "--dwell", "1", "--min-verifications", "3"});
  INFO(started.out << started.err);
  REQUIRE(started.exit_status == 0);
  std::vector<std::string> states;
  CHECK(fleet.drive(&states) == "done");
  CHECK(std::find(states.begin(), states.end(), "shadowing") != states.end());
  CHECK(fleet.every_node([](const std::string& skills) { return runs(skills, "2.0.0"); }));
  const nlohmann::json status = fleet.status();
  const auto& rollout = status["rollouts"][0];
  CHECK(rollout["standing"] == "done");
  const PgOutcome events = testing::run_batch(
      fleet.conninfo, {{"SELECT string_agg(event, ',' ORDER BY at) AS events FROM passepartout_rollout_events", {}}});
  REQUIRE(events.ok());
  CHECK(events.results[0].at(0, "events") == std::optional<std::string_view>("start,advance,advance,done"));
  // A node started again loads the finished release again, though its folder still names 1.0.0.
  fleet.nodes[2]->restart();
  const auto version_on = [&](const DaemonProcess& daemon) {
    const auto listed =
        testing::run_passepartout({"skills", "list", "--json", "--socket", daemon.socket_path().string()}, fleet.env);
    if (listed.exit_status != 0) return std::string();
    const nlohmann::json document = nlohmann::json::parse(listed.out);
    for (const auto& skill : document["skills"]) {
      if (skill["name"] == "shadow-gate") return skill["version"].get<std::string>();
    }
    return std::string();
  };
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (version_on(*fleet.nodes[2]->daemon) != "2.0.0" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
  }
  CHECK(version_on(*fleet.nodes[2]->daemon) == "2.0.0");
  // The text form names the rollout and each node.
  const auto text = fleet.fleet({"status", "--fleet-lease", "1.5"});
  CHECK(text.out.find("Rollout #1 of shadow-gate 2.0.0 (shadow,33%,100%): done") != std::string::npos);
  CHECK(text.out.find("skills: ") != std::string::npos);
}

TEST_CASE("a release that disagrees in shadow halts the rollout before any node applies it",
          "[integration][postgres][rollout]") {
  const Fleet fleet;
  fleet.publish("block");
  const auto started = fleet.fleet(
      {"rollout", "shadow-gate", "2.0.0", "--stages", "shadow,100%", "--dwell", "1", "--min-verifications", "3"});
  REQUIRE(started.exit_status == 0);
  std::vector<std::string> states;
  CHECK(fleet.drive(&states) == "halted");
  CHECK(std::find(states.begin(), states.end(), "live") == states.end());  // never applied anywhere
  const nlohmann::json status = fleet.status();
  const std::string reason = status["rollouts"][0]["reason"];
  INFO(reason);
  CHECK(reason.find("disagreed with the live gate") != std::string::npos);
  // The shadows stop; every node runs 1.0.0 as before.
  CHECK(fleet.every_node([](const std::string& skills) { return runs(skills, "1.0.0"); }));
  for (const auto& node : fleet.nodes) {
    const auto shadows = testing::run_passepartout(
        {"skills", "shadow", "status", "--json", "--socket", node->daemon->socket_path().string()}, fleet.env);
    INFO(shadows.out << shadows.err);
    CHECK(nlohmann::json::parse(shadows.out)["shadows"].empty());
  }
}

TEST_CASE("a canary whose gate fails is rolled back on its own", "[integration][postgres][rollout]") {
  const Fleet fleet;
  fleet.publish("throw");
  const auto started = fleet.fleet(
      {"rollout", "shadow-gate", "2.0.0", "--stages", "33%,100%", "--dwell", "1", "--min-verifications", "3"});
  REQUIRE(started.exit_status == 0);
  std::vector<std::string> states;
  CHECK(fleet.drive(&states) == "halted");
  CHECK(std::find(states.begin(), states.end(), "live") != states.end());  // one canary ran it
  const nlohmann::json status = fleet.status();
  const auto& rollout = status["rollouts"][0];
  INFO(rollout.dump());
  CHECK(rollout["reason"].get<std::string>().find("failed") != std::string::npos);
  CHECK(fleet.every_node([](const std::string& skills) { return runs(skills, "1.0.0"); }));
  const nlohmann::json after = fleet.status();
  std::size_t rolled_back = 0;
  for (const auto& report : after["rollouts"][0]["nodes"])
    if (report["state"] == "rolled-back") ++rolled_back;
  CHECK(rolled_back >= 1);  // the canary (two, if a missed heartbeat changed who was chosen meanwhile)
  // The canary serves again with the version it ran before.
  for (const auto& node : fleet.nodes) {
    const std::string reply = testing::ask(*node->daemon, "hello", "after");
    CHECK(reply.find("Hello! How can I help?") != std::string::npos);
  }
}

TEST_CASE("a release whose signature or digest does not check is refused, and no node loads it",
          "[integration][postgres][rollout]") {
  testing::TempDir keys;
  std::string trusted;
  std::string other;
  fs::path trusted_key;
  fs::path other_key;
  {
    const auto env = testing::hermetic_env(keys.path());
    for (auto [file, pub] : {std::pair{&trusted_key, &trusted}, std::pair{&other_key, &other}}) {
      *file = keys.path() / ("k" + std::to_string(pub == &trusted));
      const auto made = testing::run_passepartout({"fleet", "keygen", file->string()}, env);
      REQUIRE(made.exit_status == 0);
      *pub = made.out.substr(made.out.find("Public key:  ") + 13, 64);
    }
  }
  const Fleet fleet(trusted);
  fleet.publish("pass", other_key);  // signed, by a key the nodes do not trust
  REQUIRE(fleet.fleet({"rollout", "shadow-gate", "2.0.0", "--stages", "100%", "--dwell", "1"}).exit_status == 0);
  CHECK(fleet.drive() == "halted");
  nlohmann::json status = fleet.status();
  CHECK(status["rollouts"][0]["reason"].get<std::string>().find("at its signature") != std::string::npos);

  // Signed by the trusted key now, but its library changed in the database.
  const PgOutcome digests =
      testing::run_batch(fleet.conninfo, {{"SELECT manifest_sha256, library_sha256 FROM passepartout_releases", {}}});
  REQUIRE(digests.ok());
  const std::string manifest_sha256(digests.results[0].at(0, "manifest_sha256").value_or(""));
  const std::string library_sha256(digests.results[0].at(0, "library_sha256").value_or(""));
  std::string key_hex;
  {
    std::ifstream in(trusted_key);
    in >> key_hex;
  }
  const std::string signature =
      ed25519_sign(key_hex, release_statement("shadow-gate", "2.0.0", manifest_sha256, library_sha256));
  REQUIRE(testing::run_batch(fleet.conninfo, {{"UPDATE passepartout_releases SET signature = $1, library = library || "
                                               "'\\x00'::bytea",
                                               {signature}}})
              .ok());
  REQUIRE(fleet.fleet({"rollout", "shadow-gate", "2.0.0", "--stages", "100%", "--dwell", "1"}).exit_status == 0);
  CHECK(fleet.drive() == "halted");
  status = fleet.status();
  CHECK(status["rollouts"][0]["reason"].get<std::string>().find("at its digest") != std::string::npos);
  CHECK(fleet.every_node([](const std::string& skills) { return runs(skills, "1.0.0"); }));
}
