// A skill that takes the daemon down with it: the crash writer names the
// skill, its version and the hook; the next start holds it back until an
// operator loads it; exit() in a hook is logged; the listening sockets are
// not inherited by a child; `passepartout verify` says what it had, and with
// --isolate reports the crash as the gate's failure.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/protocol.hpp"
#include "integration/daemon_process.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;
using testing::DaemonProcess;
using testing::WireClient;

constexpr std::string_view kScript = R"(rules:
  - match: 'greet the operator'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "echo approved-run" :EXPLANATION "Printing a greeting."))'
)";

// Copies the bundled skills' libraries and manifests into `plugins` and `manifests`.
// The bundled skills and the fixture `fixture` (a gate, asked before all others):
// a plugin folder and a manifest folder of their own, kept across restarts.
class CrashSetup {
 public:
  // `extra`: more manifest lines for the fixture ("isolation: process\n");
  // without an `isolation:` line the fixture runs in-process, the tier whose
  // crash these tests take the daemon down with.
  explicit CrashSetup(std::string_view fixture, std::string_view extra = "") : name_(fixture) {
    testing::copy_bundled_skills(plugins(), manifests());
    const std::string library = "lib" + std::string(fixture) + ".so";
    fs::copy_file(fs::path(PP_FIXTURE_DIR) / library, plugins() / library);
    std::ofstream(manifest()) << "name: " << fixture << "\nversion: 1.0.0\nlibrary: " << library
                              << "\nabi: 1\npriority: 999\n"
                              << (extra.find("isolation:") == std::string_view::npos ? "isolation: in-process\n" : "")
                              << extra;
  }

  fs::path plugins() const { return root_.path() / "plugins"; }
  fs::path manifests() const { return root_.path() / "manifests"; }
  fs::path manifest() const { return manifests() / (name_ + ".yaml"); }

  DaemonProcess::Options options(const fs::path& state_from = {}) const {
    DaemonProcess::Options opts{std::string(kScript),
                                {"--plugins", plugins().string(), "--manifests", manifests().string()},
                                {},
                                false,
                                state_from};
    return opts;
  }

 private:
  std::string name_;
  testing::TempDir root_;
};

Value operator_request(WireClient& client, std::string_view command_and_args) {
  client.send("(:TYPE :OPERATOR :COMMAND " + std::string(command_and_args) + ")");
  return client.expect_frame();
}

// The entry of skill `name` in a :SKILLS or :STATUS answer's skill list (NIL when absent).
Value skill_entry(const Value& skills, std::string_view name) {
  for (const Value& skill : skills.items()) {
    if (skill.at("NAME").text() == name) return skill;
  }
  return Value();
}

// Sends a user's request that makes the model propose a shell command: every
// gate is asked. The connection stays open for as long as the caller keeps it.
WireClient send_request(const DaemonProcess& daemon, std::string_view id) {
  WireClient user = WireClient::local(daemon.socket_path());
  user.expect_handshake();
  user.send(testing::user_input("greet the operator", id));
  return user;
}

// Asks for the same, and reads frames until the one answering it.
std::string ask(const DaemonProcess& daemon, std::string_view id) {
  return testing::ask(daemon, "greet the operator", id);
}

}  // namespace

