// SkillHost's shadow candidates: started through the loader's checks,
// refused precisely, stopped, promoted through the hot swap, dropped with
// their live skill, and every step in the audit log with its statistics.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/gate_log.hpp"
#include "pipeline/verifier.hpp"
#include "skills/skill_host.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_reader.hpp"

using namespace passepartout;
using passepartout::testing::SkillFixtures;
using passepartout::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const Value& user_signal() {
  static const Value s = *read_sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hi\"))");
  return s;
}
const Value& an_action() {
  static const Value a = *read_sexp("(:TYPE :REQUEST :PAYLOAD (:ACTION :MESSAGE :TEXT \"hello\"))");
  return a;
}

std::string shadow_yaml(int version, std::string_view mode, std::string_view isolation = "in-process") {
  return "name: shadow-gate\nversion: " + std::to_string(version) + ".0.0\nlibrary: libshadow-gate-" +
         std::to_string(version) + ".so\nabi: 1\nisolation: " + std::string(isolation) +
         "\npriority: 10\nconfig: { mode: " + std::string(mode) + " }\n";
}

// shadow-gate 1.0.0 (passes) and pass-gate-0 booted from the manifest folder;
// candidates' manifests are written outside it.
struct ShadowWorld {
  TempDir state;
  SkillFixtures fx;
  std::unique_ptr<SkillHost> host;

  ShadowWorld() {
    for (auto name : {"shadow-gate-1", "shadow-gate-2", "pass-gate-0"}) fx.install_library(name);
    fx.write_manifest("shadow-gate.yaml", shadow_yaml(1, "pass"));
    fx.write_manifest("pass-gate-0.yaml", SkillFixtures::yaml("pass-gate-0", 50));
    auto created = SkillHost::create(SkillHostOptions{
        fx.manifest_dir(), fx.plugin_dir(), state.path() / "audit.sqlite3", true, state.path() / "ws", {}});
    REQUIRE(created.has_value());
    host = std::move(*created);
    auto boot = host->boot("test");
    REQUIRE(boot.disabled.empty());
  }

  SkillManifest candidate(int version, std::string_view mode, std::string_view name = "shadow-gate",
                          std::string_view isolation = "in-process") {
    fs::create_directories(state.path() / "candidates");
    std::string yaml = shadow_yaml(version, mode, isolation);
    if (name != "shadow-gate") yaml.replace(yaml.find("shadow-gate"), 11, name);
    auto parsed = SkillManifest::parse(yaml, state.path() / "candidates" / "candidate.yaml");
    INFO((parsed ? std::string() : parsed.error().message));
    REQUIRE(parsed.has_value());
    return std::move(*parsed);
  }

  Verification verify() {
    Verification out;
    verify_and_record(DecisionStage::reason, host->snapshot(), an_action(), user_signal(), out);
    return out;
  }
};

}  // namespace

TEST_CASE("shadow, status, promote: the candidate is swapped in and every step is audited", "[skills][shadow]") {
  ShadowWorld world;
  ChangeResult started = world.host->shadow(world.candidate(2, "block"), "operator");
  INFO(started.change.error);
  REQUIRE(started.ok());
  CHECK(started.change.action == "shadow");
  CHECK(started.change.from_version == "1.0.0");
  CHECK(started.change.to_version == "2.0.0");
  CHECK(started.change.to_sha256.size() == 64);

  for (int i = 0; i < 3; ++i) CHECK(world.verify().outcome == VerifyOutcome::passed);  // never applied

  auto status = world.host->shadow_status();
  REQUIRE(status.size() == 1);
  CHECK(status[0].skill == "shadow-gate");
  CHECK(status[0].live_version == "1.0.0");
  CHECK(status[0].candidate_version == "2.0.0");
  CHECK(status[0].requester == "operator");
  CHECK(status[0].counts.seen == 3);
  CHECK(status[0].counts.of(ShadowKind::candidate_blocks) == 3);
  CHECK(status[0].latest.size() == 3);
  CHECK(world.host->shadow_counts().at("shadow-gate").seen == 3);

  ChangeResult promoted = world.host->promote("shadow-gate", "operator");
  INFO(promoted.change.error);
  REQUIRE(promoted.ok());
  CHECK(promoted.change.action == "promote");
  CHECK(promoted.change.from_version == "1.0.0");
  CHECK(promoted.change.to_version == "2.0.0");
  CHECK(promoted.change.detail ==
        "{\"seen\":3,\"agreements\":0,\"candidate-blocks\":3,\"candidate-passes\":0,\"rewrites-differently\":0,"
        "\"candidate-failed\":0}");
  CHECK(promoted.change.state_handover == "skipped: no export or import hook");

  // The candidate is live now, and no longer shadowed.
  CHECK(world.host->snapshot()->find("shadow-gate")->version_text() == "2.0.0");
  CHECK(world.host->snapshot()->shadows().empty());
  CHECK(world.host->shadow_status().empty());
  CHECK(world.verify().outcome == VerifyOutcome::blocked);
  CHECK(world.host->shadow_counts().at("shadow-gate").seen == 3);  // kept for metrics

  auto history = world.host->history(10);
  REQUIRE(history.has_value());
  REQUIRE(history->size() >= 2);
  CHECK((*history)[0].action == "promote");
  CHECK((*history)[0].detail == promoted.change.detail);
  CHECK((*history)[1].action == "shadow");  // no shadow-stop: the promote says what happened
  CHECK((*history)[1].outcome == "ok");

  const auto kinds = SkillHost::change_kinds();
  const auto promote_kind = static_cast<std::size_t>(std::find(kinds.begin(), kinds.end(), "promote") - kinds.begin());
  REQUIRE(promote_kind < kinds.size());
  CHECK(world.host->change_count(promote_kind, 0) == 1);
}

