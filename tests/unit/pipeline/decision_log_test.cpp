// The decision log: what a verification's record holds at each stage and
// outcome, masking, rotation, sampling, and a full buffer that drops.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/digest.hpp"
#include "base/log.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/signal.hpp"
#include "support/sexp.hpp"
#include "unit/pipeline/pipeline_rig.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::RecordingSink;
using testing::Rig;
using testing::sexp;
using testing::TempDir;

std::vector<std::string> lines_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Every record written so far, in the order written (flushed first).
std::vector<json> records(DecisionLog& log) {
  log.flush();
  std::vector<json> out;
  for (const std::string& line : lines_of(current_decisions_file(log.folder()))) {
    json record = json::parse(line, nullptr, false);
    REQUIRE_FALSE(record.is_discarded());
    out.push_back(std::move(record));
  }
  return out;
}

std::vector<json> with(const std::vector<json>& all, const std::string& stage, const std::string& outcome) {
  std::vector<json> out;
  for (const json& r : all) {
    if (r.value("stage", "") == stage && r.value("outcome", "") == outcome) out.push_back(r);
  }
  return out;
}

bool is_hex64(const std::string& text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A verification decided by a host rule alone: no snapshot needed.
Verification host_decision(VerifyOutcome outcome, GateResult result, const std::string& why) {
  Verification v;
  v.outcome = outcome;
  if (result != GateResult::passed) {
    v.reason = Value::string(why);
    v.trace.push_back(nullptr, result, v.reason);
  }
  return v;
}

void record_one(DecisionLog& log, const Verification& v, const Value& action) {
  GateTimes times;
  times.count = 0;
  const IntervalClock::Ticks now = IntervalClock::now();
  log.record(DecisionStage::last_mile, nullptr, action, user_input_signal("x", "s-unit"), v, times, now, now, {});
}

DecisionLogOptions options_in(const fs::path& folder) {
  DecisionLogOptions options;
  options.folder = folder;
  return options;
}

}  // namespace

TEST_CASE("a verification at reasoning and at the last mile is recorded once each, with who proposed it",
          "[pipeline][decisions]") {
  Rig rig({{"pass-gate-0", 10}}, {R"(rules:
  - match: "hello"
    reply: '(:TYPE :REQUEST :TARGET :TUI :PAYLOAD (:TEXT "hi there"))'
)"},
          2, {}, true);
  rig.run(user_input_signal("hello", "s-pass"), std::make_shared<RecordingSink>());
  const std::vector<json> all = records(*rig.decisions);
  INFO(json(all).dump(1));
  REQUIRE(all.size() == 2);
  for (const json& r : all) {
    CHECK(r["v"] == 1);
    CHECK(r["session"] == "s-pass");
    CHECK(r["sensor"] == "user-input");
    CHECK(r["source"] == "tui");
    CHECK(r["provider"] == "scripted-0");
    CHECK_FALSE(r.contains("model"));  // the scripted provider names none
    CHECK(r["outcome"] == "passed");
    CHECK_FALSE(r.contains("reason"));
    CHECK_FALSE(r.contains("approval_token_sha256"));
    CHECK(r["took_us"].is_number());
    CHECK(r["time"].get<std::string>().size() == std::string("2026-11-27T05:11:20.123456Z").size());
    REQUIRE(r["gates"].size() == 1);
    const json& gate = r["gates"][0];
    CHECK(gate["name"] == "pass-gate-0");
    CHECK(gate["version"] == "1.0.0");
    CHECK(is_hex64(gate["sha256"]));
    CHECK(gate["verdict"] == "passed");
    CHECK(gate["us"].is_number());
    CHECK(r["action"].get<std::string>().find("hi there") != std::string::npos);
  }
  CHECK(all[0]["stage"] == "reason");
  CHECK(all[1]["stage"] == "last-mile");
  CHECK(all[0]["id"] != all[1]["id"]);
  CHECK(rig.decisions->written() == 2);
  CHECK(rig.decisions->dropped() == 0);
}

