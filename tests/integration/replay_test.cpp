// `passepartout verify --replay`: decisions recorded by a real daemon run,
// replayed by the executable against a copy of the manifests in which one
// gate's config changed so that it blocks.
#include <signal.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "integration/daemon_process.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;
using testing::converse;
using testing::DaemonProcess;
using testing::WireClient;

// The blocked command would delete only a folder of the test's own
// workspace (HOME of commands) if a gate ever let it through.
constexpr std::string_view kScript = R"(rules:
  - match: 'greet'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "echo hello" :EXPLANATION "Printing a greeting."))'
  - match: 'disk'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "rm -rf ~/scratch" :EXPLANATION "Freeing space on the disk."))'
)";

// The bundled manifests copied into `folder`, policy wanting explanations
// longer than 100 characters (every recorded one is shorter).
void write_stricter_manifests(const fs::path& folder) {
  fs::create_directories(folder);
  for (const auto& entry : fs::directory_iterator(PP_MANIFEST_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    std::string text = testing::read_text_file(entry.path());
    if (entry.path().filename() == "policy.yaml") {
      const std::string from = "min_explanation_length: 10";
      const std::size_t at = text.find(from);
      REQUIRE(at != std::string::npos);
      text.replace(at, from.size(), "min_explanation_length: 100");
    }
    std::ofstream(folder / entry.path().filename()) << text;
  }
}

// The id of the first recorded line that holds `text`.
std::string decision_id(const std::string& recorded, std::string_view text) {
  std::istringstream lines(recorded);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(text) != std::string::npos) return nlohmann::json::parse(line)["id"];
  }
  return "(none)";
}

}  // namespace

TEST_CASE("verify --replay of a daemon's decisions against a stricter policy names what would change",
          "[integration][replay]") {
  DaemonProcess daemon(DaemonProcess::Options{std::string(kScript), {}, {}, false, {}});
  {
    WireClient client = WireClient::local(daemon.socket_path());
    client.expect_handshake();
    converse(client, "please greet the operator", "g1");  // shell-guard asks for approval
    converse(client, "my disk is full", "d1");            // shell-guard blocks it
  }
  daemon.signal(SIGTERM);  // an orderly stop writes every recorded decision
  REQUIRE(daemon.wait_exit() == 0);

  const fs::path folder = daemon.state_dir() / "decisions";
  const std::string recorded = testing::read_text_file(folder / "decisions.jsonl");
  INFO(recorded);
  REQUIRE(recorded.find("\"outcome\":\"approval\"") != std::string::npos);
  REQUIRE(recorded.find("\"outcome\":\"blocked\"") != std::string::npos);

  // The daemon asks the model again after a block, so the blocked command may be recorded more than once.
  const std::size_t records = static_cast<std::size_t>(std::count(recorded.begin(), recorded.end(), '\n'));
  const std::string all = std::to_string(records);
  const fs::path stricter = daemon.dir() / "stricter";
  write_stricter_manifests(stricter);
  const auto env = testing::hermetic_env(daemon.dir());

  SECTION("against the manifests that recorded them nothing changes") {
    const auto run = testing::run_passepartout(
        {"verify", "--replay", folder.string(), "--manifests", PP_MANIFEST_DIR, "--plugins", PP_PLUGIN_DIR}, env);
    INFO(run.out << run.err);
    CHECK(run.exit_status == 0);
    CHECK(run.out.find("No recorded outcome would change.") != std::string::npos);
    CHECK(run.out.find("Changed: 0 of " + all + " outcomes.") != std::string::npos);
    CHECK(run.out.find("Gate verdicts that changed") == std::string::npos);
  }
  SECTION("against the stricter policy: a table of the changes and a summary, exit 7") {
    const auto run = testing::run_passepartout(
        {"verify", "--replay", folder.string(), "--manifests", stricter.string(), "--plugins", PP_PLUGIN_DIR}, env);
    INFO(run.out << run.err);
    CHECK(run.exit_status == 7);
    CHECK(run.err.empty());
    std::vector<std::string> lines;
    std::istringstream text(run.out);
    for (std::string line; std::getline(text, line);) lines.push_back(line);
    const auto header = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
      return line.starts_with("ID") && line.find("RECORDED -> NOW") != std::string::npos;
    });
    REQUIRE(std::distance(header, lines.end()) >= 3);
    // One row: the approval is now blocked by policy, which runs before
    // shell-guard; the blocked command stays blocked (by policy now).
    const std::string& row = *(header + 1);
    CHECK(row.starts_with(decision_id(recorded, "\"outcome\":\"approval\"")));
    CHECK(row.find("  reason  ") != std::string::npos);  // the stage
    CHECK(row.find("approval -> blocked") != std::string::npos);
    CHECK(row.find("shell-guard: Shell command requires approval: echo hello") != std::string::npos);
    CHECK(row.find("policy: Action blocked") != std::string::npos);
    CHECK((header + 2)->empty());
    CHECK(run.out.find("Read " + all + " records: " + all + " replayed, 0 skipped (malformed or unparsable).") !=
          std::string::npos);
    CHECK(run.out.find("Now: 0 passed, " + all + " blocked, 0 failed, 0 approval.") != std::string::npos);
    CHECK(run.out.find("Changed: 1 of " + all + " outcomes.") != std::string::npos);
    const auto policy =
        std::find_if(lines.begin(), lines.end(), [](const std::string& line) { return line.starts_with("  policy "); });
    REQUIRE(policy != lines.end());
    CHECK(policy->find("passed -> blocked") != std::string::npos);
    CHECK(policy->ends_with(" " + all));
    CHECK(run.out.find("Masked: 0 replayed records carried masked text") != std::string::npos);
  }
  SECTION("as JSON, from standard input") {
    const auto run = testing::run_passepartout(
        {"verify", "--replay", "-", "--manifests", stricter.string(), "--plugins", PP_PLUGIN_DIR, "--json"}, env,
        recorded);
    INFO(run.out << run.err);
    CHECK(run.exit_status == 7);
    const nlohmann::json document = nlohmann::json::parse(run.out);
    CHECK(document["replayed"] == records);
    CHECK(document["changed"] == 1);
    CHECK(document["now"]["blocked"] == records);
    REQUIRE(document["changes"].size() == 1);
    CHECK(document["changes"][0]["recorded"]["outcome"] == "approval");
    CHECK(document["changes"][0]["recorded"]["gate"] == "shell-guard");
    CHECK(document["changes"][0]["now"]["outcome"] == "blocked");
    CHECK(document["changes"][0]["now"]["gate"] == "policy");
    CHECK(document["changes"][0]["where"] == "stdin:1");
    CHECK(document["changes"][0]["id"] == decision_id(recorded, "\"outcome\":\"approval\""));
  }
  SECTION("a missing decision file is a usage error") {
    const auto run = testing::run_passepartout(
        {"verify", "--replay", (daemon.dir() / "none.jsonl").string(), "--manifests", stricter.string()}, env);
    CHECK(run.exit_status == 2);
    CHECK(run.err == "passepartout: decision file " + (daemon.dir() / "none.jsonl").string() + " does not exist\n");
  }
}

}  // namespace passepartout
