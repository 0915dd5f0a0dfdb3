// The operator's rules in a running daemon (docs/rules.md), through the
// `passepartout` commands an operator types: standing approvals taught by
// approving "always" (prefix, session scope, expiry), removed, kept across a
// restart and a kill -9 (a gate's new version: rules_pipeline_test); a rules file that
// does not check stops the start; --unattended-approvals deny-after. Every
// command the shell runs here is `ls` or `echo` in the test's own folder.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "daemon/protocol.hpp"
#include "integration/daemon_process.hpp"
#include "support/wire_client.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

using testing::DaemonProcess;
using testing::ProcessRun;
using testing::WireClient;

constexpr std::string_view kScript = R"(rules:
  - match: 'RESULT|TOOL \['
    reply: "Listed."
  - match: 'list alpha'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "ls -la ./alpha" :EXPLANATION "Listing the alpha folder as asked."))'
  - match: 'list beta'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "ls -la ./beta" :EXPLANATION "Listing the beta folder as asked."))'
  - match: 'say hi'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "echo hi-from-rules" :EXPLANATION "Printing a greeting as asked."))'
)";

DaemonProcess::Options options(std::vector<std::string> extra_args = {}) {
  DaemonProcess::Options o{std::string(kScript), std::move(extra_args), {}, false, {}};
  return o;
}

// `passepartout <args> --socket <the daemon's>`.
ProcessRun cli(const DaemonProcess& daemon, std::vector<std::string> args) {
  args.push_back("--socket");
  args.push_back(daemon.socket_path().string());
  return testing::run_passepartout(args, testing::hermetic_env(daemon.dir()));
}

// What the user is told for `text` in `session`, on `client`: the frames up
// to the answer, and the approval token when one was asked for.
struct Exchange {
  std::string shown;
  std::string token;
};
Exchange chat(WireClient& client, std::string_view text, std::string_view session, std::string_view id) {
  client.send("(:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID \"" + std::string(session) +
              "\") :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"" + std::string(text) + "\") :REQUEST-ID \"" +
              std::string(id) + "\")");
  Exchange out;
  for (;;) {
    const Value frame = client.expect_frame();
    out.shown += to_sexp(frame) + "\n";
    if (frame.path({"PAYLOAD", "SENSOR"}).is_keyword("APPROVAL-REQUIRED")) {
      out.token = std::string(frame.path({"PAYLOAD", "TOKEN"}).text());
    }
    if (frame.at("REQUEST-ID").text() == id) return out;
  }
}
Exchange chat(const DaemonProcess& daemon, std::string_view text, std::string_view id) {
  WireClient client = WireClient::local(daemon.socket_path());
  client.expect_handshake();
  return chat(client, text, "s-" + std::string(id), id);
}

std::string rule_id_in(const std::string& out) {
  std::smatch found;
  REQUIRE(std::regex_search(out, found, std::regex("remembered as rule (taught-[0-9a-f]{8})")));
  return found[1];
}

TEST_CASE(
    "approve --remember --match prefix covers the command as shown: another path still asks: a restart and a "
    "kill -9 keep it: rules remove ends it",
    "[integration][rules]") {
  DaemonProcess first(options());
  const Exchange asked = chat(first, "list alpha", "a1");
  REQUIRE(asked.token.size() == 32);
  const ProcessRun taught = cli(first, {"approvals", "approve", asked.token, "--remember", "--match", "prefix"});
  INFO(taught.out << taught.err);
  REQUIRE(taught.exit_status == 0);
  const std::string id = rule_id_in(taught.out);
  const std::string file = testing::read_text_file(first.state_dir() / "rules.yaml");
  CHECK(file.find("command: {prefix: ls -la, paths: [./alpha]}") != std::string::npos);
  CHECK(file.find("gates: [shell-guard@1.0.0]") != std::string::npos);

  const Exchange again = chat(first, "list alpha", "a2");
  INFO(again.shown);
  CHECK(again.token.empty());
  CHECK(again.shown.find("Approved by standing rule " + id) != std::string::npos);
  CHECK(chat(first, "list beta", "b1").token.size() == 32);  // the same command with another path still asks

  first.signal(SIGKILL);
  CHECK_FALSE(first.wait_exit().has_value());
  DaemonProcess::Options restart = options();
  restart.state_from = first.state_dir();
  DaemonProcess second(std::move(restart));
  CHECK(second.log().find("(0 deny, 0 ask, 1 standing approvals)") != std::string::npos);
  CHECK(chat(second, "list alpha", "a3").token.empty());
  const ProcessRun listed = cli(second, {"rules", "list"});
  CHECK(listed.out.find(id + "  allow shell command prefix 'ls -la' (paths 1)  hits 1") != std::string::npos);

  const ProcessRun removed = cli(second, {"rules", "remove", id});
  INFO(removed.out << removed.err);
  REQUIRE(removed.exit_status == 0);
  CHECK(chat(second, "list alpha", "a4").token.size() == 32);
  const ProcessRun history = cli(second, {"skills", "history"});
  CHECK(history.out.find("rule-remove") != std::string::npos);
}