TEST_CASE("a block and a failure are recorded with the deciding reason", "[pipeline][decisions]") {
  const Value request =
      sexp("(:TYPE :REQUEST :TARGET :RECORDER :META (:SOURCE :TUI :SESSION-ID \"s1\") :PAYLOAD (:NOTE \"x\"))");
  SECTION("blocked") {
    Rig rig({{"block-gate", 90}, {"toolbox-a", 50}}, {}, 2, {}, true);
    rig.run(request, std::make_shared<RecordingSink>());
    const std::vector<json> blocked = with(records(*rig.decisions), "last-mile", "blocked");
    REQUIRE(blocked.size() == 1);
    const json& r = blocked[0];
    INFO(r.dump());
    CHECK_FALSE(r.contains("provider"));  // a request, not a model's proposal
    CHECK_FALSE(r.contains("sensor"));
    CHECK(r["session"] == "s1");
    CHECK(r["reason"].is_string());
    REQUIRE(r["gates"].size() >= 1);
    CHECK(r["gates"][0]["name"] == "block-gate");
    CHECK(r["gates"][0]["verdict"] == "blocked");
    CHECK(r["gates"][0]["reason"] == r["reason"]);
  }
  SECTION("failed") {
    Rig rig({{"throw-gate", 90}, {"toolbox-a", 50}}, {}, 2, {}, true);
    rig.run(request, std::make_shared<RecordingSink>());
    const std::vector<json> failed = with(records(*rig.decisions), "last-mile", "failed");
    REQUIRE(failed.size() == 1);
    INFO(failed[0].dump());
    CHECK(failed[0]["gates"][0]["name"] == "throw-gate");
    CHECK(failed[0]["gates"][0]["verdict"] == "failed");
    CHECK(failed[0]["reason"].is_string());
  }
}

TEST_CASE("an approval is recorded with its token's hash, never the token, and so is its check when approved",
          "[pipeline][decisions][approvals]") {
  Rig rig({{"approval-gate", 40}, {"toolbox-a", 50}}, {R"(rules:
  - match: "record"
    reply: '(:TYPE :REQUEST :TARGET :RECORDER :PAYLOAD (:NOTE "keep this"))'
)"},
          2, {}, true);
  auto sink = std::make_shared<RecordingSink>();
  rig.run(user_input_signal("record something", "s-ok"), sink);
  REQUIRE(sink->messages().size() == 1);
  const std::string token(sink->messages()[0].path({"PAYLOAD", "TOKEN"}).text());
  REQUIRE(token.size() == 32);
  REQUIRE(rig.approve(token).has_value());

  const std::vector<json> all = records(*rig.decisions);
  INFO(json(all).dump(1));
  const std::vector<json> asked = with(all, "reason", "approval");
  REQUIRE(asked.size() == 1);
  CHECK(asked[0]["approval_token_sha256"] == sha256_hex(token));
  CHECK(asked[0]["provider"] == "scripted-0");
  CHECK(asked[0]["reason"] == "approval-gate wants a human");
  const std::vector<json> checked = with(all, "approval", "approval");
  REQUIRE(checked.size() == 1);
  CHECK(checked[0]["approval_token_sha256"] == sha256_hex(token));
  CHECK(checked[0]["sensor"] == "approved");
  CHECK(checked[0]["session"] == "s-ok");
  for (const std::string& line : lines_of(current_decisions_file(rig.decisions->folder()))) {
    CHECK(line.find(token) == std::string::npos);
  }
}

TEST_CASE("a key-looking string in an action is masked in its record", "[pipeline][decisions]") {
  TempDir dir;
  auto log = DecisionLog::open(options_in(dir.path() / "decisions"));
  REQUIRE(log.has_value());
  const Value action =
      sexp("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"curl -H 'x: sk-proj-abcdefghijklmnop1234'\"))");
  record_one(**log, host_decision(VerifyOutcome::passed, GateResult::passed, ""), action);
  record_one(**log, host_decision(VerifyOutcome::passed, GateResult::passed, ""), sexp("(:TYPE :REQUEST)"));
  const std::vector<json> all = records(**log);
  REQUIRE(all.size() == 2);
  CHECK(all[0]["action"].get<std::string>().find("[MASKED]") != std::string::npos);
  CHECK(all[0]["masked"] == true);
  CHECK_FALSE(all[1].contains("masked"));
  for (const std::string& line : lines_of(current_decisions_file((*log)->folder()))) {
    CHECK(line.find("sk-proj-abcdefghijklmnop1234") == std::string::npos);
  }
}

