// DecisionReplay and `verify --replay`: records written by the decision log's
// own writer, replayed against fixture gates; what changed, what did not,
// masked records counted, malformed lines skipped and named.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/decision_replay.hpp"
#include "cli/exit_status.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/verifier.hpp"
#include "skills/registry.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::SkillFixtures;

constexpr std::string_view kSignal =
    "(:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID \"s1\") :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hi\"))";
constexpr std::string_view kAction =
    "(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"ls\" :EXPLANATION \"list the files\"))";

// The fixtures (name, priority) loaded and published.
struct Gates {
  SkillFixtures fx;
  Registry registry;
  explicit Gates(std::initializer_list<std::pair<std::string_view, int>> skills) {
    std::vector<std::shared_ptr<const Slot>> slots;
    for (auto [name, priority] : skills) {
      auto slot = fx.loader().load(fx.manifest(name, priority));
      INFO((slot ? std::string() : slot.error().message));
      REQUIRE(slot.has_value());
      slots.push_back(std::move(*slot));
    }
    registry.publish(std::move(slots));
  }

  // The decision log's line for `action` verified by these gates now.
  std::string recorded(std::string_view action, std::string_view id) {
    DecisionRecord record;
    record.action = *read_sexp(action);
    record.signal = *read_sexp(kSignal);
    record.snapshot = registry.snapshot();
    Verification verification;
    Verifier::verify(*record.snapshot, record.action, record.signal, verification);
    record.outcome = verification.outcome;
    record.reason = verification.reason;
    record.trace = verification.trace;
    return decision_line(record, id, 1'795'000'000'000'000);
  }
};

ReplayReport replay(const Gates& gates, const std::string& lines) {
  DecisionReplay replayer(gates.registry.snapshot());
  std::istringstream in(lines);
  replayer.replay_stream(in, "recorded.jsonl");
  return replayer.report();
}

}  // namespace

TEST_CASE("replay reports a decision whose outcome changes because a gate now blocks", "[cli][replay]") {
  Gates then({{"pass-gate-0", 10}});
  const std::string line = then.recorded(kAction, "0000abcd-1");
  REQUIRE(json::parse(line)["outcome"] == "passed");

  Gates now({{"pass-gate-0", 10}, {"block-gate", 20}});
  const ReplayReport report = replay(now, line + "\n");
  CHECK(report.read == 1);
  CHECK(report.replayed == 1);
  CHECK(report.skipped == 0);
  CHECK(report.changed == 1);
  CHECK(report.now.at("blocked") == 1);
  REQUIRE(report.changes.size() == 1);
  const ReplayChange& change = report.changes[0];
  CHECK(change.id == "0000abcd-1");
  CHECK(change.where == "recorded.jsonl:1");
  CHECK(change.stage == "reason");
  CHECK(change.time == "2026-11-18T11:06:40.000000Z");
  CHECK(change.then.outcome == "passed");
  CHECK(change.now.outcome == "blocked");
  CHECK(change.now.gate == "block-gate");
  CHECK(change.now.reason == "blocked by block-gate");
  // block-gate runs first now (priority 20), and its block stops pass-gate-0.
  CHECK(report.gate_changes.at("block-gate").at("not run -> blocked") == 1);
  CHECK(report.gate_changes.at("pass-gate-0").at("passed -> not run") == 1);

  const std::string text = format_replay(report);
  INFO(text);
  CHECK(text.find("0000abcd-1") != std::string::npos);
  CHECK(text.find("passed -> blocked") != std::string::npos);
  CHECK(text.find("block-gate: blocked by block-gate") != std::string::npos);
  CHECK(text.find("Changed: 1 of 1 outcome.") != std::string::npos);
  CHECK(text.find("Now: 0 passed, 1 blocked, 0 failed, 0 approval.") != std::string::npos);

  const DecisionJson document = replay_json(report);
  CHECK(document["changed"] == 1);
  CHECK(document["changes"][0]["recorded"]["outcome"] == "passed");
  CHECK(document["changes"][0]["now"]["gate"] == "block-gate");
  CHECK(document["gate_changes"][0]["gate"] == "block-gate");
  CHECK(document["gate_changes"][0]["from"] == "not run");
  CHECK(document["gate_changes"][0]["to"] == "blocked");
}

