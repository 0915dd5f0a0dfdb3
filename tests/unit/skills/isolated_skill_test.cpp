// Skills in worker processes (isolation: process): every hook's round trip
// through the channel, and each way a worker fails — with the reason the
// call fails with, the worker's restart, and quarantine after repeated deaths.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/log.hpp"
#include "skills/host_api.hpp"
#include "skills/restart_policy.hpp"
#include "skills/sandbox_spec.hpp"
#include "skills/skill_loader.hpp"
#include "skills/worker_channel.hpp"
#include "support/sexp.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"

using namespace passepartout;
using passepartout::testing::loader_options_for_test;
using passepartout::testing::sexp;
using passepartout::testing::SkillFixtures;

namespace {

using namespace std::chrono_literals;

constexpr std::string_view kProcess = "isolation: process\n";
const Value kAction = Value::list({Value::keyword("TYPE"), Value::keyword("REQUEST")});
const Value kSignal = Value::list({Value::keyword("TYPE"), Value::keyword("EVENT")});

// A clock a test moves by hand.
struct FakeClock {
  std::shared_ptr<std::atomic<std::chrono::steady_clock::rep>> ticks =
      std::make_shared<std::atomic<std::chrono::steady_clock::rep>>(0);
  std::chrono::steady_clock::time_point now() const {
    return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(ticks->load()));
  }
  void advance(std::chrono::milliseconds by) const {
    ticks->fetch_add(std::chrono::duration_cast<std::chrono::steady_clock::duration>(by).count());
  }
};

struct Isolated {
  SkillFixtures fx;
  FakeClock clock;
  std::vector<std::string> quarantined;
  SkillLoader loader;

  explicit Isolated(std::chrono::milliseconds call_budget = 5000ms,
                    std::optional<SandboxCapabilities> capabilities = std::nullopt,
                    std::chrono::milliseconds control_budget = 10'000ms)
      : loader(make(fx, clock, quarantined, call_budget, std::move(capabilities), control_budget)) {}

  static SkillLoader make(SkillFixtures& fx, const FakeClock& clock, std::vector<std::string>& quarantined,
                          std::chrono::milliseconds call_budget, std::optional<SandboxCapabilities> capabilities,
                          std::chrono::milliseconds control_budget) {
    LoaderOptions options = loader_options_for_test(fx.plugin_dir());
    options.call_budget = call_budget;
    options.control_budget = control_budget;
    options.sandbox_capabilities = std::move(capabilities);
    options.clock = [clock] { return clock.now(); };
    options.on_quarantine = [&quarantined](const std::string& skill, const std::string& reason) {
      quarantined.push_back(skill + ": " + reason);
    };
    auto loader = SkillLoader::create(std::move(options));
    REQUIRE(loader.has_value());
    return std::move(*loader);
  }

  std::shared_ptr<Slot> load(std::string_view name, std::string_view extra = "") {
    auto slot = loader.load(fx.manifest(name, 10, std::string(kProcess) + std::string(extra)));
    INFO((slot ? std::string() : slot.error().message));
    REQUIRE(slot.has_value());
    return *slot;
  }
};

struct GateAnswer {
  pp_status status = PP_ERROR;
  pp_verdict verdict{};
  std::string error;
  std::string action;  // printed
  std::string reason;
};

GateAnswer gate(const Slot& slot, const Value& action = kAction) {
  pp_call call;
  GateAnswer answer;
  answer.status = slot.api().gate(slot.instance(), &call, to_handle(action), to_handle(kSignal), &answer.verdict);
  answer.error = call.error;
  if (answer.verdict.action != nullptr) answer.action = to_sexp(from_handle(answer.verdict.action));
  answer.reason = std::string(from_handle(answer.verdict.reason).text());
  return answer;
}

bool process_exists(int pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// Waits (bounded) until the restart thread has restarted `slot`'s worker
// `restarts` times in all and the new worker runs; no call is made to it meanwhile.
bool wait_restarted(const Slot& slot, std::uint64_t restarts) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    const IsolationStatus status = slot.isolation_status();
    if (status.restarts >= restarts && status.pid > 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);  // status is polled: the restart reports to nobody
  }
}

// Calls `slot`'s gate (bounded) until it fails with `error`; each call answers at once.
bool wait_gate_error(const Slot& slot, const std::string& error) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    const GateAnswer answer = gate(slot);
    if (answer.status == PP_ERROR && answer.error == error) return true;
    if (std::chrono::steady_clock::now() >= deadline) {
      UNSCOPED_INFO("last error: " << answer.error);
      return false;
    }
    std::this_thread::sleep_for(1ms);  // polled: the restart thread reports to nobody
  }
}