TEST_CASE("a block by a host rule is a block, a guard rule's failure a failure", "[pipeline][decisions]") {
  TempDir dir;
  auto log = DecisionLog::open(options_in(dir.path()));
  REQUIRE(log.has_value());
  record_one(**log, host_decision(VerifyOutcome::blocked, GateResult::blocked, "a key"), sexp("(:TYPE :REQUEST)"));
  record_one(**log, host_decision(VerifyOutcome::blocked, GateResult::failed, "no guard"), sexp("(:TYPE :REQUEST)"));
  const std::vector<json> all = records(**log);
  REQUIRE(all.size() == 2);
  CHECK(all[0]["outcome"] == "blocked");
  CHECK(all[0]["gates"][0]["name"] == "credential-rule");
  CHECK(all[0]["gates"][0]["version"] == "host");
  CHECK_FALSE(all[0]["gates"][0].contains("sha256"));
  CHECK_FALSE(all[0]["gates"][0].contains("us"));
  CHECK(all[1]["outcome"] == "failed");
  CHECK(all[1]["gates"][0]["name"] == "guard-rule");
  CHECK(all[1]["reason"] == "no guard");
}

TEST_CASE("shadow disagreements are written as the record's shadow array", "[pipeline][decisions]") {
  DecisionRecord record;
  record.signal = user_input_signal("x", "s");
  record.shadow.push_back(
      {"shell-guard", "2.0.0", std::string(64, 'a'), "passed", "blocked", "too risky", "candidate-blocks"});
  const json line = json::parse(decision_line(record, "0000abcd-1", 1'795'000'000'000'000));
  REQUIRE(line["shadow"].size() == 1);
  CHECK(line["shadow"][0]["kind"] == "candidate-blocks");
  CHECK(line["shadow"][0]["candidate"] == "blocked");
  CHECK(line["id"] == "0000abcd-1");
  CHECK(line["time"] == "2026-11-18T11:06:40.000000Z");
  CHECK_FALSE(json::parse(decision_line(DecisionRecord{}, "x", 0)).contains("shadow"));

  // Handed in with the verification, through its context.
  TempDir dir;
  auto log = DecisionLog::open(options_in(dir.path()));
  REQUIRE(log.has_value());
  const std::vector<ShadowDisagreement> shadow = record.shadow;
  DecisionContext context;
  context.shadow = &shadow;
  GateTimes times;
  times.count = 0;
  const IntervalClock::Ticks now = IntervalClock::now();
  (*log)->record(DecisionStage::reason, nullptr, sexp("(:TYPE :REQUEST)"), user_input_signal("x", "s"),
                 host_decision(VerifyOutcome::passed, GateResult::passed, ""), times, now, now, context);
  const std::vector<json> all = records(**log);
  REQUIRE(all.size() == 1);
  CHECK(all[0]["shadow"][0]["name"] == "shell-guard");
  CHECK(all[0]["shadow"][0]["reason"] == "too risky");
}

TEST_CASE("the decision log rotates by size and keeps its newest files", "[pipeline][decisions]") {
  TempDir dir;
  DecisionLogOptions options = options_in(dir.path());
  options.max_file_bytes = 2048;
  options.max_files = 3;
  auto log = DecisionLog::open(options);
  REQUIRE(log.has_value());
  for (int i = 0; i < 60; ++i) {
    record_one(**log, host_decision(VerifyOutcome::blocked, GateResult::blocked, "why " + std::to_string(i)),
               sexp("(:TYPE :REQUEST)"));
  }
  (*log)->flush();
  CHECK((*log)->written() == 60);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir.path())) files.push_back(entry.path());
  REQUIRE(files.size() == 3);  // the current one and two rotated
  std::size_t rotated = 0;
  std::vector<std::string> reasons;
  for (const fs::path& file : files) {
    CHECK(fs::file_size(file) <= 2048);
    const std::string name = file.filename().string();
    if (name != "decisions.jsonl") {
      ++rotated;
      CHECK(name.starts_with("decisions-"));
      CHECK(name.ends_with(".jsonl"));
    }
    for (const std::string& line : lines_of(file)) {
      const json record = json::parse(line, nullptr, false);
      REQUIRE_FALSE(record.is_discarded());
      reasons.push_back(record["reason"]);
    }
  }
  CHECK(rotated == 2);
  CHECK(std::find(reasons.begin(), reasons.end(), "why 59") != reasons.end());  // the newest are kept
  CHECK(std::find(reasons.begin(), reasons.end(), "why 0") == reasons.end());   // the oldest are gone
}

