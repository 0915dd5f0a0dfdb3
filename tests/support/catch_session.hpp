#pragma once
// Catch2's session, for a main of its own (Catch::Session is declared only in
// the translation unit that holds Catch2's implementation: catch_session.cpp).

namespace passepartout::testing {

// Runs the tests the command line selects; returns main's exit status.
int run_catch_session(int argc, char* argv[]);

}  // namespace passepartout::testing
