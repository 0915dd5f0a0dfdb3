// A gate that never returns (slow-gate spinning until the test lets it go)
// on every pipeline thread: operator requests are still read and answered,
// and SIGTERM still ends the daemon within its grace, with memory saved and
// the stuck skill and hook named in the log; likewise a reload whose create
// never returns on the control thread.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
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
using testing::DaemonProcess;
using testing::WireClient;

constexpr std::string_view kScript = R"(rules:
  - match: 'hello'
    reply: 'Hello! How can I help?'
)";

// How long an operator's request may take while the pipeline is held: far
// below the test's own timeouts, far above an idle daemon's answer.
constexpr std::chrono::seconds kOperatorWait{5};

// The bundled skills and slow-gate, asked before all others, spinning on
// every call until `release()` creates its file (at most 60 s, so it never
// outlives the test); each call that starts spinning adds a line to spinning().
class StuckSetup {
 public:
  StuckSetup() {
    fs::create_directories(plugins());
    fs::create_directories(manifests());
    for (const auto& entry : fs::directory_iterator(PP_PLUGIN_DIR)) {
      if (entry.path().extension() == ".so") fs::copy_file(entry.path(), plugins() / entry.path().filename());
    }
    fs::copy_file(fs::path(PP_FIXTURE_DIR) / "libslow-gate.so", plugins() / "libslow-gate.so");
    for (const auto& entry : fs::directory_iterator(PP_MANIFEST_DIR)) {
      fs::copy_file(entry.path(), manifests() / entry.path().filename());
    }
    std::ofstream(manifests() / "slow-gate.yaml")
        << "name: slow-gate\nversion: 1.0.0\nlibrary: libslow-gate.so\nabi: 1\npriority: 999\n"
        << "gate_timeout: 200ms\nisolation: in-process\n"
        << "config: { until-file: \"" << released().string() << "\", spinning-file: \"" << spinning().string()
        << "\", max-ms: 60000 }\n";
  }
  ~StuckSetup() { release(); }
  StuckSetup(const StuckSetup&) = delete;
  StuckSetup& operator=(const StuckSetup&) = delete;

  fs::path plugins() const { return root_.path() / "plugins"; }
  fs::path manifests() const { return root_.path() / "manifests"; }
  fs::path released() const { return root_.path() / "released"; }
  fs::path spinning() const { return root_.path() / "spinning"; }
  void release() const { std::ofstream(released()) << "go\n"; }

  DaemonProcess::Options options(std::vector<std::string> more = {}) const {
    std::vector<std::string> args{"--plugins", plugins().string(), "--manifests", manifests().string()};
    args.insert(args.end(), more.begin(), more.end());
    DaemonProcess::Options options;
    options.script = std::string(kScript);
    options.extra_args = std::move(args);
    return options;
  }

  // Waits (bounded) until `calls` gate calls are spinning at once.
  bool wait_spinning(std::size_t calls) const {
    const auto deadline = std::chrono::steady_clock::now() + testing::kProcessWait;
    for (;;) {
      const std::string text = testing::read_text_file(spinning());
      if (static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) >= calls) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(5ms);  // the gate appends to the file; polled, like the daemon's log
    }
  }

 private:
  testing::TempDir root_;
};

WireClient chat(const DaemonProcess& daemon, std::string_view id) {
  WireClient user = WireClient::local(daemon.socket_path());
  user.expect_handshake();
  user.send("(:TYPE :EVENT :META (:SOURCE :TUI) :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hello\") :REQUEST-ID \"" +
            std::string(id) + "\")");
  return user;
}

// One operator request on a connection of its own, answered within kOperatorWait.
Value operator_request(const DaemonProcess& daemon, std::string_view command) {
  WireClient client = WireClient::local(daemon.socket_path(), kOperatorWait);
  client.expect_handshake();
  client.send("(:TYPE :OPERATOR :COMMAND " + std::string(command) + ")");
  return client.expect_frame();
}

// A SIGTERM, and how the daemon ended: its exit status (none if it was still
// running 10 s later), how long it took, and its log.
struct Stopped {
  std::optional<int> status;
  std::chrono::steady_clock::duration took{};
  std::string log;
};

Stopped stop_with_sigterm(DaemonProcess& daemon) {
  const auto signalled = std::chrono::steady_clock::now();
  daemon.signal(SIGTERM);
  Stopped stopped;
  stopped.status = daemon.wait_exit(10s);
  stopped.took = std::chrono::steady_clock::now() - signalled;
  stopped.log = daemon.log();
  return stopped;
}

}  // namespace