TEST_CASE("a gate in a worker process that crashes fails closed while the daemon keeps serving other clients",
          "[integration][crash]") {
  const CrashSetup setup("crash-gate", "isolation: process\n");
  DaemonProcess daemon(setup.options());
  REQUIRE(daemon.started());

  // One client's request reaches the crashing gate: the worker dies, the action is blocked as failed.
  const std::string crashed = ask(daemon, "crash");
  INFO(crashed);
  // The first attempt kills the worker; the model's retries find it dead or restarting.
  CHECK(crashed.find(":RESULT :FAILED :REASON \"skill process") != std::string::npos);
  CHECK(crashed.find("died: SIGSEGV") != std::string::npos);
  CHECK(daemon.wait_for_log("crash-gate: skill process died: SIGSEGV"));

  // Another client chats meanwhile and after: answered, never by a dead daemon.
  WireClient other = WireClient::local(daemon.socket_path());
  other.expect_handshake();
  const Value status = operator_request(other, ":STATUS");
  INFO(to_sexp(status));
  const Value entry = skill_entry(status.path({"PAYLOAD", "SKILLS"}), "crash-gate");
  CHECK(entry.at("ISOLATION").text() == "process");
  CHECK(entry.at("LAST-DEATH").text() == "skill process died: SIGSEGV");
  CHECK(entry.at("SANDBOX-DENIALS").as_integer() == 0);  // a crash is no denial
  const std::string again = ask(daemon, "again");
  INFO(again);
  CHECK(again.find("skill process") != std::string::npos);  // died again, or restarting: failed closed either way
  CHECK(::kill(daemon.pid(), 0) == 0);

  const auto env = testing::hermetic_env(daemon.dir());
  const auto listed = testing::run_passepartout({"skills", "list", "--socket", daemon.socket_path().string()}, env);
  INFO(listed.out << listed.err);
  CHECK(listed.out.find("ISOLATION") != std::string::npos);
  CHECK(listed.out.find("in-process") != std::string::npos);  // the bundled skills
  CHECK(listed.out.find("process (") != std::string::npos);   // the crashing gate
}

