// `passepartout decisions` on prepared files: its filters, its order, --json,
// and malformed lines skipped with their place named.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/decisions_command.hpp"
#include "cli/exit_status.hpp"
#include "support/skill_fixtures.hpp"

namespace passepartout::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string record(const std::string& id, const std::string& time, const std::string& outcome,
                   const std::string& session, const std::string& gate, const std::string& gate_verdict) {
  json r = {{"v", 1},
            {"id", id},
            {"time", time},
            {"stage", "reason"},
            {"session", session},
            {"action", "(:TYPE :REQUEST :TARGET :SHELL)"},
            {"gates", json::array({{{"name", "pass-gate"}, {"version", "1.0.0"}, {"verdict", "passed"}},
                                   {{"name", gate}, {"version", "1.0.0"}, {"verdict", gate_verdict}}})},
            {"outcome", outcome}};
  if (outcome != "passed") r["reason"] = "because " + id;
  return r.dump();
}

struct Prepared {
  testing::TempDir dir;
  fs::path folder = dir.path() / "decisions";

  Prepared() {
    fs::create_directories(folder);
    std::ofstream rotated(folder / "decisions-20261126T000000Z-0.jsonl");
    rotated << record("a-1", "2026-11-26T00:00:01.000000Z", "blocked", "s1", "shell-guard", "blocked") << '\n';
    rotated << record("a-2", "2026-11-26T00:00:02.000000Z", "passed", "s2", "shell-guard", "passed") << '\n';
    std::ofstream current(folder / "decisions.jsonl");
    current << record("b-1", "2026-11-27T05:00:00.000000Z", "approval", "s1", "approval-gate", "approval") << '\n';
    current << "{not json\n";
    current << record("b-2", "2026-11-27T05:00:01.000000Z", "failed", "s2", "shell-guard", "failed") << '\n';
    current << record("b-3", "2026-11-27T05:00:02.000000Z", "blocked", "s1", "file-guard", "blocked") << '\n';
  }

  // The ids listed, in order; `err` gets standard error.
  std::vector<std::string> ids(DecisionQuery query, std::string* err = nullptr, int* status = nullptr) {
    query.folder = folder;
    query.json = true;
    std::ostringstream out;
    std::ostringstream errors;
    const int exit = list_decisions(query, out, errors);
    if (err != nullptr) *err = errors.str();
    if (status != nullptr) *status = exit;
    std::vector<std::string> ids;
    if (exit != kExitOk) return ids;
    const json document = json::parse(out.str());
    for (const json& r : document["decisions"]) ids.push_back(r["id"]);
    return ids;
  }
};

}  // namespace

TEST_CASE("decisions lists every file's records newest first and names a malformed line", "[cli][decisions]") {
  Prepared prepared;
  std::string err;
  CHECK(prepared.ids({}, &err) == std::vector<std::string>{"b-3", "b-2", "b-1", "a-2", "a-1"});
  CHECK(err.find("skipped a malformed line: " + (prepared.folder / "decisions.jsonl").string() + ":2") !=
        std::string::npos);
}

TEST_CASE("decisions filters by verdict, skill, session, time and count", "[cli][decisions]") {
  Prepared prepared;
  DecisionQuery query;
  SECTION("--verdict") {
    query.verdict = "blocked";
    CHECK(prepared.ids(query) == std::vector<std::string>{"b-3", "a-1"});
  }
  SECTION("--skill: the gate ran; with --verdict it gave that verdict itself") {
    query.skill = "shell-guard";
    CHECK(prepared.ids(query) == std::vector<std::string>{"b-2", "a-2", "a-1"});
    query.verdict = "failed";
    CHECK(prepared.ids(query) == std::vector<std::string>{"b-2"});
    query.skill = "pass-gate";
    CHECK(prepared.ids(query).empty());
  }
  SECTION("--session") {
    query.session = "s2";
    CHECK(prepared.ids(query) == std::vector<std::string>{"b-2", "a-2"});
  }
  SECTION("--since (durations: since_time below)") {
    query.since = "2026-11-27T05:00:01Z";
    CHECK(prepared.ids(query) == std::vector<std::string>{"b-3", "b-2"});
    query.since = "yesterday";
    int status = 0;
    std::string err;
    CHECK(prepared.ids(query, &err, &status).empty());
    CHECK(status == kExitUsage);
    CHECK(err.find("--since 'yesterday'") != std::string::npos);
  }
  SECTION("--limit") {
    query.limit = 2;
    CHECK(prepared.ids(query) == std::vector<std::string>{"b-3", "b-2"});
  }
}

TEST_CASE("decisions prints one line per decision with its reason, and says when the folder is missing",
          "[cli][decisions]") {
  Prepared prepared;
  DecisionQuery query;
  query.folder = prepared.folder;
  std::ostringstream out;
  std::ostringstream err;
  REQUIRE(list_decisions(query, out, err) == kExitOk);
  const std::string text = out.str();
  CHECK(text.find("2026-11-27T05:00:02.000000Z  blocked   reason     session s1  file-guard: because b-3\n") !=
        std::string::npos);
  CHECK(text.find("session s2  2 gates: (:TYPE :REQUEST :TARGET :SHELL)") != std::string::npos);

  query.folder = prepared.dir.path() / "nowhere";
  std::ostringstream none;
  CHECK(list_decisions(query, out, none) == kExitProblem);
  CHECK(none.str().find("no decision log at") != std::string::npos);
}

TEST_CASE("since_time reads durations and UTC times", "[cli][decisions]") {
  CHECK(since_time("1h", 1'795'000'000) == "2026-11-18T10:06:40.000000Z");
  CHECK(since_time("30m", 1'795'000'000) == "2026-11-18T10:36:40.000000Z");
  CHECK(since_time("2d", 1'795'000'000) == "2026-11-16T11:06:40.000000Z");
  CHECK(since_time("2026-11-27T05:00:00Z", 0) == "2026-11-27T05:00:00.000000Z");
  CHECK(since_time("2026-11-27T05:00:00.25Z", 0) == "2026-11-27T05:00:00.250000Z");
  CHECK_FALSE(since_time("2026-11-27T05:00:00+01:00", 0).has_value());
  CHECK_FALSE(since_time("1w", 0).has_value());
  CHECK_FALSE(since_time("h", 0).has_value());
  CHECK_FALSE(since_time("2026-11-27", 0).has_value());
}

}  // namespace passepartout::cli