TEST_CASE("operator requests are answered while a gate holds every pipeline thread", "[integration][stuck]") {
  const StuckSetup setup;
  DaemonProcess daemon(setup.options());
  // Four requests for the two pipeline loops: both end up in the gate.
  std::vector<WireClient> users;
  for (const char* id : {"u1", "u2", "u3", "u4"}) users.push_back(chat(daemon, id));
  REQUIRE(setup.wait_spinning(2));
  const auto held_since = std::chrono::steady_clock::now();

  for (const char* command : {":STATUS", ":SKILLS", ":APPROVALS"}) {
    INFO(command);
    const auto asked = std::chrono::steady_clock::now();
    const Value answer = operator_request(daemon, command);
    INFO(to_sexp(answer));
    CHECK(answer.at("TYPE").is_keyword("RESPONSE"));
    CHECK(answer.at("STATUS").is_keyword("OK"));
    CHECK(std::chrono::steady_clock::now() - asked < kOperatorWait);
  }
  // Still held: nothing was answered by letting the gate go.
  CHECK_FALSE(fs::exists(setup.released()));

  // Let go once the gate has been held past its 200 ms budget (the scenario,
  // not a wait for anything): the held requests end, failed closed.
  std::this_thread::sleep_until(held_since + 400ms);
  setup.release();
  std::string frames;
  for (WireClient& user : users) {
    for (;;) {
      const Value frame = user.expect_frame();
      frames += to_sexp(frame) + "\n";
      if (!frame.at("REQUEST-ID").is_nil()) break;
    }
  }
  INFO(frames);
  const bool logged = daemon.wait_for_log("gate 'slow-gate' 1.0.0 failed: exceeded its time budget of 200 ms");
  INFO(daemon.log());
  CHECK(logged);
}

TEST_CASE("SIGTERM ends the daemon within its grace while a gate never returns, memory saved, the hook named",
          "[integration][stuck]") {
  const StuckSetup setup;
  DaemonProcess daemon(setup.options({"--shutdown-grace", "1"}));
  const fs::path memory_file = daemon.state_dir() / "memory.sexp";
  {
    WireClient client = WireClient::local(daemon.socket_path());
    client.expect_handshake();
    client.send(
        "(:TYPE :EVENT :META (:SOURCE :TUI) :PAYLOAD (:SENSOR :BUFFER-UPDATE :AST (:TYPE :HEADLINE :PROPERTIES "
        "(:ID \"note-1\" :TITLE \"Water the ficus on Tuesdays\"))) :REQUEST-ID \"m1\")");
    for (;;) {
      if (client.expect_frame().at("REQUEST-ID").text() == "m1") break;
    }
  }
  std::vector<WireClient> users;
  for (const char* id : {"u1", "u2", "u3", "u4"}) users.push_back(chat(daemon, id));
  REQUIRE(setup.wait_spinning(2));

  const Stopped stopped = stop_with_sigterm(daemon);
  const std::string& log = stopped.log;
  INFO(log);
  REQUIRE(stopped.status.has_value());
  CHECK(*stopped.status == 1);  // not a clean stop: threads were left in the skill
  CHECK(stopped.took < 4s);     // the 1 s grace, and the saving; far from the 60 s the gate would spin
  CHECK_FALSE(fs::exists(setup.released()));
  CHECK(log.find("shutdown: skill 'slow-gate' 1.0.0 is stuck in its gate hook on an event loop thread after the "
                 "1000 ms grace") != std::string::npos);
  CHECK(log.find("shutdown: memory saved to " + memory_file.string()) != std::string::npos);
  CHECK(testing::read_text_file(memory_file).find("Water the ficus on Tuesdays") != std::string::npos);
}

TEST_CASE("SIGTERM ends the daemon within its grace while a reload's create never returns, the hook named",
          "[integration][stuck]") {
  const StuckSetup setup;
  const fs::path hold = setup.released().parent_path() / "hold";
  // The create of the boot returns; the reload's waits while `hold` exists (60 s at most).
  std::ofstream(setup.manifests() / "slow-gate.yaml")
      << "name: slow-gate\nversion: 1.0.0\nlibrary: libslow-gate.so\nabi: 1\npriority: 999\n"
      << "gate_timeout: 200ms\nisolation: in-process\n"
      << "config: { hold-create-while: \"" << hold.string() << "\", spinning-file: \"" << setup.spinning().string()
      << "\", max-ms: 60000 }\n";
  DaemonProcess daemon(setup.options({"--shutdown-grace", "1"}));
  REQUIRE(daemon.started());
  std::ofstream(hold) << "hold\n";
  WireClient op = WireClient::local(daemon.socket_path());
  op.expect_handshake();
  op.send("(:TYPE :OPERATOR :COMMAND :RELOAD :NAME \"slow-gate\")");  // never answered
  REQUIRE(setup.wait_spinning(1));

  const Stopped stopped = stop_with_sigterm(daemon);
  const std::string& log = stopped.log;
  INFO(log);
  REQUIRE(stopped.status.has_value());
  CHECK(*stopped.status == 1);  // not a clean stop: the control thread was left in the skill
  CHECK(stopped.took < 4s);     // the 1 s grace, and the saving; far from the 60 s the create would wait
  CHECK(log.find("shutdown: skill 'slow-gate' 1.0.0 is stuck in its create hook on the control thread after the "
                 "1000 ms grace") != std::string::npos);
  CHECK(log.find("stopped, leaving 1 stuck hook(s) behind (exit status 1)") != std::string::npos);
}

}  // namespace passepartout