TEST_CASE("a skill that crashes the daemon is named, recorded, and held back until an operator loads it",
          "[integration][crash]") {
  const CrashSetup setup("crash-gate");
  DaemonProcess first(setup.options());
  const WireClient user = send_request(first, "crash");
  CHECK_FALSE(first.wait_exit().has_value());  // ended by a signal
  const std::string log = first.log();
  INFO(log);
  CHECK(log.find("error crash: SIGSEGV: fatal signal in hook gate of skill 'crash-gate' 1.0.0 (code in ") !=
        std::string::npos);
  CHECK(log.find("/crash-gate-") != std::string::npos);  // the skill's private copy holds the faulting code
  const std::string record = testing::read_text_file(first.state_dir() / "last-crash");
  CHECK(record.find("cause=SIGSEGV\t") != std::string::npos);
  CHECK(record.find("\tskill=crash-gate\tversion=1.0.0\thook=gate\tsha256=") != std::string::npos);

  DaemonProcess second(setup.options(first.state_dir()));
  INFO(second.log());
  CHECK(second.log().find("the previous run ended in skill 'crash-gate' 1.0.0: SIGSEGV in hook gate at ") !=
        std::string::npos);
  CHECK(second.log().find("skill 'crash-gate' disabled: crashed the daemon: SIGSEGV in hook gate") !=
        std::string::npos);
  CHECK(testing::read_text_file(second.state_dir() / "last-crash").empty());  // consumed

  WireClient client = WireClient::local(second.socket_path());
  client.expect_handshake();
  const Value status = operator_request(client, ":STATUS");
  INFO(to_sexp(status));
  CHECK(status.path({"PAYLOAD", "HEALTH"}).is_keyword("DEGRADED"));
  const Value held = skill_entry(status.path({"PAYLOAD", "SKILLS"}), "crash-gate");
  CHECK(held.at("STATE").is_keyword("DISABLED"));
  const std::string reason(held.at("REASON").text());
  CHECK(reason.starts_with("crashed the daemon: SIGSEGV in hook gate at "));
  CHECK(reason.find("skills reload crash-gate") != std::string::npos);
  CHECK(reason.find("isolation: process") != std::string::npos);

  // The CLI's status shows why.
  const auto env = testing::hermetic_env(second.dir());
  const auto shown = testing::run_passepartout({"status", "--socket", second.socket_path().string()}, env);
  INFO(shown.out << shown.err);
  CHECK(shown.out.find("Why disabled:\n  crash-gate: crashed the daemon: SIGSEGV in hook gate") != std::string::npos);

  // Audited.
  const Value history = operator_request(client, ":HISTORY :SKILL \"crash-gate\" :LIMIT 1");
  INFO(to_sexp(history));
  REQUIRE(history.path({"PAYLOAD", "CHANGES"}).size() == 1);
  const Value& change = history.path({"PAYLOAD", "CHANGES"}).items()[0];
  CHECK(change.at("KIND").text() == "load");
  CHECK(change.at("OUTCOME").text() == "refused");
  CHECK(change.at("STEP").text() == "crash");
  CHECK(change.at("TO-VERSION").text() == "1.0.0");
  CHECK(change.at("TO-SHA256").text().size() == 64);
  CHECK(change.at("ERROR").text() == reason);
  const auto listed = testing::run_passepartout(
      {"skills", "history", "--skill", "crash-gate", "--socket", second.socket_path().string()}, env);
  INFO(listed.out << listed.err);
  CHECK(listed.exit_status == 0);
  CHECK(listed.out.find("  load  crash-gate  ") != std::string::npos);
  CHECK(listed.out.find("crash: crashed the daemon: SIGSEGV in hook gate at ") != std::string::npos);

  // The daemon serves; a rescan leaves the skill out.
  CHECK(ask(second, "after").find("APPROVAL-REQUIRED") != std::string::npos);
  const Value rescanned = operator_request(client, ":RESCAN");
  INFO(to_sexp(rescanned));
  CHECK(rescanned.path({"PAYLOAD", "CHANGES"}).size() == 0);
  CHECK(to_sexp(rescanned).find("crash-gate: held back since it crashed the daemon") != std::string::npos);
  CHECK(skill_entry(operator_request(client, ":SKILLS").path({"PAYLOAD", "SKILLS"}), "crash-gate")
            .at("STATE")
            .is_keyword("DISABLED"));

  // Held at every start until an operator loads it, not only at the next one.
  second.signal(SIGTERM);
  CHECK(second.wait_exit() == 0);
  DaemonProcess third(setup.options(second.state_dir()));
  INFO(third.log());
  CHECK(third.log().find("the previous run ended") == std::string::npos);
  CHECK(third.log().find("skill 'crash-gate' disabled: crashed the daemon: SIGSEGV in hook gate") != std::string::npos);

  // An operator loads it explicitly: it is loaded again.
  const auto loaded = testing::run_passepartout(
      {"skills", "load", setup.manifest().string(), "--socket", third.socket_path().string()}, env);
  INFO(loaded.out << loaded.err);
  CHECK(loaded.exit_status == 0);
  WireClient operator_client = WireClient::local(third.socket_path());
  operator_client.expect_handshake();
  const Value again =
      skill_entry(operator_request(operator_client, ":SKILLS").path({"PAYLOAD", "SKILLS"}), "crash-gate");
  INFO(to_sexp(again));
  CHECK_FALSE(again.at("STATE").is_keyword("DISABLED"));
  CHECK(again.at("REASON").is_nil());
  CHECK_FALSE(fs::exists(third.state_dir() / "held-skills"));
}

TEST_CASE("a skill that calls exit() in a hook is named in the log on the way out", "[integration][crash]") {
  const CrashSetup setup("exit-gate");
  DaemonProcess daemon(setup.options());
  const WireClient user = send_request(daemon, "exit");
  CHECK(daemon.wait_exit() == 3);
  INFO(daemon.log());
  CHECK(daemon.log().find("error crash: exit: the skill called exit() in hook gate of skill 'exit-gate' 1.0.0") !=
        std::string::npos);
  const std::string record = testing::read_text_file(daemon.state_dir() / "last-crash");
  CHECK(record.find("cause=exit\t") != std::string::npos);
  CHECK(record.find("\tskill=exit-gate\t") != std::string::npos);

  // Like a crash, it is held back at the next start.
  DaemonProcess next(setup.options(daemon.state_dir()));
  INFO(next.log());
  CHECK(next.log().find("skill 'exit-gate' disabled: ended the daemon: called exit() in hook gate") !=
        std::string::npos);
}

