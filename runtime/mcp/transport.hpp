// The two ways a Model Context Protocol client reaches a server: a program
// it starts, spoken to over its stdin and stdout (one JSON-RPC message a
// line), and an HTTP endpoint (Streamable HTTP). A transport carries message
// texts; what they mean is McpSession's (mcp_session.hpp).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace passepartout::mcp {

// What a transport tells its session, on the io_context's thread.
struct TransportEvents {
  std::function<void(std::string message)> on_message;
  // The transport is gone for good: the server exited, closed its output,
  // wrote garbage or too much. `reason` says so ("mcp server 'fs' exited
  // with status 1"). Called once; no message follows.
  std::function<void(std::string reason)> on_closed;
  // A line the server wrote to its standard error (stdio only).
  std::function<void(std::string line)> on_stderr;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Queues `message` (one JSON-RPC message, no newline). Any thread of the
  // io_context; dropped once the transport has closed.
  virtual void send(std::string message) = 0;
  // Ends the transport: the server's process is stopped (stdio). No event
  // follows. Idempotent; the io_context's thread.
  virtual void close() = 0;
  // The protocol version the session agreed on, which Streamable HTTP sends
  // with every later request (MCP-Protocol-Version). The io_context's thread.
  virtual void negotiated(std::string_view /*version*/) {}
  // The server's process id (stdio), 0 when there is none.
  virtual pid_t pid() const noexcept { return 0; }
};

// A server run as a program of the operator's choice.
struct StdioCommand {
  std::string name;               // the server's name, for messages
  std::string command;            // the program: a path, or a name looked up on PATH
  std::vector<std::string> args;  // its arguments
  // Its whole environment: PATH, HOME and LANG of the daemon's unless given,
  // then these; nothing else leaks in.
  std::vector<std::pair<std::string, std::string>> env;
  std::string working_dir;  // "" : the daemon's
  std::size_t max_message_bytes = std::size_t{4} * 1024 * 1024;
  // What runs `command` in its place: a program and its first arguments, to
  // which `command` and `args` are appended (`passepartout confine ... --`).
  // Empty: `command` is started itself.
  std::vector<std::string> launcher;
};

// Starts `command` with its stdin, stdout and stderr on pipes watched by
// `io`, in a process group of its own; on the io_context's thread, or before
// it runs. The error
// names the program and why it could not be started.
Result<std::shared_ptr<Transport>> start_stdio(boost::asio::io_context& io, const StdioCommand& command,
                                               TransportEvents events);

// A server reached over Streamable HTTP (2025-06-18 and 2025-11-25): each
// message is POSTed to `url`; the answer is JSON or an SSE stream; the
// Mcp-Session-Id the server assigns is sent back; a GET stream carries what
// the server sends unasked; a dropped stream is resumed with Last-Event-ID
// after the server's `retry`.
struct HttpEndpoint {
  std::string name;                                          // the server's name, for messages
  std::string url;                                           // http:// or https://
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every request
  std::size_t max_message_bytes = std::size_t{4} * 1024 * 1024;
  std::chrono::milliseconds connect_timeout{10'000};
};

// Starts the transport on `io` (its thread, or before it runs). Nothing is
// sent until the session's first message.
Result<std::shared_ptr<Transport>> start_http(boost::asio::io_context& io, const HttpEndpoint& endpoint,
                                              TransportEvents events);

}  // namespace passepartout::mcp
