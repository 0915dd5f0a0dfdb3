// Tests for `passepartout chat` against an in-process server: streamed
// chunks, replies with their gate trace, approvals, the end of an exchange,
// interactive input, and daemons that fail, vanish or send odd frames.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/client_commands.hpp"
#include "cli/exit_status.hpp"
#include "unit/cli/fake_daemon.hpp"

using namespace passepartout;
using namespace passepartout::testing;
using namespace std::chrono_literals;

namespace {

int chat(const cli::Target& target, std::string text, Captured& captured, bool json = false) {
  cli::ChatOptions options;
  options.text = std::move(text);
  std::istringstream no_input;
  return cli::run_chat(target, options, no_input, captured.output(json));
}

// Interactive chat (no text given) reading `lines` as typed input.
int chat_lines(const cli::Target& target, const std::string& lines, Captured& captured) {
  std::istringstream input(lines);
  return cli::run_chat(target, cli::ChatOptions{}, input, captured.output());
}

std::size_t count(const std::string& text, std::string_view what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("chat prints the streamed chunks, the reply once, its gate trace, and stops at the end response", "[cli]") {
  FakeDaemonServer server;
  Captured captured;
  REQUIRE(chat(server.unix_target(), "hello", captured) == cli::kExitOk);
  const std::string out = captured.out.str();
  INFO(out << captured.err.str());
  CHECK(out.rfind("Hello there\n", 0) == 0);
  CHECK(count(out, "Hello there") == 1);
  CHECK(out.find("Gate trace:") != std::string::npos);
  CHECK(out.find("policy 1.0.0") != std::string::npos);
  CHECK(out.find("PASSED") != std::string::npos);
  CHECK(out.find("REWRITTEN") != std::string::npos);
  CHECK(out.find("quoted the argument") != std::string::npos);
  CHECK(captured.err.str().empty());

  const Value request = server.daemon().last_request();
  CHECK(request.at("TYPE").is_keyword("EVENT"));
  CHECK(request.path({"META", "SOURCE"}).is_keyword("TUI"));
  CHECK(request.path({"PAYLOAD", "SENSOR"}).is_keyword("USER-INPUT"));
  CHECK(request.path({"PAYLOAD", "TEXT"}).text() == "hello");
  CHECK(request.at("REQUEST-ID").is_string());
  CHECK(request.get("AUTH") == nullptr);
}

TEST_CASE("chat works over TCP, with or without the token", "[cli]") {
  FakeDaemonServer server;
  for (const char* token : {kToken, ""}) {
    Captured captured;
    CHECK(chat(server.tcp_target(token), "hello", captured) == cli::kExitOk);
    CHECK(captured.out.str().rfind("Hello there\n", 0) == 0);
    CHECK(server.daemon().last_request().get("AUTH") == nullptr);  // the server took it off
  }
}

TEST_CASE("chat shows what an actuator ran and its output before the model's answer", "[cli]") {
  FakeDaemonServer server;
  Captured captured;
  REQUIRE(chat(server.unix_target(), "date", captured) == cli::kExitOk);
  CHECK(captured.out.str().find("Ran date -u on :SHELL:\nThu Nov 26\n") != std::string::npos);
  CHECK(captured.out.str().find("Ran date -u") < captured.out.str().find("It is Thursday."));
}

TEST_CASE("chat exits 3 when a gate blocked the reply and shows why", "[cli]") {
  FakeDaemonServer server;
  Captured captured;
  CHECK(chat(server.unix_target(), "rm", captured) == cli::kExitBlocked);
  const std::string out = captured.out.str();
  INFO(out);
  CHECK(out.find("[error] Action blocked: rm -rf is destructive") != std::string::npos);
  CHECK(out.find("BLOCKED") != std::string::npos);
}

TEST_CASE("chat exits 4 when an action waits for approval and says how to approve it", "[cli]") {
  FakeDaemonServer server;
  Captured captured;
  CHECK(chat(server.unix_target(), "deploy", captured) == cli::kExitApproval);
  const std::string out = captured.out.str();
  INFO(out);
  CHECK(out.find("Approval required: deploys need a human.") != std::string::npos);
  CHECK(out.find("token:  ab12cd34") != std::string::npos);
  CHECK(out.find("passepartout approvals approve ab12cd34") != std::string::npos);
  CHECK(out.find("passepartout approvals deny ab12cd34") != std::string::npos);
  CHECK(out.find("APPROVAL") != std::string::npos);
}

TEST_CASE("chat --json prints one document with the chunks, replies, trace and outcome", "[cli]") {
  FakeDaemonServer server;
  SECTION("a reply") {
    Captured captured;
    REQUIRE(chat(server.unix_target(), "hello", captured, true) == cli::kExitOk);
    const auto document = nlohmann::json::parse(captured.out.str());
    CHECK(document["ok"] == true);
    CHECK(document["outcome"] == "done");
    CHECK(document["stopped_by"] == "done");
    CHECK(document["cycles"] == 1);
    CHECK(document["chunks"] == nlohmann::json::array({"Hello ", "there"}));
    REQUIRE(document["replies"].size() == 1);
    CHECK(document["replies"][0]["text"] == "Hello there");
    CHECK(document["replies"][0]["gate_trace"][1]["gate"] == "shell-guard 1.2.0");
    CHECK(document["replies"][0]["gate_trace"][1]["verdict"] == "REWRITTEN");
    CHECK(document["replies"][0]["gate_trace"][1]["reason"] == "quoted the argument");
    CHECK(document["replies"][0]["frame"]["payload"]["action"] == "message");
  }
  SECTION("what an actuator ran") {
    Captured captured;
    REQUIRE(chat(server.unix_target(), "date", captured, true) == cli::kExitOk);
    const auto document = nlohmann::json::parse(captured.out.str());
    REQUIRE(document["replies"].size() == 2);
    CHECK(document["replies"][0]["text"] == "Ran date -u on :SHELL:\nThu Nov 26\n");
    CHECK(document["replies"][0]["acted"]["target"] == "shell");
    CHECK(document["replies"][0]["acted"]["what"] == "date -u");
    CHECK(document["replies"][0]["acted"]["status"] == "ok");
    CHECK(document["replies"][0]["acted"]["ms"] == 3.5);
    CHECK(document["replies"][1].count("acted") == 0);
    REQUIRE(document["acted"].size() == 1);
    CHECK(document["acted"][0]["what"] == "date -u");
  }
  SECTION("an approval") {
    Captured captured;
    REQUIRE(chat(server.unix_target(), "deploy", captured, true) == cli::kExitApproval);
    const auto document = nlohmann::json::parse(captured.out.str());
    CHECK(document["outcome"] == "approval_required");
    CHECK(document["approvals"][0]["token"] == "ab12cd34");
  }
  SECTION("an error") {
    Captured captured;
    REQUIRE(chat(server.unix_target(), "fail", captured, true) == cli::kExitProblem);
    const auto document = nlohmann::json::parse(captured.out.str());
    CHECK(document["ok"] == false);
    CHECK(document["code"] == "INTERNAL");
    CHECK(captured.err.str().empty());
  }
}

TEST_CASE("interactive chat sends each line in one session until /exit", "[cli]") {
  FakeDaemonServer server;
  Captured captured;
  const int status = chat_lines(server.unix_target(), "hello\n\n   \r\nrm\r\n/exit\nhello\n", captured);
  CHECK(status == cli::kExitOk);  // the end of input ends a conversation well, whatever the last reply was
  const auto requests = server.daemon().requests();
  REQUIRE(requests.size() == 2);
  CHECK(requests[0].path({"PAYLOAD", "TEXT"}).text() == "hello");
  CHECK(requests[1].path({"PAYLOAD", "TEXT"}).text() == "rm");
  CHECK(requests[0].at("REQUEST-ID") != requests[1].at("REQUEST-ID"));
  const std::string out = captured.out.str();
  CHECK(out.find("Hello there") < out.find("Action blocked"));
}

TEST_CASE("interactive chat opens a new connection for the next line when the last one was lost", "[cli]") {
  FakeDaemonServer server;
  Captured captured;
  const int status = chat_lines(server.unix_target(), "stopping\nhello\n", captured);
  CHECK(status == cli::kExitOk);  // the second exchange went through
  const auto connections = server.daemon().request_connections();
  REQUIRE(connections.size() == 2);
  CHECK(connections[0] != connections[1]);
  CHECK(captured.err.str().find("SHUTTING-DOWN") != std::string::npos);
  CHECK(captured.err.str().find("passepartout: reconnected to " + server.unix_target().endpoint.describe()) !=
        std::string::npos);
  CHECK(captured.out.str().find("Hello there") != std::string::npos);
}

TEST_CASE("chat passes a session id and reports the daemon's error response", "[cli]") {
  FakeDaemonServer server;
  Captured captured;
  cli::ChatOptions options;
  options.text = "fail";
  options.session_id = "s-1";
  std::istringstream no_input;
  CHECK(cli::run_chat(server.unix_target(), options, no_input, captured.output()) == cli::kExitProblem);
  CHECK(server.daemon().last_request().path({"META", "SESSION-ID"}).text() == "s-1");
  CHECK(captured.err.str() == "passepartout: the daemon reported an error: the pipeline failed (INTERNAL)\n");
}

TEST_CASE("chat survives frames with missing or unexpected keys", "[cli]") {
  FakeDaemonServer server;
  SECTION("text") {
    Captured captured;
    // One of the odd frames is an approval notice without a token.
    CHECK(chat(server.unix_target(), "odd", captured) == cli::kExitApproval);
    const std::string out = captured.out.str();
    INFO(out);
    CHECK(out.find("bell \\x07 and escape \\x1b[31m") != std::string::npos);
    CHECK(out.find('\x1b') == std::string::npos);
    CHECK(out.find("JUNK") != std::string::npos);
  }
  SECTION("json") {
    Captured captured;
    CHECK(chat(server.unix_target(), "odd", captured, true) == cli::kExitApproval);
    CHECK_NOTHROW(nlohmann::json::parse(captured.out.str()));
  }
}

TEST_CASE("chat says how to start the daemon when nothing listens", "[cli]") {
  TempDir dir;
  cli::Target target;
  target.endpoint.socket_path = dir.path() / "absent.sock";
  Captured captured;
  CHECK(chat(target, "hello", captured) == cli::kExitProblem);
  CHECK(captured.err.str() == "passepartout: cannot reach the daemon at " + target.endpoint.socket_path.string() +
                                  ": No such file or directory; start it with `passepartout daemon`, or name where it "
                                  "listens with --socket PATH or --port N\n");
  CHECK(captured.out.str().empty());
}

TEST_CASE("chat reports a daemon that closes in the middle of a reply", "[cli]") {
  SECTION("after a chunk") {
    RawPeer peer(RawPeer::frame("(:TYPE :STREAM-CHUNK :PAYLOAD (:TEXT \"partial\"))"));
    Captured captured;
    CHECK(chat(peer.target(), "hello", captured) == cli::kExitProblem);
    CHECK(captured.out.str() == "partial\n");
    CHECK(captured.err.str().find("closed the connection before the reply ended") != std::string::npos);
  }
  SECTION("inside a frame") {
    RawPeer peer("00002A(:TYPE :STREAM");
    Captured captured;
    CHECK(chat(peer.target(), "hello", captured, true) == cli::kExitProblem);
    const auto document = nlohmann::json::parse(captured.out.str());
    CHECK(document["ok"] == false);
    CHECK(document["error"].get<std::string>().find("closed the connection") != std::string::npos);
  }
  SECTION("with bytes that are no frame") {
    RawPeer peer("not a frame at all");
    Captured captured;
    CHECK(chat(peer.target(), "hello", captured) == cli::kExitProblem);
    CHECK(captured.err.str().find("unreadable frame") != std::string::npos);
  }
}

TEST_CASE("chat gives up when the daemon sends nothing for the timeout", "[cli]") {
  FakeDaemonServer server;
  cli::Target target = server.unix_target();
  target.reply_timeout = 200ms;
  Captured captured;
  CHECK(chat(target, "silence", captured) == cli::kExitProblem);
  CHECK(captured.err.str().find("sent nothing for 0.2 s; allow more time with --timeout SECONDS") != std::string::npos);
}

TEST_CASE("interactive chat says when a reply was cut off and exits 6 when the daemon does not come back", "[cli]") {
  RawPeer peer(RawPeer::frame("(:TYPE :STREAM-CHUNK :PAYLOAD (:TEXT \"partial\"))"));
  cli::Target target = peer.target();
  target.connect_timeout = 100ms;  // the peer accepts once: a second connection never gets its handshake
  target.reply_timeout = 300ms;    // and reconnecting is tried for no longer than this
  Captured captured;
  CHECK(chat_lines(target, "hello\nnever sent\n", captured) == cli::kExitDisconnected);
  CHECK(captured.out.str() == "partial\n");
  const std::string err = captured.err.str();
  CHECK(err.rfind("passepartout: connection to the daemon lost; reconnecting", 0) == 0);
  CHECK(err.find("could not reconnect to the daemon within 0.3") != std::string::npos);
  CHECK(err.find("closed the connection before the reply ended") == std::string::npos);  // said once, as a drop
}