TEST_CASE("the daemon's listening sockets are not inherited by a child (close-on-exec)", "[integration][crash]") {
  DaemonProcess::Options opts{std::string(kScript), {}, {}, false, {}};
  opts.metrics_port = "0";
  DaemonProcess daemon(std::move(opts));
  REQUIRE(daemon.metrics_port() != 0);
  const fs::path fds = "/proc/" + std::to_string(daemon.pid()) + "/fd";
  int sockets = 0;
  for (const auto& entry : fs::directory_iterator(fds)) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(entry.path(), ec);
    if (ec || !target.string().starts_with("socket:")) continue;
    ++sockets;
    const std::string info = testing::read_text_file("/proc/" + std::to_string(daemon.pid()) + "/fdinfo/" +
                                                     entry.path().filename().string());
    const std::size_t at = info.find("flags:");
    REQUIRE(at != std::string::npos);
    const unsigned long flags = std::stoul(info.substr(at + 6), nullptr, 8);
    INFO("fd " << entry.path().filename().string() << " flags " << std::oct << flags);
    CHECK((flags & O_CLOEXEC) != 0);
  }
  CHECK(sockets >= 3);  // the Unix socket, TCP, metrics
}

TEST_CASE("passepartout verify says what it had before a crashing gate takes it", "[integration][crash]") {
  const CrashSetup setup("crash-gate");
  testing::TempDir home;
  const auto run =
      testing::run_passepartout({"verify", "(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"echo hi\"))", "--manifests",
                                 setup.manifests().string(), "--plugins", setup.plugins().string()},
                                testing::hermetic_env(home.path()));
  INFO(run.out << run.err);
  CHECK(run.exit_status == -1);  // the signal took it
  const std::size_t order = run.err.find("verify: load order: ");
  const std::size_t crash = run.err.find("crash: SIGSEGV: fatal signal in hook gate of skill 'crash-gate' 1.0.0");
  CHECK(order != std::string::npos);
  CHECK(run.err.find("crash-gate 1.0.0", order) != std::string::npos);
  REQUIRE(crash != std::string::npos);
  CHECK(order < crash);
}

TEST_CASE("passepartout verify --isolate reports a crashing gate as failed and goes on to the outcome",
          "[integration][crash]") {
  const CrashSetup setup("crash-gate");  // its manifest says in-process: --isolate overrides it
  testing::TempDir home;
  const std::vector<std::string> verify{"verify",      "(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"echo hi\"))",
                                        "--manifests", setup.manifests().string(),
                                        "--plugins",   setup.plugins().string()};
  SECTION("text") {
    std::vector<std::string> args = verify;
    args.emplace_back("--isolate");
    const auto run = testing::run_passepartout(args, testing::hermetic_env(home.path()));
    INFO(run.out << run.err);
    CHECK(run.exit_status == 3);  // blocked: a failed gate fails closed
    std::istringstream lines(run.out);
    std::string line;
    bool found = false;
    while (std::getline(lines, line)) {
      if (line.find("crash-gate 1.0.0") == std::string::npos || line.find("FAILED") == std::string::npos) continue;
      found = line.find("skill process died: SIGSEGV") != std::string::npos;
    }
    CHECK(found);
    CHECK(run.out.find("Outcome: blocked") != std::string::npos);
    CHECK(run.err.find("crash: SIGSEGV: fatal signal") == std::string::npos);  // verify itself did not crash
  }
  SECTION("json") {
    std::vector<std::string> args = verify;
    args.emplace_back("--isolate");
    args.emplace_back("--json");
    const auto run = testing::run_passepartout(args, testing::hermetic_env(home.path()));
    INFO(run.out << run.err);
    CHECK(run.exit_status == 3);
    CHECK(run.out.find("\"outcome\": \"blocked\"") != std::string::npos);
    CHECK(run.out.find("\"result\": \"failed\"") != std::string::npos);
    CHECK(run.out.find("skill process died: SIGSEGV") != std::string::npos);
  }
}

