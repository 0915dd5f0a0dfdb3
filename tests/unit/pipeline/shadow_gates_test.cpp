// Shadow gates: a candidate version of a loaded gate asked after the live
// chain, its verdict compared, counted and recorded, and never applied.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pipeline/decision_log.hpp"
#include "pipeline/gate_log.hpp"
#include "pipeline/gate_watchdog.hpp"
#include "pipeline/shadow_gates.hpp"
#include "pipeline/verifier.hpp"
#include "skills/registry.hpp"
#include "support/held_gate.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_reader.hpp"

using namespace passepartout;
using nlohmann::json;
using passepartout::testing::HeldGate;
using passepartout::testing::SkillFixtures;
using passepartout::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const Value& user_signal() {
  static const Value signal = *read_sexp(
      "(:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID \"s-shadow\") :PAYLOAD (:SENSOR :USER-INPUT :TEXT "
      "\"hi\"))");
  return signal;
}

const Value kAction = *read_sexp("(:TYPE :REQUEST :TARGET :CLI :PAYLOAD (:ACTION :MESSAGE :TEXT \"hello\"))");

// shadow-gate `version` (1 or 2) with `config`, as skill "shadow-gate".
std::string shadow_yaml(int version, std::string_view config, int priority = 10) {
  return "name: shadow-gate\nversion: " + std::to_string(version) + ".0.0\nlibrary: libshadow-gate-" +
         std::to_string(version) + ".so\nabi: 1\nisolation: in-process\npriority: " + std::to_string(priority) +
         "\nconfig: " + std::string(config) + "\n";
}

// A registry with the live skills, and shadow-gate 2.0.0 as the candidate of
// the live shadow-gate 1.0.0.
struct Shadowed {
  SkillFixtures fx;
  Registry registry;
  std::shared_ptr<ShadowStats> stats = std::make_shared<ShadowStats>();

  Shadowed(std::string_view live_config, std::string_view candidate_config,
           std::initializer_list<std::pair<std::string_view, int>> others = {}) {
    fx.install_library("shadow-gate-1");
    fx.install_library("shadow-gate-2");
    std::vector<std::shared_ptr<const Slot>> slots;
    for (auto [name, priority] : others) slots.push_back(load(fx.manifest(name, priority)));
    auto live = load(parse(shadow_yaml(1, live_config), "shadow-gate.yaml"));
    const Slot* live_slot = live.get();
    slots.push_back(std::move(live));
    ShadowCandidate candidate;
    candidate.slot = load(parse(shadow_yaml(2, candidate_config), "candidate.yaml"));
    candidate.live = live_slot;
    candidate.stats = stats;
    registry.publish(std::move(slots), {std::move(candidate)});
    REQUIRE(registry.snapshot()->shadows().size() == 1);
  }

  SkillManifest parse(const std::string& yaml, std::string_view file) {
    auto parsed = SkillManifest::parse(yaml, fx.manifest_dir() / file);
    INFO((parsed ? std::string() : parsed.error().message));
    REQUIRE(parsed.has_value());
    return std::move(*parsed);
  }
  std::shared_ptr<const Slot> load(const SkillManifest& manifest) {
    auto slot = fx.loader().load(manifest);
    INFO((slot ? std::string() : slot.error().message));
    REQUIRE(slot.has_value());
    return std::move(*slot);
  }

  Verification verify(const DecisionContext& context = {}) {
    Verification out;
    verify_and_record(DecisionStage::reason, registry.snapshot(), kAction, user_signal(), out, context);
    return out;
  }
};

// The verification with no candidate: what the live gates alone decide.
Verification live_only(Shadowed& world) {
  auto snapshot = world.registry.snapshot();
  const Snapshot bare({snapshot->slots().begin(), snapshot->slots().end()}, 0);
  REQUIRE(bare.shadows().empty());
  return Verifier::verify(bare, kAction, user_signal());
}

