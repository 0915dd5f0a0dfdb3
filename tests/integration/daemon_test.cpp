// `passepartout daemon` end to end: the real executable on port 0 and a Unix
// socket in a temp dir, the scripted provider, the bundled skills; every wait
// bounded by a deadline.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon/frame_codec.hpp"
#include "daemon/protocol.hpp"
#include "integration/daemon_process.hpp"
#include "skills/sandbox_spec.hpp"
#include "support/loopback.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout {
namespace {

using testing::DaemonProcess;
using testing::exchange;
using testing::user_input;
using testing::WireClient;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Each rule's trigger word appears in one test's input only. The blocked
// command would delete only a folder of the test's own workspace (HOME of
// commands) if a gate ever let it through.
constexpr std::string_view kScript = R"(rules:
  - match: '(?i)\bhello\b'
    reply: "Hello! How can I help?"
  - match: 'naïve'
    reply: "Déjà vu: a naïve café ☕"
  - match: 'disk'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "rm -rf ~/scratch" :EXPLANATION "Freeing space on the disk."))'
  - match: 'greet the operator'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "echo approved-run" :EXPLANATION "Printing a greeting."))'
  - match: 'take your time'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "sleep 5; echo slow-run" :EXPLANATION "A slow greeting."))'
  - match: 'slowly'
    reply: "Finally, the slow answer."
    delay_ms: 3000
  - match: 'streamed'
    reply: "An answer that arrives in several pieces, one after another."
    stream: true
)";

DaemonProcess::Options options(std::vector<std::string> extra_args = {}) {
  return DaemonProcess::Options{std::string(kScript), std::move(extra_args), {}, false, {}};
}

// Asks the model, on a connection of its own, for a harmless shell command
// (the scripted model's "greet the operator"): every frame up to the answer
// to `id`, printed one a line: what the user is told.
std::string ask_greeting(const DaemonProcess& daemon, std::string_view id) {
  return testing::ask(daemon, "greet the operator", id);
}

// A fresh connection's health check: the daemon still serves.
void expect_healthy_service(const DaemonProcess& daemon) {
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  const Value health = client.request("(:TYPE :HEALTH-CHECK)");
  INFO(to_sexp(health));
  CHECK(is_health_response(health));
}

Value operator_request(WireClient& client, std::string_view command_and_args) {
  client.send("(:TYPE :OPERATOR :COMMAND " + std::string(command_and_args) + ")");
  return client.expect_frame();
}