TEST_CASE("a rotated file the fleet has not shipped is kept past the files the log keeps", "[pipeline][decisions]") {
  TempDir dir;
  DecisionLogOptions options = options_in(dir.path());
  options.max_file_bytes = 2048;
  options.max_files = 3;
  std::atomic<bool> shipped{false};
  std::atomic<int> writes{0};
  options.unshipped = [&shipped](const fs::path&) { return !shipped.load(); };
  options.written = [&writes] { ++writes; };
  auto log = DecisionLog::open(options);
  REQUIRE(log.has_value());
  const auto files = [&] {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()));
  };
  for (int i = 0; i < 60; ++i) {
    record_one(**log, host_decision(VerifyOutcome::blocked, GateResult::blocked, "why " + std::to_string(i)),
               sexp("(:TYPE :REQUEST)"));
  }
  (*log)->flush();
  CHECK(writes.load() > 0);
  const std::size_t kept = files();
  CHECK(kept > 3);
  shipped = true;  // now they are: the next rotation prunes to three
  for (int i = 60; i < 70; ++i) {
    record_one(**log, host_decision(VerifyOutcome::blocked, GateResult::blocked, "why " + std::to_string(i)),
               sexp("(:TYPE :REQUEST)"));
  }
  (*log)->flush();
  CHECK(files() == 3);
}

TEST_CASE("a line a killed writer left unended is ended when the log opens again", "[pipeline][decisions]") {
  TempDir dir;
  {
    std::ofstream torn(current_decisions_file(dir.path()), std::ios::binary);
    torn << R"({"v":1,"id":"0000-1","time":"2026-12-04T10:00:00.000001Z","stage":"rea)";
  }
  auto log = DecisionLog::open(options_in(dir.path()));
  REQUIRE(log.has_value());
  record_one(**log, host_decision(VerifyOutcome::blocked, GateResult::blocked, "after"), sexp("(:TYPE :REQUEST)"));
  (*log)->flush();
  const std::vector<std::string> lines = lines_of(current_decisions_file(dir.path()));
  REQUIRE(lines.size() == 2);
  CHECK(json::parse(lines[0], nullptr, false).is_discarded());  // still one malformed line
  const json record = json::parse(lines[1], nullptr, false);
  REQUIRE_FALSE(record.is_discarded());
  CHECK(record["reason"] == "after");
}

TEST_CASE("a file older than the rotation age is rotated before the next line", "[pipeline][decisions]") {
  TempDir dir;
  // A daemon that stopped two days ago left its current file behind.
  const std::string old_line =
      R"({"v":1,"id":"00000001-1","time":"2000-01-01T00:00:00.000000Z","stage":"reason","outcome":"passed"})";
  {
    std::ofstream out(dir.path() / "decisions.jsonl", std::ios::binary);
    out << old_line << "\n";
  }
  DecisionLogOptions options = options_in(dir.path());
  options.max_age = std::chrono::hours(24);
  auto log = DecisionLog::open(options);
  REQUIRE(log.has_value());
  record_one(**log, host_decision(VerifyOutcome::blocked, GateResult::blocked, "fresh"), sexp("(:TYPE :REQUEST)"));
  (*log)->flush();
  const std::vector<std::string> current = lines_of(current_decisions_file(dir.path()));
  REQUIRE(current.size() == 1);
  CHECK(json::parse(current[0])["reason"] == "fresh");
  std::vector<fs::path> rotated;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    if (entry.path().filename() != "decisions.jsonl") rotated.push_back(entry.path());
  }
  REQUIRE(rotated.size() == 1);
  CHECK(lines_of(rotated[0]) == std::vector<std::string>{old_line});
}

TEST_CASE("a decision the gate log names is numbered as it is captured, and every id is unique",
          "[pipeline][decisions]") {
  TempDir dir;
  auto log = DecisionLog::open(options_in(dir.path()));
  REQUIRE(log.has_value());
  GateTimes times;
  times.count = 0;
  const IntervalClock::Ticks now = IntervalClock::now();
  const Value signal = user_input_signal("x", "s-unit");
  std::vector<std::string> named;
  for (int i = 0; i < 6; ++i) {
    const bool block = i % 2 == 1;
    const Verification v = block ? host_decision(VerifyOutcome::blocked, GateResult::blocked, "no")
                                 : host_decision(VerifyOutcome::passed, GateResult::passed, "");
    const std::string id =
        (*log)->record(DecisionStage::last_mile, nullptr, sexp("(:TYPE :REQUEST)"), signal, v, times, now, now, {});
    CHECK(id.empty() == !block);  // a plain pass is numbered by the writer
    if (block) named.push_back(id);
  }
  const std::vector<json> all = records(**log);
  REQUIRE(all.size() == 6);
  std::vector<std::string> ids;
  for (const json& r : all) ids.push_back(r["id"]);
  std::vector<std::string> unique = ids;
  std::sort(unique.begin(), unique.end());
  CHECK(std::unique(unique.begin(), unique.end()) == unique.end());
  for (const json& r : all) {
    if (r["outcome"] != "blocked") continue;
    CHECK(std::find(named.begin(), named.end(), r["id"]) != named.end());
  }
}

