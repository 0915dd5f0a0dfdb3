// `passepartout daemon`: boots the runtime and serves the framed protocol.
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

namespace passepartout::cli {

void add_daemon_command(CLI::App& app, Runner& chosen) {
  (void)app;
  (void)chosen;
}

}  // namespace passepartout::cli
