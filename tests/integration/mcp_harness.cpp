// The MCP integration tests' shared helpers.
#include "integration/mcp_harness.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include "value/sexp_printer.hpp"

namespace passepartout::testing {

namespace fs = std::filesystem;

DaemonProcess::Options with_permissions(DaemonProcess::Options options, std::string lines) {
  options.copy_manifests = true;
  options.edit_manifests = [lines = std::move(lines)](const fs::path& dir) {
    const fs::path file = dir / "tool-permissions.yaml";
    std::string text = read_text_file(file);
    const std::string bundled = "    \"mcp__*\": ask";
    const std::size_t at = text.find(bundled);
    REQUIRE(at != std::string::npos);
    text.replace(at, text.find('\n', at) - at, lines);
    std::ofstream(file) << text;
  };
  return options;
}

std::string fixture_entry(std::string_view name, std::string_view mode, std::string_view more) {
  std::string entry = "  " + std::string(name) + ":\n    command: " + std::string(PP_MCP_FIXTURE) + "\n";
  if (!mode.empty()) entry += "    args: [" + std::string(mode) + "]\n";
  entry += more;
  return entry + as_daemon_user();  // a root daemon's servers run as nobody, who may not reach the build tree
}

Value operator_command(const DaemonProcess& daemon, const std::string& command) {
  WireClient op = WireClient::local(daemon.socket_path());
  op.expect_handshake();
  op.send("(:TYPE :OPERATOR :COMMAND " + command + ")");
  return op.expect_frame();
}

Value server_in(const Value& servers, std::string_view name) {
  for (const Value& server : servers.items()) {
    if (server.at("NAME").text() == name) return server;
  }
  return {};
}

Value server_of(const DaemonProcess& daemon, std::string_view name) {
  return server_in(operator_command(daemon, ":MCP").path({"PAYLOAD", "SERVERS"}), name);
}

Value tool_of(const Value& server, std::string_view name) {
  for (const Value& tool : server.at("TOOLS").items()) {
    if (tool.at("NAME").text() == name) return tool;
  }
  return {};
}

std::string text_of(const Value& entry, const char* key) {
  const Value& value = entry.at(key);
  return value.is_string() ? std::string(value.text()) : std::string();
}

Value wait_for_state(const DaemonProcess& daemon, std::string_view name, std::string_view state) {
  return wait_for_server(
      daemon, name, [state](const Value& server) { return text_of(server, "STATE") == state; },
      "became " + std::string(state));
}

void never_held(const DaemonProcess& daemon, std::string_view name, std::string_view what, const Value& last) {
  FAIL("mcp server '" << name << "' never " << what << ": " << to_sexp(last) << "\n" << daemon.log());
}

void pause_between_polls() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

}  // namespace passepartout::testing