// The same for the first of `errors` the gate answers with; "" when none came.
std::string wait_gate_errors(const Slot& slot, const std::vector<std::string>& errors) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    const GateAnswer answer = gate(slot);
    if (answer.status == PP_ERROR && std::find(errors.begin(), errors.end(), answer.error) != errors.end()) {
      return answer.error;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      UNSCOPED_INFO("last error: " << answer.error);
      return {};
    }
    std::this_thread::sleep_for(1ms);  // polled: the restart thread reports to nobody
  }
}

}  // namespace

TEST_CASE("a gate in a worker process answers through the channel and its log lines reach the host",
          "[skills][isolation]") {
  Isolated iso;
  LogCapture capture;
  auto slot = iso.load("logging-skill", "config: { greeting: hello }\n");
  const IsolationStatus status = slot->isolation_status();
  CHECK(status.tier == Isolation::process);
  CHECK(status.pid > 0);
  CHECK(status.pid != ::getpid());

  const GateAnswer answer = gate(*slot);
  CHECK(answer.status == PP_OK);
  CHECK(answer.verdict.kind == PP_VERDICT_PASS);
  CHECK(capture.contains("logging-skill: logging-skill created with hello"));
  CHECK(capture.contains("logging-skill: gate saw (:TYPE :REQUEST)"));
}

TEST_CASE("every verdict kind crosses from a worker process with its action, reason and level", "[skills][isolation]") {
  Isolated iso;
  SECTION("block, with its reason") {
    const GateAnswer answer = gate(*iso.load("block-gate"));
    CHECK(answer.verdict.kind == PP_VERDICT_BLOCK);
    CHECK(answer.reason == "blocked by block-gate");
  }
  SECTION("block at warning level") {
    const GateAnswer answer = gate(*iso.load("warn-gate"));
    CHECK(answer.verdict.kind == PP_VERDICT_BLOCK);
    CHECK(answer.verdict.level == PP_LOG_WARN);
  }
  SECTION("approval, with its reason") {
    const GateAnswer answer = gate(*iso.load("approval-gate"));
    CHECK(answer.verdict.kind == PP_VERDICT_APPROVAL);
    CHECK(answer.reason == "approval-gate wants a human");
  }
  SECTION("rewrite, with the new action") {
    const GateAnswer answer = gate(*iso.load("rewrite-gate"));
    CHECK(answer.verdict.kind == PP_VERDICT_REWRITE);
    CHECK(answer.action == "(:TYPE :REQUEST :STAMP \"rewrite-gate\")");
  }
  SECTION("a kind the host does not know arrives as it is, for the verifier to fail closed") {
    const GateAnswer answer = gate(*iso.load("garbage-gate"));
    CHECK(answer.status == PP_OK);
    CHECK(answer.verdict.kind == 42);
  }
  SECTION("a gate's error with its text") {
    const GateAnswer answer = gate(*iso.load("throw-gate"));
    CHECK(answer.status == PP_ERROR);
    CHECK_FALSE(answer.error.empty());
  }
}

TEST_CASE("tools, actuators, observe and the error policy work from a worker process", "[skills][isolation]") {
  Isolated iso;
  auto slot = iso.load("toolbox-a", "guarded_by: [pass-gate-0]\n");
  REQUIRE(slot->tools().size() == 3);
  CHECK(slot->tools()[0].name == "echo-args");
  REQUIRE(slot->actuators().size() == 1);
  CHECK(slot->actuators()[0] == "RECORDER");
  const Value signal = sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hello\"))");

  auto echoed = slot->call_tool(0, sexp("(:TEXT \"hi\")"), signal);
  REQUIRE(echoed.has_value());
  CHECK(to_sexp(*echoed) == "(:ECHO (:TEXT \"hi\") :TEXT \"hello\" :SKILL \"toolbox-a\")");
  auto failed = slot->call_tool(1, Value(), signal);
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.error().message == "the toolbox tool failed on purpose");

  const Value action = sexp("(:TYPE :REQUEST :TARGET :RECORDER :PAYLOAD (:TEXT \"x\"))");
  auto acted = slot->act(0, action, signal);
  REQUIRE(acted.has_value());
  CHECK(acted->at("RECORDED") == action);
  auto jammed = slot->act(0, action.with("JAM", Value::t()), signal);
  REQUIRE_FALSE(jammed.has_value());
  CHECK(jammed.error().message == "the recorder jammed");

  REQUIRE(slot->observe(signal).has_value());
  auto count = slot->call_tool(2, Value(), signal);
  REQUIRE(count.has_value());
  CHECK(count->as_integer() == 1);
  auto choked = slot->observe(sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :HEARTBEAT :TEXT \"boom\"))"));
  REQUIRE_FALSE(choked.has_value());
  CHECK(choked.error().message == "observe choked");

  auto fallback = slot->error_policy(signal, Value::plist({{"MESSAGE", Value::string("fallback")}}));
  REQUIRE(fallback.has_value());
  CHECK(fallback->kind == ErrorChoice::Kind::fallback);
  CHECK(fallback->text == Value::string("carry on"));
  auto skip = slot->error_policy(signal, Value::plist({{"MESSAGE", Value::string("skip")}}));
  REQUIRE(skip.has_value());
  CHECK(skip->kind == ErrorChoice::Kind::skip);
}

