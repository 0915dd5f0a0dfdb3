// Tests for McpClient over the stdio transport, against the fixture server
// (tests/fixtures/mcp): the handshake, paged listing, calls and their
// failures, and every way a server can misbehave. The io_context runs on the
// test's thread; each wait is bounded.
#include "mcp/mcp_client.hpp"

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

using namespace passepartout;
using namespace passepartout::mcp;
using namespace std::chrono_literals;

namespace {

// A session with the fixture server in `mode`, and what it reported.
struct Session {
  boost::asio::io_context io;
  std::shared_ptr<McpClient> client;
  std::vector<std::string> sent;
  std::vector<std::string> received;
  std::size_t stderr_lines = 0;
  int tools_changed = 0;
  std::optional<std::string> closed;

  explicit Session(const std::string& mode, ClientOptions options = {}) {
    options.name = "fixture";
    options.on_exchange = [this](bool outgoing, std::string_view message) {
      (outgoing ? sent : received).emplace_back(message);
    };
    ClientEvents events;
    events.on_tools_changed = [this] { ++tools_changed; };
    events.on_closed = [this](std::string reason) { closed = std::move(reason); };
    events.on_stderr = [this](const std::string&) { ++stderr_lines; };
    client = McpClient::create(io, std::move(options), std::move(events));
    command.name = "fixture";
    command.command = PP_MCP_FIXTURE;
    if (!mode.empty()) command.args = {mode};
  }

  // Runs the loop until `done` holds, at most `limit`.
  template <class Predicate>
  bool run_until(Predicate done, std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      if (io.stopped()) io.restart();
      io.run_one_for(50ms);
    }
    return done();
  }

  std::optional<Result<ServerInfo>> start() {
    std::optional<Result<ServerInfo>> info;
    client->start([this](TransportEvents events) { return start_stdio(io, command, std::move(events)); },
                  [&info](Result<ServerInfo> result) { info = std::move(result); });
    run_until([&] { return info.has_value(); });
    return info;
  }

  std::optional<Result<std::vector<ToolDefinition>>> list() {
    std::optional<Result<std::vector<ToolDefinition>>> tools;
    client->list_tools([&tools](Result<std::vector<ToolDefinition>> result) { tools = std::move(result); });
    run_until([&] { return tools.has_value(); });
    return tools;
  }

  std::optional<Result<ToolResult>> call(const std::string& tool, const std::string& arguments,
                                         std::chrono::milliseconds timeout = 10s) {
    std::optional<Result<ToolResult>> result;
    client->call_tool(tool, arguments, timeout, [&result](Result<ToolResult> r) { result = std::move(r); });
    run_until([&] { return result.has_value(); }, timeout + 10s);
    return result;
  }

  bool sent_containing(std::string_view needle) const {
    for (const std::string& message : sent) {
      if (message.find(needle) != std::string::npos) return true;
    }
    return false;
  }

  StdioCommand command;
};

bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0; }

}  // namespace

TEST_CASE("mcp client: initializes, lists every page and calls tools", "[mcp]") {
  Session session("");
  auto info = session.start();
  REQUIRE(info.has_value());
  REQUIRE(info->has_value());
  CHECK((*info)->protocol_version == "2025-06-18");  // the server's older one: both speak it
  CHECK((*info)->name == "fixture");
  CHECK((*info)->tools_list_changed);
  CHECK(session.client->ready());
  CHECK(session.sent_containing(R"("protocolVersion":"2025-11-25")"));  // what the client offered
  CHECK(session.sent_containing("notifications/initialized"));

  auto tools = session.list();
  REQUIRE(tools.has_value());
  REQUIRE(tools->has_value());
  REQUIRE((*tools)->size() == 2);  // one on each page: the cursor was followed
  CHECK((**tools)[0].name == "echo");
  CHECK((**tools)[1].name == "fail");
  CHECK((**tools)[0].digest.size() == 64);
  CHECK(session.sent_containing(R"("cursor":"page-2")"));

  auto echo = session.call("echo", R"({"message":"hi"})");
  REQUIRE(echo.has_value());
  REQUIRE(echo->has_value());
  CHECK_FALSE((*echo)->is_error);
  CHECK((*echo)->text == "echo: hi");

  auto failed = session.call("fail", "{}");
  REQUIRE(failed.has_value());
  REQUIRE(failed->has_value());
  CHECK((*failed)->is_error);
  CHECK((*failed)->text == "it failed, as it always does");

  auto unknown = session.call("nope", "{}");
  REQUIRE(unknown.has_value());
  REQUIRE_FALSE(unknown->has_value());
  CHECK_THAT(unknown->error().message, Catch::Contains("tools/call failed: unknown tool nope (error -32602)"));

  // The server pinged the client after initialized; the client answered with its id.
  CHECK(session.sent_containing(R"({"id":"ping-1","jsonrpc":"2.0","result":{}})"));
  CHECK_FALSE(session.closed.has_value());
}

