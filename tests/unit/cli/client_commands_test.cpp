// Tests for the operator commands (status, stop, skills, approvals) and for
// finding the daemon, against an in-process server and a misbehaving raw peer.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/client_commands.hpp"
#include "cli/client_output.hpp"
#include "cli/exit_status.hpp"
#include "unit/cli/fake_daemon.hpp"

using namespace passepartout;
using namespace passepartout::testing;
using nlohmann::json;

namespace {

bool contains(const std::string& text, std::string_view what) { return text.find(what) != std::string::npos; }

// Sets environment variables for one test and puts the old values back.
class EnvOverride {
 public:
  EnvOverride& set(const char* name, std::optional<std::string> value) {
    if (saved_.find(name) == saved_.end()) {
      const char* old = std::getenv(name);
      saved_[name] = old != nullptr ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
    return *this;
  }
  ~EnvOverride() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// No connection settings from the environment of whoever runs the tests.
EnvOverride clean_env() {
  EnvOverride env;
  for (const char* name :
       {"PASSEPARTOUT_SOCKET", "PASSEPARTOUT_PORT", "PASSEPARTOUT_TOKEN", "PASSEPARTOUT_TOKEN_FILE"}) {
    env.set(name, std::nullopt);
  }
  return env;
}

}  // namespace

TEST_CASE("status shows the daemon, its counters and its skills", "[cli]") {
  FakeDaemonServer server;
  SECTION("text") {
    Captured captured;
    REQUIRE(cli::run_status(server.unix_target(), captured.output()) == cli::kExitOk);
    const std::string out = captured.out.str();
    INFO(out);
    CHECK(out.rfind("passepartout daemon 9.9.9 at " + server.unix_target().endpoint.socket_path.string() + "\n", 0) ==
          0);
    CHECK(contains(out, "  health             HEALTHY\n"));
    CHECK(contains(out, "  uptime             1h 02m 05s\n"));
    CHECK(contains(out, "  connections        2 (1 refused, 5 closed to make room at a limit)\n"));
    CHECK(contains(out, "  metrics            off (3 connections closed to make room)\n"));
    CHECK(contains(out, "  signals processed  42 (1 in flight)\n"));
    CHECK(contains(out, "  pending approvals  1 (see `passepartout approvals list`)\n"));
    CHECK(contains(out, "  approvals refused  7 (past --max-pending-approvals[-per-session])\n"));
    CHECK(contains(out, "Skills (2, in load order):"));
    CHECK(contains(out,
                   "  shell-guard  1.2.0    loaded          10        2       1  "
                   "process (pid 4242, 2 restarts, 3 sandbox denials)\n"));
    CHECK(contains(out, "  weather      0.3.0    disabled         0        0       0  -\n"));
    CHECK(contains(out, "  weather: depends on 'geo', which failed to load\n"));
  }
  SECTION("json") {
    Captured captured;
    REQUIRE(cli::run_status(server.unix_target(), captured.output(true)) == cli::kExitOk);
    const auto document = json::parse(captured.out.str());
    CHECK(document["ok"] == true);
    CHECK(document["version"] == "9.9.9");
    CHECK(document["uptime_s"] == 3725);
    CHECK(document["health"] == "healthy");
    CHECK(document["signals_processed"] == 42);
    CHECK(document["pending_approvals"] == 1);
    CHECK(document["approvals_refused"] == 7);
    REQUIRE(document["skills"].size() == 2);
    CHECK(document["skills"][0]["name"] == "shell-guard");
    CHECK(document["skills"][0]["gate"] == true);
    CHECK(document["skills"][1]["state"] == "disabled");
    CHECK(document["skills"][1]["gate"] == nullptr);
  }
  CHECK(server.daemon().last_request().at("COMMAND").is_keyword("STATUS"));
  CHECK(server.daemon().last_request().at("REQUEST-ID").is_string());
}

TEST_CASE("status --health asks a health check as /healthz does, and --ready whether it is ready", "[cli]") {
  FakeDaemonServer server([] { return HealthReport{"DEGRADED", true}; });
  SECTION("--health over the Unix socket") {
    Captured captured;
    CHECK(cli::run_health(server.unix_target(), captured.output()) == cli::kExitOk);
    CHECK(captured.out.str() ==
          "ok: the daemon at " + server.unix_target().endpoint.describe() + " serves (health DEGRADED)\n");
  }
  SECTION("--health over TCP needs no token") {
    Captured captured;
    CHECK(cli::run_health(server.tcp_target(""), captured.output(true)) == cli::kExitOk);
    const auto document = json::parse(captured.out.str());
    CHECK(document["ok"] == true);
    CHECK(document["health"] == "DEGRADED");
  }
  SECTION("--health with nothing listening") {
    TempDir dir;
    cli::Target target;
    target.endpoint.socket_path = dir.path() / "none.sock";
    Captured captured;
    CHECK(cli::run_health(target, captured.output()) == cli::kExitProblem);
    CHECK(contains(captured.err.str(), "none.sock"));
  }
  SECTION("--ready when not ready") {
    Captured captured;
    CHECK(cli::run_ready(server.unix_target(), captured.output()) == cli::kExitProblem);
    CHECK(captured.err.str() == "passepartout: not ready: no skill is loaded\n");
    Captured as_json;
    CHECK(cli::run_ready(server.unix_target(), as_json.output(true)) == cli::kExitProblem);
    const auto document = json::parse(as_json.out.str());
    CHECK(document["ready"] == false);
    CHECK(document["reason"] == "not ready: no skill is loaded");
  }
}

TEST_CASE("operator commands over TCP carry the token, without it the daemon says UNAUTHORIZED", "[cli]") {
  FakeDaemonServer server;
  SECTION("with the token") {
    Captured captured;
    CHECK(cli::run_status(server.tcp_target(), captured.output()) == cli::kExitOk);
  }
  SECTION("without a token, text") {
    Captured captured;
    CHECK(cli::run_status(server.tcp_target(""), captured.output()) == cli::kExitProblem);
    const std::string err = captured.err.str();
    INFO(err);
    CHECK(contains(err, "passepartout: `status` failed: operator requests need the token (UNAUTHORIZED); "));
    CHECK(contains(err, "pass --token-file FILE or set PASSEPARTOUT_TOKEN"));
    CHECK(captured.out.str().empty());
  }
  SECTION("with a wrong token, json") {
    Captured captured;
    CHECK(cli::run_skills_list(server.tcp_target("wrong"), captured.output(true)) == cli::kExitProblem);
    const auto document = json::parse(captured.out.str());
    CHECK(document["ok"] == false);
    CHECK(document["code"] == "UNAUTHORIZED");
    CHECK(contains(document["hint"].get<std::string>(), "the token from the test was not accepted"));
  }
}

TEST_CASE("skills list shows every skill with its state and counters", "[cli]") {
  FakeDaemonServer server;
  SECTION("text") {
    Captured captured;
    REQUIRE(cli::run_skills_list(server.unix_target(), captured.output()) == cli::kExitOk);
    const std::string out = captured.out.str();
    INFO(out);
    CHECK(contains(out, "2 skills in the daemon at "));
    CHECK(contains(out, "NAME         VERSION  PRIORITY  STATE     GATE  VERIFIED  BLOCKED  FAILED  SHA256"));
    CHECK(contains(out, "shell-guard  1.2.0          90  loaded    yes         10        2       1  3f5a12345678"));
    CHECK(contains(out, "3f5a12345678  process (pid 4242, 2 restarts, 3 sandbox denials)\n"));
    CHECK(contains(out, "weather      0.3.0          10  disabled  no           0        0       0  -"));
    CHECK(contains(out, "Why disabled:\n  weather: depends on 'geo', which failed to load\n"));
  }
  SECTION("json") {
    Captured captured;
    REQUIRE(cli::run_skills_list(server.unix_target(), captured.output(true)) == cli::kExitOk);
    const auto document = json::parse(captured.out.str());
    CHECK(document["skills"][0]["sha256"] == "3f5a1234567890abcdef");
    CHECK(document["skills"][1]["reason"] == "depends on 'geo', which failed to load");
  }
}

TEST_CASE("the skills table names a worker's sandbox denials only where there are some", "[cli]") {
  const Value skills = sexp(
      "((:NAME \"none\" :VERSION \"1.0.0\" :STATE :LOADED :ISOLATION \"process\" :WORKER-PID 11 :RESTARTS 0 "
      ":SANDBOX-DENIALS 0)"
      " (:NAME \"one\" :VERSION \"1.0.0\" :STATE :LOADED :ISOLATION \"process\" :WORKER-PID 12 :RESTARTS 0 "
      ":SANDBOX-DENIALS 1)"
      " (:NAME \"many\" :VERSION \"1.0.0\" :STATE :LOADED :ISOLATION \"process\" :WORKER-PID 0 :RESTARTS 1 "
      ":QUARANTINED \"quarantined: its process died 5 times in 10 minutes, last: SIGSYS\" :SANDBOX-DENIALS 7))");
  for (const bool details : {false, true}) {
    const std::string out = cli::skills_table(skills, details);
    INFO(out);
    CHECK(contains(out, "process (pid 11)\n"));
    CHECK(contains(out, "process (pid 12, 1 sandbox denial)\n"));
    CHECK(contains(out, "process (quarantined, 1 restart, 7 sandbox denials)\n"));
  }
}

TEST_CASE("skills load sends the manifest's absolute path and prints the changes", "[cli]") {
  FakeDaemonServer server;
  SECTION("ok") {
    Captured captured;
    REQUIRE(cli::run_skills_load(server.unix_target(), "manifests/weather.yaml", captured.output()) == cli::kExitOk);
    const Value request = server.daemon().last_request();
    CHECK(request.at("COMMAND").is_keyword("LOAD"));
    CHECK(request.at("MANIFEST").text() == (std::filesystem::current_path() / "manifests/weather.yaml").string());
    const std::string out = captured.out.str();
    INFO(out);
    CHECK(out.rfind("loaded weather 1.1.0\n", 0) == 0);
    CHECK(contains(out, "swap  weather  1.0.0 (aaaabbbbcccc) -> 1.1.0 (eeeeffff0000)  ok  1.5 ms  cli"));
  }
  SECTION("json") {
    Captured captured;
    REQUIRE(cli::run_skills_load(server.unix_target(), "/x/weather.yaml", captured.output(true)) == cli::kExitOk);
    const auto document = json::parse(captured.out.str());
    CHECK(document["message"] == "loaded weather 1.1.0");
    CHECK(document["changes"][0]["kind"] == "swap");
    CHECK(document["changes"][0]["to_version"] == "1.1.0");
    CHECK(document["changes"][0]["duration_us"] == 1500);
  }
  SECTION("refused") {
    Captured captured;
    CHECK(cli::run_skills_load(server.unix_target(), "/x/refused.yaml", captured.output()) == cli::kExitProblem);
    CHECK(captured.err.str() ==
          "passepartout: `load` failed: skill 'weather': step self-test: the skill's self-test failed "
          "(REFUSED); `passepartout skills history` shows the recorded changes\n");
  }
}

TEST_CASE("skills reload, unload and rescan print what changed", "[cli]") {
  FakeDaemonServer server;
  SECTION("reload") {
    Captured captured;
    CHECK(cli::run_skills_reload(server.unix_target(), "weather", captured.output()) == cli::kExitOk);
    CHECK(server.daemon().last_request().at("NAME").text() == "weather");
    CHECK(contains(captured.out.str(), "reloaded\n"));
  }
  SECTION("reload of an unknown skill") {
    Captured captured;
    CHECK(cli::run_skills_reload(server.unix_target(), "nope", captured.output()) == cli::kExitProblem);
    CHECK(contains(captured.err.str(),
                   "no skill named 'nope' (NOT-FOUND); see the loaded skills with `passepartout skills list`"));
  }
  SECTION("unload with --cascade") {
    Captured captured;
    CHECK(cli::run_skills_unload(server.unix_target(), "weather", true, false, captured.output()) == cli::kExitOk);
    CHECK(server.daemon().last_request().at("CASCADE").is_true());
    CHECK(contains(captured.out.str(), "remove  forecast"));
  }
  SECTION("unload without --cascade") {
    Captured captured;
    CHECK(cli::run_skills_unload(server.unix_target(), "weather", false, false, captured.output()) == cli::kExitOk);
    CHECK(server.daemon().last_request().get("CASCADE") == nullptr);
  }
  SECTION("rescan with nothing to do") {
    Captured captured;
    CHECK(cli::run_skills_rescan(server.unix_target(), captured.output()) == cli::kExitOk);
    CHECK(captured.out.str() == "nothing changed\nNo changes.\n");
    Captured as_json;
    CHECK(cli::run_skills_rescan(server.unix_target(), as_json.output(true)) == cli::kExitOk);
    CHECK(json::parse(as_json.out.str())["changes"] == json::array());
  }
}

TEST_CASE("skills shadow, shadow status, shadow stop and promote", "[cli][shadow]") {
  FakeDaemonServer server;
  SECTION("shadow sends the manifest's absolute path") {
    Captured captured;
    CHECK(cli::run_skills_shadow(server.unix_target(), "c/weather-2.yaml", captured.output()) == cli::kExitOk);
    const Value request = server.daemon().last_request();
    CHECK(request.at("COMMAND").is_keyword("SHADOW"));
    CHECK(request.at("MANIFEST").text() == (std::filesystem::current_path() / "c/weather-2.yaml").string());
    CHECK(contains(captured.out.str(), "shadow  weather"));
  }
  SECTION("status") {
    Captured captured;
    CHECK(cli::run_skills_shadow_status(server.unix_target(), "", captured.output()) == cli::kExitOk);
    CHECK(server.daemon().last_request().get("NAME") == nullptr);
    const std::string out = captured.out.str();
    INFO(out);
    CHECK(contains(out, "shell-guard: candidate 2.0.0 (sha256 3f5a01234567) beside live 1.4.0"));
    CHECK(contains(out, "seen 120, agreements 117, disagreements 3 (candidate-blocks 3, candidate-passes 0"));
    CHECK(contains(out,
                   "candidate-blocks (last-mile, action 9f2c01ab34cd56ef): live passed, candidate blocked "
                   "(rm outside the workspace)"));
  }
  SECTION("status --json") {
    Captured captured;
    CHECK(cli::run_skills_shadow_status(server.unix_target(), "shell-guard", captured.output(true)) == cli::kExitOk);
    CHECK(server.daemon().last_request().at("NAME").text() == "shell-guard");
    const auto document = json::parse(captured.out.str());
    CHECK(document["shadows"][0]["candidate_blocks"] == 3);
    CHECK(document["shadows"][0]["latest"][0]["kind"] == "candidate-blocks");
  }
  SECTION("status of a skill without a candidate") {
    Captured captured;
    CHECK(cli::run_skills_shadow_status(server.unix_target(), "nope", captured.output()) == cli::kExitProblem);
    CHECK(contains(captured.err.str(), "skill 'nope' has no shadow candidate (NOT-FOUND)"));
  }
  SECTION("stop and promote") {
    Captured stopped;
    CHECK(cli::run_skills_shadow_stop(server.unix_target(), "weather", stopped.output()) == cli::kExitOk);
    CHECK(server.daemon().last_request().at("COMMAND").is_keyword("SHADOW-STOP"));
    CHECK(contains(stopped.out.str(), "shadow-stop  weather"));
    Captured promoted;
    CHECK(cli::run_skills_promote(server.unix_target(), "weather", promoted.output()) == cli::kExitOk);
    CHECK(server.daemon().last_request().at("COMMAND").is_keyword("PROMOTE"));
    CHECK(contains(promoted.out.str(), "promote  weather"));
  }
}

TEST_CASE("approvals list, approve and deny", "[cli]") {
  FakeDaemonServer server;
  SECTION("list, text") {
    Captured captured;
    REQUIRE(cli::run_approvals_list(server.unix_target(), {}, captured.output()) == cli::kExitOk);
    const std::string out = captured.out.str();
    INFO(out);
    CHECK(out.rfind("showing 1-100 of 250 pending (newest first); next: --offset 100\n\n  ab12cd34\n", 0) == 0);
    CHECK(contains(out, "    session:  s1\n"));
    CHECK(contains(out, "    reason:   deletes files\n"));
    CHECK(contains(out, "    gates:    shell-guard@1.2.0\n"));
    CHECK(contains(out, "    action:   (:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"rm -rf build\"))\n"));
    CHECK(contains(out, "    expires:  "));
    CHECK_FALSE(contains(out, "    state:"));  // pending goes without saying
    CHECK(contains(out, "passepartout approvals approve TOKEN"));
    CHECK(contains(out, "passepartout approvals deny --all-from SESSION"));
    const Value request = server.daemon().last_request();
    CHECK(request.get("LIMIT") == nullptr);  // the daemon's defaults
    CHECK(request.get("OFFSET") == nullptr);
  }
  SECTION("list, json") {
    Captured captured;
    REQUIRE(cli::run_approvals_list(server.unix_target(), {}, captured.output(true)) == cli::kExitOk);
    const auto document = json::parse(captured.out.str());
    CHECK(document["total"] == 250);
    CHECK(document["offset"] == 0);
    CHECK(document["approvals"].size() == 100);
    CHECK(document["approvals"][0]["token"] == "ab12cd34");
    CHECK(document["approvals"][0]["session_id"] == "s1");
    CHECK(document["approvals"][0]["gates"] == json::array({"shell-guard@1.2.0"}));
    CHECK(document["approvals"][0]["action"]["payload"]["cmd"] == "rm -rf build");
    CHECK(document["approvals"][0]["action_sexp"] ==
          "(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"rm -rf build\"))");
  }
  SECTION("approve") {
    Captured captured;
    REQUIRE(cli::run_approvals_decide(server.unix_target(), "ab12cd34", true, captured.output()) == cli::kExitOk);
    CHECK(server.daemon().last_request().at("COMMAND").is_keyword("APPROVE"));
    CHECK(server.daemon().last_request().at("TOKEN").text() == "ab12cd34");
    CHECK(captured.out.str() == "approved\nResult: removed build/\n");
  }
  SECTION("deny, json") {
    Captured captured;
    REQUIRE(cli::run_approvals_decide(server.unix_target(), "ab12cd34", false, captured.output(true)) == cli::kExitOk);
    const auto document = json::parse(captured.out.str());
    CHECK(document["decision"] == "denied");
    CHECK(document["message"] == "denied");
  }
  SECTION("an unknown token") {
    Captured captured;
    CHECK(cli::run_approvals_decide(server.unix_target(), "ffff", true, captured.output()) == cli::kExitProblem);
    CHECK(contains(captured.err.str(), "(NOT-FOUND); see the pending approvals with `passepartout approvals list`"));
  }
}

TEST_CASE("approvals list pages with --limit and --offset and says where the next page starts", "[cli][approvals]") {
  FakeDaemonServer server;
  SECTION("a middle page") {
    Captured captured;
    REQUIRE(cli::run_approvals_list(server.unix_target(), {10, 100}, captured.output()) == cli::kExitOk);
    CHECK(captured.out.str().rfind("showing 101-110 of 250 pending (newest first); next: --offset 110\n", 0) == 0);
    const Value request = server.daemon().last_request();
    CHECK(request.at("LIMIT").as_integer() == 10);
    CHECK(request.at("OFFSET").as_integer() == 100);
  }
  SECTION("the last page has no next") {
    Captured captured;
    REQUIRE(cli::run_approvals_list(server.unix_target(), {100, 200}, captured.output()) == cli::kExitOk);
    CHECK(captured.out.str().rfind("showing 201-250 of 250 pending (newest first)\n", 0) == 0);
  }
  SECTION("past the end") {
    Captured captured;
    REQUIRE(cli::run_approvals_list(server.unix_target(), {std::nullopt, 300}, captured.output()) == cli::kExitOk);
    CHECK(captured.out.str() == "no pending approvals at offset 300 (250 pending; newest first: --offset 0)\n");
  }
  SECTION("a limit the daemon refuses is a usage error with its message") {
    Captured captured;
    CHECK(cli::run_approvals_list(server.unix_target(), {5000, std::nullopt}, captured.output()) == cli::kExitUsage);
    INFO(captured.err.str());
    CHECK(contains(captured.err.str(), ":LIMIT must be a whole number from 1 to 1000 (BAD-REQUEST)"));
  }
}

TEST_CASE("approvals deny --all-from denies a session's pending approvals, show prints a decided one's run",
          "[cli][approvals]") {
  FakeDaemonServer server;
  SECTION("a flood") {
    Captured captured;
    REQUIRE(cli::run_approvals_deny_session(server.unix_target(), "s1", captured.output()) == cli::kExitOk);
    CHECK(captured.out.str() == "denied 4998 pending approvals of session 's1'\n");
    const Value request = server.daemon().last_request();
    CHECK(request.at("COMMAND").is_keyword("DENY"));
    CHECK(request.at("SESSION").text() == "s1");
    CHECK(request.get("TOKEN") == nullptr);
  }
  SECTION("none pending is not a failure") {
    Captured captured;
    REQUIRE(cli::run_approvals_deny_session(server.unix_target(), "quiet", captured.output()) == cli::kExitOk);
    CHECK(captured.out.str() == "no pending approvals of session 'quiet'\n");
  }
  SECTION("json") {
    Captured captured;
    REQUIRE(cli::run_approvals_deny_session(server.unix_target(), "s1", captured.output(true)) == cli::kExitOk);
    const auto document = json::parse(captured.out.str());
    CHECK(document["denied"] == 4998);
    CHECK(document["session"] == "s1");
  }
  SECTION("no session") {
    Captured captured;
    CHECK(cli::run_approvals_deny_session(server.unix_target(), "", captured.output()) == cli::kExitUsage);
  }
  SECTION("show") {
    Captured captured;
    REQUIRE(cli::run_approvals_show(server.unix_target(), "ab12cd34", captured.output()) == cli::kExitOk);
    const std::string out = captured.out.str();
    INFO(out);
    CHECK(out.rfind("Approval ab12cd34: approved\n\n  ab12cd34\n    state:    approved by wire, ", 0) == 0);
    CHECK(contains(out, "    run:      interrupted: the daemon stopped while the action ran\n"));
    CHECK(contains(out, "    session:  s1\n"));
    Captured json_captured;
    REQUIRE(cli::run_approvals_show(server.unix_target(), "ab12cd34", json_captured.output(true)) == cli::kExitOk);
    const auto document = json::parse(json_captured.out.str());
    CHECK(document["approval"]["run"] == "interrupted");
    CHECK(document["approval"]["state"] == "approved");
    CHECK(document["approval"]["action_sexp"] == "(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"rm -rf build\"))");
  }
}

TEST_CASE("stop asks the daemon to shut down", "[cli]") {
  FakeDaemonServer server;
  Captured captured;
  CHECK(cli::run_stop(server.unix_target(), captured.output()) == cli::kExitOk);
  CHECK(server.daemon().last_request().at("COMMAND").is_keyword("SHUTDOWN"));
  CHECK(contains(captured.out.str(), "is shutting down: shutting down\n"));
}

TEST_CASE("operator commands say how to start the daemon when nothing listens", "[cli]") {
  TempDir dir;
  cli::Target target;
  target.endpoint.socket_path = dir.path() / "absent.sock";
  SECTION("text") {
    Captured captured;
    CHECK(cli::run_status(target, captured.output()) == cli::kExitProblem);
    CHECK(contains(captured.err.str(), "cannot reach the daemon at " + target.endpoint.socket_path.string() +
                                           ": No such file or directory; start it with `passepartout daemon`"));
  }
  SECTION("json") {
    Captured captured;
    CHECK(cli::run_skills_list(target, captured.output(true)) == cli::kExitProblem);
    const auto document = json::parse(captured.out.str());
    CHECK(document["ok"] == false);
    CHECK(contains(document["error"].get<std::string>(), "No such file or directory"));
    CHECK(contains(document["hint"].get<std::string>(), "passepartout daemon"));
    CHECK(captured.err.str().empty());
  }
  SECTION("tcp") {
    // A port nothing listens on: bound to find a free one, then closed.
    const int probe = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(probe >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    REQUIRE(::bind(probe, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::getsockname(probe, reinterpret_cast<sockaddr*>(&address), &size) == 0);
    ::close(probe);
    cli::Target tcp;
    tcp.endpoint.port = ntohs(address.sin_port);
    Captured captured;
    CHECK(cli::run_status(tcp, captured.output()) == cli::kExitProblem);
    INFO(captured.err.str());
    CHECK(contains(captured.err.str(), "cannot reach the daemon at 127.0.0.1:" + std::to_string(tcp.endpoint.port) +
                                           ": Connection refused; start it with `passepartout daemon`"));
  }
}

TEST_CASE("operator commands cope with a daemon that answers oddly or not at all", "[cli]") {
  SECTION("closes before answering") {
    RawPeer peer("");
    Captured captured;
    CHECK(cli::run_status(peer.target(), captured.output()) == cli::kExitProblem);
    CHECK(contains(captured.err.str(), "closed the connection before answering; the daemon may have stopped"));
  }
  SECTION("an :OK response with no payload") {
    RawPeer peer(RawPeer::frame("(:TYPE :RESPONSE :STATUS :OK)"));
    Captured captured;
    CHECK(cli::run_status(peer.target(), captured.output()) == cli::kExitOk);
    CHECK(contains(captured.out.str(), "  health             unknown\n"));
    CHECK(contains(captured.out.str(), "(none loaded)"));
  }
  SECTION("junk where the skills should be") {
    RawPeer peer(RawPeer::frame("(:TYPE :RESPONSE :STATUS :OK :PAYLOAD (:SKILLS (junk 5 (:NAME 7) (:STATE \"x\"))))"));
    Captured captured;
    CHECK(cli::run_skills_list(peer.target(), captured.output()) == cli::kExitOk);
  }
  SECTION("junk where the approvals and changes should be, json") {
    RawPeer peer(RawPeer::frame("(:TYPE :RESPONSE :STATUS :OK :PAYLOAD (:APPROVALS \"none\" :MESSAGE 5))"));
    Captured captured;
    CHECK(cli::run_approvals_list(peer.target(), {}, captured.output(true)) == cli::kExitOk);
    CHECK_NOTHROW(json::parse(captured.out.str()));
  }
  SECTION("a response that is neither :OK nor :ERROR") {
    RawPeer peer(RawPeer::frame("(:TYPE :RESPONSE :STATUS :MAYBE)"));
    Captured captured;
    CHECK(cli::run_skills_rescan(peer.target(), captured.output()) == cli::kExitProblem);
    CHECK(contains(captured.err.str(), "`rescan` failed: the request failed"));
  }
  SECTION("no handshake") {
    RawPeer peer(RawPeer::frame("(:TYPE :RESPONSE :STATUS :OK)"), false, false);
    Captured captured;
    CHECK(cli::run_stop(peer.target(), captured.output()) == cli::kExitProblem);
    CHECK(contains(captured.err.str(), "did not start with a handshake"));
  }
  SECTION("an error instead of the handshake") {
    RawPeer peer(
        RawPeer::frame("(:TYPE :RESPONSE :STATUS :ERROR :PAYLOAD (:MESSAGE \"too many connections\" :CODE :BUSY))"),
        false, false);
    Captured captured;
    CHECK(cli::run_stop(peer.target(), captured.output()) == cli::kExitProblem);
    CHECK(contains(captured.err.str(), "turned the connection away: too many connections"));
  }
}

TEST_CASE("the daemon is found from the options, then the environment, then the defaults", "[cli]") {
  EnvOverride env = clean_env();
  const cli::ConnectionOptions none;
  SECTION("--socket") {
    cli::ConnectionOptions options;
    options.socket_path = "/tmp/x.sock";
    env.set("PASSEPARTOUT_PORT", "9200");
    auto target = cli::resolve_target(options, std::chrono::seconds(30));
    REQUIRE(target.has_value());
    CHECK(target->endpoint.socket_path == "/tmp/x.sock");
    CHECK(target->reply_timeout == std::chrono::seconds(30));
    CHECK(target->connect_timeout == std::chrono::seconds(5));
  }
  SECTION("--port, --host and --timeout") {
    cli::ConnectionOptions options;
    options.port = 9300;
    options.host = "localhost";
    options.timeout_s = 2.5;
    env.set("PASSEPARTOUT_SOCKET", "/tmp/ignored.sock");
    auto target = cli::resolve_target(options, std::chrono::seconds(30));
    REQUIRE(target.has_value());
    CHECK(target->endpoint.is_tcp());
    CHECK(target->endpoint.describe() == "localhost:9300");
    CHECK(target->reply_timeout == std::chrono::milliseconds(2500));
  }
  SECTION("PASSEPARTOUT_SOCKET, then PASSEPARTOUT_PORT") {
    env.set("PASSEPARTOUT_SOCKET", "/tmp/env.sock").set("PASSEPARTOUT_PORT", "9400");
    CHECK(cli::resolve_target(none, std::chrono::seconds(1))->endpoint.socket_path == "/tmp/env.sock");
    env.set("PASSEPARTOUT_SOCKET", std::nullopt);
    CHECK(cli::resolve_target(none, std::chrono::seconds(1))->endpoint.describe() == "127.0.0.1:9400");
    env.set("PASSEPARTOUT_PORT", "99999");
    auto bad = cli::resolve_target(none, std::chrono::seconds(1));
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().message == "PASSEPARTOUT_PORT is '99999', not a port number from 1 to 65535");
  }
  SECTION("the default socket") {
    env.set("XDG_RUNTIME_DIR", "/run/user/4242");
    CHECK(cli::resolve_target(none, std::chrono::seconds(1))->endpoint.socket_path ==
          "/run/user/4242/passepartout.sock");
    env.set("XDG_RUNTIME_DIR", std::nullopt).set("PASSEPARTOUT_STATE_DIR", "/var/lib/pp");
    CHECK(cli::resolve_target(none, std::chrono::seconds(1))->endpoint.socket_path == "/var/lib/pp/passepartout.sock");
  }
  SECTION("the token over TCP") {
    TempDir dir;
    env.set("PASSEPARTOUT_STATE_DIR", dir.path().string());
    cli::ConnectionOptions tcp;
    tcp.port = 9105;
    CHECK(cli::resolve_target(tcp, std::chrono::seconds(1))->token.empty());
    { std::ofstream(dir.path() / "token") << "from-state-dir\n"; }
    CHECK(cli::resolve_target(tcp, std::chrono::seconds(1))->token == "from-state-dir");
    env.set("PASSEPARTOUT_TOKEN", "from-env");
    CHECK(cli::resolve_target(tcp, std::chrono::seconds(1))->token == "from-env");
    { std::ofstream(dir.path() / "other") << "  from-file  \n"; }
    env.set("PASSEPARTOUT_TOKEN_FILE", (dir.path() / "other").string());
    CHECK(cli::resolve_target(tcp, std::chrono::seconds(1))->token == "from-file");
    tcp.token_file = (dir.path() / "missing").string();
    auto missing = cli::resolve_target(tcp, std::chrono::seconds(1));
    REQUIRE_FALSE(missing.has_value());
    CHECK(contains(missing.error().message, "cannot read the token file"));
  }
}

TEST_CASE("doctor checks tools, the state folder, the bundled skills and the daemon", "[cli]") {
  TempDir state;
  cli::DoctorOptions options;
  options.state_dir = state.path();
  options.manifest_dir = PP_MANIFEST_DIR;
  options.plugin_dir = PP_PLUGIN_DIR;
  options.check_provider = false;
  SECTION("healthy") {
    FakeDaemonServer server([] { return HealthReport{"HEALTHY", true}; });
    Captured captured;
    CHECK(cli::run_doctor(server.unix_target(), options, captured.output()) == cli::kExitOk);
    const std::string out = captured.out.str();
    INFO(out);
    CHECK(contains(out, "OK    tool sh"));
    CHECK(contains(out, "OK    state folder"));
    CHECK(contains(out, "OK    bundled skills"));
    CHECK(contains(out, "OK    daemon          " + server.unix_target().endpoint.socket_path.string() +
                            ", version 9.9.9, health HEALTHY"));
    CHECK(contains(out, "\nHealthy.\n"));
  }
  SECTION("a degraded daemon fails") {
    FakeDaemonServer server([] { return HealthReport{"DEGRADED", true}; });
    Captured captured;
    CHECK(cli::run_doctor(server.unix_target(), options, captured.output(true)) == cli::kExitProblem);
    const auto document = json::parse(captured.out.str());
    CHECK(document["ok"] == false);
    CHECK(document["checks"][3]["name"] == "daemon");
    CHECK(document["checks"][3]["status"] == "fail");
  }
  SECTION("everything missing") {
    options.tools = {"sh", "passepartout-no-such-tool"};
    options.state_dir = state.path() / "absent";
    options.manifest_dir = state.path() / "no-manifests";
    options.check_provider = true;
    cli::Target target;
    target.endpoint.socket_path = state.path() / "absent.sock";
    Captured captured;
    CHECK(cli::run_doctor(target, options, captured.output(true)) == cli::kExitProblem);
    const auto document = json::parse(captured.out.str());
    INFO(document.dump(2));
    CHECK(document["failed"] == 4);
    CHECK(document["checks"][0]["status"] == "ok");
    CHECK(document["checks"][1]["status"] == "fail");
    CHECK(contains(document["checks"][2]["hint"].get<std::string>(), "mkdir -p"));
    CHECK(document["checks"][3]["status"] == "fail");
    CHECK(contains(document["checks"][4]["hint"].get<std::string>(), "passepartout daemon"));
    CHECK(document["checks"][5]["name"] == "daemon user");
    CHECK(document["checks"][6]["status"] == "info");
  }
  SECTION("a daemon that runs as root is a warning with what to do, not a failure") {
    FakeDaemonServer server([] { return HealthReport{"HEALTHY", true}; });
    Captured captured;
    CHECK(cli::run_doctor(server.unix_target(), options, captured.output(true)) == cli::kExitOk);
    const auto document = json::parse(captured.out.str());
    INFO(document.dump(2));
    CHECK(document["checks"][4]["name"] == "daemon user");
    const std::string detail = document["checks"][4]["detail"];
    CHECK(contains(detail, "the owner of its socket"));  // the fake daemon's socket is this process's
    if (::geteuid() == 0) {
      CHECK(document["checks"][4]["status"] == "warn");
      CHECK(contains(detail, "runs as root"));
      CHECK(contains(document["checks"][4]["hint"].get<std::string>(), "scripts/passepartout.service"));
    } else {
      CHECK(document["checks"][4]["status"] == "ok");
    }
  }
}