TEST_CASE("replay tells a gate that now fails from one that blocks", "[cli][replay]") {
  Gates then({{"pass-gate-0", 10}});
  Gates now({{"pass-gate-0", 10}, {"throw-gate", 20}});
  const ReplayReport report = replay(now, then.recorded(kAction, "f-1") + "\n");
  CHECK(report.changed == 1);
  CHECK(report.now.at("failed") == 1);
  REQUIRE(report.changes.size() == 1);
  CHECK(report.changes[0].now.outcome == "failed");
  CHECK(report.changes[0].now.gate == "throw-gate");
  CHECK(report.gate_changes.at("throw-gate").at("not run -> failed") == 1);
  CHECK(format_replay(report).find("passed -> failed") != std::string::npos);
}

TEST_CASE("replay against the same gates changes nothing", "[cli][replay]") {
  Gates gates({{"pass-gate-0", 10}, {"block-gate", 20}});
  const std::string lines = gates.recorded(kAction, "a-1") + "\n" + gates.recorded("(:TYPE :LOG)", "a-2") + "\n";
  const ReplayReport report = replay(gates, lines);
  CHECK(report.replayed == 2);
  CHECK(report.changed == 0);
  CHECK(report.changes.empty());
  CHECK(report.gate_changes.empty());
  CHECK(report.now.at("blocked") == 2);
  CHECK(format_replay(report).find("No recorded outcome would change.") != std::string::npos);
}

TEST_CASE("replay counts the records whose text was masked", "[cli][replay]") {
  Gates gates({{"pass-gate-0", 10}});
  const std::string masked = gates.recorded(
      "(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"echo sk-proj-abcdefghijklmnopqrstuvwxyz0123456789\"))", "m-1");
  REQUIRE(json::parse(masked).value("masked", false));
  REQUIRE(json::parse(masked)["action"].get<std::string>().find("[MASKED]") != std::string::npos);
  const ReplayReport report = replay(gates, masked + "\n" + gates.recorded(kAction, "m-2") + "\n");
  CHECK(report.replayed == 2);
  CHECK(report.masked == 1);
  CHECK(report.changed == 0);
  const std::string text = format_replay(report);
  INFO(text);
  CHECK(text.find("Masked: 1 replayed record carried masked text (\"masked\": true), 0 of them changed: their gates "
                  "saw [MASKED]") != std::string::npos);
  CHECK(replay_json(report)["masked"] == 1);
  CHECK(replay_json(report)["masked_changed"] == 0);

  SECTION("a masked record whose outcome changes is counted as such") {
    Gates stricter({{"pass-gate-0", 10}, {"block-gate", 20}});
    const ReplayReport changed = replay(stricter, masked + "\n" + gates.recorded(kAction, "m-2") + "\n");
    CHECK(changed.changed == 2);
    CHECK(changed.masked_changed == 1);
    REQUIRE(changed.changes.size() == 2);
    CHECK(changed.changes[0].masked);
    CHECK_FALSE(changed.changes[1].masked);
    CHECK(format_replay(changed).find("1 of them changed") != std::string::npos);
  }
}

TEST_CASE("replay skips and names a malformed line and an action that does not parse", "[cli][replay]") {
  Gates gates({{"pass-gate-0", 10}});
  json unparsable = json::parse(gates.recorded(kAction, "u-1"));
  unparsable["action"] = "(:TYPE :REQUEST :PAYLOAD (:CMD \"ls\"";
  json no_signal = json::parse(gates.recorded(kAction, "u-2"));
  no_signal.erase("signal");
  const std::string lines =
      "{not json\n\n" + unparsable.dump() + "\n" + gates.recorded(kAction, "ok-1") + "\n" + no_signal.dump() + "\n";
  const ReplayReport report = replay(gates, lines);
  CHECK(report.read == 4);
  CHECK(report.replayed == 1);
  CHECK(report.skipped == 3);
  REQUIRE(report.skips.size() == 3);
  CHECK(report.skips[0].where == "recorded.jsonl:1");
  CHECK(report.skips[0].why.find("not a decision record") != std::string::npos);
  CHECK(report.skips[1].where == "recorded.jsonl:3");
  CHECK(report.skips[1].why.find("the action does not parse") != std::string::npos);
  CHECK(report.skips[2].where == "recorded.jsonl:5");
  CHECK(report.skips[2].why == "no \"signal\" string");
  CHECK(format_replay(report).find("Read 4 records: 1 replayed, 3 skipped") != std::string::npos);
}

