// MCP servers behind the gates, end to end: the daemon runs a server named in
// its config (the fixture server of tests/fixtures/mcp, and the reference
// server-everything from npm), offers its tools to a real model's API (the
// loopback HTTP stub playing openai), and a native call goes through the
// gates: allowed, it reaches the server and its result is the call's result
// in the model's next request; asked, it waits for approval and runs once
// approved; denied, its reason reaches the model. A tool whose definition
// changes is refused until an operator trusts it; a server that crashes is
// restarted while the daemon keeps serving. Tagged [concurrency]: the
// ThreadSanitizer preset runs them (the MCP loop, the pipeline loops and the
// operator thread meet in the hub).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/protocol.hpp"
#include "integration/daemon_process.hpp"
#include "integration/mcp_harness.hpp"
#include "integration/model_exchange.hpp"
#include "integration/npm_packages.hpp"
#include "skills/sandbox_spec.hpp"
#include "support/http_stub.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace passepartout::testing;

std::string fixture_server(std::string_view mode = "") { return "mcp_servers:\n" + fixture_entry("fixture", mode); }

}  // namespace

TEST_CASE("an MCP server's tools are offered natively, and an allowed call's result reaches the model",
          "[integration][mcp][concurrency]") {
  HttpStub stub;
  stub.enqueue(call_answer("openai", "call_echo", "mcp__fixture__echo", {{"message", "through the gates"}}));
  stub.enqueue(text_answer("openai", "The server said it back."));
  TempDir dir;
  DaemonProcess daemon(with_permissions(with_model(dir, write_config(dir, stub, "openai", true, fixture_server())),
                                        "    \"mcp__fixture__*\": allow"));
  const Value server = wait_for_state(daemon, "fixture", "ready");
  CHECK(server.at("PROTOCOL-VERSION").text() == "2025-06-18");
  CHECK(server.at("PID").as_integer() > 0);
  CHECK(tool_of(server, "echo").at("OFFERED").text() == "mcp__fixture__echo");
  CHECK(tool_of(server, "echo").at("PIN").text() == "new");           // pinned on first sight
  CHECK(tool_of(server, "fail").at("PERMISSION").text() == "allow");  // by the table's pattern

  const auto frames = chat(daemon, "echo something through the server", "s1", "r1");
  INFO(printed(frames) << daemon.log());
  REQUIRE(stub.requests().size() == 2);
  const Sent first = sent("openai", stub.requests()[0]);
  CHECK(std::find(first.tools.begin(), first.tools.end(), "mcp__fixture__echo") != first.tools.end());
  CHECK(std::find(first.tools.begin(), first.tools.end(), "mcp__fixture__fail") != first.tools.end());
  CHECK(first.system.find("mcp__fixture__echo") != std::string::npos);  // in the TOOLS section too
  const std::string result = call_result("openai", sent("openai", stub.requests()[1]).messages, "call_echo");
  CHECK(result.find("echo: through the gates") != std::string::npos);
  CHECK(printed(frames).find("echo: through the gates") != std::string::npos);  // the user sees it too
  const Value after = server_of(daemon, "fixture");
  CHECK(after.at("CALLS").as_integer() == 1);
  CHECK(after.at("FAILURES").as_integer() == 0);
  // The decision log recorded which server and which definition the call was
  // for, once its writer (a tenth of a second at most) has put it on disk.
  const std::string digest(tool_of(after, "echo").at("SHA256").text());
  const auto deadline = std::chrono::steady_clock::now() + kProcessWait;
  std::string decisions;
  while (decisions.find("\"tool_sha256\":\"" + digest) == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    decisions = read_text_file(daemon.state_dir() / "decisions" / "decisions.jsonl");
  }
  INFO(decisions);
  CHECK(decisions.find(R"("mcp_server":"fixture","tool_sha256":")" + digest + "\"") != std::string::npos);
}

