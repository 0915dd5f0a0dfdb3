// The failure matrix of skills in worker processes, against a real daemon
// under load: for each way a skill's process can fail (a segfault, abort(),
// exit(3), a gate that never answers, an allocation past the memory limit,
// junk on its channel), one client's action reaches the failing gate while
// other clients chat through the same gate: the failing action is blocked as
// :FAILED with the precise reason, every other chat is answered (and passes
// once the worker is back), the worker is restarted, and repeated deaths
// quarantine the skill until an operator reloads it. Then the refusals (a
// create that fails, a self-test that fails during a swap) and a hot swap
// in-process -> process -> in-process under load with the state handed over,
// and the sandbox under load: a gate that tries to open a file, connect a
// socket, fork or exec is denied each time, logged, and goes on serving.
#include <catch2/catch.hpp>

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "integration/daemon_process.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::ask;
using testing::converse;
using testing::DaemonProcess;
using testing::WireClient;

// Two requests for a shell command: the greeting every loaded gate passes
// (held for approval by the dispatcher), and one holding the marker "boom"
// that the fault-gate fixture fails on.
constexpr std::string_view kScript = R"(rules:
  - match: 'greet the operator'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "echo approved-run" :EXPLANATION "Printing a greeting."))'
  - match: 'make it go'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "echo boom" :EXPLANATION "Printing the marker."))'
)";

// The bundled skills plus fixture libraries, in a plugin and a manifest folder of their own.
class IsolationSetup {
 public:
  explicit IsolationSetup(const std::vector<std::string>& fixtures) {
    fs::create_directories(plugins());
    fs::create_directories(manifests());
    for (const auto& entry : fs::directory_iterator(PP_PLUGIN_DIR)) {
      if (entry.path().extension() == ".so") fs::copy_file(entry.path(), plugins() / entry.path().filename());
    }
    for (const std::string& fixture : fixtures) {
      const std::string library = "lib" + fixture + ".so";
      fs::copy_file(fs::path(PP_FIXTURE_DIR) / library, plugins() / library);
    }
    for (const auto& entry : fs::directory_iterator(PP_MANIFEST_DIR)) {
      fs::copy_file(entry.path(), manifests() / entry.path().filename());
    }
  }

  // Writes (or rewrites) the manifest of skill `name`: a gate asked before all others.
  fs::path write_manifest(std::string_view name, std::string_view library, std::string_view version,
                          std::string_view extra) const {
    const fs::path path = manifests() / (std::string(name) + ".yaml");
    std::ofstream(path) << "name: " << name << "\nversion: " << version << "\nlibrary: lib" << library
                        << ".so\nabi: 1\npriority: 999\n"
                        << extra;
    return path;
  }

  fs::path plugins() const { return root_.path() / "plugins"; }
  fs::path manifests() const { return root_.path() / "manifests"; }

  DaemonProcess::Options options() const {
    return DaemonProcess::Options{std::string(kScript),
                                  {"--plugins", plugins().string(), "--manifests", manifests().string(),
                                   // the load's chats each leave an action awaiting approval
                                   "--max-pending-approvals", "1000000"},
                                  {},
                                  false,
                                  {}};
  }

 private:
  testing::TempDir root_;
};

bool passed(const std::string& answer) { return answer.find("APPROVAL-REQUIRED") != std::string::npos; }

Value operator_request(WireClient& client, std::string_view command_and_args) {
  client.send("(:TYPE :OPERATOR :COMMAND " + std::string(command_and_args) + ")");
  return client.expect_frame();
}

Value skill_entry(const Value& answer, std::string_view name) {
  for (const Value& skill : answer.path({"PAYLOAD", "SKILLS"}).items()) {
    if (skill.at("NAME").text() == name) return skill;
  }
  return Value();
}

// Asks for :STATUS until `holds` is true of skill `name`'s entry, at most 15 s.
bool poll_skill(WireClient& client, std::string_view name, const std::function<bool(const Value&)>& holds) {
  const auto until = std::chrono::steady_clock::now() + 15s;
  while (std::chrono::steady_clock::now() < until) {
    if (holds(skill_entry(operator_request(client, ":STATUS"), name))) return true;
    std::this_thread::sleep_for(20ms);  // a poll of the daemon's state, bounded above
  }
  return false;
}

