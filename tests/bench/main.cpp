// The one main of the benchmark executable: runtime logs at warn and above only,
// so the table stays readable.
#include <benchmark/benchmark.h>

#include "base/log.hpp"

int main(int argc, char** argv) {
  passepartout::configure_logging(passepartout::LogLevel::warn);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
