// Test support: a slow-gate held until the gate watchdog has marked its call
// late, so a test of the time budget does not depend on how fast the machine
// is or on when the watchdog thread gets a CPU.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

#include "pipeline/gate_watchdog.hpp"
#include "support/async_wait.hpp"
#include "support/skill_fixtures.hpp"

namespace passepartout::testing {

// A slow-gate that waits, asleep, until it is let go (or 30 s have passed),
// and writes a line to `calls` as each call starts. verify_when_late() runs a
// verification on a thread of its own, waits (bounded) until the watchdog has
// marked the call late, and only then lets the gate go: the verdict is judged
// late however long the watchdog waited for a CPU, however busy the machine.
struct HeldGate {
  TempDir dir;
  std::filesystem::path release = dir.path() / "release";
  std::filesystem::path calls = dir.path() / "calls";

  // The slow-gate's manifest lines: `before`, then its config (`wait`:
  // "poll-ms: 2" sleeps between looks at the file; "" spins).
  std::string manifest(std::string_view before = "", std::string_view wait = "poll-ms: 2, ") const {
    return std::string(before) + "config: { until-file: \"" + release.string() + "\", spinning-file: \"" +
           calls.string() + "\", " + std::string(wait) + "max-ms: 30000 }\n";
  }

  // Runs `run` (a verification, or anything that calls the gate) on a thread
  // of its own; true when the watchdog marked a call late before the bound,
  // after which the gate is let go. Nothing else may hold a gate meanwhile.
  template <class Run>
  bool verify_when_late(Run run) const {
    const std::uint64_t before = GateWatchdog::late_calls();
    std::thread verifying(run);
    const auto patience = std::chrono::steady_clock::now() + kAsyncTimeout;
    while (GateWatchdog::late_calls() == before && std::chrono::steady_clock::now() < patience) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polled: the watchdog tells no one
    }
    const bool marked = GateWatchdog::late_calls() != before;
    std::ofstream(release) << "go\n";
    verifying.join();
    return marked;
  }

  // How many times the gate was called.
  int call_count() const {
    std::ifstream in(calls);
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  }
};

}  // namespace passepartout::testing
