// `passepartout mcp probe`: a Model Context Protocol client for trying a
// server by hand, without a daemon: initialize, list the tools, optionally
// call one, printing every message exchanged.
#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
// GCC 12 reports a "potential null pointer dereference" inside Asio's
// scheduler (a false positive); silenced for Asio's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#pragma GCC diagnostic pop

#include "cli/cli11.hpp"

#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "mcp/mcp_client.hpp"

namespace passepartout::cli {

namespace {

namespace asio = boost::asio;
using nlohmann::json;

struct ProbeOptions {
  std::vector<std::string> target;  // a URL, or a command and its arguments
  std::vector<std::string> call;    // TOOL JSON
  std::vector<std::string> env;     // NAME=VALUE for a command
  double timeout_seconds = 30;
  bool json = false;
  bool quiet = false;  // no exchanged messages
};

bool is_url(const std::string& text) { return text.rfind("http://", 0) == 0 || text.rfind("https://", 0) == 0; }

// What one probe saw, for either output.
struct ProbeReport {
  std::vector<json> exchanged;
  json server;
  json tools = json::array();
  json call;
  std::string error;
};

json parsed_or_text(std::string_view text) {
  json parsed = json::parse(text, nullptr, false);
  return parsed.is_discarded() ? json(std::string(text)) : parsed;
}

int run_probe(const ProbeOptions& options) {
  std::signal(SIGPIPE, SIG_IGN);
  if (options.target.empty()) {
    std::cerr << "passepartout: mcp probe needs a server: a URL, or -- COMMAND ARGS...\n";
    return kExitUsage;
  }
  if (!options.call.empty() && !json::accept(options.call[1])) {
    std::cerr << "passepartout: --call " << options.call[0] << ": the arguments are not JSON: " << options.call[1]
              << '\n';
    return kExitUsage;
  }
  if (is_url(options.target[0])) {
    std::cerr << "passepartout: mcp probe: Streamable HTTP is not supported yet; give a command\n";
    return kExitUsage;
  }
  mcp::StdioCommand command;
  command.name = "probe";
  command.command = options.target[0];
  command.args.assign(options.target.begin() + 1, options.target.end());
  for (const std::string& entry : options.env) {
    const auto equals = entry.find('=');
    if (equals == std::string::npos || equals == 0) {
      std::cerr << "passepartout: --env " << entry << ": give NAME=VALUE\n";
      return kExitUsage;
    }
    command.env.emplace_back(entry.substr(0, equals), entry.substr(equals + 1));
  }
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(options.timeout_seconds * 1000));

  asio::io_context io;
  ProbeReport report;
  const bool live = !options.json && !options.quiet;
  mcp::ClientOptions client_options;
  client_options.name = command.name;
  client_options.initialize_timeout = timeout;
  client_options.request_timeout = timeout;
  client_options.on_exchange = [&](bool outgoing, std::string_view message) {
    if (live) std::cout << (outgoing ? "> " : "< ") << message << '\n' << std::flush;
    report.exchanged.push_back(
        json{{"direction", outgoing ? "sent" : "received"}, {"message", parsed_or_text(message)}});
  };
  mcp::ClientEvents events;
  events.on_stderr = [&](std::string line) {
    if (!options.json) std::cerr << "[server] " << line << '\n';
  };
  auto client = mcp::McpClient::create(io, client_options, events);
  int status = kExitOk;
  auto finish = [&](std::string error) {
    if (!error.empty()) {
      report.error = std::move(error);
      status = kExitProblem;
    }
    client->close();
    io.stop();
  };

