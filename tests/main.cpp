// The one Catch2 main of the unit and integration suite. Runtime log lines go
// to standard error at warn and above; tests that assert on log lines attach a
// LogCapture, which sees every level.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "base/log.hpp"

int main(int argc, char* argv[]) {
  passepartout::configure_logging(passepartout::LogLevel::warn);
  return Catch::Session().run(argc, argv);
}