std::vector<json> records(DecisionLog& log) {
  log.flush();
  std::vector<json> out;
  std::ifstream in(current_decisions_file(log.folder()), std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    json record = json::parse(line, nullptr, false);
    REQUIRE_FALSE(record.is_discarded());
    out.push_back(std::move(record));
  }
  return out;
}

}  // namespace

TEST_CASE("verdicts compare by strictness, then by the action let through", "[pipeline][shadow]") {
  const Value a = *read_sexp("(:X 1)");
  const Value b = *read_sexp("(:X 2)");
  using R = GateResult;
  CHECK(compare_verdicts(R::passed, a, R::passed, a) == ShadowKind::agreement);
  CHECK(compare_verdicts(R::passed, a, R::rewritten, a) == ShadowKind::agreement);  // rewrote to the same action
  CHECK(compare_verdicts(R::rewritten, a, R::rewritten, b) == ShadowKind::rewrites_differently);
  CHECK(compare_verdicts(R::passed, a, R::blocked, Value()) == ShadowKind::candidate_blocks);
  CHECK(compare_verdicts(R::passed, a, R::approval, Value()) == ShadowKind::candidate_blocks);
  CHECK(compare_verdicts(R::approval, Value(), R::blocked, Value()) == ShadowKind::candidate_blocks);
  CHECK(compare_verdicts(R::blocked, Value(), R::passed, a) == ShadowKind::candidate_passes);
  CHECK(compare_verdicts(R::failed, Value(), R::approval, Value()) == ShadowKind::candidate_passes);
  CHECK(compare_verdicts(R::blocked, Value(), R::blocked, Value()) == ShadowKind::agreement);
  CHECK(compare_verdicts(R::failed, Value(), R::blocked, Value()) == ShadowKind::agreement);
  CHECK(compare_verdicts(R::blocked, Value(), R::failed, Value()) == ShadowKind::candidate_failed);
  CHECK(compare_verdicts(R::passed, a, R::failed, Value()) == ShadowKind::candidate_failed);
}

TEST_CASE("a candidate that agrees is counted as an agreement and adds nothing to the record", "[pipeline][shadow]") {
  Shadowed world("{ mode: pass }", "{ mode: pass }");
  TempDir dir;
  DecisionLogOptions options;
  options.folder = dir.path();
  auto log = DecisionLog::open(options);
  REQUIRE(log.has_value());
  for (int i = 0; i < 3; ++i) {
    DecisionContext context;
    context.log = log->get();
    CHECK(world.verify(context).outcome == VerifyOutcome::passed);
  }
  const ShadowCounts counts = world.stats->read();
  CHECK(counts.seen == 3);
  CHECK(counts.agreements() == 3);
  CHECK(counts.disagreements() == 0);
  CHECK(world.stats->latest().empty());
  const auto all = records(**log);
  REQUIRE(all.size() == 3);
  for (const json& r : all) CHECK_FALSE(r.contains("shadow"));
}

TEST_CASE("a candidate that blocks more is recorded and counted, and the live reply is unchanged",
          "[pipeline][shadow]") {
  Shadowed world("{ mode: pass }", "{ mode: block }");
  TempDir dir;
  DecisionLogOptions options;
  options.folder = dir.path();
  auto log = DecisionLog::open(options);
  REQUIRE(log.has_value());
  DecisionContext context;
  context.log = log->get();
  const Verification v = world.verify(context);
  const Verification expected = live_only(world);
  CHECK(v.outcome == VerifyOutcome::passed);
  CHECK(v.action == expected.action);
  CHECK(v.action == kAction);
  CHECK(v.to_value() == expected.to_value());  // the trace names the live gate only
  REQUIRE(v.trace.size() == 1);
  CHECK(v.trace[0].version() == "1.0.0");

  const ShadowCounts counts = world.stats->read();
  CHECK(counts.seen == 1);
  CHECK(counts.of(ShadowKind::candidate_blocks) == 1);
  CHECK(counts.agreements() == 0);
  const auto latest = world.stats->latest();
  REQUIRE(latest.size() == 1);
  CHECK(latest[0].kind == ShadowKind::candidate_blocks);
  CHECK(latest[0].live == "passed");
  CHECK(latest[0].candidate == "blocked");
  CHECK(latest[0].candidate_reason == "shadow-gate 2.0.0 says no");
  CHECK(latest[0].stage == "reason");
  CHECK(latest[0].action_digest == action_digest(kAction));

  const auto all = records(**log);
  REQUIRE(all.size() == 1);
  const json& r = all[0];
  CHECK(r["outcome"] == "passed");
  REQUIRE(r.contains("shadow"));
  REQUIRE(r["shadow"].size() == 1);
  const json& s = r["shadow"][0];
  CHECK(s["name"] == "shadow-gate");
  CHECK(s["version"] == "2.0.0");
  CHECK(s["sha256"].get<std::string>().size() == 64);
  CHECK(s["live"] == "passed");
  CHECK(s["candidate"] == "blocked");
  CHECK(s["reason"] == "shadow-gate 2.0.0 says no");
  CHECK(s["kind"] == "candidate-blocks");
}