// Asks STATUS over the Unix socket until `done(response)` or the deadline.
template <class Done>
bool poll_status(const DaemonProcess& daemon, Done done, std::string_view command = ":STATUS") {
  WireClient client = WireClient::local(daemon.socket_path());
  client.expect_handshake();
  const auto deadline = Clock::now() + testing::kProcessWait;
  while (Clock::now() < deadline) {
    const Value response = operator_request(client, command);
    REQUIRE(is_ok_response(response));
    if (done(response)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

bool has_skill(const Value& response, std::string_view name) {
  for (const Value& skill : response.path({"PAYLOAD", "SKILLS"}).items()) {
    if (skill.at("NAME").text() == name && skill.at("STATE").is_keyword("LOADED")) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("the daemon greets on TCP and on its 0600 Unix socket and reports itself healthy", "[integration]") {
  DaemonProcess daemon(options());

  struct stat info {};
  REQUIRE(::stat(daemon.socket_path().c_str(), &info) == 0);
  CHECK(S_ISSOCK(info.st_mode));
  CHECK((info.st_mode & 0777) == 0600);
  REQUIRE(::stat((daemon.state_dir() / "token").c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);
  CHECK(daemon.token().size() == 64);

  SECTION("over TCP") {
    WireClient client = WireClient::tcp(daemon.port());
    const Value hello = client.expect_handshake();
    CHECK(hello.path({"PAYLOAD", "VERSION"}).is_string());
    const Value health = client.request("(:TYPE :HEALTH-CHECK)");
    INFO(to_sexp(health) << "\n" << daemon.log());
    CHECK(health.at("STATUS").is_keyword("HEALTHY"));
    CHECK(health.at("CHECKED-P").is_true());
  }
  SECTION("over the Unix socket") {
    WireClient client = WireClient::local(daemon.socket_path());
    client.expect_handshake();
    CHECK(client.request("(:TYPE :HEALTH-CHECK)").at("STATUS").is_keyword("HEALTHY"));
  }
}

TEST_CASE("a chat goes through the scripted model and comes back with its gate trace", "[integration]") {
  DaemonProcess daemon(options());
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  client.send(user_input("hello there", "r-1", daemon.token()));

  const Value reply = client.expect_frame();
  INFO(to_sexp(reply) << "\n" << daemon.log());
  CHECK(reply.path({"PAYLOAD", "TEXT"}).text() == "Hello! How can I help?");
  const Value& trace = reply.at("GATE-TRACE");
  REQUIRE(trace.is_list());
  CHECK(trace.size() >= 2);

  const Value done = client.expect_frame();
  INFO(to_sexp(done));
  CHECK(is_ok_response(done));
  CHECK(done.at("REQUEST-ID").text() == "r-1");
  CHECK(done.path({"PAYLOAD", "STOPPED-BY"}).is_keyword("DONE"));
  CHECK(done.path({"PAYLOAD", "CYCLES"}).as_integer() == 1);

  SECTION("and without a request id the reply alone comes back, on the Unix socket too") {
    WireClient local = WireClient::local(daemon.socket_path());
    local.expect_handshake();
    local.send(user_input("hello again"));
    CHECK(local.expect_frame().path({"PAYLOAD", "TEXT"}).text() == "Hello! How can I help?");
    // The next request is answered after it: nothing else was queued in between.
    CHECK(is_health_response(local.request("(:TYPE :HEALTH-CHECK)")));
  }
  SECTION("streamed replies arrive as chunks before the final frame") {
    client.send(user_input("a streamed answer please", "r-2", daemon.token()));
    std::string streamed;
    Value frame = client.expect_frame();
    while (is_stream_chunk(frame)) {
      streamed += frame.path({"PAYLOAD", "TEXT"}).text();
      frame = client.expect_frame();
    }
    INFO(to_sexp(frame));
    CHECK(streamed == "An answer that arrives in several pieces, one after another.");
    CHECK(frame.path({"PAYLOAD", "TEXT"}).text() == streamed);
    CHECK(client.expect_frame().at("REQUEST-ID").text() == "r-2");
  }
}

TEST_CASE("a destructive shell command from the model is blocked and the user sees why", "[integration]") {
  DaemonProcess daemon(options());
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  client.send(user_input("my disk is full", "r-3", daemon.token()));

  const Value rejection = client.expect_frame();
  const std::string printed = to_sexp(rejection);
  INFO(printed << "\n" << daemon.log());
  CHECK(rejection.at("TYPE").is_keyword("LOG"));
  CHECK(printed.find("rm -rf") == std::string::npos);       // the user sees the rejection, not the command
  CHECK(printed.find("shell-guard") != std::string::npos);  // the gate that blocked it, in the trace
  const Value done = client.expect_frame();
  CHECK(done.at("REQUEST-ID").text() == "r-3");
  CHECK(daemon.wait_for_log("proposal rejected"));
}

TEST_CASE("every malformed frame gets an error frame and closes only its own connection", "[integration]") {
  DaemonProcess daemon(options({"--max-frame", "1024"}));
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  std::string expected_code = "BAD-FRAME";

  SECTION("a prefix that is not hexadecimal") { client.send_raw("zz0010(:TYPE :HEALTH-CHECK)"); }
  SECTION("an announced length over the limit") {
    client.send_raw("000401");  // 1025 code points, one over --max-frame
    expected_code = "FRAME-TOO-LARGE";
  }
  SECTION("a payload cut short by the end of the stream") {
    client.send_raw("000040(:TYPE :HEALTH");
    client.shutdown_write();
  }
  SECTION("a read-time evaluation") { client.send_raw("00000A#.(launch)"); }
  SECTION("invalid UTF-8") { client.send_raw(std::string("000004(\"\xff\")", 10)); }

  const Value error = client.expect_frame();
  INFO(to_sexp(error));
  CHECK(is_error_response(error));
  CHECK(error_response_code(error) == expected_code);
  CHECK_FALSE(client.read_frame().has_value());  // then the daemon closes
  expect_healthy_service(daemon);
}

TEST_CASE("non-ASCII text is counted in code points both ways", "[integration]") {
  DaemonProcess daemon(options());
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();

  // 32 code points, 34 bytes: a byte count would leave the daemon waiting.
  const std::string payload = "(:TYPE :HEALTH-CHECK :NOTE \"ïé\")";
  REQUIRE(payload.size() == 34);
  client.send_raw("000020" + payload);
  CHECK(is_health_response(client.expect_frame()));

  client.send(user_input("a naïve question", "r-4", daemon.token()));
  const Value reply = client.expect_frame();
  INFO(to_sexp(reply));
  CHECK(reply.path({"PAYLOAD", "TEXT"}).text() == "Déjà vu: a naïve café ☕");
}

TEST_CASE("a thousand connections open and close and the daemon keeps serving", "[integration]") {
  DaemonProcess daemon(options());
  for (int i = 0; i < 1000; ++i) {
    WireClient client = i % 2 == 0 ? WireClient::tcp(daemon.port()) : WireClient::local(daemon.socket_path());
    client.expect_handshake();
  }
  // Only the status connection is left once the daemon has seen every close.
  CHECK(poll_status(daemon, [](const Value& status) {
    return status.path({"PAYLOAD", "CONNECTIONS"}).as_integer() == 1;
  }));
  expect_healthy_service(daemon);
}

TEST_CASE("operator commands over TCP need the token and on the Unix socket need none", "[integration]") {
  DaemonProcess daemon(options());

  SECTION("refused without the token or with a wrong one") {
    WireClient client = WireClient::tcp(daemon.port());
    client.expect_handshake();
    Value refused = operator_request(client, ":STATUS :REQUEST-ID \"op-1\"");
    INFO(to_sexp(refused));
    CHECK(error_response_code(refused) == "UNAUTHORIZED");
    CHECK(refused.at("REQUEST-ID").text() == "op-1");
    refused = operator_request(client, ":STATUS :AUTH \"0123456789abcdef0123456789abcdef\"");
    CHECK(error_response_code(refused) == "UNAUTHORIZED");
    // The connection still serves other requests.
    CHECK(is_health_response(client.request("(:TYPE :HEALTH-CHECK)")));
  }
  SECTION("accepted with the token") {
    WireClient client = WireClient::tcp(daemon.port());
    client.expect_handshake();
    const Value status = operator_request(client, ":STATUS :AUTH \"" + daemon.token() + "\"");
    INFO(to_sexp(status));
    REQUIRE(is_ok_response(status));
    CHECK(status.path({"PAYLOAD", "HEALTH"}).is_keyword("HEALTHY"));
    CHECK(status.path({"PAYLOAD", "SKILLS"}).size() == 8);
    CHECK(status.path({"PAYLOAD", "VERSION"}).is_string());
  }
  SECTION("accepted on the Unix socket, with the listed commands") {
    WireClient client = WireClient::local(daemon.socket_path());
    client.expect_handshake();
    const Value skills = operator_request(client, ":SKILLS");
    INFO(to_sexp(skills));
    REQUIRE(is_ok_response(skills));
    CHECK(has_skill(skills, "shell-guard"));
    const Value history = operator_request(client, ":HISTORY :LIMIT 3");
    CHECK(history.path({"PAYLOAD", "CHANGES"}).size() == 3);
    CHECK(is_ok_response(operator_request(client, ":APPROVALS")));
    CHECK(error_response_code(operator_request(client, ":UNLOAD :NAME \"no-such-skill\"")) == "NOT-FOUND");
    CHECK(error_response_code(operator_request(client, ":APPROVE :TOKEN \"00000000000000000000000000000000\"")) ==
          "NOT-FOUND");
    CHECK(error_response_code(operator_request(client, ":FROBNICATE")) == "BAD-REQUEST");
    CHECK(error_response_code(operator_request(client, ":RELOAD")) == "BAD-REQUEST");
  }
}

TEST_CASE("SIGTERM lets the request in flight finish, then the daemon exits 0", "[integration]") {
  DaemonProcess daemon(options());
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  client.send(user_input("answer slowly", "r-5", daemon.token()));
  REQUIRE(poll_status(daemon, [](const Value& status) {
    return status.path({"PAYLOAD", "IN-FLIGHT"}).as_integer() >= 1;
  }));
  // In flight is not yet in the model call: a stop before the call begins
  // cancels it. Logged once the call is registered, where the scripted
  // provider (which cannot stop) answers whatever the stop.
  REQUIRE(daemon.wait_for_log("PROBABILISTIC: Attempting backend scripted"));

  daemon.signal(SIGTERM);
  const Value reply = client.expect_frame();
  INFO(to_sexp(reply) << "\n" << daemon.log());
  CHECK(reply.path({"PAYLOAD", "TEXT"}).text() == "Finally, the slow answer.");
  CHECK(client.expect_frame().at("REQUEST-ID").text() == "r-5");
  CHECK(daemon.wait_exit() == 0);
  CHECK_FALSE(std::filesystem::exists(daemon.socket_path()));
  CHECK(daemon.log().find("SHUTDOWN: SIGTERM received") != std::string::npos);
}

TEST_CASE("what the daemon perceived is in its memory file once SIGTERM has stopped it", "[integration]") {
  DaemonProcess daemon(options());
  const std::filesystem::path memory_file = daemon.state_dir() / "memory.sexp";
  WireClient client = WireClient::local(daemon.socket_path());
  client.expect_handshake();
  // A buffer update is ingested into memory (seed C2); the exchange ends with its response.
  client.send(
      "(:TYPE :EVENT :META (:SOURCE :TUI) :PAYLOAD (:SENSOR :BUFFER-UPDATE :AST (:TYPE :HEADLINE :PROPERTIES "
      "(:ID \"note-1\" :TITLE \"Water the ficus on Tuesdays\"))) :REQUEST-ID \"m1\")");
  for (;;) {
    const Value frame = client.expect_frame();
    if (frame.at("REQUEST-ID").text() == "m1") break;
  }
  CHECK_FALSE(std::filesystem::exists(memory_file));  // not before the stop (the auto-save is minutes away)

  daemon.signal(SIGTERM);
  CHECK(daemon.wait_exit() == 0);
  const std::string saved = testing::read_text_file(memory_file);
  INFO(daemon.log());
  CHECK(saved.find("Water the ficus on Tuesdays") != std::string::npos);
  CHECK(daemon.log().find("shutdown: memory saved to " + memory_file.string()) != std::string::npos);
}

TEST_CASE("an operator's SHUTDOWN stops the daemon like SIGTERM", "[integration]") {
  DaemonProcess daemon(options());
  WireClient client = WireClient::local(daemon.socket_path());
  client.expect_handshake();
  const Value response = operator_request(client, ":SHUTDOWN :REQUEST-ID \"bye\"");
  CHECK(is_ok_response(response));
  CHECK(response.at("REQUEST-ID").text() == "bye");
  CHECK(daemon.wait_exit() == 0);
}

TEST_CASE("the :INTERRUPT sensor shuts the daemon down, and over TCP needs the token", "[integration]") {
  DaemonProcess daemon(options());
  const char* interrupt = "(:TYPE :EVENT :META (:SOURCE :TUI) :PAYLOAD (:SENSOR :INTERRUPT) :REQUEST-ID \"int-1\")";

  WireClient tcp = WireClient::tcp(daemon.port());
  tcp.expect_handshake();
  tcp.send(interrupt);
  const Value refused = tcp.expect_frame();
  INFO(to_sexp(refused) << "\n" << daemon.log());
  CHECK(error_response_code(refused) == "UNAUTHORIZED");
  CHECK(refused.at("REQUEST-ID").text() == "int-1");
  CHECK(is_health_response(tcp.request("(:TYPE :HEALTH-CHECK)")));  // still serving

  WireClient local = WireClient::local(daemon.socket_path());
  local.expect_handshake();
  local.send(interrupt);
  CHECK(daemon.wait_exit() == 0);
  CHECK(daemon.log().find("SHUTDOWN: Interrupt flag set. Saving memory...") != std::string::npos);
}

TEST_CASE("an action held for approval runs once when an operator approves it, also after a restart", "[integration]") {
  // The dispatcher holds every shell command for a human.
  DaemonProcess first(options());
  const std::string token = testing::ask_for_approval(first, "greet the operator", "g1");
  first.signal(SIGTERM);
  REQUIRE(first.wait_exit() == 0);

  DaemonProcess::Options restart = options();
  restart.state_from = first.state_dir();
  DaemonProcess second(std::move(restart));
  WireClient client = WireClient::local(second.socket_path());
  client.expect_handshake();
  const Value approved = operator_request(client, ":APPROVE :TOKEN \"" + token + "\"");
  INFO(to_sexp(approved) << "\n" << second.log());
  REQUIRE(is_ok_response(approved));
  CHECK(to_sexp(approved).find("approved-run") != std::string::npos);  // the command's output
  const Value again = operator_request(client, ":APPROVE :TOKEN \"" + token + "\"");
  CHECK(error_response_code(again) == "REFUSED");
  CHECK(to_sexp(again).find("already approved") != std::string::npos);
}

namespace {

// What the daemon answered chats that each ask for a shell command (held for approval).
struct ApprovalFlood {
  int held = 0;                 // approval notices
  int refused_per_session = 0;  // refused: the session's bound
  int refused_in_all = 0;       // refused: the daemon's bound
};

// Sends `count` chats in `session` on `client`, each with a :REQUEST-ID.
void send_chats(WireClient& client, const std::string& session, int first, int count) {
  for (int i = first; i < first + count; ++i) {
    client.send("(:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID \"" + session +
                "\") :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"greet the operator\") :REQUEST-ID \"" + session + "-" +
                std::to_string(i) + "\")");
  }
}

// Reads the answers to `count` chats, counting what they say.
void read_answers(WireClient& client, int count, ApprovalFlood& seen) {
  for (int ended = 0; ended < count;) {
    const Value frame = client.expect_frame();
    if (message_type(frame) == "RESPONSE") {
      ++ended;
    } else if (frame.path({"PAYLOAD", "SENSOR"}).is_keyword("APPROVAL-REQUIRED")) {
      ++seen.held;
    } else if (const Value& text = frame.path({"PAYLOAD", "TEXT"}); text.is_string()) {
      if (text.text().find("(--max-pending-approvals-per-session)") != std::string_view::npos) {
        ++seen.refused_per_session;
      } else if (text.text().find("(--max-pending-approvals)") != std::string_view::npos) {
        ++seen.refused_in_all;
      }
    }
  }
}

}  // namespace

TEST_CASE("a flood of approval requests is bounded, listed page by page, and denied by session", "[integration]") {
  // The issue's figure: 5,000 requests against the default bounds (1,000 in
  // all, 20 per session). Four connections send them in windows.
  DaemonProcess daemon(options());
  const auto env = testing::hermetic_env(daemon.dir());
  const std::string socket = daemon.socket_path().string();
  const auto started = Clock::now();

  // One session alone first: exactly its bound is held, the rest refused for it.
  ApprovalFlood flood;
  {
    WireClient client = WireClient::local(daemon.socket_path());
    client.expect_handshake();
    send_chats(client, "flood", 0, 50);
    read_answers(client, 50, flood);
  }
  CHECK(flood.held == 20);
  CHECK(flood.refused_per_session == 30);

  // Then 99 sessions of 50 requests each, on four connections the daemon
  // serves at once (one thread of the test feeds them all, in windows: Catch2
  // asserts on one thread only), until the daemon's bound is reached.
  constexpr int kConnections = 4;
  constexpr int kWindow = 25;
  std::vector<WireClient> clients;
  for (int c = 0; c < kConnections; ++c) {
    clients.push_back(WireClient::local(daemon.socket_path()));
    clients.back().expect_handshake();
  }
  ApprovalFlood many;
  for (int session = 0; session < 99; session += kConnections) {
    for (int first = 0; first < 50; first += kWindow) {
      for (int c = 0; c < kConnections && session + c < 99; ++c) {
        send_chats(clients[static_cast<std::size_t>(c)], "s" + std::to_string(session + c), first, kWindow);
      }
      for (int c = 0; c < kConnections && session + c < 99; ++c) {
        read_answers(clients[static_cast<std::size_t>(c)], kWindow, many);
      }
    }
  }
  INFO("flood took " << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count() << " ms");
  CHECK(many.held == 980);
  CHECK(many.refused_per_session + many.refused_in_all == 4950 - 980);
  CHECK(many.refused_in_all > 0);

  auto status = testing::run_passepartout({"status", "--json", "--socket", socket}, env);
  REQUIRE(status.exit_status == 0);
  auto document = nlohmann::json::parse(status.out);
  CHECK(document["pending_approvals"] == 1000);
  CHECK(document["approvals_refused"] == 4000);

  // The default page answers whatever is pending, and says how to go on.
  auto listed = testing::run_passepartout({"approvals", "list", "--socket", socket}, env);
  REQUIRE(listed.exit_status == 0);
  CHECK(listed.out.rfind("showing 1-100 of 1000 pending (newest first); next: --offset 100\n", 0) == 0);

  // Every page together: each pending approval once, none past its session's bound.
  std::set<std::string> tokens;
  std::map<std::string, int> per_session;
  std::size_t listed_count = 0;
  for (int offset = 0;; offset += 300) {
    auto page = testing::run_passepartout(
        {"approvals", "list", "--json", "--limit", "300", "--offset", std::to_string(offset), "--socket", socket}, env);
    REQUIRE(page.exit_status == 0);
    const auto json = nlohmann::json::parse(page.out);
    CHECK(json["total"] == 1000);
    if (json["approvals"].empty()) break;
    for (const auto& approval : json["approvals"]) {
      tokens.insert(approval["token"].get<std::string>());
      ++per_session[approval["session_id"].get<std::string>()];
      ++listed_count;
    }
  }
  CHECK(listed_count == 1000);
  CHECK(tokens.size() == 1000);
  CHECK(per_session["flood"] == 20);
  CHECK(std::all_of(per_session.begin(), per_session.end(), [](const auto& entry) { return entry.second <= 20; }));

  auto denied = testing::run_passepartout({"approvals", "deny", "--all-from", "flood", "--socket", socket}, env);
  CHECK(denied.exit_status == 0);
  CHECK(denied.out == "denied 20 pending approvals of session 'flood'\n");
  auto again = testing::run_passepartout({"approvals", "deny", "--all-from", "flood", "--socket", socket}, env);
  CHECK(again.exit_status == 0);
  CHECK(again.out == "no pending approvals of session 'flood'\n");
  status = testing::run_passepartout({"status", "--json", "--socket", socket}, env);
  CHECK(nlohmann::json::parse(status.out)["pending_approvals"] == 980);
  // No bound on the whole run's time: 1,000 approvals are 1,000 synced
  // writes, and on a busy or sanitized machine those take what they take.
  // Every wait above is bounded (WireClient, run_passepartout).
}

TEST_CASE("an approved run the daemon died during reads as interrupted once it is back", "[integration]") {
  std::string token;
  DaemonProcess first(options());
  WireClient client = WireClient::local(first.socket_path());
  client.expect_handshake();
  client.send(user_input("take your time", "t1"));
  for (;;) {
    const Value frame = client.expect_frame();
    if (frame.path({"PAYLOAD", "SENSOR"}).is_keyword("APPROVAL-REQUIRED")) {
      token = std::string(frame.path({"PAYLOAD", "TOKEN"}).text());
    }
    if (frame.at("REQUEST-ID").text() == "t1") break;
  }
  REQUIRE(token.size() == 32);
  client.send("(:TYPE :OPERATOR :COMMAND :APPROVE :TOKEN \"" + token + "\")");  // its answer never comes
  // Killed once the run is recorded as started: the command sleeps for 5 s.
  REQUIRE(poll_status(
      first,
      [](const Value& shown) {
        return shown.path({"PAYLOAD", "APPROVAL", "RUN"}).is_keyword("RUNNING");
      },
      ":APPROVAL :TOKEN \"" + token + "\""));
  first.signal(SIGKILL);
  CHECK_FALSE(first.wait_exit().has_value());

  DaemonProcess::Options restart = options();
  restart.state_from = first.state_dir();
  DaemonProcess second(std::move(restart));
  CHECK(second.log().find("1 approved action was still running when the daemon stopped; recorded as interrupted") !=
        std::string::npos);
  const auto shown = testing::run_passepartout({"approvals", "show", token, "--socket", second.socket_path().string()},
                                               testing::hermetic_env(second.dir()));
  INFO(shown.out << shown.err);
  CHECK(shown.exit_status == 0);
  CHECK(shown.out.rfind("Approval " + token + ": approved\n", 0) == 0);
  CHECK(shown.out.find("    run:      interrupted: the daemon stopped while the action ran") != std::string::npos);
}

TEST_CASE("RESCAN and SIGHUP apply what changed in the manifest folder", "[integration]") {
  DaemonProcess::Options opts = options();
  opts.copy_manifests = true;
  DaemonProcess daemon(std::move(opts));
  const auto manifest = daemon.manifest_dir() / "protocol-validator.yaml";
  const auto aside = daemon.dir() / "protocol-validator.yaml";
  std::filesystem::rename(manifest, aside);

  WireClient client = WireClient::local(daemon.socket_path());
  client.expect_handshake();
  const Value rescanned = operator_request(client, ":RESCAN");
  INFO(to_sexp(rescanned));
  REQUIRE(is_ok_response(rescanned));
  const Value& changes = rescanned.path({"PAYLOAD", "CHANGES"});
  REQUIRE(changes.size() == 1);
  CHECK(changes.items()[0].at("KIND").text() == "remove");
  CHECK(changes.items()[0].at("SKILL").text() == "protocol-validator");
  CHECK_FALSE(has_skill(operator_request(client, ":SKILLS"), "protocol-validator"));

  std::filesystem::rename(aside, manifest);
  daemon.signal(SIGHUP);
  CHECK(poll_status(
      daemon, [](const Value& skills) { return has_skill(skills, "protocol-validator"); }, ":SKILLS"));
}

// An operator who unloads the shell's guard on a running daemon: refused,
// then forced; the shell then acts on nothing (its command is harmless
// anyway) until the guard is loaded again. The CLI shows it throughout.
TEST_CASE("a running daemon never lets the shell act without its guard", "[integration][guards]") {
  DaemonProcess::Options opts = options();
  opts.copy_manifests = true;
  DaemonProcess daemon(std::move(opts));
  const auto env = testing::hermetic_env(daemon.dir());
  const std::string socket = daemon.socket_path().string();
  WireClient client = WireClient::local(daemon.socket_path());
  client.expect_handshake();

  // Asks the model for a harmless shell command: what the user is told.
  auto ask = [&](std::string_view id) { return ask_greeting(daemon, id); };

  const Value refused = operator_request(client, ":UNLOAD :NAME \"shell-guard\"");
  INFO(to_sexp(refused));
  CHECK(error_response_code(refused) == "REFUSED");
  CHECK(to_sexp(refused).find("guards the actuator :SHELL of 'shell'") != std::string::npos);
  CHECK(ask("before").find("APPROVAL-REQUIRED") != std::string::npos);

  auto unload = testing::run_passepartout({"skills", "unload", "shell-guard", "--socket", socket}, env);
  CHECK(unload.exit_status != 0);
  CHECK(unload.err.find("--force") != std::string::npos);

  auto forced = testing::run_passepartout({"skills", "unload", "shell-guard", "--force", "--socket", socket}, env);
  INFO(forced.out << forced.err);
  CHECK(forced.exit_status == 0);
  CHECK(forced.out.find("force-remove") != std::string::npos);
  CHECK(daemon.wait_for_log("was removed with --force: the actuator :SHELL of 'shell' cannot act"));

  auto listed = testing::run_passepartout({"skills", "list", "--socket", socket}, env);
  INFO(listed.out);
  CHECK(listed.out.find("actuator :SHELL") != std::string::npos);
  CHECK(listed.out.find("REFUSES TO ACT: it is guarded by shell-guard, which is not loaded") != std::string::npos);

  const std::string after = ask("after");
  INFO(after);
  CHECK(after.find(":SHELL is guarded by shell-guard, which is not loaded") != std::string::npos);
  CHECK(after.find(":GATE \"guard-rule\" :VERSION \"host\" :RESULT :FAILED") != std::string::npos);
  CHECK(after.find("APPROVAL-REQUIRED") == std::string::npos);
  CHECK(daemon.log().find("ACT START") == std::string::npos);

  const Value loaded =
      operator_request(client, ":LOAD :MANIFEST \"" + (daemon.manifest_dir() / "shell-guard.yaml").string() + "\"");
  INFO(to_sexp(loaded));
  CHECK(is_ok_response(loaded));
  CHECK(ask("again").find("APPROVAL-REQUIRED") != std::string::npos);
}

TEST_CASE("a failed skills load keeps the daemon DEGRADED until the operator unloads the disabled skill",
          "[integration][operator]") {
  DaemonProcess daemon(options());
  const std::filesystem::path broken = daemon.dir() / "broken.yaml";
  std::ofstream(broken) << "name: broken\nversion: 1.2.0\nlibrary: libno-such-skill.so\nabi: 1\n";
  WireClient client = WireClient::local(daemon.socket_path());
  client.expect_handshake();
  auto health = [&] { return operator_request(client, ":STATUS").path({"PAYLOAD", "HEALTH"}); };
  REQUIRE(health().is_keyword("HEALTHY"));

  const Value loaded = operator_request(client, ":LOAD :MANIFEST \"" + broken.string() + "\"");
  INFO(to_sexp(loaded));
  CHECK(error_response_code(loaded) == "REFUSED");
  CHECK(health().is_keyword("DEGRADED"));

  const Value unloaded = operator_request(client, ":UNLOAD :NAME \"broken\"");
  INFO(to_sexp(unloaded));
  REQUIRE(is_ok_response(unloaded));
  CHECK(health().is_keyword("HEALTHY"));
  CHECK(error_response_code(operator_request(client, ":UNLOAD :NAME \"broken\"")) == "NOT-FOUND");

  // Audited, with who asked: this process, over the Unix socket.
  const Value history = operator_request(client, ":HISTORY :LIMIT 1");
  const Value& change = history.path({"PAYLOAD", "CHANGES"}).items()[0];
  CHECK(change.at("KIND").text() == "remove");
  CHECK(change.at("SKILL").text() == "broken");
  CHECK(change.at("OUTCOME").text() == "ok");
  CHECK(change.at("FROM-VERSION").text() == "1.2.0");
  CHECK(change.at("REQUESTER").text() ==
        "wire uid=" + std::to_string(::getuid()) + " pid=" + std::to_string(::getpid()));
}

TEST_CASE("a swap of settings alone is told apart in the history, with what changed and who asked",
          "[integration][operator]") {
  DaemonProcess::Options opts = options();
  opts.copy_manifests = true;
  DaemonProcess daemon(std::move(opts));
  const auto manifest = daemon.manifest_dir() / "protocol-validator.yaml";
  std::string text = testing::read_text_file(manifest);
  text.replace(text.find("priority: 95"), 12, "priority: 96");
  std::ofstream(manifest) << text;

  // Over TCP: the requester names the token by its file and fingerprint, never by itself.
  WireClient tcp = WireClient::tcp(daemon.port());
  tcp.expect_handshake();
  const Value reloaded = operator_request(tcp, ":RELOAD :NAME \"protocol-validator\" :AUTH \"" + daemon.token() + "\"");
  INFO(to_sexp(reloaded));
  REQUIRE(is_ok_response(reloaded));
  const Value& change = reloaded.path({"PAYLOAD", "CHANGES"}).items()[0];
  CHECK(change.at("FROM-SHA256").text() == change.at("TO-SHA256").text());
  CHECK(change.at("FROM-VERSION").text() == change.at("TO-VERSION").text());
  CHECK(change.at("FROM-FINGERPRINT").text().size() == 12);
  CHECK(change.at("FROM-FINGERPRINT").text() != change.at("TO-FINGERPRINT").text());
  CHECK(change.at("DETAILS").text() == "priority: 95 -> 96");
  CHECK(change.at("STATE-HANDOVER").is_string());
  const std::string requester(change.at("REQUESTER").text());
  CHECK(requester.starts_with("wire token=token#"));
  CHECK(requester.find(" peer=127.0.0.1:") != std::string::npos);
  CHECK(requester.find(daemon.token()) == std::string::npos);

  // The CLI asks the daemon, and shows the same.
  const auto env = testing::hermetic_env(daemon.dir());
  auto listed = testing::run_passepartout(
      {"skills", "history", "--skill", "protocol-validator", "--socket", daemon.socket_path().string()}, env);
  INFO(listed.out << listed.err);
  CHECK(listed.exit_status == 0);
  CHECK(listed.out.find("changed: priority: 95 -> 96") != std::string::npos);
  CHECK(listed.out.find(" cfg ") != std::string::npos);
  CHECK(listed.err.empty());
  auto json = testing::run_passepartout(
      {"skills", "history", "--json", "--limit", "1", "--socket", daemon.socket_path().string()}, env);
  INFO(json.out << json.err);
  REQUIRE(json.exit_status == 0);
  const auto document = nlohmann::json::parse(json.out);
  CHECK(document.at("source") == "daemon " + daemon.socket_path().string());
  REQUIRE(document.at("changes").size() == 1);
  CHECK(document.at("changes").at(0).at("details") == "priority: 95 -> 96");
}

TEST_CASE("skills history without a daemon reads the default state folder and says so", "[integration][operator]") {
  testing::TempDir home;
  const auto env = testing::hermetic_env(home.path());
  const std::string nowhere = (home.path() / "no-daemon.sock").string();
  auto text = testing::run_passepartout({"skills", "history", "--socket", nowhere}, env);
  INFO(text.out << text.err);
  CHECK(text.exit_status == 0);
  CHECK(text.err.find("no daemon answered at " + nowhere) != std::string::npos);
  CHECK(text.err.find((home.path() / ".local/state/passepartout/audit.sqlite3").string()) != std::string::npos);
  CHECK(text.out.find("No skill changes recorded yet") != std::string::npos);
  auto json = testing::run_passepartout({"skills", "history", "--json", "--socket", nowhere}, env);
  INFO(json.out << json.err);
  REQUIRE(json.exit_status == 0);
  CHECK(nlohmann::json::parse(json.out).at("source") ==
        "folder " + (home.path() / ".local/state/passepartout").string());
}

TEST_CASE("with --log-json, gate decisions carry skill, version, verdict, session and decision id as keys",
          "[integration][operator]") {
  DaemonProcess daemon(options({"--log-json"}));
  WireClient client = WireClient::local(daemon.socket_path());
  client.expect_handshake();
  client.send(user_input("my disk is full", "d1"));
  for (;;) {
    if (client.expect_frame().at("REQUEST-ID").text() == "d1") break;
  }
  REQUIRE(daemon.wait_for_log("GATE DECISION"));
  bool found = false;
  std::string decision_id;
  std::istringstream lines(daemon.log());
  for (std::string line; std::getline(lines, line);) {
    if (line.find("GATE DECISION") == std::string::npos || line.find("blocked") == std::string::npos) continue;
    const auto object = nlohmann::json::parse(line);
    INFO(line);
    CHECK(object.at("component") == "gates");
    CHECK(object.at("skill").is_string());
    CHECK(object.at("version").is_string());
    CHECK(object.at("verdict") == "blocked");
    CHECK(object.at("session").is_string());
    decision_id = object.at("decision").get<std::string>();
    found = true;
  }
  REQUIRE(found);
  // The id names the decision log's record of the same verification, once
  // the writer (a tenth of a second at most) has put it on disk.
  const auto env = testing::hermetic_env(daemon.dir());
  bool recorded = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!recorded && std::chrono::steady_clock::now() < deadline) {
    auto listed = testing::run_passepartout(
        {"decisions", "--state-dir", daemon.state_dir().string(), "--verdict", "blocked", "--json"}, env);
    INFO(listed.out << listed.err);
    REQUIRE(listed.exit_status == 0);
    // Parsed into a variable: a range-for over a member of a temporary would read a destroyed object.
    const nlohmann::json parsed = nlohmann::json::parse(listed.out);
    for (const auto& record : parsed.at("decisions")) recorded = recorded || record.at("id") == decision_id;
  }
  INFO(decision_id);
  CHECK(recorded);
}

TEST_CASE("a daemon started as root says so in its log, and its shell runs commands as nobody", "[integration]") {
  DaemonProcess daemon(options());
  if (::geteuid() != 0) {
    CHECK(daemon.log().find("running as root") == std::string::npos);
    return;
  }
  CHECK(daemon.wait_for_log("running as root: every skill runs with root's privileges"));
  CHECK(daemon.wait_for_log("sandbox: commands run as nobody (uid 65534) in " +
                            (daemon.state_dir() / "workspace").string()));
}

TEST_CASE("a daemon logs at start which protections a skill process gets on this machine", "[integration]") {
  DaemonProcess daemon(options());
  // The daemon probes the same kernel as this process, as the same user.
  const std::string line = passepartout::describe(passepartout::probe_sandbox());
  INFO(line);
  CHECK(daemon.wait_for_log(line));
}

// A local user without the token asks for a file of the daemon's workspace
// with a raw tool action: refused over TCP; with the token, served.
TEST_CASE("over TCP, a raw action without the token is refused and with it is served", "[integration][auth]") {
  DaemonProcess daemon(options());
  std::ofstream(daemon.state_dir() / "workspace" / "notes.txt") << "the daemon user's notes";
  const std::string read =
      "(:TYPE :REQUEST :TARGET :TOOL :REQUEST-ID \"f\" :META (:SOURCE :TUI) :PAYLOAD (:TOOL \"read-file\" "
      ":ARGS (:FILEPATH \"notes.txt\") :EXPLANATION \"Reading the notes the user asked for.\")";
  WireClient stranger = WireClient::tcp(daemon.port());
  stranger.expect_handshake();
  const std::string refused = exchange(stranger, read + ")", "f");
  INFO(refused);
  CHECK(refused.find(":UNAUTHORIZED") != std::string::npos);
  CHECK(refused.find("the daemon user's notes") == std::string::npos);

  WireClient owner = WireClient::tcp(daemon.port());
  owner.expect_handshake();
  const std::string served = exchange(owner, read + " :AUTH \"" + daemon.token() + "\")", "f");
  INFO(served << daemon.log());
  CHECK(served.find("the daemon user's notes") != std::string::npos);
  expect_healthy_service(daemon);
}

// The seeds' Lisp peers send user input over TCP without a token.
TEST_CASE("a tokenless Lisp-style client is served with --tcp-auth user-input and refused without it",
          "[integration][auth]") {
  SECTION("by default every TCP request needs the token") {
    DaemonProcess daemon(options());
    WireClient lisp = WireClient::tcp(daemon.port());
    lisp.expect_handshake();
    lisp.send(user_input("hello", ""));
    const Value refused = lisp.expect_frame();
    INFO(to_sexp(refused));
    CHECK(error_response_code(refused) == "UNAUTHORIZED");
  }
  SECTION("with --tcp-auth user-input, user input is answered; raw actions and approvals still need it") {
    DaemonProcess daemon(options({"--tcp-auth", "user-input"}));
    CHECK(daemon.wait_for_log("--tcp-auth user-input: any local user may send user input over TCP"));
    WireClient lisp = WireClient::tcp(daemon.port());
    lisp.expect_handshake();
    lisp.send(user_input("hello", ""));  // exactly what a Lisp peer sends: no :REQUEST-ID, no :AUTH
    const Value reply = lisp.expect_frame();
    INFO(to_sexp(reply));
    CHECK(reply.path({"PAYLOAD", "TEXT"}).text() == "Hello! How can I help?");

    const std::string approval = exchange(lisp, user_input("greet the operator", "g"), "g");
    INFO(approval);
    CHECK(approval.find("only an authenticated client may ask for one") != std::string::npos);
    CHECK(approval.find("APPROVAL-REQUIRED") == std::string::npos);
    const Value raw = operator_request(lisp, ":APPROVALS");
    CHECK(error_response_code(raw) == "UNAUTHORIZED");
    lisp.send("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"echo raw\"))");
    CHECK(error_response_code(lisp.expect_frame()) == "UNAUTHORIZED");
    WireClient local = WireClient::local(daemon.socket_path());
    local.expect_handshake();
    const Value pending = operator_request(local, ":APPROVALS");
    CHECK(pending.path({"PAYLOAD", "APPROVALS"}).is_nil());  // none was created
  }
}

TEST_CASE("a client's newline in a keyword stays on one line of the daemon's log", "[integration][auth]") {
  DaemonProcess daemon(options());
  WireClient client = WireClient::local(daemon.socket_path());
  client.expect_handshake();
  client.send(
      "(:TYPE :|EVENT\n2026-01-01T00:00:00.000 info daemon: forged| :REQUEST-ID \"x\" "
      ":PAYLOAD (:SENSOR :HEARTBEAT))");
  for (Value frame = client.expect_frame(); frame.at("REQUEST-ID").text() != "x"; frame = client.expect_frame()) {
  }
  REQUIRE(daemon.wait_for_log("GATE [Perceive]: EVENT\\n2026-01-01T00:00:00.000 "));  // escaped, on its line
  INFO(daemon.log());
  CHECK(daemon.log().find("\n2026-01-01T00:00:00.000") == std::string::npos);  // never a line of its own
}

// What /proc says of a process: resident memory in KiB, open descriptors.
std::size_t rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
  }
  return 0;
}
std::size_t open_descriptors(pid_t pid) {
  const auto folder = "/proc/" + std::to_string(pid) + "/fd";
  return static_cast<std::size_t>(
      std::distance(std::filesystem::directory_iterator(folder), std::filesystem::directory_iterator()));
}

// A loopback connection to `port` that only writes: nothing is ever read.
int raw_connect(std::uint16_t port) {
  const int fd = testing::connect_loopback(port);
  REQUIRE(fd >= 0);
  return fd;
}

TEST_CASE("200 idle TCP connections neither lock the operator out nor outlive the handshake timeout",
          "[integration][limits]") {
  DaemonProcess daemon(
      options({"--max-connections", "150", "--max-connections-per-peer", "1000", "--handshake-timeout", "2"}));
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) idle.push_back(raw_connect(daemon.port()));
  const auto env = testing::hermetic_env(daemon.dir());
  auto status = testing::run_passepartout({"status", "--socket", daemon.socket_path().string()}, env);
  INFO(status.out << status.err);
  CHECK(status.exit_status == 0);
  CHECK(status.out.find("HEALTHY") != std::string::npos);
  CHECK(daemon.wait_for_log("too many TCP connections (the limit is 150)"));
  // The ones admitted say nothing: each is closed once the handshake's 2 s are up.
  CHECK(daemon.wait_for_log("no complete request within 2000 ms of connecting"));
  CHECK(poll_status(daemon, [](const Value& s) { return s.path({"PAYLOAD", "CONNECTIONS"}).as_integer() <= 1; }));
  for (int fd : idle) ::close(fd);
  expect_healthy_service(daemon);
}

TEST_CASE("10,000 quick connections leave the daemon's memory and descriptors where they were",
          "[integration][limits]") {
  DaemonProcess daemon(options({"--max-connections", "64"}));
  expect_healthy_service(daemon);
  const std::size_t rss_before = rss_kib(daemon.pid());
  const std::size_t fds_before = open_descriptors(daemon.pid());
  // Connections opened faster than they are closed, most of them refused.
  std::vector<int> open;
  for (int i = 0; i < 10000; ++i) {
    open.push_back(raw_connect(daemon.port()));
    if (open.size() == 100) {
      for (int fd : open) ::close(fd);
      open.clear();
    }
  }
  for (int fd : open) ::close(fd);
  // The daemon sees the last closes a moment after they are made: until then
  // those connections still count against the limit, so wait for it to catch up.
  CHECK(poll_status(daemon, [](const Value& s) { return s.path({"PAYLOAD", "CONNECTIONS"}).as_integer() <= 1; }));
  expect_healthy_service(daemon);
  const std::size_t rss_after = rss_kib(daemon.pid());
  const std::size_t fds_after = open_descriptors(daemon.pid());
  INFO("RSS " << rss_before << " -> " << rss_after << " KiB; descriptors " << fds_before << " -> " << fds_after);
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer keeps freed memory in quarantine (256 MiB by default):
  // there the resident size says nothing about what the daemon holds.
  static_cast<void>(rss_after);
#else
  CHECK(rss_after < rss_before + 16 * 1024);  // the bound: 16 MiB, whatever was refused
#endif
  CHECK(fds_after <= fds_before + 4);
}

TEST_CASE("32 clients that send large events and never read stay within the reply budget, others are served",
          "[integration][limits]") {
  DaemonProcess daemon(options({"--max-queued-replies", "32", "--max-connections-per-peer", "100"}));
  expect_healthy_service(daemon);
  const std::size_t rss_before = rss_kib(daemon.pid());
  // An event with no action goes back to its source (E2): each one is echoed.
  const std::string event = "(:TYPE :EVENT :META (:SOURCE :TUI) :AUTH \"" + daemon.token() +
                            "\" :PAYLOAD (:SENSOR :NOTE :TEXT \"" + std::string(512 * 1024, 'x') + "\"))";
  const auto message = read_sexp(event);
  REQUIRE(message.has_value());
  const auto encoded = FrameCodec(FrameLimits{kMaxFrameCodePoints, 128, 4096}).encode(*message);
  REQUIRE(encoded.has_value());
  const std::string& frame = *encoded;
  std::vector<int> hogs;
  for (int i = 0; i < 32; ++i) {
    const int fd = raw_connect(daemon.port());
    int small = 4096;  // what the kernel holds for a client that never reads: little
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    timeval timeout{2, 0};  // a send that waits this long: the daemon stopped reading this one
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    hogs.push_back(fd);
  }
  // Whole frames only: a frame cut short would end that connection as malformed instead.
  std::vector<bool> stopped(hogs.size(), false);
  for (int round = 0; round < 40; ++round) {
    for (std::size_t i = 0; i < hogs.size(); ++i) {
      std::string_view rest = frame;
      while (!stopped[i] && !rest.empty()) {
        const ssize_t sent = ::send(hogs[i], rest.data(), rest.size(), MSG_NOSIGNAL);
        if (sent <= 0) {
          stopped[i] = true;
        } else {
          rest.remove_prefix(static_cast<std::size_t>(sent));
        }
      }
    }
  }
  CHECK(daemon.wait_for_log("bytes of unread replies were the most while all connections together held more than"));
  WireClient polite = WireClient::tcp(daemon.port());
  polite.expect_handshake();
  polite.send(user_input("hello", "p", daemon.token()));
  CHECK(polite.expect_frame().path({"PAYLOAD", "TEXT"}).text() == "Hello! How can I help?");
  const std::size_t rss_after = rss_kib(daemon.pid());
  INFO("RSS " << rss_before << " -> " << rss_after << " KiB");
#if !defined(__SANITIZE_ADDRESS__)                   // its quarantine keeps freed memory resident
  CHECK(rss_after < rss_before + (32 + 96) * 1024);  // the budget (32 MiB) plus a stated margin (96 MiB)
#endif
  for (int fd : hogs) ::close(fd);
}

TEST_CASE("skills check shows what each skill offers and its guards, and reports a guard missing from the folder",
          "[integration][guards]") {
  testing::TempDir dir;
  const auto env = testing::hermetic_env(dir.path());
  const auto folder = dir.path() / "manifests";
  std::filesystem::create_directories(folder);
  for (const char* name : {"policy", "shell-guard", "shell", "tool-permissions", "file-tools"}) {
    std::filesystem::copy_file(std::filesystem::path(PP_MANIFEST_DIR) / (std::string(name) + ".yaml"),
                               folder / (std::string(name) + ".yaml"));
  }
  auto whole = testing::run_passepartout({"skills", "check", folder.string(), "--plugins", PP_PLUGIN_DIR}, env);
  INFO(whole.out << whole.err);
  CHECK(whole.exit_status == 0);
  CHECK(whole.out.find("shell 1.0.0 (priority 50); offers the actuator :SHELL, guarded by shell-guard") !=
        std::string::npos);
  CHECK(whole.out.find("offers the tools read-file, write-file,") != std::string::npos);
  CHECK(whole.out.find("list-files, search-files and edit-file, guarded by tool-permissions") != std::string::npos);

  std::filesystem::remove(folder / "shell-guard.yaml");
  auto missing =
      testing::run_passepartout({"skills", "check", folder.string(), "--plugins", PP_PLUGIN_DIR, "--json"}, env);
  INFO(missing.out << missing.err);
  CHECK(missing.exit_status == 1);
  CHECK(missing.out.find("is guarded by 'shell-guard', which is not installed") != std::string::npos);
  CHECK(missing.out.find("\"guarded_by\": [\n") != std::string::npos);  // each loaded skill's guards, in JSON
}

TEST_CASE("skills check prints each skill's config keys, and refuses a manifest config key its skill does not declare",
          "[integration][skills]") {
  testing::TempDir dir;
  const auto env = testing::hermetic_env(dir.path());
  const auto folder = dir.path() / "manifests";
  std::filesystem::create_directories(folder);
  // Every bundled manifest: their config keys must all be ones their skills declare.
  for (const auto& entry : std::filesystem::directory_iterator(PP_MANIFEST_DIR)) {
    std::filesystem::copy_file(entry.path(), folder / entry.path().filename());
  }
  auto text = testing::run_passepartout({"skills", "check", folder.string(), "--plugins", PP_PLUGIN_DIR}, env);
  INFO(text.out << text.err);
  CHECK(text.exit_status == 0);
  CHECK(text.out.find("     config keys:\n       min_explanation_length (integer, default 10): An explanation needs "
                      "more code points than this\n") != std::string::npos);
  CHECK(text.out.find("       workdir (string): Required: the folder commands run in, their HOME\n") !=
        std::string::npos);
  CHECK(text.out.find("config keys: not declared by the skill (any key is accepted, none checked)") !=
        std::string::npos);  // protocol-validator declares none

  auto as_json =
      testing::run_passepartout({"skills", "check", folder.string(), "--plugins", PP_PLUGIN_DIR, "--json"}, env);
  INFO(as_json.out << as_json.err);
  CHECK(as_json.exit_status == 0);
  const auto document = nlohmann::json::parse(as_json.out);
  std::map<std::string, nlohmann::json> keys_of;
  for (const auto& slot : document.at("order")) keys_of[slot.at("name").get<std::string>()] = slot.at("config_keys");
  CHECK(keys_of.at("protocol-validator").is_null());
  const nlohmann::json& policy = keys_of.at("policy");
  REQUIRE(policy.is_array());
  REQUIRE(policy.size() == 1);
  CHECK(policy[0] == nlohmann::json{{"name", "min_explanation_length"},
                                    {"type", "integer"},
                                    {"default", "10"},
                                    {"description", "An explanation needs more code points than this"}});
  CHECK(keys_of.at("shell").size() == 12);

  {
    std::ofstream typo(folder / "policy.yaml", std::ios::app);
    typo << "  min_explanation_lenght: 3\n";  // appended to the config map, which ends the file
  }
  std::ifstream written(folder / "policy.yaml");
  int typo_line = 0;
  std::string line_text;
  for (int line = 1; std::getline(written, line_text); ++line) {
    if (line_text.find("lenght") != std::string::npos) typo_line = line;
  }
  REQUIRE(typo_line > 0);
  auto refused = testing::run_passepartout({"skills", "check", folder.string(), "--plugins", PP_PLUGIN_DIR}, env);
  INFO(refused.out << refused.err);
  CHECK(refused.exit_status == 1);
  CHECK(refused.out.find((folder / "policy.yaml").string() + ":" + std::to_string(typo_line) +
                         ":3: unknown key 'min_explanation_lenght' in 'config' of skill 'policy'; did you mean "
                         "'min_explanation_length'?") != std::string::npos);
}

TEST_CASE("skills check prints what each skill's process is allowed and which protections this machine has",
          "[integration][skills]") {
  testing::TempDir dir;
  const auto env = testing::hermetic_env(dir.path());
  const auto folder = dir.path() / "manifests";
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(std::filesystem::path(PP_MANIFEST_DIR) / "policy.yaml", folder / "policy.yaml");
  {
    std::ofstream sandbox(folder / "policy.yaml", std::ios::app);
    sandbox << "sandbox:\n  files: [/srv/data]\n  network: true\n  memory: 256MiB\n";
  }
  auto text = testing::run_passepartout({"skills", "check", folder.string(), "--plugins", PP_PLUGIN_DIR}, env);
  INFO(text.out << text.err);
  CHECK(text.exit_status == 0);
  CHECK(text.out.find("\nskill sandbox: seccomp ") != std::string::npos);
  CHECK(text.out.find("     sandbox (in a skill process): files: /srv/data (read-only") != std::string::npos);
  CHECK(text.out.find("; network: allowed; processes: denied; memory: ") != std::string::npos);

  auto as_json =
      testing::run_passepartout({"skills", "check", folder.string(), "--plugins", PP_PLUGIN_DIR, "--json"}, env);
  INFO(as_json.out << as_json.err);
  CHECK(as_json.exit_status == 0);
  const auto document = nlohmann::json::parse(as_json.out);
  CHECK(document.at("sandbox_protections").get<std::string>().rfind("skill sandbox: ", 0) == 0);
  REQUIRE(document.at("order").size() == 1);
  const auto& sandbox = document.at("order")[0].at("sandbox");
  CHECK(sandbox.at("files") == nlohmann::json::array({"/srv/data"}));
  CHECK(sandbox.at("network") == true);
  CHECK(sandbox.at("processes") == false);
  CHECK(sandbox.at("memory_bytes") == 268435456);
  CHECK(sandbox.at("open_files") == 64);
  CHECK(sandbox.at("require") == nlohmann::json::array());
}

TEST_CASE("systemd hears READY, WATCHDOG and STOPPING on NOTIFY_SOCKET", "[integration]") {
  testing::TempDir dir;
  const auto path = dir.path() / "notify.sock";
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.native().size());
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  timeval timeout{};
  timeout.tv_sec = testing::kProcessWait.count();
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  auto next = [&] {
    char buffer[512];
    const ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
    REQUIRE(got > 0);
    return std::string(buffer, static_cast<std::size_t>(got));
  };

  DaemonProcess::Options opts = options();
  opts.extra_env = {"NOTIFY_SOCKET=" + path.string(), "WATCHDOG_USEC=200000"};
  DaemonProcess daemon(std::move(opts));
  const std::string ready = next();
  CHECK(ready.find("READY=1") != std::string::npos);
  CHECK(ready.find("STATUS=") != std::string::npos);
  CHECK(next() == "WATCHDOG=1");
  CHECK(next() == "WATCHDOG=1");
  daemon.signal(SIGTERM);
  std::string message;
  do {
    message = next();
  } while (message == "WATCHDOG=1");
  CHECK(message.find("STOPPING=1") != std::string::npos);
  CHECK(daemon.wait_exit() == 0);
  ::close(fd);
}

TEST_CASE("bad settings stop the daemon before it starts, with exit status 2 and the culprit named", "[integration]") {
  testing::TempDir dir;
  const auto env = testing::hermetic_env(dir.path());
  const std::string state = (dir.path() / "state").string();

  SECTION("a flag") {
    auto run = testing::run_passepartout({"daemon", "--state-dir", state, "--port", "http"}, env);
    CHECK(run.exit_status == 2);
    CHECK(run.err.find("--port: 'http' is not a port number") != std::string::npos);
  }
  SECTION("an environment variable") {
    auto with = env;
    with.push_back("HEARTBEAT_INTERVAL=soon");
    auto run = testing::run_passepartout({"daemon", "--state-dir", state}, with);
    CHECK(run.exit_status == 2);
    CHECK(run.err.find("HEARTBEAT_INTERVAL: 'soon'") != std::string::npos);
  }
  SECTION("a config file, by line") {
    const auto config = dir.path() / "daemon.yaml";
    std::ofstream(config) << "port: 0\nprot: 9\n";
    auto run = testing::run_passepartout({"daemon", "--state-dir", state, "--config", config.string()}, env);
    CHECK(run.exit_status == 2);
    CHECK(run.err.find(config.string() + ":2:1: unknown key 'prot'; did you mean 'port'?") != std::string::npos);
  }
  SECTION("a listener beyond loopback that would take tokenless input (refused before anything listens)") {
    auto run = testing::run_passepartout(
        {"daemon", "--state-dir", state, "--listen", "0.0.0.0", "--port", "0", "--tcp-auth", "user-input"}, env);
    CHECK(run.exit_status == 2);
    CHECK(run.err.find("--tcp-auth all") != std::string::npos);
  }
  SECTION("more connections than the descriptor limit can serve") {
    rlimit limit{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
    if (limit.rlim_max >= 100000) {
      WARN("the hard descriptor limit (" << limit.rlim_max << ") serves every --max-connections allowed");
      return;
    }
    const std::string too_many = std::to_string(limit.rlim_max + 1);
    auto run = testing::run_passepartout({"daemon", "--state-dir", state, "--max-connections", too_many}, env);
    CHECK(run.exit_status == 2);
    CHECK(run.err.find("--max-connections " + too_many + " needs about ") != std::string::npos);
    CHECK(run.err.find("descriptors, but the limit is ") != std::string::npos);
  }
  SECTION("an unknown TCP authentication mode") {
    auto run = testing::run_passepartout({"daemon", "--state-dir", state, "--tcp-auth", "none"}, env);
    CHECK(run.exit_status == 2);
    CHECK(run.err.find("--tcp-auth: 'none' is not a TCP authentication mode: all or user-input") != std::string::npos);
  }
  INFO(std::string("state dir ") + state);
}

TEST_CASE("daemon --help explains every flag and the environment", "[integration]") {
  testing::TempDir dir;
  auto run = testing::run_passepartout({"daemon", "--help"}, testing::hermetic_env(dir.path()));
  CHECK(run.exit_status == 0);
  for (std::string_view needle : {"--port",
                                  "--socket",
                                  "--no-tcp",
                                  "--listen",
                                  "--tcp-auth",
                                  "--require-auth",
                                  "--config",
                                  "--script",
                                  "--max-frame",
                                  "--max-connections-per-peer",
                                  "--handshake-timeout",
                                  "--max-queued-replies",
                                  "--workspace",
                                  "--log-json",
                                  "--max-pending-approvals",
                                  "PASSEPARTOUT_MAX_PENDING_APPROVALS_PER_SESSION",
                                  "HEARTBEAT_INTERVAL",
                                  "MEMORY_AUTO_SAVE_INTERVAL",
                                  "DEFAULT_ACTUATOR",
                                  "SILENT_ACTUATORS",
                                  "MEMEX_ASSISTANT",
                                  "CONTEXT_LOG_LIMIT",
                                  "PASSEPARTOUT_PROVIDER",
                                  "NOTIFY_SOCKET",
                                  ".env",
                                  "SIGHUP"}) {
    INFO(needle);
    CHECK(run.out.find(needle) != std::string::npos);
  }
}

}  // namespace passepartout

namespace passepartout {

TEST_CASE("killed with SIGKILL while it records, the daemon leaves every written decision whole", "[integration]") {
  DaemonProcess daemon(options());
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  client.send(user_input("my disk is full", "r-0", daemon.token()));  // shell-guard blocks it
  CHECK(client.expect_frame().at("TYPE").is_keyword("LOG"));
  CHECK(client.expect_frame().at("REQUEST-ID").text() == "r-0");
  // The writer has put it on disk once STATUS counts it.
  CHECK(poll_status(daemon, [](const Value& response) {
    return response.path({"PAYLOAD", "DECISIONS-WRITTEN"}).as_integer() >= 1;
  }));
  // A burst still being recorded when the process dies.
  for (int i = 0; i < 300; ++i) client.send(user_input("hello", "", daemon.token()));
  CHECK(client.expect_frame().path({"PAYLOAD", "TEXT"}).text() == "Hello! How can I help?");
  daemon.signal(SIGKILL);
  CHECK_FALSE(daemon.wait_exit().has_value());  // a signal ended it

  const std::filesystem::path folder = daemon.state_dir() / "decisions";
  const std::string text = testing::read_text_file(folder / "decisions.jsonl");
  REQUIRE_FALSE(text.empty());
  CHECK(text.back() == '\n');
  std::size_t lines = 0;
  bool blocked = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line); ++lines) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    INFO(line);
    REQUIRE_FALSE(record.is_discarded());
    blocked = blocked || (record["outcome"] == "blocked" && record["gates"].back()["name"] == "shell-guard");
  }
  CHECK(lines >= 1);
  CHECK(blocked);

  const auto env = testing::hermetic_env(daemon.dir());
  auto listed = testing::run_passepartout(
      {"decisions", "--state-dir", daemon.state_dir().string(), "--verdict", "blocked", "--json"}, env);
  INFO(listed.out << listed.err);
  CHECK(listed.exit_status == 0);
  CHECK(listed.err.find("malformed") == std::string::npos);
  CHECK(listed.out.find("shell-guard") != std::string::npos);
}