TEST_CASE("a candidate in a worker process that crashes costs only its own record", "[skills][shadow]") {
  ShadowWorld world;
  const SkillManifest crashing = world.candidate(2, "crash", "shadow-gate", "process");
  REQUIRE(crashing.isolation == Isolation::process);
  ChangeResult started = world.host->shadow(crashing, "operator");
  INFO(started.change.error);
  REQUIRE(started.ok());
  {
    const auto snapshot = world.host->snapshot();
    REQUIRE(snapshot->shadows().size() == 1);
    CHECK(snapshot->shadows()[0].candidate.slot->isolation_status().tier == Isolation::process);
  }

  for (int i = 0; i < 2; ++i) {
    const Verification v = world.verify();
    CHECK(v.outcome == VerifyOutcome::passed);  // the live gates decide, unaffected
    for (std::size_t g = 0; g < v.trace.size(); ++g) CHECK(v.trace[g].result != GateResult::failed);
  }

  auto status = world.host->shadow_status();
  REQUIRE(status.size() == 1);
  CHECK(status[0].counts.seen == 2);
  CHECK(status[0].counts.of(ShadowKind::candidate_failed) == 2);
  REQUIRE(status[0].latest.size() == 2);
  const ShadowSample& first = status[0].latest.back();  // newest first
  CHECK(first.live == "passed");
  CHECK(first.candidate == "failed");
  CHECK(first.candidate_reason == "skill process died: SIGSEGV");
  CHECK(world.host->snapshot()->find("shadow-gate")->version_text() == "1.0.0");

  // The candidate can still be stopped, audited with what it cost.
  ChangeResult stopped = world.host->shadow_stop("shadow-gate", "operator");
  INFO(stopped.change.error);
  REQUIRE(stopped.ok());
  CHECK(stopped.change.detail.find("\"candidate-failed\":2") != std::string::npos);
}

TEST_CASE("shadow, then stop: the candidate is dropped, audited with its statistics", "[skills][shadow]") {
  ShadowWorld world;
  REQUIRE(world.host->shadow(world.candidate(2, "pass"), "operator").ok());
  world.verify();
  ChangeResult stopped = world.host->shadow_stop("shadow-gate", "operator");
  REQUIRE(stopped.ok());
  CHECK(stopped.change.action == "shadow-stop");
  CHECK(stopped.change.from_version == "2.0.0");
  CHECK(stopped.change.detail.find("\"seen\":1,\"agreements\":1") != std::string::npos);
  CHECK(world.host->snapshot()->shadows().empty());
  CHECK(world.host->snapshot()->find("shadow-gate")->version_text() == "1.0.0");
  auto history = world.host->history(1);
  REQUIRE(history.has_value());
  REQUIRE(history->size() == 1);
  CHECK((*history)[0].action == "shadow-stop");
  CHECK((*history)[0].detail == stopped.change.detail);

  SECTION("stopping again, or promoting, is refused: there is no candidate") {
    ChangeResult again = world.host->shadow_stop("shadow-gate", "operator");
    CHECK(again.change.outcome == "refused");
    CHECK(again.change.error == "skill 'shadow-gate' has no shadow candidate");
    ChangeResult promote = world.host->promote("shadow-gate", "operator");
    CHECK(promote.change.outcome == "refused");
    CHECK(world.host->snapshot()->find("shadow-gate")->version_text() == "1.0.0");
  }
}