TEST_CASE("mcp client: arguments that are not a JSON object are refused before anything is sent", "[mcp]") {
  Session session("");
  REQUIRE(session.start()->has_value());
  const std::size_t sent = session.sent.size();
  auto result = session.call("echo", "[1, 2]");
  REQUIRE_FALSE(result->has_value());
  CHECK_THAT(result->error().message, Catch::Contains("must be a JSON object"));
  CHECK(session.sent.size() == sent);
}

TEST_CASE("mcp client: a call with no answer times out, is cancelled, and the session goes on", "[mcp]") {
  Session session("");
  REQUIRE(session.start()->has_value());
  auto hung = session.call("hang", "{}", 200ms);
  REQUIRE(hung.has_value());
  REQUIRE_FALSE(hung->has_value());
  CHECK_THAT(hung->error().message, Catch::Contains("mcp server 'fixture': tools/call: no answer in 200 ms"));
  CHECK(session.sent_containing(R"("method":"notifications/cancelled")"));
  auto echo = session.call("echo", R"({"message":"still here"})");
  REQUIRE(echo->has_value());
  CHECK((*echo)->text == "echo: still here");
}

TEST_CASE("mcp client: cancel fails the call at once and tells the server", "[mcp]") {
  Session session("");
  REQUIRE(session.start()->has_value());
  std::optional<Result<ToolResult>> result;
  const std::int64_t id =
      session.client->call_tool("hang", "{}", 10s, [&result](Result<ToolResult> r) { result = std::move(r); });
  session.client->cancel(id, "the user stopped it");
  REQUIRE(result.has_value());  // at once, not on a later turn of the loop
  REQUIRE_FALSE(result->has_value());
  CHECK_THAT(result->error().message, Catch::Contains("the user stopped it"));
  CHECK(session.sent_containing(R"("params":{"reason":"the user stopped it","requestId":)" + std::to_string(id)));
}

TEST_CASE("mcp client: a server that crashes fails the call in flight with its exit status", "[mcp]") {
  Session session("crash");
  REQUIRE(session.start()->has_value());
  auto result = session.call("echo", R"({"message":"hi"})");
  REQUIRE(result.has_value());
  REQUIRE_FALSE(result->has_value());
  CHECK(result->error().message == "mcp server 'fixture' exited with status 3");
  REQUIRE(session.closed.has_value());
  CHECK(*session.closed == "mcp server 'fixture' exited with status 3");
  CHECK_FALSE(session.client->ready());
  // Later calls fail at once with the same reason.
  auto later = session.call("echo", "{}");
  REQUIRE_FALSE(later->has_value());
  CHECK(later->error().message == "mcp server 'fixture' exited with status 3");
}

TEST_CASE("mcp client: a server that never answers initialize is reported", "[mcp]") {
  ClientOptions options;
  options.initialize_timeout = 300ms;
  Session session("silent", options);
  auto info = session.start();
  REQUIRE(info.has_value());
  REQUIRE_FALSE(info->has_value());
  CHECK(info->error().message == "mcp server 'fixture': initialize: no answer in 300 ms");
  // initialize is the one request the protocol says is never cancelled.
  CHECK_FALSE(session.sent_containing("notifications/cancelled"));
}

