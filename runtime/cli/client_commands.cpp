// The commands that talk to a running daemon over its socket.
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

namespace passepartout::cli {

void add_client_commands(CLI::App& app, CLI::App& skills, Runner& chosen) {
  (void)app;
  (void)skills;
  (void)chosen;
}

}  // namespace passepartout::cli