TEST_CASE("a candidate is refused precisely and nothing changes", "[skills][shadow]") {
  ShadowWorld world;
  const auto generation = world.host->snapshot()->generation();
  SECTION("not loaded") {
    ChangeResult r = world.host->shadow(world.candidate(2, "pass", "other-gate"), "operator");
    CHECK(r.change.outcome == "refused");
    CHECK(r.change.step == "manifest");
    CHECK(r.change.error.find("skill 'other-gate' is not loaded") == 0);
  }
  SECTION("a library that fails the loader's checks") {
    SkillManifest candidate = world.candidate(2, "pass");
    candidate.sha256 = std::string(64, '0');
    ChangeResult r = world.host->shadow(candidate, "operator");
    CHECK(r.change.outcome == "refused");
    CHECK(r.change.step == "load");
    CHECK(r.change.error.find("the manifest pins") != std::string::npos);
  }
  SECTION("already shadowed") {
    REQUIRE(world.host->shadow(world.candidate(2, "pass"), "operator").ok());
    ChangeResult r = world.host->shadow(world.candidate(2, "block"), "operator");
    CHECK(r.change.outcome == "refused");
    CHECK(r.change.error.find("is already shadowed by 2.0.0") != std::string::npos);
    CHECK(world.host->shadow_status().size() == 1);
    return;
  }
  CHECK(world.host->snapshot()->generation() == generation);
  CHECK(world.host->snapshot()->shadows().empty());
}

TEST_CASE("reloading or unloading the live skill drops its candidate, audited", "[skills][shadow]") {
  ShadowWorld world;
  REQUIRE(world.host->shadow(world.candidate(2, "block"), "operator").ok());
  world.verify();
  SECTION("reload") { REQUIRE(world.host->reload("shadow-gate", "operator").ok()); }
  SECTION("unload") {
    auto removed = world.host->remove("shadow-gate", RemoveMode::refuse_if_needed, "operator");
    REQUIRE(removed.size() == 1);
    REQUIRE(removed[0].ok());
  }
  CHECK(world.host->snapshot()->shadows().empty());
  auto history = world.host->history(10);
  REQUIRE(history.has_value());
  const auto stop =
      std::find_if(history->begin(), history->end(), [](const SkillChange& c) { return c.action == "shadow-stop"; });
  REQUIRE(stop != history->end());
  CHECK(stop->details.find("dropped: the live version") == 0);
  CHECK(stop->detail.find("\"candidate-blocks\":1") != std::string::npos);
  CHECK(world.host->shadow_counts().at("shadow-gate").of(ShadowKind::candidate_blocks) == 1);
}

TEST_CASE("verifications from many threads while candidates come and go are never decided by a candidate",
          "[skills][shadow][concurrency]") {
  ShadowWorld world;
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::atomic<long> done{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&] {
      while (!stop.load()) {
        Verification v;
        verify_and_record(DecisionStage::reason, world.host->snapshot(), an_action(), user_signal(), v);
        // The live shadow-gate 1.0.0 passes; only its candidate (2.0.0) blocks.
        if (v.outcome != VerifyOutcome::passed || v.trace.size() != 2) ++wrong;
        ++done;
      }
    });
  }
  long seen = 0;
  for (int i = 0; i < 20; ++i) {
    REQUIRE(world.host->shadow(world.candidate(2, "block"), "operator").ok());
    const long before = done.load();
    // Some verifications see the candidate (bounded: the workers never wait on anything).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (done.load() < before + 20 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    auto status = world.host->shadow_status();
    REQUIRE(status.size() == 1);
    seen += static_cast<long>(status[0].counts.seen);
    REQUIRE(world.host->shadow_stop("shadow-gate", "operator").ok());
  }
  stop = true;
  for (auto& w : workers) w.join();
  CHECK(wrong.load() == 0);
  CHECK(seen > 0);
  CHECK(world.host->shadow_counts().at("shadow-gate").of(ShadowKind::candidate_blocks) >=
        static_cast<std::uint64_t>(seen));
}
