// Verifier (cognitive-verify, seed D15 + Decisions 2): order, pass, rewrite,
// block, approval, and every way a gate can fail closed.
#include <catch2/catch.hpp>
#include <thread>

#include "base/log.hpp"
#include "pipeline/gate_watchdog.hpp"
#include "pipeline/verifier.hpp"
#include "skills/registry.hpp"
#include "support/held_gate.hpp"
#include "support/sexp.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

using namespace passepartout;
using passepartout::testing::HeldGate;
using passepartout::testing::SkillFixtures;

namespace {

using passepartout::testing::sexp;

const Value& user_signal() {
  static const Value signal =
      *read_sexp("(:TYPE :EVENT :META (:SOURCE :TUI) :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hi\"))");
  return signal;
}

// Loads the fixtures as (name, priority) into a fresh registry.
struct Gates {
  SkillFixtures fx;
  Registry registry;
  explicit Gates(std::initializer_list<std::pair<std::string_view, int>> skills, std::string_view extra = "") {
    std::vector<std::shared_ptr<const Slot>> slots;
    for (auto [name, priority] : skills) {
      auto slot = fx.loader().load(fx.manifest(name, priority, extra));
      INFO((slot ? std::string() : slot.error().message));
      REQUIRE(slot.has_value());
      slots.push_back(std::move(*slot));
    }
    registry.publish(std::move(slots));
  }
  Verification verify(const Value& action) { return Verifier::verify(*registry.snapshot(), action, user_signal()); }
};

std::vector<std::string> trace_lines(const Verification& v) {
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < v.trace.size(); ++i) {
    lines.push_back(v.trace[i].slot->name() + " " + to_string(v.trace[i].result));
  }
  return lines;
}

const Value kAction = *read_sexp(
    "(:TYPE :REQUEST :TARGET :CLI :PAYLOAD (:ACTION :MESSAGE :TEXT \"hello\" :EXPLANATION \"a greeting for the "
    "user\"))");

}  // namespace

TEST_CASE("with no gates the action passes unchanged (test-cognitive-verify-empty-registry)", "[pipeline][verifier]") {
  Registry registry;
  auto v = Verifier::verify(*registry.snapshot(), kAction, user_signal());
  CHECK(v.outcome == VerifyOutcome::passed);
  CHECK(v.action == kAction);
  CHECK(v.trace.empty());
  Value result = v.to_value();
  CHECK(result.at("TYPE").is_keyword("REQUEST"));
  CHECK(result.at("PAYLOAD") == kAction.at("PAYLOAD"));
}

TEST_CASE("a pass-through gate returns the same request with a non-empty trace (test-cognitive-verify-pass-through)",
          "[pipeline][verifier]") {
  Gates gates({{"pass-gate-0", 10}});
  auto v = gates.verify(kAction);
  REQUIRE(v.outcome == VerifyOutcome::passed);
  CHECK(v.action == kAction);
  Value result = v.to_value();
  CHECK(result.at("TYPE").is_keyword("REQUEST"));
  CHECK(result.at("PAYLOAD") == kAction.at("PAYLOAD"));
  CHECK(to_sexp(result.at("GATE-TRACE")) == "((:GATE \"pass-gate-0\" :VERSION \"1.0.0\" :RESULT :PASSED))");
}

TEST_CASE("when every gate passes the trace is the snapshot's, built once and shared", "[pipeline][verifier]") {
  Gates gates({{"pass-gate-0", 10}, {"pass-gate-1", 20}});
  const auto snapshot = gates.registry.snapshot();
  auto v = Verifier::verify(*snapshot, kAction, user_signal());
  REQUIRE(v.outcome == VerifyOutcome::passed);
  const Value trace = v.to_value().at("GATE-TRACE");
  CHECK(to_sexp(trace) ==
        "((:GATE \"pass-gate-1\" :VERSION \"1.0.0\" :RESULT :PASSED) "
        "(:GATE \"pass-gate-0\" :VERSION \"1.0.0\" :RESULT :PASSED))");
  CHECK(trace.items().data() == snapshot->passed_trace().items().data());  // the same list, not a copy

  // Reused for a verification that does not pass, the trace is built from its entries again.
  Gates blocking({{"pass-gate-0", 10}, {"block-gate", 5}});
  Verifier::verify(*blocking.registry.snapshot(), kAction, user_signal(), v);
  REQUIRE(v.outcome == VerifyOutcome::blocked);
  CHECK_THAT(to_sexp(v.to_value().at("GATE-TRACE")), Catch::Contains(":RESULT :BLOCKED"));
}

