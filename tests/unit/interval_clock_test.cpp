// IntervalClock: the time-stamp counter, where it is used, converts to the
// time steady_clock measures over the same stretch.
#include <catch2/catch.hpp>

#include <chrono>

#include "base/interval_clock.hpp"

using passepartout::IntervalClock;
using SteadyClock = std::chrono::steady_clock;

TEST_CASE("an interval measured in ticks is the time steady_clock measures", "[clock]") {
  for (const auto span : {std::chrono::milliseconds(2), std::chrono::milliseconds(30)}) {
    INFO("span " << span.count() << " ms");
    const SteadyClock::time_point steady_start = SteadyClock::now();
    const IntervalClock::Ticks start = IntervalClock::now();
    while (SteadyClock::now() - steady_start < span) {
    }
    const IntervalClock::Ticks end = IntervalClock::now();
    const auto steady = std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - steady_start);
    const auto ticked = std::chrono::duration_cast<std::chrono::microseconds>(IntervalClock::elapsed(start, end));
    // Both spans cover the same busy wait; the steady one also the reads around it.
    CHECK(ticked.count() >= span.count() * 1000 * 9 / 10);
    CHECK(ticked.count() <= steady.count() * 11 / 10 + 1000);
  }
}

TEST_CASE("an interval that runs backwards is empty", "[clock]") {
  const IntervalClock::Ticks now = IntervalClock::now();
  CHECK(IntervalClock::elapsed(now + 1000, now).count() == 0);
  CHECK(IntervalClock::elapsed(now, now).count() == 0);
}
