// How the command groups of `passepartout` plug into the one CLI::App.
// Each group adds its subcommands and, in each subcommand's callback, stores
// the function that runs it; cli::run() calls the chosen one after parsing.
#pragma once

#include <functional>

namespace CLI {
class App;
}  // namespace CLI

namespace passepartout::cli {

// Set by a subcommand's callback; returns the exit status.
using Runner = std::function<int()>;

// `passepartout daemon` (runtime/cli/daemon_command.cpp).
void add_daemon_command(CLI::App& app, Runner& chosen);

// `passepartout decisions` (runtime/cli/decisions_command.cpp): reads the decision log's files.
void add_decisions_command(CLI::App& app, Runner& chosen);

// `passepartout verify` (runtime/cli/verify_command.cpp): one action, or
// --replay of recorded decisions, against a manifest folder loaded locally.
void add_verify_command(CLI::App& app, Runner& chosen);

// The commands that talk to a running daemon (runtime/cli/client_commands.cpp):
// chat, status, doctor, approvals ..., and skills list|load|reload|unload
// under the existing `skills` group.
void add_client_commands(CLI::App& app, CLI::App& skills, Runner& chosen);

// `passepartout mcp` (runtime/cli/mcp_command.cpp): Model Context Protocol servers.
void add_mcp_command(CLI::App& app, Runner& chosen);

// `passepartout fleet` (runtime/cli/fleet_command.cpp): the nodes sharing a state database.
void add_fleet_command(CLI::App& app, Runner& chosen);
// Its keygen, publish, rollout and halt (runtime/cli/fleet_release_command.cpp).
void add_fleet_release_commands(CLI::App& fleet, Runner& chosen);

}  // namespace passepartout::cli