TEST_CASE("gates run highest priority first, ties broken by name", "[pipeline][verifier]") {
  Gates gates({{"pass-gate-3", 50}, {"pass-gate-1", 90}, {"pass-gate-2", 50}, {"pass-gate-0", 10}});
  auto v = gates.verify(kAction);
  CHECK(trace_lines(v) == std::vector<std::string>{"pass-gate-1 passed", "pass-gate-2 passed", "pass-gate-3 passed",
                                                   "pass-gate-0 passed"});
}

TEST_CASE("a block stops at once and returns the rejection with the trace (test-decide-gate-safety)",
          "[pipeline][verifier]") {
  Gates gates({{"pass-gate-0", 100}, {"block-gate", 50}, {"pass-gate-1", 10}});
  auto v = gates.verify(sexp("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"rm -rf /\"))"));
  REQUIRE(v.outcome == VerifyOutcome::blocked);
  CHECK(trace_lines(v) == std::vector<std::string>{"pass-gate-0 passed", "block-gate blocked"});
  CHECK(to_sexp(v.to_value()) ==
        "(:TYPE :LOG :PAYLOAD (:LEVEL :ERROR :TEXT \"blocked by block-gate\") :GATE-TRACE "
        "((:GATE \"pass-gate-0\" :VERSION \"1.0.0\" :RESULT :PASSED) "
        "(:GATE \"block-gate\" :VERSION \"1.0.0\" :RESULT :BLOCKED :REASON \"blocked by block-gate\")))");
  CHECK(v.reason.text() == "blocked by block-gate");
}

TEST_CASE("a warning block keeps its level in the rejection", "[pipeline][verifier]") {
  Gates gates({{"warn-gate", 10}});
  auto v = gates.verify(kAction);
  REQUIRE(v.outcome == VerifyOutcome::blocked);
  CHECK(v.action.path({"PAYLOAD", "LEVEL"}).is_keyword("WARN"));
  CHECK(v.action.path({"PAYLOAD", "TEXT"}).text() == "warned by warn-gate");
}

TEST_CASE(
    "an approval does not stop later gates and yields the approval event (test-cognitive-verify-approval-required)",
    "[pipeline][verifier]") {
  Gates gates({{"approval-gate", 90}, {"pass-gate-0", 10}});
  auto v = gates.verify(kAction);
  REQUIRE(v.outcome == VerifyOutcome::approval_required);
  CHECK(trace_lines(v) == std::vector<std::string>{"approval-gate approval", "pass-gate-0 passed"});
  Value result = v.to_value();
  CHECK(result.at("TYPE").is_keyword("EVENT"));
  CHECK(result.at("LEVEL").is_keyword("APPROVAL-REQUIRED"));
  CHECK(result.path({"PAYLOAD", "SENSOR"}).is_keyword("APPROVAL-REQUIRED"));
  CHECK(result.path({"PAYLOAD", "ACTION"}) == kAction);
  CHECK(result.path({"PAYLOAD", "REASON"}).text() == "approval-gate wants a human");
}

TEST_CASE("a block after an approval still wins", "[pipeline][verifier]") {
  Gates gates({{"approval-gate", 90}, {"block-gate", 10}});
  auto v = gates.verify(kAction);
  CHECK(v.outcome == VerifyOutcome::blocked);
  CHECK(trace_lines(v) == std::vector<std::string>{"approval-gate approval", "block-gate blocked"});
}

TEST_CASE("a rewrite replaces the action for later gates and the result", "[pipeline][verifier]") {
  Gates gates({{"rewrite-gate", 90}, {"logging-skill", 10}});
  passepartout::LogCapture capture;
  auto v = gates.verify(kAction);
  REQUIRE(v.outcome == VerifyOutcome::passed);
  CHECK(v.action.at("STAMP").text() == "rewrite-gate");
  CHECK(v.action.at("PAYLOAD") == kAction.at("PAYLOAD"));
  CHECK(trace_lines(v) == std::vector<std::string>{"rewrite-gate rewritten", "logging-skill passed"});
  CHECK(capture.contains(":STAMP \"rewrite-gate\""));  // the later gate saw the rewritten action
  CHECK_THAT(to_sexp(v.to_value().at("GATE-TRACE")), Catch::Contains(":RESULT :PASSED :REWRITTEN T"));
  CHECK(kAction.get("STAMP") == nullptr);  // the proposal itself is untouched
}