TEST_CASE("an actuator's payload schema and a mandate cross from a worker process", "[skills][isolation]") {
  Isolated iso;
  auto slot = iso.load("chime", "guarded_by: [chime]\n");
  REQUIRE(slot->actuators().size() == 1);
  REQUIRE(slot->actuator_specs().size() == 1);
  CHECK(slot->actuator_specs()[0].description == "Rings a chime");
  CHECK(slot->actuator_specs()[0].payload_json.find(R"("required":["tune","explanation"])") != std::string::npos);
  CHECK(slot->actuator_specs()[0].payload.at("PROPERTIES").at("TUNE").is_list());
  REQUIRE(slot->has_mandate());
  const Value signal = sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hello\"))");
  auto line = slot->mandate(signal);
  REQUIRE(line.has_value());
  CHECK(*line == "MANDATE: chime only when asked.");
  auto acted = slot->act(0, sexp("(:TYPE :REQUEST :TARGET :CHIME :PAYLOAD (:TUNE \"ding\"))"), signal);
  REQUIRE(acted.has_value());
  CHECK(to_sexp(*acted) == "(:TUNE \"ding\")");
}

TEST_CASE("state crosses between versions in and out of worker processes", "[skills][isolation]") {
  Isolated iso;
  iso.fx.install_library("echo-v1");
  auto echo = [&](std::string_view isolation) {
    auto manifest = SkillManifest::parse(
        "name: echo\nversion: 1.0.0\nlibrary: libecho-v1.so\nabi: 1\nisolation: " + std::string(isolation) + "\n",
        iso.fx.manifest_dir() / "echo.yaml");
    REQUIRE(manifest.has_value());
    auto slot = iso.loader.load(*manifest);
    INFO((slot ? std::string() : slot.error().message));
    REQUIRE(slot.has_value());
    CHECK((*slot)->isolation_status().tier == (isolation == "process" ? Isolation::process : Isolation::in_process));
    return *slot;
  };
  auto in_process = echo("in-process");
  auto exported = in_process->export_state();
  REQUIRE(exported.has_value());
  CHECK(to_sexp(*exported) == "(:GENERATION 1)");

  auto worker = echo("process");
  REQUIRE(worker->import_state(*exported).has_value());
  auto handed = worker->export_state();
  REQUIRE(handed.has_value());
  CHECK(to_sexp(*handed) == "(:GENERATION 2)");

  auto back = echo("in-process");
  REQUIRE(back->import_state(*handed).has_value());
  auto last = back->export_state();
  REQUIRE(last.has_value());
  CHECK(to_sexp(*last) == "(:GENERATION 3)");
}