// Clients chatting continuously, each on a connection of its own, each chat
// the greeting every gate passes. The threads make no Catch assertions: they
// count, and keep what went wrong for the test's own thread to report.
class ChatLoad {
 public:
  ChatLoad(const DaemonProcess& daemon, int clients) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, &daemon, c] { run(daemon, c); });
    }
  }
  ~ChatLoad() { stop(); }
  ChatLoad(const ChatLoad&) = delete;
  ChatLoad& operator=(const ChatLoad&) = delete;

  void stop() {
    stop_.store(true);
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // Waits until `more` further chats have passed (at most 30 s).
  bool wait_passes(std::uint64_t more) const {
    const std::uint64_t target = passes_.load() + more;
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (passes_.load() < target) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(5ms);  // polls a counter the clients raise
    }
    return true;
  }

  std::uint64_t passes() const { return passes_.load(); }
  std::uint64_t failed_closed() const { return failed_closed_.load(); }
  std::vector<std::string> errors() const {
    const std::lock_guard lock(mutex_);
    return errors_;
  }
  std::vector<std::string> answers() const {
    const std::lock_guard lock(mutex_);
    return answers_;
  }

 private:
  void run(const DaemonProcess& daemon, int client) {
    try {
      // A session holds at most 20 actions awaiting approval: a fresh connection every 10 chats.
      std::optional<WireClient> user;
      for (int n = 0; !stop_.load(); ++n) {
        if (n % 10 == 0) {
          user.reset();
          user.emplace(WireClient::local(daemon.socket_path()));
          user->expect_handshake();
        }
        const std::string id = "load-" + std::to_string(client) + "-" + std::to_string(n);
        const std::string answer = converse(*user, "greet the operator", id);
        const std::lock_guard lock(mutex_);
        answers_.push_back(answer);
        if (passed(answer)) {
          passes_.fetch_add(1);
        } else if (answer.find(":FAILED") != std::string::npos) {
          failed_closed_.fetch_add(1);
        } else {
          errors_.push_back(id + ": " + answer);
        }
      }
    } catch (const std::exception& e) {
      const std::lock_guard lock(mutex_);
      errors_.push_back("client " + std::to_string(client) + ": " + e.what());
    }
  }

  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> passes_{0};
  std::atomic<std::uint64_t> failed_closed_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> errors_;
  std::vector<std::string> answers_;
  std::vector<std::thread> threads_;
};

// Every chat of `load` was answered (passed or failed closed): none lost or
// refused. The first three errors, if any, go with the failure.
void check_no_errors(const ChatLoad& load) {
  const std::vector<std::string> errors = load.errors();
  for (std::size_t e = 0; e < errors.size() && e < 3; ++e) UNSCOPED_INFO(errors[e]);
  CHECK(errors.empty());
}

constexpr int kClients = 4;

// The fault gate's gate_timeout: past it a call fails and the worker is
// killed. Under a sanitizer an ordinary call, with four clients and the rest
// of the suite sharing two CPUs, can take longer than 300 ms.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
constexpr const char* kFaultBudget = "300ms";
constexpr const char* kNoAnswer = "no answer in 300 ms";
#else
constexpr const char* kFaultBudget = "2s";
constexpr const char* kNoAnswer = "no answer in 2 s";
#endif

struct FaultCase {
  std::string fault;         // fault-gate's :FAULT
  std::string reason;        // the death, as the log and LAST-DEATH say it
  std::string short_reason;  // as "restarting after it died: ..." says it
  std::string trace{};       // when set, what the failing action's trace says instead
};

}  // namespace

