// The one Catch2 main of the unit and integration suite. Runtime log lines go
// to standard error at warn and above; tests that assert on log lines attach a
// LogCapture, which sees every level. Started as `<it> skill-worker ...` it is
// a skill's worker process instead.
#include <string_view>

#include "base/log.hpp"
#include "isolation/skill_worker.hpp"
#include "support/catch_session.hpp"

int main(int argc, char* argv[]) {
  // A skill host made in a test starts its workers (isolation: process) from
  // /proc/self/exe, which is this executable: it serves them as `passepartout` does.
  if (argc >= 2 && std::string_view(argv[1]) == "skill-worker") return passepartout::run_skill_worker(argc, argv);
  passepartout::configure_logging(passepartout::LogLevel::warn);
  return passepartout::testing::run_catch_session(argc, argv);
}