TEST_CASE("an MCP call the table asks about waits for approval and runs once approved",
          "[integration][mcp][concurrency]") {
  HttpStub stub;
  stub.enqueue(call_answer("openai", "call_ask", "mcp__fixture__echo", {{"message", "approved run"}}));
  stub.enqueue(text_answer("openai", "It waits for your approval."));
  TempDir dir;
  DaemonProcess daemon(with_model(dir, write_config(dir, stub, "openai", true, fixture_server())));  // mcp__*: ask
  wait_for_state(daemon, "fixture", "ready");
  const auto frames = chat(daemon, "echo something", "s1", "r1");
  INFO(printed(frames) << daemon.log());
  const std::string token = approval_token(frames);
  REQUIRE(token.size() == 32);
  CHECK(server_of(daemon, "fixture").at("CALLS").as_integer() == 0);  // nothing ran yet

  const Value approved = operator_command(daemon, ":APPROVE :TOKEN \"" + token + "\"");
  INFO(to_sexp(approved));
  REQUIRE(is_ok_response(approved));
  CHECK(to_sexp(approved).find("echo: approved run") != std::string::npos);
  CHECK(server_of(daemon, "fixture").at("CALLS").as_integer() == 1);

  stub.enqueue(text_answer("openai", "Done."));
  chat(daemon, "what did it say?", "s1", "r2");
  const std::string result = call_result("openai", sent("openai", stub.requests().back()).messages, "call_ask");
  CHECK(result.find("Approved by ") == 0);
  CHECK(result.find("echo: approved run") != std::string::npos);
}

TEST_CASE("a denied MCP call's reason reaches the model, and a tool that fails reports its error",
          "[integration][mcp][concurrency]") {
  HttpStub stub;
  stub.enqueue(call_answer("openai", "call_deny", "mcp__fixture__echo", {{"message", "never"}}));
  stub.enqueue(text_answer("openai", "Denied, then."));
  stub.enqueue(call_answer("openai", "call_fail", "mcp__fixture__fail", json::object()));
  stub.enqueue(text_answer("openai", "It failed."));
  TempDir dir;
  DaemonProcess daemon(with_permissions(with_model(dir, write_config(dir, stub, "openai", true, fixture_server())),
                                        "    mcp__fixture__echo: deny\n    mcp__fixture__fail: allow"));
  wait_for_state(daemon, "fixture", "ready");
  chat(daemon, "echo something", "s1", "r1");
  REQUIRE(stub.requests().size() == 2);
  const std::string denied = call_result("openai", sent("openai", stub.requests()[1]).messages, "call_deny");
  INFO(denied << daemon.log());
  CHECK(denied.find("denied by tool-permissions") != std::string::npos);
  CHECK(server_of(daemon, "fixture").at("CALLS").as_integer() == 0);

  chat(daemon, "now the failing one", "s2", "r2");
  REQUIRE(stub.requests().size() == 4);
  const std::string failed = call_result("openai", sent("openai", stub.requests()[3]).messages, "call_fail");
  CHECK(failed.find("it failed, as it always does") != std::string::npos);
  CHECK(server_of(daemon, "fixture").at("FAILURES").as_integer() == 1);
}

TEST_CASE("a tool whose definition changes is refused until an operator trusts it", "[integration][mcp][concurrency]") {
  HttpStub stub;
  stub.enqueue(call_answer("openai", "call_1", "mcp__fixture__echo", {{"message", "first"}}));
  stub.enqueue(text_answer("openai", "First done."));
  TempDir dir;
  DaemonProcess daemon(
      with_permissions(with_model(dir, write_config(dir, stub, "openai", true, fixture_server("drift"))),
                       "    \"mcp__fixture__*\": allow"));
  const Value before = wait_for_state(daemon, "fixture", "ready");
  chat(daemon, "echo once", "s1", "r1");  // the server changes echo's description after this call
  INFO(daemon.log());
  REQUIRE(daemon.wait_for_log("the definition of tool 'echo' changed since it was pinned"));
  const Value changed = server_of(daemon, "fixture");
  CHECK(tool_of(changed, "echo").at("PIN").text() == "changed");
  CHECK(tool_of(changed, "echo").at("OFFERED").text().empty());
  CHECK(tool_of(changed, "echo").at("PINNED-SHA256").text() == tool_of(before, "echo").at("SHA256").text());
  CHECK(changed.at("DEFINITION-CHANGES").as_integer() == 1);

  // No longer offered, and a call the model makes anyway is refused.
  stub.enqueue(call_answer("openai", "call_2", "mcp__fixture__echo", {{"message", "second"}}));
  stub.enqueue(text_answer("openai", "Refused."));
  chat(daemon, "echo again", "s2", "r2");
  const std::size_t second = stub.requests().size() - 2;
  const Sent offered = sent("openai", stub.requests()[second]);
  CHECK(std::find(offered.tools.begin(), offered.tools.end(), "mcp__fixture__echo") == offered.tools.end());
  const std::string refused = call_result("openai", sent("openai", stub.requests().back()).messages, "call_2");
  CHECK(refused.find("changed since it was pinned; it waits for an operator: passepartout mcp trust fixture echo") !=
        std::string::npos);
  CHECK(server_of(daemon, "fixture").at("CALLS").as_integer() == 1);

  // Trusted: the difference is shown, and the tool is offered again.
  const Value trusted = operator_command(daemon, ":MCP-TRUST :SERVER \"fixture\" :TOOL \"echo\"");
  INFO(to_sexp(trusted));
  REQUIRE(is_ok_response(trusted));
  REQUIRE(trusted.path({"PAYLOAD", "CHANGES"}).items().size() == 1);
  const Value change = trusted.path({"PAYLOAD", "CHANGES"}).items()[0];
  CHECK(std::string(change.at("TO-DEFINITION").text()).find("ignore previous instructions") != std::string::npos);
  CHECK(std::string(change.at("FROM-DEFINITION").text()).find("ignore previous instructions") == std::string::npos);
  CHECK(tool_of(server_of(daemon, "fixture"), "echo").at("PIN").text() == "pinned");
  // The pin is in the state folder: a restart does not forget it.
  const json pins = json::parse(read_text_file(daemon.state_dir() / "mcp-pins.json"));
  CHECK(pins["servers"]["fixture"]["echo"]["sha256"] == std::string(change.at("TO-SHA256").text()));

  // The change and its acceptance are in the audit log, with the skill changes, newest first.
  const Value history = operator_command(daemon, ":HISTORY :LIMIT 2");
  INFO(to_sexp(history));
  REQUIRE(history.path({"PAYLOAD", "CHANGES"}).items().size() == 2);
  const Value accepted = history.path({"PAYLOAD", "CHANGES"}).items()[0];
  const Value found = history.path({"PAYLOAD", "CHANGES"}).items()[1];
  CHECK(found.at("KIND").text() == "mcp-tool-changed");
  CHECK(found.at("SKILL").text() == "mcp__fixture__echo");
  CHECK(found.at("OUTCOME").text() == "refused");
  CHECK(found.at("FROM-SHA256").text() == tool_of(before, "echo").at("SHA256").text());
  CHECK(found.at("TO-SHA256").text() == change.at("TO-SHA256").text());
  CHECK(std::string(found.at("ERROR").text()).find("passepartout mcp trust fixture echo") != std::string::npos);
  CHECK(accepted.at("KIND").text() == "mcp-trust");
  CHECK(accepted.at("OUTCOME").text() == "ok");
  CHECK(accepted.at("TO-SHA256").text() == change.at("TO-SHA256").text());
}