TEST_CASE("each way a worker process fails blocks only its action, names why, and the worker is restarted under load",
          "[integration][isolation][concurrency]") {
  std::vector<FaultCase> cases = {
    {"segv", "skill process died: SIGSEGV", "SIGSEGV", ""},
    {"abort", "skill process died: SIGABRT", "SIGABRT", ""},
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    {"exit", "skill process exited with status 3", "exited with status 3", ""},
#else
    // Under a sanitizer the C++ fixture's exit(3) runs the sanitizer
    // runtime's exit handlers, which end the worker with a status of their own.
    {"exit", "skill process exited with status ", "exited with status ", ""},
#endif
    // The gate's own budget is the worker's deadline: past it the worker is killed.
    {"loop", kNoAnswer, kNoAnswer, ""},
    {"junk", "skill process wrote garbage on its channel", "wrote garbage on its channel", ""},
  };
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  cases.push_back({"greedy", "killed: memory limit (512 MiB)", "killed: memory limit (512 MiB)",
                   ""});  // no address-space limit under the sanitizers
#endif
  for (const FaultCase& fault : cases) {
    DYNAMIC_SECTION("fault " << fault.fault) {
      const IsolationSetup setup({"fault-gate"});
      setup.write_manifest("fault-gate", "fault-gate", "1.0.0",
                           "isolation: process\ngate_timeout: " + std::string(kFaultBudget) +
                               "\nconfig: { fault: " + fault.fault + " }\n");
      DaemonProcess daemon(setup.options());
      REQUIRE(daemon.started());
      WireClient op = WireClient::local(daemon.socket_path());
      op.expect_handshake();
      const Value before = skill_entry(operator_request(op, ":STATUS"), "fault-gate");
      INFO(to_sexp(before));
      REQUIRE(before.at("ISOLATION").text() == "process");
      const std::int64_t first_pid = before.at("WORKER-PID").as_integer();

      ChatLoad load(daemon, kClients);
      REQUIRE(load.wait_passes(8));  // the others chat through the gate before

      const std::string failed = ask(daemon, "make it go", "boom");
      INFO(failed);
      // The first call killed the worker; the model's retries of the same
      // action find it restarting, and the trace (of the last try) says why.
      if (!fault.trace.empty()) {
        CHECK(failed.find(":RESULT :FAILED :REASON \"") != std::string::npos);
        CHECK(failed.find(fault.trace) != std::string::npos);
      } else
        CHECK((failed.find(":RESULT :FAILED :REASON \"" + fault.reason) != std::string::npos ||
               failed.find(":RESULT :FAILED :REASON \"skill process restarting after it died: " + fault.short_reason) !=
                   std::string::npos));
      CHECK(daemon.wait_for_log("fault-gate: " + fault.reason));

      // The worker comes back, and the others' chats pass through it again.
      CHECK(poll_skill(op, "fault-gate", [&](const Value& entry) {
        return entry.at("RESTARTS").as_integer() >= 1 && entry.at("WORKER-PID").as_integer() != first_pid;
      }));
      CHECK(load.wait_passes(8));
      load.stop();

      const Value after = skill_entry(operator_request(op, ":STATUS"), "fault-gate");
      INFO(to_sexp(after));
      CHECK(after.at("LAST-DEATH").text().starts_with(fault.reason));
      CHECK(after.at("QUARANTINED").is_nil());
      // Every other chat was answered: passed, or (while the worker was down,
      // between its death and its restart) failed closed, never lost.
      check_no_errors(load);
      CHECK(load.passes() >= 16);
      for (const std::string& answer : load.answers()) {
        if (passed(answer)) continue;
        INFO(answer);
        CHECK((answer.find("restarting after it died: " + fault.short_reason) != std::string::npos ||
               answer.find(fault.reason) != std::string::npos ||
               (!fault.trace.empty() && answer.find(fault.trace) != std::string::npos)));
        if (answer.find(fault.short_reason) == std::string::npos) break;  // one report is enough
      }
      CHECK(::kill(daemon.pid(), 0) == 0);
    }
  }
}