TEST_CASE("mcp client: a server that writes garbage ends its session", "[mcp]") {
  Session session("garbage");
  auto info = session.start();
  REQUIRE_FALSE(info->has_value());
  CHECK_THAT(info->error().message,
             Catch::Contains("mcp server 'fixture' wrote something that is not a JSON-RPC message: not JSON: "
                             "this is not JSON at all"));
  REQUIRE(session.closed.has_value());
}

TEST_CASE("mcp client: an answer over the cap ends the session, and the server is stopped", "[mcp]") {
  Session session("huge");
  REQUIRE(session.start()->has_value());
  const pid_t pid = session.client->pid();
  REQUIRE(pid > 0);
  auto result = session.call("echo", "{}");
  REQUIRE_FALSE(result->has_value());
  CHECK(result->error().message == "mcp server 'fixture' answered over 4 MiB in one message");
  CHECK(session.run_until([&] { return process_gone(pid); }));
}

TEST_CASE("mcp client: a server that speaks another protocol version is refused", "[mcp]") {
  Session session("version");
  auto info = session.start();
  REQUIRE_FALSE(info->has_value());
  CHECK(info->error().message ==
        "mcp server 'fixture' speaks MCP 1999-01-01; this client speaks 2025-11-25, 2025-06-18 and 2025-03-26");
  CHECK(info->error().code == ErrorCode::refused);
}

TEST_CASE("mcp client: a server that exits before answering is reported with its status", "[mcp]") {
  Session session("exit-early");
  auto info = session.start();
  REQUIRE_FALSE(info->has_value());
  CHECK(info->error().message == "mcp server 'fixture' exited with status 7");
}

TEST_CASE("mcp client: a program that does not exist is named", "[mcp]") {
  Session session("");
  session.command.command = "/nonexistent/mcp-server";
  auto info = session.start();
  REQUIRE_FALSE(info->has_value());
  CHECK(info->error().message ==
        "cannot start mcp server 'fixture' (/nonexistent/mcp-server): No such file or directory");
  CHECK(info->error().code == ErrorCode::not_found);
}

TEST_CASE("mcp client: a changed tool list is announced, and the changed definition has another digest", "[mcp]") {
  Session session("drift");
  REQUIRE(session.start()->has_value());
  auto before = session.list();
  REQUIRE(before->has_value());
  REQUIRE(session.call("echo", R"({"message":"first"})")->has_value());
  REQUIRE(session.run_until([&] { return session.tools_changed == 1; }));
  auto after = session.list();
  REQUIRE(after->has_value());
  CHECK((**before)[0].name == (**after)[0].name);
  CHECK((**before)[0].digest != (**after)[0].digest);
  CHECK((**before)[1].digest == (**after)[1].digest);  // the other tool did not change
}

TEST_CASE("mcp client: a server flooding its stderr keeps serving", "[mcp]") {
  Session session("stderr-flood");
  REQUIRE(session.start()->has_value());
  auto echo = session.call("echo", R"({"message":"through the flood"})");
  REQUIRE(echo->has_value());
  CHECK((*echo)->text == "echo: through the flood");
  CHECK(session.run_until([&] { return session.stderr_lines == 200000; }));
}

TEST_CASE("mcp client: close fails what is in flight and stops the server", "[mcp]") {
  Session session("");
  REQUIRE(session.start()->has_value());
  const pid_t pid = session.client->pid();
  std::optional<Result<ToolResult>> result;
  session.client->call_tool("hang", "{}", 10s, [&result](Result<ToolResult> r) { result = std::move(r); });
  session.client->close();
  REQUIRE(result.has_value());
  REQUIRE_FALSE(result->has_value());
  CHECK(result->error().message == "mcp server 'fixture': closed");
  CHECK_FALSE(session.closed.has_value());  // close() reports nothing: the caller knows
  CHECK(session.run_until([&] { return process_gone(pid); }));
}