TEST_CASE("a server that crashes is started again while the daemon keeps serving", "[integration][mcp][concurrency]") {
  HttpStub stub;
  stub.enqueue(call_answer("openai", "call_crash", "mcp__fixture__echo", {{"message", "boom"}}));
  stub.enqueue(text_answer("openai", "It crashed."));
  stub.set_default(text_answer("openai", "Still here."));
  TempDir dir;
  DaemonProcess daemon(
      with_permissions(with_model(dir, write_config(dir, stub, "openai", true, fixture_server("crash"))),
                       "    \"mcp__fixture__*\": allow"));
  const Value first = wait_for_state(daemon, "fixture", "ready");
  chat(daemon, "crash it", "s1", "r1");
  REQUIRE(stub.requests().size() >= 2);
  const std::string result = call_result("openai", sent("openai", stub.requests()[1]).messages, "call_crash");
  INFO(result << daemon.log());
  CHECK(result.find("mcp server 'fixture' exited with status 3") != std::string::npos);
  // Started again after its backoff, with another process.
  const Value again = wait_for_state(daemon, "fixture", "ready");
  CHECK(again.at("STARTS").as_integer() == 2);
  CHECK(again.at("PID").as_integer() != first.at("PID").as_integer());
  const auto frames = chat(daemon, "are you there?", "s2", "r2");
  CHECK(printed(frames).find("Still here.") != std::string::npos);
}

// One line of /proc/<pid>/status ("Uid:\t65534\t..." -> "65534\t..."); "" when absent.
std::string proc_status(std::int64_t pid, std::string_view field) {
  const std::string text = read_text_file("/proc/" + std::to_string(pid) + "/status");
  const std::string key = std::string(field) + ":\t";
  const std::size_t at = text.find("\n" + key);
  if (at == std::string::npos) return "";
  const std::size_t start = at + 1 + key.size();
  return text.substr(start, text.find('\n', start) - start);
}