TEST_CASE("a worker that dies five times is quarantined, and a reload brings it back, under load",
          "[integration][isolation][concurrency]") {
  const IsolationSetup setup({"fault-gate"});
  setup.write_manifest("fault-gate", "fault-gate", "1.0.0", "isolation: process\nconfig: { fault: segv }\n");
  DaemonProcess daemon(setup.options());
  REQUIRE(daemon.started());
  WireClient op = WireClient::local(daemon.socket_path());
  op.expect_handshake();
  ChatLoad load(daemon, kClients);
  REQUIRE(load.wait_passes(8));

  // Each death backs off longer (100 ms, 200 ms, ...): the next marker is sent
  // once the worker is back (restarted in the background), until the fifth
  // death quarantines it. A marker's retries may find the worker restarting.
  const auto is_quarantined = [](const Value& entry) { return !entry.at("QUARANTINED").is_nil(); };
  for (int round = 0; round < 10; ++round) {
    const Value entry = skill_entry(operator_request(op, ":STATUS"), "fault-gate");
    if (is_quarantined(entry)) break;
    const std::int64_t restarts = entry.at("RESTARTS").as_integer();
    const std::string answer = ask(daemon, "make it go", "boom-" + std::to_string(round));
    INFO(answer);
    CHECK(answer.find(":RESULT :FAILED :REASON \"") != std::string::npos);
    CHECK(answer.find("SIGSEGV") != std::string::npos);  // died, restarting after it died, or quarantined
    CHECK(poll_skill(op, "fault-gate",
                     [&](const Value& e) { return is_quarantined(e) || e.at("RESTARTS").as_integer() > restarts; }));
  }
  CHECK(poll_skill(op, "fault-gate", is_quarantined));
  const Value status = operator_request(op, ":STATUS");
  INFO(to_sexp(status));
  const std::string quarantined(skill_entry(status, "fault-gate").at("QUARANTINED").text());
  CHECK(quarantined.starts_with("quarantined: its process died 5 times in "));

  // Quarantined: every action it would judge fails closed, the others' chats included.
  const std::string blocked = ask(daemon, "greet the operator", "quarantined");
  INFO(blocked);
  CHECK(blocked.find(":FAILED") != std::string::npos);
  CHECK(blocked.find("quarantined") != std::string::npos);

  // The row is written on the control thread after the death that quarantined it: poll for it.
  bool recorded = false;
  std::string history;
  for (const auto until = std::chrono::steady_clock::now() + 3s;
       !recorded && std::chrono::steady_clock::now() < until;) {
    const Value changes = operator_request(op, ":HISTORY :SKILL \"fault-gate\" :LIMIT 5");
    history = to_sexp(changes);
    for (const Value& change : changes.path({"PAYLOAD", "CHANGES"}).items()) {
      if (change.at("KIND").text() == "quarantine" && change.at("ERROR").text() == quarantined) recorded = true;
    }
    if (!recorded) std::this_thread::sleep_for(20ms);  // a poll of the audit log, bounded above
  }
  INFO(history);
  CHECK(recorded);

  const auto env = testing::hermetic_env(daemon.dir());
  const auto reloaded =
      testing::run_passepartout({"skills", "reload", "fault-gate", "--socket", daemon.socket_path().string()}, env);
  INFO(reloaded.out << reloaded.err);
  CHECK(reloaded.exit_status == 0);
  const Value fresh = skill_entry(operator_request(op, ":STATUS"), "fault-gate");
  INFO(to_sexp(fresh));
  CHECK(fresh.at("QUARANTINED").is_nil());
  CHECK(fresh.at("RESTARTS").as_integer() == 0);
  CHECK(passed(ask(daemon, "greet the operator", "reloaded")));
  CHECK(load.wait_passes(8));
  load.stop();
  check_no_errors(load);
}

TEST_CASE("a worker skill whose create fails is refused with its reason, and the daemon serves on",
          "[integration][isolation]") {
  const IsolationSetup setup({"create-fails"});
  DaemonProcess daemon(setup.options());
  REQUIRE(daemon.started());
  ChatLoad load(daemon, kClients);
  REQUIRE(load.wait_passes(4));
  const fs::path manifest = setup.write_manifest("create-fails", "create-fails", "1.0.0", "isolation: process\n");
  const auto env = testing::hermetic_env(daemon.dir());
  const auto loaded =
      testing::run_passepartout({"skills", "load", manifest.string(), "--socket", daemon.socket_path().string()}, env);
  INFO(loaded.out << loaded.err);
  CHECK(loaded.exit_status != 0);
  CHECK((loaded.out + loaded.err).find("create failed: cannot open the rules database") != std::string::npos);
  WireClient op = WireClient::local(daemon.socket_path());
  op.expect_handshake();
  const Value refused = skill_entry(operator_request(op, ":SKILLS"), "create-fails");
  INFO(to_sexp(refused));
  CHECK_FALSE(refused.at("STATE").is_keyword("LOADED"));
  CHECK(load.wait_passes(4));
  load.stop();
  CHECK(load.errors().empty());
  CHECK(load.failed_closed() == 0);
}

