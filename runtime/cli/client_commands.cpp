// The client commands on the command line: the connection options they all
// take, and each command group's subcommands (chat, status and stop, skills,
// approvals, doctor; each group's own file runs and wires it).
#include <iostream>
#include <memory>
#include <utility>
#include "cli/cli11.hpp"

#include "base/log.hpp"
#include "cli/client_options.hpp"
#include "cli/client_output.hpp"
#include "cli/exit_status.hpp"

namespace passepartout::cli {

namespace {

constexpr const char* kConnectionGroup = "Connection";

}  // namespace

void add_connection_options(CLI::App& command, ParsedClient& parsed, int default_timeout_s) {
  auto* socket = command
                     .add_option("--socket", parsed.socket_path,
                                 "The daemon's Unix socket (default: $PASSEPARTOUT_SOCKET, else "
                                 "$XDG_RUNTIME_DIR/passepartout.sock, else <state dir>/passepartout.sock;\n"
                                 "when that does not exist, the system service's "
                                 "/run/passepartout/passepartout.sock)")
                     ->type_name("PATH")
                     ->group(kConnectionGroup);
  command
      .add_option("--port", parsed.port,
                  "Talk to the daemon over TCP on this port instead (default: $PASSEPARTOUT_PORT)")
      ->type_name("N")
      ->check(CLI::Range(1, 65535))
      ->excludes(socket)
      ->group(kConnectionGroup);
  command.add_option("--host", parsed.host, "The host for --port (default 127.0.0.1)")
      ->type_name("HOST")
      ->group(kConnectionGroup);
  command
      .add_option("--token-file", parsed.token_file,
                  "Over TCP, read the operator token from FILE (default: $PASSEPARTOUT_TOKEN_FILE, else "
                  "$PASSEPARTOUT_TOKEN, else <state dir>/token)")
      ->type_name("FILE")
      ->group(kConnectionGroup);
  command
      .add_option("--timeout", parsed.timeout_s,
                  "Seconds to wait for the daemon's answer (default " + std::to_string(default_timeout_s) +
                      "; connecting has 5)")
      ->type_name("SECONDS")
      ->check(CLI::PositiveNumber)
      ->group(kConnectionGroup);
  command.add_flag("--json", parsed.json, "Print one JSON document instead of text");
}

ConnectionOptions connection_options(const ParsedClient& parsed) {
  ConnectionOptions options;
  options.socket_path = parsed.socket_path;
  if (parsed.port > 0) options.port = static_cast<std::uint16_t>(parsed.port);
  options.host = parsed.host;
  options.token_file = parsed.token_file;
  if (parsed.timeout_s > 0) options.timeout_s = parsed.timeout_s;
  return options;
}

void choose(Runner& chosen, const std::shared_ptr<ParsedClient>& parsed, int default_timeout_s, ClientBody body) {
  chosen = [parsed, default_timeout_s, body = std::move(body)]() -> int {
    const bool verbose = parsed->verbose != nullptr && parsed->verbose->count() > 0;
    configure_logging(verbose ? LogLevel::debug : LogLevel::warn);
    const Output output{std::cout, std::cerr, parsed->json};
    auto target = resolve_target(connection_options(*parsed), std::chrono::seconds(default_timeout_s));
    if (!target) return report_failure(output, target.error().message, "", kExitUsage);
    return body(*target, output);
  };
}

void add_client_commands(CLI::App& app, CLI::App& skills, Runner& chosen) {
  auto parsed = std::make_shared<ParsedClient>();
  parsed->verbose = app.get_option_no_throw("--verbose");
  add_chat_command(app, parsed, chosen);
  add_status_commands(app, parsed, chosen);
  add_skills_commands(skills, parsed, chosen);
  add_install_commands(skills, parsed, chosen);
  add_approvals_commands(app, parsed, chosen);
  add_rules_commands(app, parsed, chosen);
  add_doctor_command(app, parsed, chosen);
}

}  // namespace passepartout::cli
