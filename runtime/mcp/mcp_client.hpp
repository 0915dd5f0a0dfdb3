// McpClient: one session with one Model Context Protocol server, over a
// transport (transport.hpp). It negotiates the protocol version, lists the
// server's tools (following the cursor), calls them with a deadline, answers
// the server's pings, and reports what the server says changed. Everything
// happens on the thread that runs the transport's io_context: no thread
// waits on a server.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "mcp/tools.hpp"
#include "mcp/transport.hpp"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace passepartout::mcp {

// The protocol versions this client speaks, newest first; it offers the
// first. 2025-03-26 is what some servers still answer (the conformance
// suite's sse-retry one among them); what it differs in (JSON-RPC batches,
// no MCP-Protocol-Version header required) the transports read anyway.
inline constexpr std::string_view kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

// What a server said of itself when it initialized.
struct ServerInfo {
  std::string protocol_version;  // the one both sides speak
  std::string name;              // serverInfo.name ("" when absent)
  std::string version;           // serverInfo.version
  std::string instructions;      // "" when absent
  bool tools = false;            // it has tools (capabilities.tools)
  bool tools_list_changed = false;
};

struct ClientOptions {
  std::string name;  // the server's, for messages
  std::chrono::milliseconds initialize_timeout{30'000};
  std::chrono::milliseconds request_timeout{30'000};      // tools/list pages, ping
  std::size_t max_result_bytes = std::size_t{64} * 1024;  // rendered result text
  std::size_t max_tools = 1024;                           // over all pages
  // Every message sent (outgoing = true) and received, as its text; for `mcp probe`.
  std::function<void(bool outgoing, std::string_view message)> on_exchange;
};

struct ClientEvents {
  // The server said its tools changed (notifications/tools/list_changed).
  std::function<void()> on_tools_changed;
  // The session is over (the transport's reason); every call in flight has
  // already failed with it.
  std::function<void(std::string reason)> on_closed;
  std::function<void(std::string line)> on_stderr;
};

using StartTransport = std::function<Result<std::shared_ptr<Transport>>(TransportEvents)>;

class McpClient : public std::enable_shared_from_this<McpClient> {
 public:
  using InitializeDone = std::function<void(Result<ServerInfo>)>;
  using ToolsDone = std::function<void(Result<std::vector<ToolDefinition>>)>;
  using CallDone = std::function<void(Result<ToolResult>)>;
  using PingDone = std::function<void(Result<void>)>;

  // Created, used and destroyed on the io_context's thread.
  static std::shared_ptr<McpClient> create(boost::asio::io_context& io, ClientOptions options, ClientEvents events);
  ~McpClient();
  McpClient(const McpClient&) = delete;
  McpClient& operator=(const McpClient&) = delete;

  // Starts the transport, sends initialize, and on a usable answer
  // notifications/initialized. `done` gets the server's info, or why not:
  // the transport did not start, no answer within initialize_timeout, an
  // error, a version this client does not speak, a malformed answer.
  void start(const StartTransport& start_transport, InitializeDone done);

  // Every tool, following nextCursor; a malformed tool is an error naming it.
  void list_tools(ToolsDone done);

  // Calls `tool` with `arguments_json` (an object's text). Past `timeout`
  // the request is cancelled (notifications/cancelled) and `done` gets
  // "no answer in 30 s". Returns the request's id, for cancel().
  std::int64_t call_tool(std::string_view tool, std::string_view arguments_json, std::chrono::milliseconds timeout,
                         CallDone done);

  // Cancels a request in flight: the server is told, and its `done` gets
  // `reason` at once. Nothing happens when it already finished.
  void cancel(std::int64_t id, std::string_view reason);

  void ping(PingDone done);

  // Ends the session: every request in flight fails with "closed", the
  // transport is closed, no event follows.
  void close();

  bool ready() const noexcept;
  const ServerInfo& server() const noexcept;
  pid_t pid() const noexcept;

 private:
  struct Impl;
  McpClient(boost::asio::io_context& io, ClientOptions options, ClientEvents events);
  std::unique_ptr<Impl> impl_;
};

}  // namespace passepartout::mcp