TEST_CASE("a candidate that blocks less is counted as candidate-passes, and the action stays blocked",
          "[pipeline][shadow]") {
  Shadowed world("{ mode: block }", "{ mode: pass }");
  const Verification v = world.verify();
  CHECK(v.outcome == VerifyOutcome::blocked);
  CHECK(v.reason.text() == "shadow-gate 1.0.0 says no");
  CHECK(v.to_value() == live_only(world).to_value());
  const ShadowCounts counts = world.stats->read();
  CHECK(counts.seen == 1);
  CHECK(counts.of(ShadowKind::candidate_passes) == 1);
  const auto latest = world.stats->latest();
  REQUIRE(latest.size() == 1);
  CHECK(latest[0].live == "blocked");
  CHECK(latest[0].live_reason == "shadow-gate 1.0.0 says no");
  CHECK(latest[0].candidate == "passed");
}

TEST_CASE("a candidate that throws costs its own record only", "[pipeline][shadow]") {
  Shadowed world("{ mode: pass }", "{ mode: throw }");
  const Verification v = world.verify();
  CHECK(v.outcome == VerifyOutcome::passed);
  CHECK(v.action == kAction);
  const ShadowCounts counts = world.stats->read();
  CHECK(counts.of(ShadowKind::candidate_failed) == 1);
  const auto latest = world.stats->latest();
  REQUIRE(latest.size() == 1);
  CHECK(latest[0].candidate == "failed");
  CHECK(latest[0].candidate_reason == "shadow-gate exploded");
  // The live gate's counters saw one pass; the candidate's own are not the live skill's.
  CHECK(world.registry.snapshot()->find("shadow-gate")->counters().read().passes == 1);
}

TEST_CASE("a candidate that runs out of time is failed, and the live reply is unaffected", "[pipeline][shadow]") {
  const auto previous = GateWatchdog::budget();
  GateWatchdog::set_budget(std::chrono::milliseconds(40));
  const HeldGate held;  // its release file: the candidate sleeps until the watchdog has marked it late
  Shadowed world("{ mode: pass }", "{ mode: sleep, sleep-ms: 30000, until-file: \"" + held.release.string() + "\" }");
  Verification v;
  const bool marked = held.verify_when_late([&] { v = world.verify(); });
  GateWatchdog::set_budget(previous);
  REQUIRE(marked);
  CHECK(v.outcome == VerifyOutcome::passed);
  CHECK(v.action == kAction);
  const ShadowCounts counts = world.stats->read();
  CHECK(counts.of(ShadowKind::candidate_failed) == 1);
  const auto latest = world.stats->latest();
  REQUIRE(latest.size() == 1);
  CHECK(latest[0].candidate_reason == "exceeded its time budget of 40 ms");
}