namespace {

// The pids of the daemon's worker processes (its children running `skill-worker`).
std::vector<pid_t> worker_pids(pid_t daemon) {
  std::vector<pid_t> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = testing::read_text_file(entry.path() / "stat");
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size()) continue;
    // After "pid (comm) ": the state, then the parent's pid.
    const pid_t parent = static_cast<pid_t>(std::stol(stat.substr(close + 4)));
    if (parent != daemon) continue;
    if (testing::read_text_file(entry.path() / "cmdline").find("skill-worker") == std::string::npos) continue;
    pids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return pids;
}

// Waits (at most 15 s) until the daemon's only worker is `pid`.
bool only_worker_is(pid_t daemon, pid_t pid) {
  const auto until = std::chrono::steady_clock::now() + 15s;
  while (std::chrono::steady_clock::now() < until) {
    if (worker_pids(daemon) == std::vector<pid_t>{pid}) return true;
    std::this_thread::sleep_for(20ms);  // a poll of /proc, bounded above
  }
  return false;
}

// Waits (at most 15 s) until the daemon has no worker process.
bool no_workers(pid_t daemon) {
  const auto until = std::chrono::steady_clock::now() + 15s;
  while (std::chrono::steady_clock::now() < until) {
    if (worker_pids(daemon).empty()) return true;
    std::this_thread::sleep_for(20ms);  // a poll of /proc, bounded above
  }
  return false;
}

}  // namespace

TEST_CASE("a new version whose self-test fails in its worker is refused while the old worker keeps serving",
          "[integration][isolation][swap]") {
  const IsolationSetup setup({"echo-v1", "echo-v2-selftest"});
  setup.write_manifest("echo", "echo-v1", "1.0.0", "isolation: process\n");
  DaemonProcess daemon(setup.options());
  REQUIRE(daemon.started());
  WireClient op = WireClient::local(daemon.socket_path());
  op.expect_handshake();
  const Value before = skill_entry(operator_request(op, ":STATUS"), "echo");
  INFO(to_sexp(before));
  REQUIRE(before.at("ISOLATION").text() == "process");
  const auto old_pid = static_cast<pid_t>(before.at("WORKER-PID").as_integer());
  CHECK(only_worker_is(daemon.pid(), old_pid));

  ChatLoad load(daemon, kClients);
  REQUIRE(load.wait_passes(4));
  setup.write_manifest("echo", "echo-v2-selftest", "2.0.0", "isolation: process\n");
  const auto env = testing::hermetic_env(daemon.dir());
  const auto reloaded =
      testing::run_passepartout({"skills", "reload", "echo", "--socket", daemon.socket_path().string()}, env);
  INFO(reloaded.out << reloaded.err);
  CHECK(reloaded.exit_status != 0);
  CHECK((reloaded.out + reloaded.err).find("self-test: stamp table is empty") != std::string::npos);
  CHECK(load.wait_passes(4));
  load.stop();

  const Value after = skill_entry(operator_request(op, ":STATUS"), "echo");
  INFO(to_sexp(after));
  CHECK(after.at("VERSION").text() == "1.0.0");
  CHECK(after.at("WORKER-PID").as_integer() == old_pid);
  CHECK(::kill(old_pid, 0) == 0);
  CHECK(only_worker_is(daemon.pid(), old_pid));  // the new version's worker is gone
  check_no_errors(load);
  CHECK(load.failed_closed() == 0);
}