TEST_CASE("verify --replay reads a decisions folder oldest first and exits 7 when an outcome changed",
          "[cli][replay]") {
  Gates then({{"pass-gate-0", 10}});
  SkillFixtures now;
  now.install_library("pass-gate-0");
  now.install_library("block-gate");
  now.write_manifest("pass-gate-0.yaml", SkillFixtures::yaml("pass-gate-0", 10));
  now.write_manifest("block-gate.yaml", SkillFixtures::yaml("block-gate", 20));
  testing::TempDir dir;
  const fs::path folder = dir.path() / "decisions";
  fs::create_directories(folder);
  std::ofstream(folder / "decisions-20261126T000000Z-0.jsonl") << then.recorded(kAction, "old-1") << '\n';
  std::ofstream(folder / "decisions.jsonl") << then.recorded(kAction, "new-1") << "\n{broken\n";

  std::istringstream in;
  std::ostringstream out;
  std::ostringstream err;
  SECTION("as text") {
    // Given the state folder: its decisions/ is read.
    const int status = replay_decisions(dir.path().string(), now.manifest_dir(), now.plugin_dir(), false, in, out, err);
    INFO(out.str() << err.str());
    CHECK(status == kExitChanged);
    const std::string text = out.str();
    const std::size_t old_row = text.find("old-1");
    const std::size_t new_row = text.find("new-1");
    CHECK(old_row != std::string::npos);
    CHECK(new_row != std::string::npos);
    CHECK(old_row < new_row);
    CHECK(text.find("block-gate 1.0.0") != std::string::npos);
    CHECK(text.find("Read 3 records: 2 replayed, 1 skipped") != std::string::npos);
    CHECK(err.str().find("skipped " + (folder / "decisions.jsonl").string() + ":2: not a decision record") !=
          std::string::npos);
  }
  SECTION("as JSON") {
    const int status = replay_decisions(folder.string(), now.manifest_dir(), now.plugin_dir(), true, in, out, err);
    CHECK(status == kExitChanged);
    const json document = json::parse(out.str());
    CHECK(document["ok"] == true);
    CHECK(document["changed"] == 2);
    CHECK(document["skipped_lines"][0]["where"] == (folder / "decisions.jsonl").string() + ":2");
  }
  SECTION("from standard input, against the gates that recorded it") {
    SkillFixtures same;
    same.install_library("pass-gate-0");
    same.write_manifest("pass-gate-0.yaml", SkillFixtures::yaml("pass-gate-0", 10));
    std::istringstream stdin_lines(then.recorded(kAction, "in-1") + "\n");
    const int status = replay_decisions("-", same.manifest_dir(), same.plugin_dir(), false, stdin_lines, out, err);
    INFO(out.str() << err.str());
    CHECK(status == kExitOk);
    CHECK(out.str().find("Read 1 record: 1 replayed, 0 skipped") != std::string::npos);
  }
}

TEST_CASE("verify --replay of a missing file or an empty folder is a usage error that names it", "[cli][replay]") {
  SkillFixtures fx;
  testing::TempDir dir;
  std::istringstream in;
  std::ostringstream out;
  std::ostringstream err;
  SECTION("a missing file") {
    const fs::path missing = dir.path() / "nope.jsonl";
    CHECK(replay_decisions(missing.string(), fx.manifest_dir(), fx.plugin_dir(), false, in, out, err) == kExitUsage);
    CHECK(err.str() == "passepartout: decision file " + missing.string() + " does not exist\n");
  }
  SECTION("a folder without decision files") {
    CHECK(replay_decisions(dir.path().string(), fx.manifest_dir(), fx.plugin_dir(), true, in, out, err) == kExitUsage);
    const json document = json::parse(out.str());
    CHECK(document["ok"] == false);
    CHECK(document["error"] == "no decision files (decisions.jsonl, decisions-*.jsonl) in " + dir.path().string());
  }
  SECTION("a missing manifest folder") {
    std::ofstream(dir.path() / "d.jsonl") << "\n";
    CHECK(replay_decisions((dir.path() / "d.jsonl").string(), dir.path() / "no-manifests", fx.plugin_dir(), false, in,
                           out, err) == kExitUsage);
    CHECK(err.str().find("manifest folder " + (dir.path() / "no-manifests").string() + " does not exist") !=
          std::string::npos);
  }
  CHECK(out.str().find("Replaying") == std::string::npos);
}

}  // namespace passepartout::cli