TEST_CASE("a worker that fails takes only itself down, and the call fails closed saying how", "[skills][isolation]") {
  SECTION("a fault in the hook: SIGSEGV") {
    Isolated iso;
    auto slot = iso.load("crash-gate");
    const GateAnswer answer = gate(*slot);
    CHECK(answer.status == PP_ERROR);
    CHECK(answer.error == "skill process died: SIGSEGV");
    CHECK(slot->isolation_status().last_death == "skill process died: SIGSEGV");
  }
  SECTION("exit(3) in the hook") {
    Isolated iso;
    const GateAnswer answer = gate(*iso.load("exit-gate"));
    CHECK(answer.status == PP_ERROR);
    CHECK(answer.error == "skill process exited with status 3");
  }
  SECTION("no answer within the budget: the worker is killed") {
    Isolated iso(200ms);
    auto slot = iso.load("slow-gate", "config: { sleep-ms: 60000 }\n");
    const int pid = slot->isolation_status().pid;
    const auto started = std::chrono::steady_clock::now();
    const GateAnswer answer = gate(*slot);
    CHECK(std::chrono::steady_clock::now() - started < 5s);
    CHECK(answer.status == PP_ERROR);
    CHECK(answer.error == "no answer in 200 ms");
    CHECK_FALSE(process_exists(pid));
  }
  SECTION("junk written on the channel") {
    Isolated iso;
    const GateAnswer answer = gate(*iso.load("channel-junk"));
    CHECK(answer.status == PP_ERROR);
    CHECK_THAT(answer.error, Catch::StartsWith("skill process wrote garbage on its channel: "));
  }
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  SECTION("an allocation past the memory limit") {
    Isolated iso;
    const GateAnswer answer =
        gate(*iso.load("greedy-gate", "config: { megabytes: 1024 }\nsandbox: { memory: 256MiB }\n"));
    CHECK(answer.status == PP_ERROR);
    CHECK(answer.error == "killed: memory limit (256 MiB)");
  }
#endif
  SECTION("create fails: the load fails with the skill's reason") {
    Isolated iso;
    auto slot = iso.loader.load(iso.fx.manifest("create-fails", 10, kProcess));
    REQUIRE_FALSE(slot.has_value());
    CHECK_THAT(slot.error().message, Catch::StartsWith("skill 'create-fails': create failed: "));
  }
  SECTION("a library the worker's loader refuses is refused with the loader's words") {
    Isolated iso;
    auto slot = iso.loader.load(iso.fx.manifest("abi-major-mismatch", 10, kProcess));
    REQUIRE_FALSE(slot.has_value());
    auto in_process = iso.loader.load(iso.fx.manifest("abi-major-mismatch", 10, "isolation: in-process\n"));
    REQUIRE_FALSE(in_process.has_value());
    CHECK(slot.error().message == in_process.error().message);
  }
}

TEST_CASE("a dead worker is restarted after its backoff, and quarantined after 5 deaths in 10 minutes",
          "[skills][isolation]") {
  Isolated iso;
  auto slot = iso.load("pass-gate-0");
  const int first = slot->isolation_status().pid;
  REQUIRE(::kill(first, SIGKILL) == 0);
  CHECK(gate(*slot).error == "skill process died: SIGKILL");
  // Within the backoff: fails at once.
  CHECK(gate(*slot).error == "skill process restarting after it died: SIGKILL (restart pending)");
  iso.clock.advance(100ms);
  REQUIRE(wait_restarted(*slot, 1));
  const GateAnswer restarted = gate(*slot);
  CHECK(restarted.status == PP_OK);
  CHECK(slot->isolation_status().restarts == 1);
  CHECK(slot->isolation_status().pid != first);

  // Deaths 2 to 4 back off 200, 400, 800 ms; the 5th quarantines.
  std::chrono::milliseconds backoff = 200ms;
  for (int death = 2; death <= 5; ++death) {
    REQUIRE(::kill(slot->isolation_status().pid, SIGSEGV) == 0);
    CHECK(gate(*slot).error == "skill process died: SIGSEGV");
    if (death == 5) break;
    iso.clock.advance(backoff - 1ms);
    CHECK(gate(*slot).error == "skill process restarting after it died: SIGSEGV (restart pending)");
    iso.clock.advance(1ms);
    REQUIRE(wait_restarted(*slot, static_cast<std::uint64_t>(death)));
    CHECK(gate(*slot).status == PP_OK);
    backoff *= 2;
  }
  const GateAnswer quarantined = gate(*slot);
  CHECK(quarantined.status == PP_ERROR);
  CHECK(quarantined.error ==
        "quarantined: its process died 5 times in 10 minutes, last: SIGSEGV; "
        "`passepartout skills reload pass-gate-0` to try again");
  CHECK(slot->isolation_status().quarantined);
  REQUIRE(iso.quarantined.size() == 1);
  CHECK(iso.quarantined[0] == "pass-gate-0: quarantined: its process died 5 times in 10 minutes, last: SIGSEGV");
  iso.clock.advance(1h);
  CHECK(gate(*slot).status == PP_ERROR);  // quarantine lasts until a reload makes a new slot

  auto reloaded = iso.load("pass-gate-0");
  CHECK(gate(*reloaded).status == PP_OK);
}

TEST_CASE("a dead worker comes back once its backoff passed, without a call to bring it", "[skills][isolation]") {
  Isolated iso;
  LogCapture capture;
  auto slot = iso.load("pass-gate-0");
  const int first = slot->isolation_status().pid;
  REQUIRE(::kill(first, SIGKILL) == 0);
  CHECK(gate(*slot).error == "skill process died: SIGKILL");  // the call that finds it dead
  CHECK(slot->isolation_status().pid == 0);
  CHECK(slot->isolation_status().last_death == "skill process died: SIGKILL");
  iso.clock.advance(100ms);
  REQUIRE(wait_restarted(*slot, 1));
  const IsolationStatus status = slot->isolation_status();
  CHECK(status.pid != first);
  CHECK(process_exists(status.pid));
  CHECK(status.last_death == "skill process died: SIGKILL");
  CHECK(capture.contains("pass-gate-0: its process was restarted after it died (SIGKILL); the state it held was lost"));
  CHECK(gate(*slot).status == PP_OK);
}