TEST_CASE("a stdio server runs confined: its user, its writes, no network, no new privileges",
          "[integration][mcp][concurrency]") {
  HttpStub stub;
  TempDir dir;
  // A copy of the fixture where the server's user (nobody, when root) can run it.
  const fs::path open = dir.path() / "open";
  fs::create_directories(open / "notes");
  const fs::path server = open / "mcp_fixture_server";
  fs::copy_file(PP_MCP_FIXTURE, server);
  for (const fs::path& path : {dir.path(), open, open / "notes", server}) {
    fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  }
  const std::string servers = "mcp_servers:\n  fixture:\n    command: " + server.string() + "\n    writable: [" +
                              (open / "notes").string() + "]\n    network: false\n    limits: {open_files: 256}\n";
  DaemonProcess daemon(with_model(dir, write_config(dir, stub, "openai", true, servers)));
  const Value ready = wait_for_state(daemon, "fixture", "ready");
  const std::string sandbox(ready.at("SANDBOX").text());
  INFO(sandbox << "\n" << daemon.log());
  const std::int64_t pid = ready.at("PID").as_integer();
  REQUIRE(pid > 0);
  CHECK(proc_status(pid, "NoNewPrivs") == "1");
  CHECK(proc_status(pid, "Seccomp") == "2");  // the filter that closes the network
  CHECK(sandbox.find("; network denied; open files 256") != std::string::npos);
  if (::geteuid() == 0) {
    CHECK(proc_status(pid, "Uid").starts_with("65534\t65534"));
    CHECK(sandbox.starts_with("runs as nobody (uid 65534)"));
  }
  if (sandbox_capabilities().landlock_abi > 0) {
    CHECK(sandbox.find("writes confined by Landlock") != std::string::npos);
    CHECK(sandbox.find((open / "notes").string() + ", /") != std::string::npos);  // and its temporary folder
  }
  // Its temporary folder, its working folder and its TMPDIR, is its own.
  const fs::path cwd = fs::read_symlink("/proc/" + std::to_string(pid) + "/cwd");
  CHECK(cwd.filename().string().starts_with("passepartout-mcp-" + std::to_string(daemon.pid()) + "-fixture-"));
  CHECK(read_text_file("/proc/" + std::to_string(pid) + "/environ").find("TMPDIR=" + cwd.string()) !=
        std::string::npos);
  struct stat info {};
  REQUIRE(::stat(cwd.c_str(), &info) == 0);
  CHECK(info.st_uid == (::geteuid() == 0 ? 65534U : ::geteuid()));
  CHECK((info.st_mode & 0777U) == 0700U);

  // Killed, the daemon leaves its folder; the next daemon's start removes it.
  daemon.signal(SIGKILL);
  daemon.wait_exit();
  REQUIRE(fs::exists(cwd));
  HttpStub other_stub;
  TempDir other;
  DaemonProcess next(with_model(other, write_config(other, other_stub, "openai", true, "")));
  CHECK(next.wait_for_log("listening on"));
  const auto deadline = std::chrono::steady_clock::now() + kProcessWait;
  while (fs::exists(cwd) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK_FALSE(fs::exists(cwd));
}

TEST_CASE("a stdio server the sandbox cannot honour is refused, not run unconfined",
          "[integration][mcp][concurrency]") {
  HttpStub stub;
  TempDir dir;
  const std::string servers =
      "mcp_servers:\n" + fixture_entry("fixture", "", "    writable: [" + (dir.path() / "missing").string() + "]\n") +
      "  other:\n    command: no-such-mcp-server\n" + as_daemon_user();
  DaemonProcess daemon(with_model(dir, write_config(dir, stub, "openai", true, servers)));
  const Value refused = wait_for_state(daemon, "fixture", "refused");
  CHECK(std::string(refused.at("REASON").text()) ==
        "writable: '" + (dir.path() / "missing").string() +
            "' is not an existing folder; create it or remove it from the entry");
  CHECK(refused.at("PID").as_integer() == 0);
  const Value missing = wait_for_state(daemon, "other", "restarting");
  CHECK(std::string(missing.at("REASON").text()).find("no program 'no-such-mcp-server' on its PATH") !=
        std::string::npos);
}

// Replaces `file` at once (a rename), as an editor or a deployment does.
void replace_file(const fs::path& file, const std::string& text) {
  const fs::path temporary = file.string() + ".new";
  std::ofstream(temporary) << text;
  fs::rename(temporary, file);
}

TEST_CASE("servers are added, changed and removed live, and the ones that did not change keep serving",
          "[integration][mcp][concurrency]") {
  HttpStub stub;
  TempDir dir;
  const std::string config = write_config(dir, stub, "openai", true, fixture_server());
  const std::string with_one = read_text_file(config);
  const std::string second = fixture_entry("second");
  DaemonProcess::Options options = with_model(dir, config);
  options.extra_args.emplace_back("--watch");
  DaemonProcess daemon(std::move(options));
  const Value first = wait_for_state(daemon, "fixture", "ready");

  // --watch: the config file rewritten with a second server; the first one is left alone.
  replace_file(config, with_one + second);
  wait_for_state(daemon, "second", "ready");
  INFO(daemon.log());
  const Value untouched = server_of(daemon, "fixture");
  CHECK(untouched.at("PID").as_integer() == first.at("PID").as_integer());
  CHECK(untouched.at("STARTS").as_integer() == 1);

  // The second one's entry changed: it alone starts again, as another process.
  const std::int64_t second_pid = server_of(daemon, "second").at("PID").as_integer();
  replace_file(config, with_one + second + "    call_timeout: 5s\n");
  REQUIRE(daemon.wait_for_log("mcp server 'second' changed: starting it again"));
  const Value restarted = wait_for_state(daemon, "second", "ready");
  CHECK(restarted.at("PID").as_integer() != second_pid);
  CHECK(server_of(daemon, "fixture").at("PID").as_integer() == first.at("PID").as_integer());

  // A mistake changes nothing, and says where it is.
  replace_file(config, with_one + second + "  third:\n    commnd: x\n");
  const Value refused = operator_command(daemon, ":MCP-RELOAD");
  CHECK_FALSE(is_ok_response(refused));
  CHECK(to_sexp(refused).find("unknown key 'commnd' of mcp server 'third'") != std::string::npos);
  CHECK(server_of(daemon, "second").at("STATE").text() == "ready");

  // mcp reload: the second one removed, the first still the same process.
  replace_file(config, with_one);
  REQUIRE(is_ok_response(operator_command(daemon, ":MCP-RELOAD")));
  CHECK(server_of(daemon, "second").is_nil());
  CHECK(server_of(daemon, "fixture").at("PID").as_integer() == first.at("PID").as_integer());
}

TEST_CASE("a bad mcp_servers entry stops the daemon's start, naming the file, line and key",
          "[integration][mcp][concurrency]") {
  TempDir dir;
  const fs::path config = dir.path() / "bad.yaml";
  std::ofstream(config) << "mcp_servers:\n  fs:\n    command: x\n    argz: [a]\n  \"bad__name\":\n    url: ftp://x\n";
  const ProcessRun run = run_passepartout({"daemon", "--config", config.string(), "--state-dir",
                                           (dir.path() / "state").string(), "--port", "0", "--metrics-port", "off"},
                                          hermetic_env(dir.path()));
  CHECK(run.exit_status == 2);
  CHECK(run.err.find(config.string() + ":4:5: unknown key 'argz' of mcp server 'fs'; did you mean 'args'?") !=
        std::string::npos);
  CHECK(run.err.find(config.string() + ":5:3: mcp server 'bad__name': a name is 1 to 24") != std::string::npos);
  CHECK(run.err.find(config.string() +
                     ":6:5: url of mcp server 'bad__name': 'ftp://x' is not an http:// or https:// URL") !=
        std::string::npos);
  INFO(run.err);
}

TEST_CASE("the reference server-everything over stdio serves a model's call through the daemon",
          "[integration][mcp][concurrency]") {
  const fs::path server = package_script("@modelcontextprotocol/server-everything", "dist/index.js");
  HttpStub stub;
  stub.enqueue(call_answer("openai", "call_everything", "mcp__everything__echo", {{"message", "hello reference"}}));
  stub.enqueue(text_answer("openai", "It echoed."));
  TempDir dir;
  const std::string servers = "mcp_servers:\n  everything:\n    command: node\n    args: [" + server.string() +
                              ", stdio]\n" + testing::as_daemon_user();
  DaemonProcess daemon(with_permissions(with_model(dir, write_config(dir, stub, "openai", true, servers)),
                                        "    mcp__everything__echo: allow"));
  const Value ready = wait_for_state(daemon, "everything", "ready");
  CHECK(ready.at("PROTOCOL-VERSION").text() == "2025-11-25");
  // The table's level: the name's own, else (no pattern matches) ask.
  CHECK(tool_of(ready, "echo").at("PERMISSION").text() == "allow");
  CHECK(tool_of(ready, "get-tiny-image").at("PERMISSION").text() == "ask");
  CHECK(tool_of(ready, "get-tiny-image").at("OFFERED").text() == "mcp__everything__get-tiny-image");
  CHECK(std::string(tool_of(ready, "echo").at("ANNOTATIONS-JSON").text()).find("readOnlyHint") != std::string::npos);
  chat(daemon, "echo hello", "s1", "r1");
  REQUIRE(stub.requests().size() == 2);
  const std::string result = call_result("openai", sent("openai", stub.requests()[1]).messages, "call_everything");
  INFO(result << daemon.log());
  CHECK(result.find("Echo: hello reference") != std::string::npos);
}

}  // namespace passepartout