TEST_CASE("two gates that rewrite differently are counted, and the live rewrite is the one applied",
          "[pipeline][shadow]") {
  SECTION("different rewrites") {
    Shadowed world("{ mode: rewrite, stamp: live }", "{ mode: rewrite, stamp: candidate }");
    const Verification v = world.verify();
    REQUIRE(v.outcome == VerifyOutcome::passed);
    CHECK(v.action.at("STAMP").text() == "live");
    CHECK(world.stats->read().of(ShadowKind::rewrites_differently) == 1);
  }
  SECTION("the same rewrite is an agreement") {
    Shadowed world("{ mode: rewrite, stamp: same }", "{ mode: rewrite, stamp: same }");
    CHECK(world.verify().action.at("STAMP").text() == "same");
    CHECK(world.stats->read().agreements() == 1);
  }
  SECTION("a rewrite against a pass") {
    Shadowed world("{ mode: pass }", "{ mode: rewrite }");
    CHECK(world.verify().action == kAction);
    CHECK(world.stats->read().of(ShadowKind::rewrites_differently) == 1);
  }
}

TEST_CASE("a candidate is given the action its live gate was given", "[pipeline][shadow]") {
  // rewrite-gate (priority 90) stamps :STAMP "rewrite-gate" before shadow-gate
  // runs; a candidate that stamps the same value changes nothing of what it
  // was given, so it agrees with the live pass only if it saw the rewrite.
  Shadowed world("{ mode: pass }", "{ mode: rewrite, stamp: rewrite-gate }", {{"rewrite-gate", 90}});
  const Verification v = world.verify();
  REQUIRE(v.outcome == VerifyOutcome::passed);
  CHECK(v.action.at("STAMP").text() == "rewrite-gate");
  CHECK(world.stats->read().agreements() == 1);
}

TEST_CASE("a candidate whose live gate was not reached is not asked", "[pipeline][shadow]") {
  Shadowed world("{ mode: pass }", "{ mode: block }", {{"block-gate", 90}});
  const Verification v = world.verify();
  CHECK(v.outcome == VerifyOutcome::blocked);
  CHECK(world.stats->read().seen == 0);
}

TEST_CASE("a snapshot carries a candidate only while its live slot is published", "[pipeline][shadow]") {
  Shadowed world("{ mode: pass }", "{ mode: block }", {{"pass-gate-0", 90}});
  auto snapshot = world.registry.snapshot();
  REQUIRE(snapshot->shadows().size() == 1);
  CHECK(snapshot->shadows()[0].live_gate == 1);  // behind pass-gate-0
  CHECK(snapshot->shadow_of_gate(0) == -1);
  CHECK(snapshot->shadow_of_gate(1) == 0);
  // Republishing the same slots keeps it (with the same statistics).
  world.registry.publish({snapshot->slots().begin(), snapshot->slots().end()});
  REQUIRE(world.registry.snapshot()->shadows().size() == 1);
  CHECK(world.registry.snapshot()->shadows()[0].candidate.stats == world.stats);
  // Without the live slot (unloaded, or swapped for another), it is dropped.
  std::vector<std::shared_ptr<const Slot>> without;
  for (const auto& slot : snapshot->slots()) {
    if (slot->name() != "shadow-gate") without.push_back(slot);
  }
  world.registry.publish(without);
  CHECK(world.registry.snapshot()->shadows().empty());
  // And it does not come back with a live slot that is not the one it shadowed.
  world.registry.publish({snapshot->slots().begin(), snapshot->slots().end()});
  CHECK(world.registry.snapshot()->shadows().empty());
}

TEST_CASE("the latest disagreements are kept newest first, at most ten", "[pipeline][shadow]") {
  Shadowed world("{ mode: pass }", "{ mode: block }");
  for (int i = 0; i < 12; ++i) world.verify();
  CHECK(world.stats->read().of(ShadowKind::candidate_blocks) == 12);
  const auto latest = world.stats->latest();
  CHECK(latest.size() == ShadowStats::kLatest);
  CHECK(latest.front().at_unix_ms >= latest.back().at_unix_ms);
}