TEST_CASE("a gate that fails blocks the action and the trace says failed, not blocked", "[pipeline][verifier]") {
  struct Case {
    const char* fixture;
    const char* reason;
  };
  auto c = GENERATE(Case{"throw-gate", "gate exploded"}, Case{"error-gate", "error-gate says no"},
                    Case{"garbage-gate", "answered an unknown verdict (42)"});
  Gates gates({{"pass-gate-0", 90}, {c.fixture, 50}, {"pass-gate-1", 10}});
  auto v = gates.verify(kAction);
  REQUIRE(v.outcome == VerifyOutcome::blocked);
  CHECK(trace_lines(v) == std::vector<std::string>{"pass-gate-0 passed", std::string(c.fixture) + " failed"});
  CHECK(v.reason.text() == c.reason);
  CHECK(v.action.path({"PAYLOAD", "TEXT"}).text() ==
        std::string("Action blocked: gate '") + c.fixture + "' 1.0.0 failed: " + c.reason);
  CHECK_THAT(to_sexp(v.to_value().at("GATE-TRACE")), Catch::Contains(":RESULT :FAILED"));
  auto counts = gates.registry.snapshot()->find(c.fixture)->counters().read();
  CHECK(counts.failures == 1);
  CHECK(counts.blocks == 0);
}

TEST_CASE("a gate that exceeds its time budget fails closed", "[pipeline][verifier]") {
  auto previous = GateWatchdog::budget();
  GateWatchdog::set_budget(std::chrono::milliseconds(40));
  HeldGate held;
  Gates gates({{"slow-gate", 10}}, held.manifest());
  Verification v;
  const bool marked = held.verify_when_late([&] { v = gates.verify(kAction); });
  GateWatchdog::set_budget(previous);
  REQUIRE(marked);
  REQUIRE(v.outcome == VerifyOutcome::blocked);
  CHECK(trace_lines(v) == std::vector<std::string>{"slow-gate failed"});
  CHECK(v.reason.text() == "exceeded its time budget of 40 ms");
}

TEST_CASE("a gate is judged against its own gate_timeout, and the failure names that budget", "[pipeline][verifier]") {
  // The host's default is generous; the manifest's 40 ms is what counts.
  auto previous = GateWatchdog::budget();
  GateWatchdog::set_budget(std::chrono::milliseconds(5000));
  HeldGate held;
  Gates gates({{"slow-gate", 10}}, held.manifest("gate_timeout: 40ms\n"));
  REQUIRE(gates.registry.snapshot()->gates()[0].budget_ms == 40);
  Verification v;
  const bool marked = held.verify_when_late([&] { v = gates.verify(kAction); });
  GateWatchdog::set_budget(previous);
  REQUIRE(marked);
  REQUIRE(v.outcome == VerifyOutcome::blocked);
  CHECK(trace_lines(v) == std::vector<std::string>{"slow-gate failed"});
  CHECK(v.reason.text() == "exceeded its time budget of 40 ms");
}

TEST_CASE("a process gate past its gate_timeout fails with its worker's deadline, not the watchdog's",
          "[pipeline][verifier][isolation]") {
  // The worker is killed at 200 ms and says so; the watchdog waits a margin
  // longer, and a failed call reports its own reason even when the watchdog
  // noticed it first (on a busy machine killing the worker can take a while).
  Gates gates({{"slow-gate", 10}}, "isolation: process\ngate_timeout: 200ms\nconfig: { sleep-ms: 60000 }\n");
  REQUIRE(gates.registry.snapshot()->gates()[0].budget_ms == 300);
  auto v = gates.verify(kAction);
  REQUIRE(v.outcome == VerifyOutcome::blocked);
  CHECK(trace_lines(v) == std::vector<std::string>{"slow-gate failed"});
  CHECK(v.reason.text() == "no answer in 200 ms");
}

TEST_CASE("a spinning gate past its gate_timeout fails closed", "[pipeline][verifier]") {
  HeldGate held;
  Gates gates({{"slow-gate", 10}}, held.manifest("gate_timeout: 40ms\n", ""));
  Verification v;
  const bool marked = held.verify_when_late([&] { v = gates.verify(kAction); });
  REQUIRE(marked);
  REQUIRE(v.outcome == VerifyOutcome::blocked);
  CHECK(v.reason.text() == "exceeded its time budget of 40 ms");
}

TEST_CASE("a gate_timeout above the host's default lets a slow gate pass", "[pipeline][verifier]") {
  auto previous = GateWatchdog::budget();
  GateWatchdog::set_budget(std::chrono::milliseconds(40));
  Gates gates({{"slow-gate", 10}}, "gate_timeout: 5s\nconfig: { sleep-ms: 200 }\n");
  auto v = gates.verify(kAction);
  GateWatchdog::set_budget(previous);
  CHECK(v.outcome == VerifyOutcome::passed);
  CHECK(trace_lines(v) == std::vector<std::string>{"slow-gate passed"});
}

