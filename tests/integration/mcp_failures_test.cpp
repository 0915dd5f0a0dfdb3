// MCP servers that misbehave, behind the daemon: one that never answers
// initialize, one that writes garbage on its stdout, one that answers a call
// with 100 MB, one that floods its stderr, a tool that never answers. Each is
// reported with its precise reason while the daemon keeps serving: a healthy
// server configured beside it serves a model's call (the loopback HTTP stub
// playing openai), an operator's STATUS is answered, another conversation
// goes on. Then the reference server-filesystem from npm end to end: a file
// it reads reaches the model's next request, and a write outside the folder
// it serves is the server's own failure, reported as a failed tool. Tagged
// [concurrency]: the ThreadSanitizer preset runs them (the MCP loop, the
// pipeline loops and the operator thread meet in the hub).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "daemon/protocol.hpp"
#include "integration/daemon_process.hpp"
#include "integration/mcp_harness.hpp"
#include "integration/model_exchange.hpp"
#include "integration/npm_packages.hpp"
#include "support/http_stub.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace passepartout::testing;
using namespace std::chrono_literals;

// The daemon keeps serving other clients: an operator's STATUS over its
// socket is answered, with `healthy` ready among its MCP servers; that entry
// of the bad server `bad`.
Value status_answered(const DaemonProcess& daemon, std::string_view healthy, std::string_view bad) {
  const Value status = operator_command(daemon, ":STATUS");
  INFO(to_sexp(status));
  REQUIRE(is_ok_response(status));
  const Value servers = status.path({"PAYLOAD", "MCP-SERVERS"});
  CHECK(text_of(server_in(servers, healthy), "STATE") == "ready");
  return server_in(servers, bad);
}

bool offers(const Sent& request, std::string_view tool) {
  return std::find(request.tools.begin(), request.tools.end(), tool) != request.tools.end();
}

bool offers_any_of(const Sent& request, std::string_view server) {
  const std::string prefix = "mcp__" + std::string(server) + "__";
  return std::any_of(request.tools.begin(), request.tools.end(),
                     [&](const std::string& tool) { return tool.rfind(prefix, 0) == 0; });
}

// The result of the call `id` in whichever request the stub got carries it ("" when none).
std::string result_of_call(const HttpStub& stub, std::string_view id) {
  for (const StubRequest& request : stub.requests()) {
    std::string result = call_result("openai", sent("openai", request).messages, id);
    if (!result.empty()) return result;
  }
  return {};
}

