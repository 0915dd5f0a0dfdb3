// The command-line front end: parses arguments and runs one subcommand.
#pragma once

namespace passepartout::cli {

// Runs `passepartout` with the process arguments; returns the exit status.
int run(int argc, char** argv);

}  // namespace passepartout::cli