TEST_CASE("a call while its worker restarts fails at once, naming the death and the restart in progress",
          "[skills][isolation]") {
  passepartout::testing::TempDir held;
  // World-readable: a root test run's skill process runs as nobody.
  std::filesystem::permissions(held.path(), std::filesystem::perms(0755));
  const std::filesystem::path hold = held.path() / "hold";
  Isolated iso;
  auto slot = iso.load("slow-gate", "config: { sleep-ms: 0, max-ms: 20000, hold-create-while: " + hold.string() +
                                        " }\nsandbox: { files: [" + held.path().string() + "] }\n");
  REQUIRE(gate(*slot).status == PP_OK);
  // From now on a create holds until the file is gone (at most 20 s): the restart's will.
  std::ofstream(hold) << "hold\n";
  std::filesystem::permissions(hold, std::filesystem::perms(0644));
  REQUIRE(::kill(slot->isolation_status().pid, SIGKILL) == 0);
  CHECK(gate(*slot).error == "skill process died: SIGKILL");
  iso.clock.advance(100ms);

  const std::string in_progress = "skill process restarting after it died: SIGKILL (restart in progress)";
  GateAnswer answer;
  std::chrono::steady_clock::duration longest{};
  const auto patience = std::chrono::steady_clock::now() + 10s;
  do {
    const auto asked = std::chrono::steady_clock::now();
    answer = gate(*slot);
    longest = std::max(longest, std::chrono::steady_clock::now() - asked);
    if (answer.error != in_progress) std::this_thread::sleep_for(1ms);  // polled until the restart starts
  } while (answer.error != in_progress && std::chrono::steady_clock::now() < patience);
  REQUIRE(answer.error == in_progress);
  // Every call answered at once, whatever the restart was doing.
  CHECK(longest < 2s);
  CHECK(answer.status == PP_ERROR);
  CHECK(slot->isolation_status().pid == 0);
  CHECK(slot->isolation_status().restarts == 0);

  SECTION("the restart completes once its create returns") {
    std::filesystem::remove(hold);
    REQUIRE(wait_restarted(*slot, 1));
    CHECK(gate(*slot).status == PP_OK);
  }
  SECTION("destroying the skill ends the restart in progress at once") {
    const auto started = std::chrono::steady_clock::now();
    slot.reset();
    CHECK(std::chrono::steady_clock::now() - started < 5s);  // not the 10 s control budget, nor the 20 s hold
  }
}

TEST_CASE("a restart that fails counts as a death, is retried after the next backoff, and quarantines",
          "[skills][isolation]") {
  passepartout::testing::TempDir held;
  std::filesystem::permissions(held.path(), std::filesystem::perms(0755));
  const std::filesystem::path hold = held.path() / "hold";
  // A create gets 1.5 s (a sanitizer's start fits in it on a loaded machine):
  // one held past it is killed, "no answer in 1.5 s".
  Isolated iso(5000ms, std::nullopt, 1500ms);
  auto slot = iso.load("slow-gate", "config: { sleep-ms: 0, max-ms: 20000, hold-create-while: " + hold.string() +
                                        " }\nsandbox: { files: [" + held.path().string() + "] }\n");
  REQUIRE(gate(*slot).status == PP_OK);
  std::ofstream(hold) << "hold\n";  // every restart's create now holds
  std::filesystem::permissions(hold, std::filesystem::perms(0644));
  REQUIRE(::kill(slot->isolation_status().pid, SIGKILL) == 0);
  CHECK(gate(*slot).error == "skill process died: SIGKILL");

  const std::string restarting = "skill process restarting after it died: ";
  std::string last = "SIGKILL";
  std::chrono::milliseconds backoff = 100ms;
  // A restart fails at the held create; on a loaded machine (a sanitizer's
  // start) the new process may miss the same budget before its create, which
  // fails the restart all the same.
  const std::vector<std::string> failed_restarts = {"no answer in 1.5 s",
                                                    "skill 'slow-gate': its process did not start: no answer in 1.5 s"};
  for (int death = 2; death <= 5; ++death) {
    INFO("death " << death);
    iso.clock.advance(backoff);
    REQUIRE(wait_gate_error(*slot, restarting + last + " (restart in progress)"));
    if (death == 5) break;
    const std::string seen = wait_gate_errors(*slot, {restarting + failed_restarts[0] + " (restart pending)",
                                                      restarting + failed_restarts[1] + " (restart pending)"});
    REQUIRE_FALSE(seen.empty());
    last = seen.substr(restarting.size(), seen.size() - restarting.size() - std::string(" (restart pending)").size());
    CHECK(slot->isolation_status().last_death == last);
    backoff *= 2;
  }
  const std::string quarantined = "quarantined: its process died 5 times in 10 minutes, last: ";
  const std::string seen = wait_gate_errors(
      *slot, {quarantined + failed_restarts[0] + "; `passepartout skills reload slow-gate` to try again",
              quarantined + failed_restarts[1] + "; `passepartout skills reload slow-gate` to try again"});
  REQUIRE_FALSE(seen.empty());
  const std::string quarantine = seen.substr(0, seen.find("; `passepartout skills reload"));
  const IsolationStatus status = slot->isolation_status();
  CHECK(status.quarantined);
  CHECK(status.restarts == 0);
  CHECK(status.pid == 0);
  REQUIRE(iso.quarantined.size() == 1);  // reported from the restart thread, under the lock the gate took
  CHECK(iso.quarantined[0] == "slow-gate: " + quarantine);
}