TEST_CASE("gates are timed in one verification of every N on a thread", "[pipeline][decisions]") {
  TempDir dir;
  DecisionLogOptions options = options_in(dir.path());
  CHECK(options.time_gates_every == DecisionLogOptions::kDefaultTimeGatesEvery);
  options.time_gates_every = 4;
  auto log = DecisionLog::open(options);
  REQUIRE(log.has_value());
  int timed = 0;
  for (int i = 0; i < 16; ++i) timed += (*log)->time_next_gates() ? 1 : 0;
  CHECK(timed == 4);
  options.folder = dir.path() / "every";
  options.time_gates_every = 1;
  auto every = DecisionLog::open(options);
  REQUIRE(every.has_value());
  for (int i = 0; i < 5; ++i) CHECK((*every)->time_next_gates());
}

TEST_CASE("passes are sampled when asked and blocks never are", "[pipeline][decisions]") {
  TempDir dir;
  DecisionLogOptions options = options_in(dir.path());
  options.sample_passed = 4;
  auto log = DecisionLog::open(options);
  REQUIRE(log.has_value());
  for (int i = 0; i < 8; ++i) {
    record_one(**log, host_decision(VerifyOutcome::passed, GateResult::passed, ""), sexp("(:TYPE :REQUEST)"));
  }
  for (int i = 0; i < 3; ++i) {
    record_one(**log, host_decision(VerifyOutcome::blocked, GateResult::blocked, "no"), sexp("(:TYPE :REQUEST)"));
  }
  const std::vector<json> all = records(**log);
  CHECK(all.size() == 2 + 3);
}

TEST_CASE("dropped decisions are reported in a warning at most once per interval", "[pipeline][decisions]") {
  TempDir dir;
  DecisionLogOptions options = options_in(dir.path());
  options.buffer = 16;
  SECTION("an interval that has passed: one warning with the count, none while nothing more is dropped") {
    options.drop_report_every = std::chrono::milliseconds(0);
    auto log = DecisionLog::open(options);
    REQUIRE(log.has_value());
    LogCapture capture;
    (*log)->hold_writer_for_test(true);
    for (int i = 0; i < 40; ++i) {
      record_one(**log, host_decision(VerifyOutcome::blocked, GateResult::blocked, "no"), sexp("(:TYPE :REQUEST)"));
    }
    (*log)->hold_writer_for_test(false);
    (*log)->flush();  // the writer reports before it says the flush is done
    const auto warned = [&] {
      const std::vector<std::string> lines = capture.lines();
      return std::count_if(lines.begin(), lines.end(), [](const std::string& line) {
        return line.find("24 decisions dropped since the last report") != std::string::npos &&
               line.find("24 since start") != std::string::npos;
      });
    };
    CHECK(warned() == 1);
    (*log)->flush();
    CHECK(warned() == 1);
  }
  SECTION("within the interval: counted, not yet reported") {
    options.drop_report_every = std::chrono::hours(1);
    auto log = DecisionLog::open(options);
    REQUIRE(log.has_value());
    LogCapture capture;
    (*log)->hold_writer_for_test(true);
    for (int i = 0; i < 40; ++i) {
      record_one(**log, host_decision(VerifyOutcome::blocked, GateResult::blocked, "no"), sexp("(:TYPE :REQUEST)"));
    }
    (*log)->hold_writer_for_test(false);
    (*log)->flush();
    CHECK((*log)->dropped() == 24);
    CHECK_FALSE(capture.contains("decisions dropped"));
  }
}

TEST_CASE("a full buffer drops and counts decisions and never waits for the writer",
          "[pipeline][decisions][concurrency]") {
  TempDir dir;
  DecisionLogOptions options = options_in(dir.path());
  options.buffer = 16;
  auto log = DecisionLog::open(options);
  REQUIRE(log.has_value());
  (*log)->hold_writer_for_test(true);  // returns once the writer waits
  for (int i = 0; i < 100; ++i) {
    record_one(**log, host_decision(VerifyOutcome::blocked, GateResult::blocked, "no"), sexp("(:TYPE :REQUEST)"));
  }
  CHECK((*log)->dropped() == 84);  // this thread's shard holds 16
  CHECK((*log)->written() == 0);
  (*log)->hold_writer_for_test(false);
  (*log)->flush();
  CHECK((*log)->written() == 16);
  CHECK((*log)->dropped() == 84);
  CHECK(lines_of(current_decisions_file(dir.path())).size() == 16);
}

}  // namespace passepartout