TEST_CASE("a gate_timeout above the host's maximum is refused at load, naming both", "[pipeline][verifier]") {
  SkillFixtures fx;
  auto slot = fx.loader().load(fx.manifest("slow-gate", 10, "gate_timeout: 11s\n"));
  REQUIRE_FALSE(slot.has_value());
  CHECK(slot.error().code == ErrorCode::refused);
  CHECK_THAT(slot.error().message, Catch::Contains("'gate_timeout' 11000 ms in") &&
                                       Catch::Contains("is above the host's maximum of 10000 ms (--gate-timeout-max)"));
}

TEST_CASE("a gate that timed out earlier for the signal fails at once without being called", "[pipeline][verifier]") {
  auto previous = GateWatchdog::budget();
  GateWatchdog::set_budget(std::chrono::milliseconds(40));
  HeldGate held;
  Gates gates({{"pass-gate-0", 90}, {"slow-gate", 50}, {"pass-gate-1", 10}}, held.manifest());
  Verification first;
  REQUIRE(held.verify_when_late([&] { Verifier::verify(*gates.registry.snapshot(), kAction, user_signal(), first); }));
  REQUIRE(first.timed_out != nullptr);
  CHECK(first.timed_out->name() == "slow-gate");
  REQUIRE(held.call_count() == 1);

  const std::vector<std::string> timed_out{first.timed_out->name()};
  Verification again;
  Verifier::verify(*gates.registry.snapshot(), kAction, user_signal(), again, nullptr, nullptr, timed_out);
  GateWatchdog::set_budget(previous);
  CHECK(held.call_count() == 1);  // each call of the gate writes a line
  REQUIRE(again.outcome == VerifyOutcome::blocked);
  CHECK(trace_lines(again) == std::vector<std::string>{"pass-gate-0 passed", "slow-gate failed"});
  CHECK(again.reason.text() == "timed out earlier for this signal, not called again (budget 40 ms)");
  CHECK(again.timed_out == nullptr);
  CHECK_THAT(to_sexp(again.to_value()), Catch::Contains(":RESULT :FAILED"));
}

TEST_CASE("a gate within its time budget is not failed", "[pipeline][verifier]") {
  Gates gates({{"slow-gate", 10}}, "config: { sleep-ms: 5 }\n");
  auto v = gates.verify(kAction);
  CHECK(v.outcome == VerifyOutcome::passed);
}

TEST_CASE("gate counters count each decision", "[pipeline][verifier]") {
  Gates gates({{"pass-gate-0", 90}, {"approval-gate", 50}});
  // One verification in 256 per thread is timed: any 256 in a row include one.
  for (int i = 0; i < 256; ++i) gates.verify(kAction);
  auto snapshot = gates.registry.snapshot();
  auto pass = snapshot->find("pass-gate-0")->counters().read();
  auto approval = snapshot->find("approval-gate")->counters().read();
  CHECK(pass.passes == 256);
  CHECK(pass.calls() == 256);
  CHECK(approval.approvals == 256);
  CHECK(approval.timed_calls >= 1);
}

TEST_CASE("skills without a gate are not consulted", "[pipeline][verifier]") {
  Gates gates({{"null-hooks", 99}, {"prompt-a", 90}, {"pass-gate-0", 10}});
  auto v = gates.verify(kAction);
  CHECK(trace_lines(v) == std::vector<std::string>{"pass-gate-0 passed"});
}

TEST_CASE("verification from many threads while snapshots are republished stays consistent",
          "[pipeline][verifier][concurrency]") {
  Gates gates({{"pass-gate-0", 90}, {"approval-gate", 50}, {"pass-gate-1", 10}});
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::atomic<long> done{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&] {
      Verification v;
      while (!stop.load()) {
        auto snapshot = gates.registry.snapshot();
        Verifier::verify(*snapshot, kAction, user_signal(), v);
        if (v.outcome != VerifyOutcome::approval_required || v.trace.size() != snapshot->gates().size()) ++wrong;
        ++done;
      }
    });
  }
  auto slots = std::vector<std::shared_ptr<const Slot>>(gates.registry.snapshot()->slots().begin(),
                                                        gates.registry.snapshot()->slots().end());
  for (int i = 0; i < 200; ++i) {
    // Republish subsets: readers must see either the old or the new set, whole.
    gates.registry.publish(i % 2 == 0 ? std::vector<std::shared_ptr<const Slot>>{slots[1]} : slots);
  }
  gates.registry.publish(slots);
  while (done.load() < 2000) std::this_thread::yield();
  stop = true;
  for (auto& w : workers) w.join();
  CHECK(wrong.load() == 0);
}