namespace {

// How many of worker `pid`'s lanes are asleep in a system call that sleeps
// (slow-gate's gate), read from /proc. The lanes are the main thread and the
// threads named "lane N"; others (a sanitizer's own thread) do not count.
int threads_sleeping(int pid) {
  int sleeping = 0;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", error)) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    if (task.path().filename() != std::to_string(pid) && !comm.starts_with("lane ")) continue;
    std::ifstream in(task.path() / "syscall");
    long number = -1;
    if (in >> number && (number == SYS_clock_nanosleep || number == SYS_nanosleep)) ++sleeping;
  }
  return sleeping;
}

}  // namespace

TEST_CASE("calls in flight to a worker that dies all fail at once", "[skills][isolation][concurrency]") {
  Isolated iso(30'000ms);
  auto slot = iso.load("slow-gate", "config: { sleep-ms: 20000 }\n");
  const int pid = slot->isolation_status().pid;
  std::vector<GateAnswer> answers(3);
  std::atomic<int> started{0};
  const auto begin = std::chrono::steady_clock::now();
  std::vector<std::thread> callers;
  for (auto& answer : answers) {
    callers.emplace_back([&] {
      started.fetch_add(1);
      answer = gate(*slot);
    });
  }
  while (started.load() < 3) std::this_thread::yield();
  // Every call in the gate (three lanes asleep in it) before the worker dies.
  const auto patience = std::chrono::steady_clock::now() + 10s;
  while (threads_sleeping(pid) < 3 && std::chrono::steady_clock::now() < patience) std::this_thread::sleep_for(1ms);
  REQUIRE(threads_sleeping(pid) == 3);
  REQUIRE(::kill(pid, SIGSEGV) == 0);
  for (auto& caller : callers) caller.join();
  CHECK(std::chrono::steady_clock::now() - begin < 15s);  // not the 20 s the gate sleeps, nor the 30 s budget
  for (const GateAnswer& answer : answers) {
    CHECK(answer.status == PP_ERROR);
    CHECK(answer.error == "skill process died: SIGSEGV");
  }
}

TEST_CASE("concurrent gate calls share a worker's lanes", "[skills][isolation][concurrency]") {
  Isolated iso;
  auto slot = iso.load("pass-gate-0");
  std::atomic<int> passed{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        if (gate(*slot).verdict.kind == PP_VERDICT_PASS) passed.fetch_add(1);
      }
    });
  }
  for (auto& caller : callers) caller.join();
  CHECK(passed.load() == 400);
}