TEST_CASE("a session's standing approval ends with the session: one that expires asks again",
          "[integration][rules][concurrency]") {
  DaemonProcess daemon(options());
  std::optional<WireClient> connection;
  connection.emplace(WireClient::local(daemon.socket_path()));
  connection->expect_handshake();
  const Exchange asked = chat(*connection, "say hi", "sess-x", "h1");
  REQUIRE(asked.token.size() == 32);
  const ProcessRun taught = cli(daemon, {"approvals", "approve", asked.token, "--remember", "--scope", "session"});
  INFO(taught.out << taught.err);
  REQUIRE(taught.exit_status == 0);
  CHECK(testing::read_text_file(daemon.state_dir() / "rules.yaml").find("echo hi-from-rules") == std::string::npos);
  CHECK(chat(*connection, "say hi", "sess-x", "h2").token.empty());
  {
    WireClient other = WireClient::local(daemon.socket_path());
    other.expect_handshake();
    CHECK(chat(other, "say hi", "sess-y", "h3").token.size() == 32);  // another session still asks
  }
  connection.reset();  // the session's one connection closes
  REQUIRE(daemon.wait_for_log("rules: session sess-x ended: 1 rule(s) of its own"));
  WireClient mine = WireClient::local(daemon.socket_path());
  mine.expect_handshake();
  const Exchange later = chat(mine, "say hi", "sess-x", "h4");
  CHECK(later.token.size() == 32);

  // Always, for a second: asked again once it has passed.
  const ProcessRun brief = cli(daemon, {"approvals", "approve", later.token, "--remember", "--expires", "1s"});
  INFO(brief.out << brief.err);
  REQUIRE(brief.exit_status == 0);
  const auto deadline = std::chrono::steady_clock::now() + testing::kProcessWait;
  std::string token;
  for (int i = 0; token.empty() && std::chrono::steady_clock::now() < deadline; ++i) {
    token = chat(mine, "say hi", "sess-x", "e" + std::to_string(i)).token;
  }
  CHECK(token.size() == 32);
}

TEST_CASE("rules add, test and list from the command line: a deny rule blocks before the gates",
          "[integration][rules]") {
  DaemonProcess daemon(options());
  const ProcessRun added = cli(daemon, {"rules", "add", "deny", "--target", "shell", "--prefix", "echo", "--reason",
                                        "echo is for people", "--id", "no-echo"});
  INFO(added.out << added.err);
  REQUIRE(added.exit_status == 0);
  const ProcessRun tested = cli(daemon, {"rules", "test", "true; echo x"});
  INFO(tested.out << tested.err);
  CHECK(tested.out.rfind("deny: rule no-echo (deny shell command prefix 'echo') blocks it before any gate runs", 0) ==
        0);
  const ProcessRun json = cli(daemon, {"rules", "test", "--json", "ls"});
  CHECK(json.out.find("\"decision\": \"none\"") != std::string::npos);
  const Exchange blocked = chat(daemon, "say hi", "d1");
  CHECK(blocked.token.empty());
  CHECK(blocked.shown.find(":GATE \"rules\" :VERSION \"host\" :RESULT :BLOCKED") != std::string::npos);
  CHECK(blocked.shown.find("shell-guard") == std::string::npos);
  const ProcessRun refused = cli(daemon, {"rules", "add", "ask", "--target", "shell"});
  CHECK(refused.exit_status != 0);
  CHECK(refused.err.find("an ask rule needs a reason") != std::string::npos);
  const ProcessRun status = cli(daemon, {"status"});
  CHECK(status.out.find("1 deny, 0 ask, 0 standing approvals; hits 3 / 0 / 0") != std::string::npos);
}

TEST_CASE("a rules file whose example fails stops the start, naming its line and the example", "[integration][rules]") {
  testing::TempDir dir;
  const std::filesystem::path file = dir.path() / "rules.yaml";
  std::ofstream(file) << R"(rules:
  - id: no-fetch
    decision: deny
    target: shell
    command: {prefix: wget}
    reason: fetch through the http tool
    examples:
      match: ["curl https://example.com"]
)";
  const ProcessRun run = testing::run_passepartout(
      {"daemon", "--state-dir", (dir.path() / "state").string(), "--socket", (dir.path() / "s.sock").string(), "--port",
       "0", "--metrics-port", "off", "--rules", file.string(), "--provider", "offline"},
      testing::hermetic_env(dir.path()));
  INFO(run.out << run.err);
  CHECK(run.exit_status == 2);
  CHECK(run.err.find(file.string() + ":8:15: rule 'no-fetch': the example 'curl https://example.com' should match, "
                                     "and does not") != std::string::npos);
}

TEST_CASE("deny-after: an approval nobody decides is denied at its time, once: a late approve says it expired",
          "[integration][rules][approvals][concurrency]") {
  DaemonProcess daemon(options({"--unattended-approvals", "deny-after", "1s"}));
  const Exchange first = chat(daemon, "say hi", "u1");
  REQUIRE(first.token.size() == 32);
  REQUIRE(daemon.wait_for_log("approval " + first.token + " expired: denied unattended (nobody decided within 1 s)"));
  const Exchange second = chat(daemon, "say hi", "u2");  // a later one, to see the first told only once
  REQUIRE(daemon.wait_for_log("approval " + second.token + " expired: denied unattended"));
  const std::string log = daemon.log();
  std::size_t told = 0;
  for (std::size_t at = 0; (at = log.find("approval " + first.token + " expired", at)) != std::string::npos; ++at) {
    ++told;
  }
  CHECK(told == 1);

  const ProcessRun late = cli(daemon, {"approvals", "approve", first.token});
  CHECK(late.exit_status != 0);
  CHECK(late.err.find("has expired") != std::string::npos);
  const ProcessRun shown = cli(daemon, {"approvals", "show", first.token});
  CHECK(shown.out.find("state:    expired by unattended") != std::string::npos);
  const ProcessRun decisions = testing::run_passepartout(
      {"decisions", "--state-dir", daemon.state_dir().string(), "--json"}, testing::hermetic_env(daemon.dir()));
  INFO(decisions.out << decisions.err);
  CHECK(decisions.out.find("expired: denied unattended") != std::string::npos);
}

}  // namespace
}  // namespace passepartout
