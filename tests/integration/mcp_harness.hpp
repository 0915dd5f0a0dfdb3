// What the MCP integration tests share: the fixture server as an
// mcp_servers entry, the tool-permissions table edited, and the daemon's
// MCP listing read and waited on over the operator socket.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "integration/daemon_process.hpp"
#include "value/value.hpp"

namespace passepartout::testing {

// The daemon's tool-permissions table with `lines` (YAML, indented four) in
// place of the bundled `"mcp__*": ask`.
DaemonProcess::Options with_permissions(DaemonProcess::Options options, std::string lines);

// The fixture server (tests/fixtures/mcp) as the entry `name` of
// mcp_servers:, misbehaving as `mode` says, with `more` keys (YAML, indented
// four), run as the daemon's user (as_daemon_user()).
std::string fixture_entry(std::string_view name, std::string_view mode = "", std::string_view more = "");

// The daemon's answer to an operator command (over its Unix socket).
Value operator_command(const DaemonProcess& daemon, const std::string& command);

// The server `name` in a list of servers (:MCP's :SERVERS, STATUS's
// :MCP-SERVERS), NIL when it is not there.
Value server_in(const Value& servers, std::string_view name);
// The server `name` of the daemon's MCP listing now, NIL when it is not there.
Value server_of(const DaemonProcess& daemon, std::string_view name);
// The tool `name` of a server's entry, NIL when it is not there.
Value tool_of(const Value& server, std::string_view name);
// A text field of an entry, "" when it is not a string.
std::string text_of(const Value& entry, const char* key);

// Polls the MCP listing (bounded by `timeout`) until server `name`'s entry
// satisfies `holds`; that entry. The test fails, saying `what` never held.
template <class Holds>
Value wait_for_server(const DaemonProcess& daemon, std::string_view name, Holds holds, std::string_view what,
                      std::chrono::milliseconds timeout = kProcessWait);
// Waits until server `name` is in `state`; its entry.
Value wait_for_state(const DaemonProcess& daemon, std::string_view name, std::string_view state);

// Failing a wait: the test fails with the last entry seen and the log.
void never_held(const DaemonProcess& daemon, std::string_view name, std::string_view what, const Value& last);
// One poll's pause.
void pause_between_polls();

template <class Holds>
Value wait_for_server(const DaemonProcess& daemon, std::string_view name, Holds holds, std::string_view what,
                      std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Value server;
  while (std::chrono::steady_clock::now() < deadline) {
    server = server_of(daemon, name);
    if (!server.is_nil() && holds(server)) return server;
    pause_between_polls();
  }
  never_held(daemon, name, what, server);
  return server;
}

}  // namespace passepartout::testing
