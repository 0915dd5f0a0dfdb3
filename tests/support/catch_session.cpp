// Catch2's implementation, compiled once for both test executables (the suite
// and the SDK tests): it is the most expensive translation unit of the tests.
#define CATCH_CONFIG_RUNNER
#include "support/catch_session.hpp"

#include <catch2/catch.hpp>

namespace passepartout::testing {

int run_catch_session(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }

}  // namespace passepartout::testing