// An operator tries shell-guard with approve_all_shell off as a shadow
// candidate on a running daemon: the user still gets the approval the live
// guard asks for, the candidate's disagreement is counted, and the CLI
// stops it, starts it again and promotes it, every step in the history.
TEST_CASE("a shadow candidate on a running daemon is counted, never applied, stopped and promoted",
          "[integration][shadow]") {
  DaemonProcess::Options opts = options();
  opts.copy_manifests = true;
  DaemonProcess daemon(std::move(opts));
  const auto env = testing::hermetic_env(daemon.dir());
  const std::string socket = daemon.socket_path().string();
  auto ask = [&](std::string_view id) { return ask_greeting(daemon, id); };

  // The candidate: the same guard, with approve_all_shell off, outside the manifest folder.
  std::string yaml;
  {
    std::ifstream in(daemon.manifest_dir() / "shell-guard.yaml");
    std::ostringstream text;
    text << in.rdbuf();
    yaml = text.str();
  }
  const auto at = yaml.find("approve_all_shell: true");
  REQUIRE(at != std::string::npos);
  yaml.replace(at, std::string("approve_all_shell: true").size(), "approve_all_shell: false");
  const std::string candidate = (daemon.dir() / "shell-guard-candidate.yaml").string();
  std::ofstream(candidate) << yaml;

  auto run = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--socket", socket});
    return testing::run_passepartout(args, env);
  };
  auto started = run({"skills", "shadow", candidate});
  INFO(started.out << started.err);
  REQUIRE(started.exit_status == 0);
  CHECK(started.out.find("shadow  shell-guard") != std::string::npos);

  const std::string reply = ask("shadowed");
  INFO(reply);
  CHECK(reply.find("APPROVAL-REQUIRED") != std::string::npos);  // the live guard decides

  auto status = run({"skills", "shadow", "status", "shell-guard", "--json"});
  INFO(status.out << status.err);
  REQUIRE(status.exit_status == 0);
  const auto document = nlohmann::json::parse(status.out);
  REQUIRE(document["shadows"].size() == 1);
  CHECK(document["shadows"][0]["seen"].get<int>() >= 1);
  CHECK(document["shadows"][0]["candidate_passes"].get<int>() >= 1);  // it would not have asked
  CHECK(document["shadows"][0]["latest"][0]["live"] == "approval");
  auto overview = run({"status"});
  CHECK(overview.out.find("Shadow candidates (1") != std::string::npos);

  auto stopped = run({"skills", "shadow", "stop", "shell-guard"});
  INFO(stopped.out << stopped.err);
  CHECK(stopped.exit_status == 0);
  CHECK(run({"skills", "shadow", "status"}).out.find("No shadow candidates") != std::string::npos);

  REQUIRE(run({"skills", "shadow", candidate}).exit_status == 0);
  auto promoted = run({"skills", "promote", "shell-guard"});
  INFO(promoted.out << promoted.err);
  CHECK(promoted.exit_status == 0);
  CHECK(promoted.out.find("promote  shell-guard") != std::string::npos);

  auto history = run({"skills", "history", "--skill", "shell-guard", "--limit", "4"});
  INFO(history.out);
  // Kinds are padded to one column width: " promote ", " shadow ", " shadow-stop ".
  const auto promote_at = history.out.find(" promote ");
  const auto shadow_at = history.out.find(" shadow ");
  const auto stop_at = history.out.find(" shadow-stop ");
  CHECK(promote_at != std::string::npos);
  CHECK(stop_at != std::string::npos);
  CHECK(shadow_at != std::string::npos);
  CHECK(promote_at < shadow_at);  // newest first
  CHECK(shadow_at < stop_at);
  CHECK(history.out.find("shadow: {\"seen\":") != std::string::npos);
}

}  // namespace passepartout
