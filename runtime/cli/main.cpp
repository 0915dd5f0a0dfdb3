// The `passepartout` executable: everything lives in the core library.
#include "cli/cli.hpp"

int main(int argc, char** argv) { return passepartout::cli::run(argc, argv); }
