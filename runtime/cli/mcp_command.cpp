// `passepartout mcp probe`: a Model Context Protocol client for trying a
// server by hand, without a daemon: a program over stdio or an endpoint over
// Streamable HTTP; initialize, list the tools, optionally call one, printing
// every message exchanged.
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

#include "cli/client_options.hpp"
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/operator_request.hpp"
#include "mcp/mcp_client.hpp"

namespace passepartout::cli {

namespace {

namespace asio = boost::asio;
using nlohmann::json;

struct ProbeOptions {
  std::vector<std::string> target;   // a URL, or a command and its arguments
  std::vector<std::string> call;     // TOOL JSON
  std::vector<std::string> env;      // NAME=VALUE for a command
  std::vector<std::string> headers;  // NAME=VALUE for a URL
  double timeout_seconds = 30;
  bool json = false;
  bool quiet = false;  // no exchanged messages
};

bool is_url(const std::string& text) { return text.rfind("http://", 0) == 0 || text.rfind("https://", 0) == 0; }

// How long the DELETE that ends an HTTP session may take once the probe is
// done: it is sent, not waited for (a server that keeps the session is no
// reason to hang).
constexpr std::chrono::milliseconds kSessionEndGrace{2000};

// Splits NAME=VALUE entries of `option` into `out`; false (and a message) on one without a name.
bool split_pairs(const std::vector<std::string>& entries, std::string_view option,
                 std::vector<std::pair<std::string, std::string>>& out) {
  for (const std::string& entry : entries) {
    const auto equals = entry.find('=');
    if (equals == std::string::npos || equals == 0) {
      std::cerr << "passepartout: " << option << ' ' << entry << ": give NAME=VALUE\n";
      return false;
    }
    out.emplace_back(entry.substr(0, equals), entry.substr(equals + 1));
  }
  return true;
}

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

// Prints what the probe saw: one JSON document, or text.
void print_report(const ProbeOptions& options, const ProbeReport& report) {
  if (options.json) {
    json document = {{"ok", report.error.empty()}, {"server", report.server}, {"tools", report.tools}};
    if (!report.call.is_null()) document["call"] = report.call;
    if (!report.error.empty()) document["error"] = report.error;
    document["exchanged"] = report.exchanged;
    std::cout << document.dump(2) << '\n' << std::flush;
    return;
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
  std::cout << std::flush;
  if (!report.error.empty()) std::cerr << "passepartout: " << report.error << '\n';
}

std::string text_of(const Value& plist, const char* key) {
  const Value& value = plist.at(key);
  return value.is_string() ? std::string(value.text()) : std::string();
}

std::int64_t number_of(const Value& plist, const char* key) { return plist.at(key).as_integer(); }

// `mcp list`: every server, its state and its tools.
void render_servers(const Value& response, std::ostream& out) {
  const Value& servers = response.path({"PAYLOAD", "SERVERS"});
  if (servers.items().empty()) {
    out << "no MCP servers are configured (mcp_servers: in the config file, or --mcp-config FILE)\n";
    return;
  }
  for (const Value& server : servers.items()) {
    out << text_of(server, "NAME") << "  " << text_of(server, "TRANSPORT") << "  " << text_of(server, "STATE");
    if (const std::string version = text_of(server, "PROTOCOL-VERSION"); !version.empty()) out << "  MCP " << version;
    if (const std::int64_t pid = number_of(server, "PID"); pid > 0) out << "  pid " << pid;
    out << "  calls " << number_of(server, "CALLS") << "  failures " << number_of(server, "FAILURES");
    if (number_of(server, "CALLS") > 0) {
      out << "  p50 " << number_of(server, "LATENCY-P50-US") << " us  p99 " << number_of(server, "LATENCY-P99-US")
          << " us";
    }
    out << '\n';
    if (const std::string reason = text_of(server, "REASON"); !reason.empty()) out << "  " << reason << '\n';
    if (const std::string sandbox = text_of(server, "SANDBOX"); !sandbox.empty()) out << "  " << sandbox << '\n';
    for (const Value& tool : server.at("TOOLS").items()) {
      const std::string offered = text_of(tool, "OFFERED");
      out << "  " << (offered.empty() ? text_of(tool, "NAME") + " (not offered)" : offered) << "  "
          << text_of(tool, "PIN") << "  sha256:" << text_of(tool, "SHA256").substr(0, 12);
      if (const std::string level = text_of(tool, "PERMISSION"); !level.empty()) out << "  tool-permissions: " << level;
      if (const std::string pinned = text_of(tool, "PINNED-SHA256"); !pinned.empty()) {
        out << " (pinned " << pinned.substr(0, 12) << ": run passepartout mcp trust " << text_of(server, "NAME") << ' '
            << text_of(tool, "NAME") << ")";
      }
      if (const std::string annotations = text_of(tool, "ANNOTATIONS-JSON"); !annotations.empty()) {
        out << "  annotations " << annotations << " (shown, not trusted)";
      }
      if (const std::string note = text_of(tool, "NOTE"); !note.empty()) out << "  " << note;
      out << '\n';
    }
  }
}

// `mcp trust`: each definition accepted, with what changed.
void render_trust(const Value& response, std::ostream& out) {
  out << response.path({"PAYLOAD", "MESSAGE"}).text() << '\n';
  for (const Value& change : response.path({"PAYLOAD", "CHANGES"}).items()) {
    out << "  " << text_of(change, "TOOL") << ": sha256 " << text_of(change, "FROM-SHA256").substr(0, 12) << " -> "
        << text_of(change, "TO-SHA256").substr(0, 12) << '\n';
    const json from = json::parse(text_of(change, "FROM-DEFINITION"), nullptr, false);
    const json to = json::parse(text_of(change, "TO-DEFINITION"), nullptr, false);
    if (from.is_object() && to.is_object()) {
      for (const auto& [key, value] : to.items()) {
        if (!from.contains(key)) {
          out << "    + " << key << ": " << value.dump() << '\n';
        } else if (from[key] != value) {
          out << "    - " << key << ": " << from[key].dump() << "\n    + " << key << ": " << value.dump() << '\n';
        }
      }
      for (const auto& [key, value] : from.items()) {
        if (!to.contains(key)) out << "    - " << key << ": " << value.dump() << '\n';
      }
    }
  }
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
  const bool over_http = is_url(options.target[0]);
  mcp::StdioCommand command;
  mcp::HttpEndpoint endpoint;
  if (over_http) {
    if (options.target.size() > 1) {
      std::cerr << "passepartout: mcp probe: a URL takes no arguments (" << options.target[1]
                << "); for a program give -- COMMAND ARGS...\n";
      return kExitUsage;
    }
    if (!options.env.empty()) {
      std::cerr << "passepartout: mcp probe: --env is for a program; a URL takes --header NAME=VALUE\n";
      return kExitUsage;
    }
    endpoint.name = "probe";
    endpoint.url = options.target[0];
    if (!split_pairs(options.headers, "--header", endpoint.headers)) return kExitUsage;
  } else {
    if (!options.headers.empty()) {
      std::cerr << "passepartout: mcp probe: --header is for a URL; a program takes --env NAME=VALUE\n";
      return kExitUsage;
    }
    command.name = "probe";
    command.command = options.target[0];
    command.args.assign(options.target.begin() + 1, options.target.end());
    if (!split_pairs(options.env, "--env", command.env)) return kExitUsage;
  }
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(options.timeout_seconds * 1000));

  asio::io_context io;
  ProbeReport report;
  const bool live = !options.json && !options.quiet;
  mcp::ClientOptions client_options;
  client_options.name = "probe";
  client_options.initialize_timeout = timeout;
  client_options.request_timeout = timeout;
  client_options.on_exchange = [&](bool outgoing, std::string_view message) {
    if (live) std::cout << (outgoing ? "> " : "< ") << message << '\n' << std::flush;
    report.exchanged.push_back(
        json{{"direction", outgoing ? "sent" : "received"}, {"message", parsed_or_text(message)}});
  };
  mcp::ClientEvents events;
  events.on_stderr = [&](const std::string& line) {
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
      [&](mcp::TransportEvents transport_events) {
        if (over_http) return mcp::start_http(io, endpoint, std::move(transport_events));
        return mcp::start_stdio(io, command, std::move(transport_events));
      },
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
  print_report(options, report);
  if (over_http) {
    // close() sent the DELETE that ends the session; the loop runs until it
    // is done (then nothing is left to do) or the grace is over.
    io.restart();
    io.run_for(kSessionEndGrace);
    io.stop();  // the client is destroyed with its loop stopped, not merely idle
  }
  return status;
}
}  // namespace

void add_mcp_command(CLI::App& app, Runner& chosen) {
  auto* mcp =
      app.add_subcommand("mcp",
                         "Model Context Protocol servers: list the daemon's (list), accept a changed tool definition\n"
                         "(trust), read their configuration again (reload), or try one by hand (probe)");
  mcp->require_subcommand(1);
  auto parsed = std::make_shared<ParsedClient>();
  parsed->verbose = app.get_option_no_throw("--verbose");

  auto* list = mcp->add_subcommand(
      "list",
      "Every MCP server of the daemon: transport, state (starting, ready, restarting, quarantined,\n"
      "refused, disabled) and why, protocol version, pid, calls, failures, latency p50/p99, the\n"
      "sandbox a stdio server runs in; and each tool: the name the model calls it by, its pin (pinned,\n"
      "new, changed: refused until trusted), its digest, its level in the loaded tool-permissions\n"
      "table (allow, ask, deny; the gates decide each call) and annotations (shown, never trusted).");
  add_connection_options(*list, *parsed, kReplyTimeoutS);
  list->footer(kExitFooter);
  list->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [](const Target& target, const Output& output) {
      return run_operator_command(target, output, OperatorRequest{"MCP", {}, {}, {"servers"}}, render_servers);
    });
  });

  auto* trust = mcp->add_subcommand(
      "trust",
      "Accept the current definition of a server's tool (or of every changed tool of the server) as\n"
      "its pin, showing what changed: a tool whose definition changed since it was pinned is neither\n"
      "offered nor callable until then.");
  trust->add_option("server", parsed->name, "The server's name")->required();
  trust->add_option("tool", parsed->skill, "The tool's name (default: every changed tool of the server)");
  add_connection_options(*trust, *parsed, kReplyTimeoutS);
  trust->footer(kExitFooter);
  trust->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      OperatorRequest request{"MCP-TRUST",
                              {{"SERVER", Value::string(parsed->name)},
                               {"TOOL", parsed->skill.empty() ? Value() : Value::string(parsed->skill)}},
                              {"see passepartout mcp list", "the server must be ready: see passepartout mcp list"},
                              {"changes"}};
      return run_operator_command(target, output, request, render_trust);
    });
  });

  auto* reload = mcp->add_subcommand(
      "reload",
      "Read the MCP servers' configuration again (the config file's mcp_servers:, --mcp-config) and\n"
      "apply it: new servers start, changed ones restart, removed ones stop, the others keep serving.\n"
      "SIGHUP does the same.");
  add_connection_options(*reload, *parsed, kReplyTimeoutS);
  reload->footer(kExitFooter);
  reload->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [](const Target& target, const Output& output) {
      return run_operator_command(target, output, OperatorRequest{"MCP-RELOAD", {}, {}, {}},
                                  [](const Value& response, std::ostream& out) {
                                    out << response.path({"PAYLOAD", "MESSAGE"}).text() << '\n';
                                  });
    });
  });

  auto options = std::make_shared<ProbeOptions>();
  auto* probe = mcp->add_subcommand(
      "probe",
      "Start a server (-- COMMAND ARGS...) or reach one over Streamable HTTP (URL), and speak to it\n"
      "as the daemon would, without a daemon: initialize, list its tools, optionally call one\n"
      "(--call TOOL JSON), printing every message exchanged ('> ' sent, '< ' received) and then\n"
      "what it found. Over HTTP the session the server opened is ended (DELETE) at the end. Exits 1\n"
      "when the server fails to initialize, a request fails, or the called tool reports an error.");
  probe
      ->add_option("target", options->target,
                   "URL (http:// or https://, Streamable HTTP), or -- COMMAND ARGS... (the server's program and\n"
                   "arguments, over stdio)")
      ->required();
  probe->add_option("--call", options->call, "Call one tool: its name and its arguments as a JSON object")
      ->expected(2)
      ->type_name("TOOL JSON");
  probe->add_option("--env", options->env, "NAME=VALUE in the server's environment (repeatable; a program)");
  probe->add_option("--header", options->headers,
                    "NAME=VALUE sent with every HTTP request, as Authorization=Bearer ... (repeatable; a URL)");
  probe->add_option("--timeout", options->timeout_seconds, "Seconds to wait for each answer (default 30)")
      ->check(CLI::Range(0.1, 3600.0));
  probe->add_flag("--json", options->json, "Print one JSON document: server, tools, call, exchanged");
  probe->add_flag("-q,--quiet", options->quiet, "Do not print the messages exchanged");
  probe->callback([options, &chosen] { chosen = [options] { return run_probe(*options); }; });
}

}  // namespace passepartout::cli