  client->start(
      [&](mcp::TransportEvents transport_events) { return mcp::start_stdio(io, command, std::move(transport_events)); },
      [&](Result<mcp::ServerInfo> info) {
        if (!info) return finish(info.error().message);
        report.server = {{"name", info->name},
                         {"version", info->version},
                         {"protocol_version", info->protocol_version},
                         {"tools_list_changed", info->tools_list_changed}};
        client->list_tools([&](Result<std::vector<mcp::ToolDefinition>> tools) {
          if (!tools) return finish(tools.error().message);
          for (const mcp::ToolDefinition& tool : *tools) {
            report.tools.push_back(
                {{"name", tool.name},
                 {"title", tool.title},
                 {"description", tool.description},
                 {"sha256", tool.digest},
                 {"annotations",
                  tool.annotations_json.empty() ? json(nullptr) : json::parse(tool.annotations_json, nullptr, false)}});
          }
          if (options.call.empty()) return finish("");
          client->call_tool(options.call[0], options.call[1], timeout, [&](Result<mcp::ToolResult> result) {
            if (!result) return finish(result.error().message);
            report.call = {{"tool", options.call[0]},
                           {"is_error", result->is_error},
                           {"text", result->text},
                           {"result", parsed_or_text(result->raw_json)}};
            finish(result->is_error ? "the tool reported an error" : "");
          });
        });
      });
  io.run();

  if (options.json) {
    json document = {{"ok", report.error.empty()}, {"server", report.server}, {"tools", report.tools}};
    if (!report.call.is_null()) document["call"] = report.call;
    if (!report.error.empty()) document["error"] = report.error;
    document["exchanged"] = report.exchanged;
    std::cout << document.dump(2) << '\n';
    return status;
  }
  if (!report.server.is_null()) {
    std::cout << "server: " << report.server["name"].get<std::string>() << ' '
              << report.server["version"].get<std::string>() << ", MCP "
              << report.server["protocol_version"].get<std::string>() << '\n';
    std::cout << "tools (" << report.tools.size() << "):\n";
    for (const json& tool : report.tools) {
      std::string description = tool["description"].get<std::string>();
      if (const auto newline = description.find('\n'); newline != std::string::npos) description.resize(newline);
      std::cout << "  " << tool["name"].get<std::string>()
                << "  sha256:" << tool["sha256"].get<std::string>().substr(0, 12) << "  " << description << '\n';
    }
  }
  if (!report.call.is_null()) {
    std::cout << "result of " << report.call["tool"].get<std::string>()
              << (report.call["is_error"].get<bool>() ? " (isError)" : "") << ":\n"
              << report.call["text"].get<std::string>() << '\n';
  }
  if (!report.error.empty()) std::cerr << "passepartout: " << report.error << '\n';
  return status;
}

}  // namespace

void add_mcp_command(CLI::App& app, Runner& chosen) {
  auto* mcp = app.add_subcommand("mcp", "Model Context Protocol servers: try one by hand (probe)");
  mcp->require_subcommand(1);

  auto options = std::make_shared<ProbeOptions>();
  auto* probe =
      mcp->add_subcommand("probe",
                          "Start a server (-- COMMAND ARGS...) and speak to it as the daemon would, without a daemon:\n"
                          "initialize, list its tools, optionally call one (--call TOOL JSON), printing every message\n"
                          "exchanged ('> ' sent, '< ' received) and then what it found. Exits 1 when the server fails\n"
                          "to initialize, a request fails, or the called tool reports an error.");
  probe->add_option("target", options->target, "-- COMMAND ARGS... (the server's program and arguments)")->required();
  probe->add_option("--call", options->call, "Call one tool: its name and its arguments as a JSON object")
      ->expected(2)
      ->type_name("TOOL JSON");
  probe->add_option("--env", options->env, "NAME=VALUE in the server's environment (repeatable)");
  probe->add_option("--timeout", options->timeout_seconds, "Seconds to wait for each answer (default 30)")
      ->check(CLI::Range(0.1, 3600.0));
  probe->add_flag("--json", options->json, "Print one JSON document: server, tools, call, exchanged");
  probe->add_flag("-q,--quiet", options->quiet, "Do not print the messages exchanged");
  probe->callback([options, &chosen] { chosen = [options] { return run_probe(*options); }; });
}

}  // namespace passepartout::cli