TEST_CASE("a stateful skill moves in-process -> process -> in-process under load with its state handed over",
          "[integration][isolation][swap]") {
  const IsolationSetup setup({"echo-v1"});
  setup.write_manifest("echo", "echo-v1", "1.0.0", "isolation: in-process\n");
  DaemonProcess daemon(setup.options());
  REQUIRE(daemon.started());
  WireClient op = WireClient::local(daemon.socket_path());
  op.expect_handshake();
  const auto env = testing::hermetic_env(daemon.dir());
  const auto reload = [&] {
    return testing::run_passepartout({"skills", "reload", "echo", "--socket", daemon.socket_path().string()}, env);
  };
  // The echo gate stamps its generation (1 when created, +1 at each hand-over) into the action.
  const auto check_generation = [&](int expected) {
    const std::string answer = ask(daemon, "greet the operator", "gen-" + std::to_string(expected));
    INFO(answer);
    CHECK(answer.find(":ECHO-GENERATION " + std::to_string(expected)) != std::string::npos);
  };
  // The manifest moved to `tier`, reloaded while the others chat; the state handed over once more.
  const auto move_to = [&](const std::string& tier, int expected_generation, ChatLoad& load) {
    setup.write_manifest("echo", "echo-v1", "1.0.0", "isolation: " + tier + "\n");
    const auto reloaded = reload();
    INFO(reloaded.out << reloaded.err);
    CHECK(reloaded.exit_status == 0);
    const Value moved = skill_entry(operator_request(op, ":STATUS"), "echo");
    INFO(to_sexp(moved));
    CHECK(moved.at("ISOLATION").text() == tier);
    CHECK(load.wait_passes(4));
    check_generation(expected_generation);
  };

  ChatLoad load(daemon, kClients);
  REQUIRE(load.wait_passes(4));
  check_generation(1);
  move_to("process", 2, load);
  move_to("in-process", 3, load);
  CHECK(no_workers(daemon.pid()));  // the process tier's worker retired

  load.stop();
  // No chat lost or failed across both swaps.
  check_no_errors(load);
  CHECK(load.failed_closed() == 0);
}

TEST_CASE("a worker's gate that tries what its sandbox denies is refused and logged while clients chat, and serves on",
          "[integration][isolation][sandbox][concurrency]") {
  struct Attempt {
    std::string name;     // sandbox-probe-gate's :TRY
    std::string syscall;  // as the denial's log line names it ("" when not recorded: fork)
  };
  const std::vector<Attempt> attempts = {{"open", "openat"}, {"connect", "socket"}, {"fork", ""}, {"exec", "execve"}};
  for (const Attempt& attempt : attempts) {
    DYNAMIC_SECTION("try " << attempt.name) {
      const IsolationSetup setup({"sandbox-probe-gate"});
      // verdict: pass: the gate passes whatever the attempt did, so every chat goes through it.
      setup.write_manifest("sandbox-probe-gate", "sandbox-probe-gate", "1.0.0",
                           "isolation: process\nconfig: { try: " + attempt.name + ", verdict: pass }\n");
      DaemonProcess daemon(setup.options());
      REQUIRE(daemon.started());
      WireClient op = WireClient::local(daemon.socket_path());
      op.expect_handshake();
      const std::int64_t pid =
          skill_entry(operator_request(op, ":STATUS"), "sandbox-probe-gate").at("WORKER-PID").as_integer();
      REQUIRE(pid > 0);

      ChatLoad load(daemon, kClients);
      CHECK(load.wait_passes(20));
      load.stop();
      for (const std::string& error : load.errors()) FAIL_CHECK(error);
      CHECK(load.failed_closed() == 0);  // denied, not crashed: no chat failed

      const Value entry = skill_entry(operator_request(op, ":STATUS"), "sandbox-probe-gate");
      INFO(to_sexp(entry));
      CHECK(entry.at("WORKER-PID").as_integer() == pid);  // the same worker served every call
      CHECK(entry.at("RESTARTS").as_integer() == 0);
      if (!attempt.syscall.empty()) {
        CHECK(entry.at("SANDBOX-DENIALS").as_integer() >= 1);
        CHECK(daemon.wait_for_log("tried " + attempt.syscall + " (denied by the sandbox)"));
      }
      CHECK(::kill(static_cast<pid_t>(pid), 0) == 0);
    }
  }
}

}  // namespace passepartout