// shadow-gate 1.0.0 (passes, in-process) live in a daemon, and 2.0.0, which
// crashes, tried beside it as a shadow candidate whose manifest does not say
// `isolation`: the default puts it in a worker of its own, whose death is the
// candidate's failure, counted; the users' verdicts and the daemon go on.
TEST_CASE("a shadow candidate that crashes in its worker leaves the daemon and the live verdicts unaffected",
          "[integration][crash][shadow]") {
  testing::TempDir root;
  const fs::path plugins = root.path() / "plugins";
  const fs::path manifests = root.path() / "manifests";
  testing::copy_bundled_skills(plugins, manifests);
  for (const char* library : {"libshadow-gate-1.so", "libshadow-gate-2.so"}) {
    fs::copy_file(fs::path(PP_FIXTURE_DIR) / library, plugins / library);
  }
  std::ofstream(manifests / "shadow-gate.yaml")
      << "name: shadow-gate\nversion: 1.0.0\nlibrary: libshadow-gate-1.so\nabi: 1\npriority: 999\n"
         "isolation: in-process\nconfig: { mode: pass }\n";
  const fs::path candidate = root.path() / "shadow-gate-candidate.yaml";
  std::ofstream(candidate) << "name: shadow-gate\nversion: 2.0.0\nlibrary: libshadow-gate-2.so\nabi: 1\npriority: 999\n"
                              "config: { mode: crash }\n";

  DaemonProcess daemon(DaemonProcess::Options{
      std::string(kScript), {"--plugins", plugins.string(), "--manifests", manifests.string()}, {}, false, {}});
  REQUIRE(daemon.started());
  const auto env = testing::hermetic_env(daemon.dir());
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--socket", daemon.socket_path().string()});
    return testing::run_passepartout(args, env);
  };
  const std::string before = ask(daemon, "before");
  INFO(before);

  const auto started = run({"skills", "shadow", candidate.string()});
  INFO(started.out << started.err);
  REQUIRE(started.exit_status == 0);

  for (const char* id : {"shadowed-1", "shadowed-2"}) {
    const std::string reply = ask(daemon, id);
    INFO(reply);
    CHECK(reply.find(":FAILED") == std::string::npos);  // the candidate's failure is not the users'
    CHECK(reply.find("skill process died") == std::string::npos);
    // The live gates decide as they did before the candidate came.
    CHECK((reply.find("APPROVAL-REQUIRED") != std::string::npos) ==
          (before.find("APPROVAL-REQUIRED") != std::string::npos));
  }
  CHECK(daemon.wait_for_log("skill process died: SIGSEGV"));
  CHECK(::kill(daemon.pid(), 0) == 0);

  const auto status = run({"skills", "shadow", "status", "shadow-gate", "--json"});
  INFO(status.out << status.err);
  REQUIRE(status.exit_status == 0);
  const auto document = nlohmann::json::parse(status.out);
  REQUIRE(document["shadows"].size() == 1);
  CHECK(document["shadows"][0]["seen"].get<int>() >= 2);
  CHECK(document["shadows"][0]["candidate_failed"].get<int>() == document["shadows"][0]["seen"].get<int>());
  REQUIRE_FALSE(document["shadows"][0]["latest"].empty());
  const auto& oldest = document["shadows"][0]["latest"].back();
  CHECK(oldest["live"] == "passed");
  CHECK(oldest["candidate"] == "failed");
  CHECK(oldest["candidate_reason"] == "skill process died: SIGSEGV");

  // The daemon still serves, and the live version is the one in force.
  WireClient other = WireClient::local(daemon.socket_path());
  other.expect_handshake();
  const Value overview = operator_request(other, ":STATUS");
  INFO(to_sexp(overview));
  CHECK(skill_entry(overview.path({"PAYLOAD", "SKILLS"}), "shadow-gate").at("VERSION").text() == "1.0.0");
  CHECK(run({"skills", "shadow", "stop", "shadow-gate"}).exit_status == 0);
}

}  // namespace passepartout