TEST_CASE("restart policy backs off from 100 ms doubling to 30 s, and forgets deaths older than its window",
          "[skills][isolation]") {
  RestartPolicy policy;
  const RestartPolicy::TimePoint t0{};
  CHECK_FALSE(policy.record_death(t0, "skill process died: SIGSEGV"));
  CHECK(policy.backoff() == 100ms);
  CHECK_FALSE(policy.may_start(t0 + 99ms));
  CHECK(policy.may_start(t0 + 100ms));
  CHECK_FALSE(policy.record_death(t0 + 1s, "skill process exited with status 3"));
  CHECK(policy.backoff() == 200ms);
  // Deaths more than 10 minutes apart never add up to a quarantine.
  for (int i = 1; i <= 10; ++i) CHECK_FALSE(policy.record_death(t0 + i * 11min, "x"));
  CHECK(policy.backoff() == 100ms);

  RestartPolicy::Limits limits;
  limits.max_deaths = 100;
  RestartPolicy capped(limits);
  for (int i = 0; i < 20; ++i) capped.record_death(t0 + i * 1ms, "x");
  CHECK(capped.backoff() == 30s);
  CHECK(short_death_reason("skill process exited with status 3") == "exited with status 3");
  CHECK(human_duration(1000ms) == "1 s");
  CHECK(human_duration(1500ms) == "1.5 s");
  CHECK(human_duration(600'000ms) == "10 minutes");
}

TEST_CASE("the channel refuses a frame over its size limit before allocating it", "[skills][isolation]") {
  int pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
  FrameHeader header{static_cast<std::uint32_t>(kMaxFramePayload + 1), static_cast<std::uint16_t>(FrameKind::reply), 0,
                     1};
  REQUIRE(::write(pair[1], &header, sizeof header) == static_cast<ssize_t>(sizeof header));
  FrameOrError read = read_frame(pair[0], std::chrono::steady_clock::now() + 1s);
  CHECK_FALSE(read.frame.has_value());
  CHECK(read.error.fault == ChannelFault::garbage);
  CHECK(read.error.message == "a frame of 67108865 bytes is over the limit of 67108864");

  FrameHeader unknown{0, 77, 0, 1};
  REQUIRE(::write(pair[1], &unknown, sizeof unknown) == static_cast<ssize_t>(sizeof unknown));
  read = read_frame(pair[0], std::chrono::steady_clock::now() + 1s);
  CHECK(read.error.message == "a frame header of unknown kind 77");

  read = read_frame(pair[0], std::chrono::steady_clock::now() + 10ms);
  CHECK(read.error.fault == ChannelFault::timeout);
  ::close(pair[1]);
  read = read_frame(pair[0], std::chrono::steady_clock::now() + 1s);
  CHECK(read.error.fault == ChannelFault::closed);
  ::close(pair[0]);
}

// --- the sandbox of a skill process ---------------------------------------------

namespace {

// Log lines that contain `needle`.
std::size_t count_lines(const LogCapture& capture, std::string_view needle) {
  const std::vector<std::string> lines = capture.lines();
  return static_cast<std::size_t>(std::count_if(
      lines.begin(), lines.end(), [&](const std::string& line) { return line.find(needle) != std::string::npos; }));
}

// The probe gate trying `attempt` (see sandbox_probe_gate.c), with `more` manifest lines.
std::shared_ptr<Slot> probe(Isolated& iso, std::string_view attempt, std::string_view more = "") {
  return iso.load("sandbox-probe-gate", "config: { try: " + std::string(attempt) + " }\n" + std::string(more));
}

constexpr std::string_view kProbe = "sandbox-probe-gate";

}  // namespace

TEST_CASE("a skill process's sandbox denies what its manifest does not allow: the hook sees EPERM and carries on",
          "[skills][isolation][sandbox]") {
  if (!sandbox_capabilities().seccomp) {
    WARN("seccomp is unavailable here (" << sandbox_capabilities().seccomp_reason << "): nothing to deny");
    return;
  }
  struct Attempt {
    std::string_view name;
    std::string_view syscall;  // what the denial log names; empty: not recorded (new processes)
  };
  const Attempt attempt = GENERATE(Attempt{"open", "openat"}, Attempt{"socket", "socket"}, Attempt{"connect", "socket"},
                                   Attempt{"fork", ""}, Attempt{"exec", "execve"});
  INFO("try: " << attempt.name);
  Isolated iso;
  LogCapture capture;
  auto slot = probe(iso, attempt.name);
  const int pid = slot->isolation_status().pid;
  REQUIRE(pid > 0);

  const GateAnswer first = gate(*slot);
  CHECK(first.status == PP_OK);
  CHECK(first.verdict.kind == PP_VERDICT_BLOCK);
  CHECK(first.reason == std::string(attempt.name) + " failed: Operation not permitted (errno 1)");
  // The same process serves the next call, and the denial is logged once.
  const GateAnswer second = gate(*slot);
  CHECK(second.reason == first.reason);
  CHECK(slot->isolation_status().pid == pid);
  CHECK(process_exists(pid));
  if (!attempt.syscall.empty()) {
    const std::string line =
        "skill 'sandbox-probe-gate' tried " + std::string(attempt.syscall) + " (denied by the sandbox)";
    CHECK(count_lines(capture, line) == 1);
    CHECK(slot->isolation_status().sandbox_denials >= 2);
  } else {
    CHECK(count_lines(capture, "(denied by the sandbox)") == 0);
  }
}

TEST_CASE("a skill process logs its protections when it starts", "[skills][isolation][sandbox]") {
  Isolated iso;
  LogCapture capture;
  auto slot = probe(iso, "open");
  CHECK(count_lines(capture, std::string(kProbe) + ": sandbox in force: no_new_privs; limits (open files 64") == 1);
}

TEST_CASE("a gate whose sandbox was denied a call still passes when it says pass", "[skills][isolation][sandbox]") {
  if (!sandbox_capabilities().seccomp) {
    WARN("seccomp is unavailable here (" << sandbox_capabilities().seccomp_reason << "): nothing to deny");
    return;
  }
  // The sandbox denies the system call, not the verdict.
  Isolated iso;
  LogCapture capture;
  auto slot = iso.load(kProbe, "config: { try: open, path: /etc/passwd, verdict: pass }\n");
  const GateAnswer answer = gate(*slot);
  CHECK(answer.status == PP_OK);
  CHECK(answer.verdict.kind == PP_VERDICT_PASS);
  CHECK(count_lines(capture, "skill 'sandbox-probe-gate' tried openat (denied by the sandbox)") == 1);
}

TEST_CASE("sandbox processes: true lets a skill process fork", "[skills][isolation][sandbox]") {
  Isolated iso;
  const GateAnswer answer = gate(*probe(iso, "fork", "sandbox: { processes: true }\n"));
  CHECK(answer.status == PP_OK);
  CHECK(answer.reason.empty());
  CHECK(answer.verdict.kind == PP_VERDICT_PASS);
}

TEST_CASE("sandbox network: true lets a skill process open a socket", "[skills][isolation][sandbox]") {
  Isolated iso;
  const GateAnswer answer = gate(*probe(iso, "socket", "sandbox: { network: true }\n"));
  CHECK(answer.status == PP_OK);
  CHECK(answer.reason.empty());
  CHECK(answer.verdict.kind == PP_VERDICT_PASS);
}

TEST_CASE("sandbox files lets a skill process read beneath them and nowhere else", "[skills][isolation][sandbox]") {
  passepartout::testing::TempDir readable;
  // World-readable: a root daemon's skill process runs as nobody.
  std::filesystem::permissions(readable.path(), std::filesystem::perms(0755));
  const std::filesystem::path file = readable.path() / "data.txt";
  std::ofstream(file) << "data\n";
  std::filesystem::permissions(file, std::filesystem::perms(0644));
  const std::string files = "sandbox: { files: [" + readable.path().string() + "] }\n";

  Isolated iso;
  const GateAnswer read = gate(*iso.load(kProbe, "config: { try: open, path: " + file.string() + " }\n" + files));
  CHECK(read.reason.empty());
  CHECK(read.verdict.kind == PP_VERDICT_PASS);

  Isolated other;
  const GateAnswer outside = gate(*other.load(kProbe, "config: { try: open, path: /etc/passwd }\n" + files));
  if (sandbox_capabilities().landlock_abi == 0) {
    WARN("Landlock is unavailable here (" << sandbox_capabilities().landlock_reason
                                          << "): read-only opens are allowed anywhere, /etc/passwd not checked");
  } else {
    CHECK(outside.verdict.kind == PP_VERDICT_BLOCK);
    CHECK(outside.reason == "open failed: Permission denied (errno 13)");
  }
}

TEST_CASE("a manifest that requires seccomp is refused where seccomp is unavailable", "[skills][isolation][sandbox]") {
  SandboxCapabilities without;
  without.seccomp = false;
  without.seccomp_reason = "the kernel was built without CONFIG_SECCOMP_FILTER";
  Isolated iso(5000ms, without);
  auto slot = iso.loader.load(iso.fx.manifest(kProbe, 10, std::string(kProcess) + "sandbox: { require: [seccomp] }\n"));
  REQUIRE_FALSE(slot.has_value());
  CHECK(slot.error().code == ErrorCode::refused);
  CHECK_THAT(slot.error().message, Catch::StartsWith("skill 'sandbox-probe-gate': the manifest requires seccomp"));
  CHECK_THAT(slot.error().message, Catch::Contains("CONFIG_SECCOMP_FILTER"));
}

TEST_CASE("a process gate's gate_timeout is its worker's deadline", "[skills][isolation]") {
  Isolated iso(5000ms);
  auto slot = iso.load("slow-gate", "config: { sleep-ms: 60000 }\ngate_timeout: 200ms\n");
  CHECK(slot->isolation_status().call_budget == 200ms);
  const int pid = slot->isolation_status().pid;
  const auto started = std::chrono::steady_clock::now();
  const GateAnswer answer = gate(*slot);
  CHECK(std::chrono::steady_clock::now() - started < 3s);
  CHECK(answer.status == PP_ERROR);
  CHECK(answer.error == "no answer in 200 ms");
  CHECK_FALSE(process_exists(pid));
}