std::size_t occurrences(const std::string& text, std::string_view what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The peak resident memory of process `pid` (VmHWM), in KiB; 0 when unknown.
long peak_resident_kib(pid_t pid) {
  std::ifstream status(fs::path("/proc") / std::to_string(pid) / "status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

}  // namespace

TEST_CASE("a server that never answers initialize is reported while the one beside it serves a model's call",
          "[integration][mcp][concurrency]") {
  HttpStub stub;
  stub.enqueue(call_answer("openai", "call_echo", "mcp__fixture__echo", {{"message", "beside a silent one"}}));
  stub.enqueue(text_answer("openai", "The healthy one answered."));
  TempDir dir;
  const std::string servers =
      "mcp_servers:\n" + fixture_entry("fixture") + fixture_entry("silent", "silent", "    call_timeout: 2s\n");
  DaemonProcess daemon(with_permissions(with_model(dir, write_config(dir, stub, "openai", true, servers)),
                                        "    \"mcp__fixture__*\": allow\n    \"mcp__silent__*\": allow"));
  wait_for_state(daemon, "fixture", "ready");
  // Not ready and no tools: its initialize waits for an answer that does not come.
  const Value starting = server_of(daemon, "silent");
  INFO(to_sexp(starting));
  CHECK(text_of(starting, "STATE") != "ready");
  CHECK(starting.at("TOOLS").items().empty());
  CHECK(starting.at("PID").as_integer() == 0);

  const auto frames = chat(daemon, "echo beside the silent one", "s1", "r1");
  INFO(printed(frames) << daemon.log());
  REQUIRE(stub.requests().size() == 2);
  const Sent first = sent("openai", stub.requests()[0]);
  CHECK(offers(first, "mcp__fixture__echo"));
  CHECK_FALSE(offers_any_of(first, "silent"));
  const std::string result = call_result("openai", sent("openai", stub.requests()[1]).messages, "call_echo");
  CHECK(result.find("echo: beside a silent one") != std::string::npos);
  CHECK(text_of(status_answered(daemon, "fixture", "silent"), "STATE") != "ready");  // still silent meanwhile

  // Its entry's call_timeout bounds initialize too: then the server is
  // reported with the reason, and started again after its backoff.
  const std::string reason = "mcp server 'silent': initialize: no answer in 2 s";
  const Value reported = wait_for_server(
      daemon, "silent", [](const Value& server) { return !text_of(server, "REASON").empty(); },
      "was reported with a reason", 2s + kProcessWait);
  CHECK(text_of(reported, "REASON") == reason);
  CHECK(text_of(reported, "STATE") != "ready");
  const Value in_status = status_answered(daemon, "fixture", "silent");
  CHECK(text_of(in_status, "REASON") == reason);
  CHECK(text_of(in_status, "STATE") != "ready");
  CHECK(daemon.wait_for_log(reason + "; starting it again in 1000 ms"));
}

TEST_CASE("a server that writes garbage on its stdout is reported with what it wrote while another serves",
          "[integration][mcp][concurrency]") {
  HttpStub stub;
  stub.enqueue(call_answer("openai", "call_echo", "mcp__fixture__echo", {{"message", "beside the garbage"}}));
  stub.enqueue(text_answer("openai", "The healthy one answered."));
  TempDir dir;
  const std::string servers = "mcp_servers:\n" + fixture_entry("fixture") + fixture_entry("garbage", "garbage");
  DaemonProcess daemon(with_permissions(with_model(dir, write_config(dir, stub, "openai", true, servers)),
                                        "    \"mcp__fixture__*\": allow\n    \"mcp__garbage__*\": allow"));
  wait_for_state(daemon, "fixture", "ready");
  const std::string reason =
      "mcp server 'garbage' wrote something that is not a JSON-RPC message: not JSON: this is not JSON at all";
  const Value reported = wait_for_server(
      daemon, "garbage", [](const Value& server) { return !text_of(server, "REASON").empty(); },
      "was reported with a reason");
  INFO(to_sexp(reported) << daemon.log());
  CHECK(text_of(reported, "REASON") == reason);
  CHECK(text_of(reported, "STATE") != "ready");
  CHECK(reported.at("TOOLS").items().empty());
  CHECK(daemon.wait_for_log(reason + "; starting it again in "));

  const auto frames = chat(daemon, "echo beside the garbage", "s1", "r1");
  INFO(printed(frames));
  REQUIRE(stub.requests().size() == 2);
  const Sent first = sent("openai", stub.requests()[0]);
  CHECK(offers(first, "mcp__fixture__echo"));
  CHECK_FALSE(offers_any_of(first, "garbage"));
  const std::string result = call_result("openai", sent("openai", stub.requests()[1]).messages, "call_echo");
  CHECK(result.find("echo: beside the garbage") != std::string::npos);

  // Started again after its backoff, it fails the same way, and the daemon still answers.
  const Value again = wait_for_server(
      daemon, "garbage", [](const Value& server) { return server.at("STARTS").as_integer() >= 2; },
      "was started again");
  CHECK(text_of(again, "REASON") == reason);
  const Value in_status = status_answered(daemon, "fixture", "garbage");
  CHECK(text_of(in_status, "STATE") != "ready");
  CHECK(text_of(in_status, "REASON") == reason);
}

TEST_CASE("a server answering a call with 100 MB fails that call at 4 MiB while the daemon keeps serving",
          "[integration][mcp][concurrency]") {
  HttpStub stub;
  stub.enqueue(call_answer("openai", "call_huge", "mcp__huge__echo", {{"message", "answer me"}}));
  stub.enqueue(text_answer("openai", "That was too much."));
  TempDir dir;
  const std::string servers = "mcp_servers:\n" + fixture_entry("fixture") + fixture_entry("huge", "huge");
  DaemonProcess daemon(with_permissions(with_model(dir, write_config(dir, stub, "openai", true, servers)),
                                        "    \"mcp__fixture__*\": allow\n    \"mcp__huge__*\": allow"));
  wait_for_state(daemon, "fixture", "ready");
  const Value first_start = wait_for_state(daemon, "huge", "ready");
  const long peak_before = peak_resident_kib(daemon.pid());

  const auto frames = chat(daemon, "ask the huge one", "s1", "r1");
  INFO(printed(frames) << daemon.log());
  REQUIRE(stub.requests().size() == 2);
  const std::string result = call_result("openai", sent("openai", stub.requests()[1]).messages, "call_huge");
  INFO(result);
  CHECK(result.find("mcp server 'huge' answered over 4 MiB in one message") != std::string::npos);
  CHECK(result.size() < 4096);  // the reason, not the answer
  CHECK(daemon.wait_for_log("mcp server 'huge' answered over 4 MiB in one message; starting it again in 1000 ms"));
  const Value after = server_of(daemon, "huge");
  CHECK(after.at("CALLS").as_integer() == 1);
  CHECK(after.at("FAILURES").as_integer() == 1);

  // The daemon keeps serving: an operator is answered, and another
  // conversation's call reaches the other server.
  status_answered(daemon, "fixture", "huge");
  stub.enqueue(call_answer("openai", "call_echo", "mcp__fixture__echo", {{"message", "after the huge one"}}));
  stub.enqueue(text_answer("openai", "The healthy one answered."));
  chat(daemon, "now the healthy one", "s2", "r2");
  REQUIRE(stub.requests().size() == 4);
  const std::string echoed = call_result("openai", sent("openai", stub.requests()[3]).messages, "call_echo");
  CHECK(echoed.find("echo: after the huge one") != std::string::npos);
  // Its memory was not blown: the answer is dropped at the cap, never held whole.
  const long peak_after = peak_resident_kib(daemon.pid());
  INFO("peak resident " << peak_before << " -> " << peak_after << " KiB");
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // their shadow memory and quarantine
  CHECK(peak_after - peak_before < 64 * 1024);
#endif
  // And the huge server itself was started again, with another process.
  const Value again = wait_for_server(
      daemon, "huge",
      [](const Value& server) { return server.at("STARTS").as_integer() == 2 && text_of(server, "STATE") == "ready"; },
      "was started again");
  CHECK(again.at("PID").as_integer() != first_start.at("PID").as_integer());
}

TEST_CASE("a server flooding its stderr gets only its rate-limited lines in the log while another serves",
          "[integration][mcp][concurrency]") {
  HttpStub stub;
  stub.enqueue(call_answer("openai", "call_echo", "mcp__fixture__echo", {{"message", "beside the flood"}}));
  stub.enqueue(text_answer("openai", "The healthy one answered."));
  stub.enqueue(call_answer("openai", "call_flood", "mcp__flood__echo", {{"message", "after the flood"}}));
  stub.enqueue(text_answer("openai", "The flooding one answered too."));
  TempDir dir;
  const std::string servers = "mcp_servers:\n" + fixture_entry("fixture") + fixture_entry("flood", "stderr-flood");
  DaemonProcess daemon(with_permissions(with_model(dir, write_config(dir, stub, "openai", true, servers)),
                                        "    \"mcp__fixture__*\": allow\n    \"mcp__flood__*\": allow"));
  wait_for_state(daemon, "fixture", "ready");
  // A model's call to the other server, while the flood may still pour.
  chat(daemon, "echo beside the flood", "s1", "r1");
  REQUIRE(stub.requests().size() == 2);
  const std::string result = call_result("openai", sent("openai", stub.requests()[1]).messages, "call_echo");
  INFO(result << daemon.log());
  CHECK(result.find("echo: beside the flood") != std::string::npos);

  // The fixture serves once its 200000 lines are written: the daemon read them all.
  wait_for_state(daemon, "flood", "ready");
  chat(daemon, "echo through the flooding one", "s2", "r2");
  REQUIRE(stub.requests().size() == 4);
  CHECK(
      call_result("openai", sent("openai", stub.requests()[3]).messages, "call_flood").find("echo: after the flood") !=
      std::string::npos);
  status_answered(daemon, "fixture", "flood");

  // 20 lines a 10 s window at most (the hub's kStderrLines per kStderrWindow);
  // a window that dropped some says so when the next one opens.
  const std::string log = daemon.log();
  const std::size_t logged = occurrences(log, "mcp server 'flood': flood line ");
  const std::size_t windows = 1 + occurrences(log, "more lines of its stderr were not logged");
  INFO(logged << " flood lines logged in " << windows << " windows; the log has " << log.size() << " bytes");
  CHECK(logged >= 1);
  CHECK(logged <= 20 * windows);
  CHECK(log.find("mcp server 'flood': flood line 0 of the fixture server's stderr") != std::string::npos);
  CHECK(log.find("flood line 199999 of") == std::string::npos);
  CHECK(log.size() < std::size_t{1} << 20);  // the flood was 10 MB
}

TEST_CASE("a tool that hangs fails after the entry's call timeout, the model is told, and a later call works",
          "[integration][mcp][concurrency]") {
  HttpStub stub;
  stub.enqueue(call_answer("openai", "call_hang", "mcp__fixture__hang", {{"message", "wait for me"}}));
  stub.set_default(text_answer("openai", "Still serving."));
  TempDir dir;
  const std::string servers =
      "mcp_servers:\n" + fixture_entry("fixture", "hang-listed", "    call_timeout: 3s\n") + fixture_entry("other");
  DaemonProcess daemon(with_permissions(with_model(dir, write_config(dir, stub, "openai", true, servers)),
                                        "    \"mcp__fixture__*\": allow\n    \"mcp__other__*\": allow"));
  const Value ready = wait_for_state(daemon, "fixture", "ready");
  REQUIRE(text_of(ready.at("TOOLS").items().back(), "OFFERED") == "mcp__fixture__hang");
  wait_for_state(daemon, "other", "ready");

  auto hanging = std::async(std::launch::async, [&] { return chat(daemon, "call the tool that hangs", "s1", "r1"); });
  // While the call hangs (counted, not failed: the snapshot itself is an
  // answer the daemon gave meanwhile), an operator and another conversation
  // are answered.
  const Value in_flight = wait_for_server(
      daemon, "fixture", [](const Value& server) { return server.at("CALLS").as_integer() == 1; }, "received the call");
  CHECK(in_flight.at("FAILURES").as_integer() == 0);
  CHECK(text_of(status_answered(daemon, "other", "fixture"), "STATE") == "ready");
  const auto other = chat(daemon, "are you there?", "s2", "r2");
  CHECK(printed(other).find("Still serving.") != std::string::npos);

  const auto frames = hanging.get();
  INFO(printed(frames) << daemon.log());
  const std::string failed = result_of_call(stub, "call_hang");
  INFO(failed);
  CHECK(failed.find("mcp server 'fixture': tools/call: no answer in 3 s") != std::string::npos);
  const Value after = server_of(daemon, "fixture");
  CHECK(after.at("FAILURES").as_integer() == 1);
  CHECK(text_of(after, "STATE") == "ready");  // a timeout is the call's end, not the server's
  CHECK(after.at("STARTS").as_integer() == 1);
  // The server was told (notifications/cancelled, which the fixture writes to its stderr).
  REQUIRE(daemon.wait_for_log("mcp server 'fixture': cancelled request "));
  CHECK(
      std::regex_search(daemon.log(), std::regex(R"(mcp server 'fixture': cancelled request \d+: no answer in 3 s)")));

  // A later call on the same server works.
  stub.enqueue(call_answer("openai", "call_after", "mcp__fixture__echo", {{"message", "after the hang"}}));
  stub.enqueue(text_answer("openai", "It answered this time."));
  chat(daemon, "echo after the hang", "s3", "r3");
  CHECK(call_result("openai", sent("openai", stub.requests().back()).messages, "call_after")
            .find("echo: after the hang") != std::string::npos);
  CHECK(server_of(daemon, "fixture").at("CALLS").as_integer() == 2);
}

TEST_CASE("the reference server-filesystem reads a file for the model and refuses a write outside its folder",
          "[integration][mcp][concurrency]") {
  const fs::path server = package_script("@modelcontextprotocol/server-filesystem", "dist/index.js");
  const std::string node = node_or_fail();
  TempDir dir;
  const fs::path served = dir.path() / "notes";
  fs::create_directories(served);
  const fs::path file = served / "todo.md";
  std::ofstream(file) << "buy milk\nwater the plants\n";
  // Inside the test's temporary folder, outside the one the server serves.
  const fs::path outside = dir.path() / "outside.txt";

  HttpStub stub;
  stub.enqueue(call_answer("openai", "call_read", "mcp__fs__read_text_file", {{"path", file.string()}}));
  stub.enqueue(text_answer("openai", "You have two things to do."));
  stub.enqueue(call_answer("openai", "call_write", "mcp__fs__write_file",
                           {{"path", outside.string()}, {"content", "this must not be written"}}));
  stub.enqueue(text_answer("openai", "The server refused."));
  // (sandbox) user: root when the tests run as root: a root daemon runs its servers as nobody, who cannot
  // reach the npm cache (under /root, mode 0700) nor this temporary folder.
  const std::string servers = "mcp_servers:\n  fs:\n    command: " + node + "\n    args: [\"" + server.string() +
                              "\", \"" + served.string() + "\"]\n" + as_daemon_user();
  DaemonProcess daemon(
      with_permissions(with_model(dir, write_config(dir, stub, "openai", true, servers)), "    \"mcp__fs__*\": allow"));
  const Value ready = wait_for_state(daemon, "fs", "ready");
  INFO(to_sexp(ready));
  auto offered = [&](std::string_view tool) {
    for (const Value& t : ready.at("TOOLS").items()) {
      if (t.at("NAME").text() == tool) return text_of(t, "OFFERED");
    }
    return std::string();
  };
  CHECK(offered("read_text_file") == "mcp__fs__read_text_file");
  CHECK(offered("write_file") == "mcp__fs__write_file");

  chat(daemon, "what is in my todo list?", "s1", "r1");
  REQUIRE(stub.requests().size() == 2);
  const std::string read = call_result("openai", sent("openai", stub.requests()[1]).messages, "call_read");
  INFO(read << daemon.log());
  CHECK(read.find("buy milk\nwater the plants") != std::string::npos);

  chat(daemon, "write a file outside the notes", "s2", "r2");
  REQUIRE(stub.requests().size() == 4);
  const std::string refused = call_result("openai", sent("openai", stub.requests()[3]).messages, "call_write");
  INFO(refused);
  CHECK(refused.find("Access denied - path outside allowed directories: ") != std::string::npos);
  CHECK(refused.find("outside.txt not in ") != std::string::npos);
  CHECK_FALSE(fs::exists(outside));
  const Value after = server_of(daemon, "fs");
  CHECK(after.at("CALLS").as_integer() == 2);
  CHECK(after.at("FAILURES").as_integer() == 1);  // the server's isError
}

}  // namespace passepartout
