// IntervalClock: how long a short stretch of the hot path took (a
// verification, whose duration a blocked action's log lines report), where
// reading steady_clock twice per signal shows in the profile.
//
// On x86-64 with an invariant time-stamp counter (one that ticks at a
// constant rate in every power state: what the kernel needs to use it as
// its own clock source) now() reads the counter, about 11 ns against
// steady_clock's 27 ns on a virtual machine; elsewhere it is steady_clock.
// Ticks mean something only as the difference of two readings on one
// machine, which elapsed() converts.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace passepartout {

namespace detail {
// Whether now() reads the time-stamp counter (decided once, at start-up).
extern const bool interval_clock_uses_tsc;
}  // namespace detail

class IntervalClock {
 public:
  using Ticks = std::uint64_t;

  static Ticks now() noexcept {
#if defined(__x86_64__)
    if (detail::interval_clock_uses_tsc) [[likely]]
      return __rdtsc();
#endif
    return static_cast<Ticks>(std::chrono::steady_clock::now().time_since_epoch().count());
  }

  // The time from `from` to `to` (both from now(), `to` the later). The first
  // call may take up to 10 ms, when the process is younger than that: the
  // counter's rate is measured against steady_clock over at least 10 ms.
  static std::chrono::nanoseconds elapsed(Ticks from, Ticks to) noexcept;
};

}  // namespace passepartout
