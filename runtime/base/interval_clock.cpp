#include "base/interval_clock.hpp"

#include <cmath>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace passepartout {

namespace {

using SteadyClock = std::chrono::steady_clock;

bool invariant_tsc() noexcept {
#if defined(__x86_64__)
  unsigned eax = 0;
  unsigned ebx = 0;
  unsigned ecx = 0;
  unsigned edx = 0;
  if (__get_cpuid(0x80000000U, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000007U) return false;
  if (__get_cpuid(0x80000007U, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (edx & (1U << 8)) != 0;  // "TscInvariant" (AMD), "Invariant TSC" (Intel)
#else
  return false;
#endif
}

// A reading of both clocks at start-up: the counter's rate is measured from it.
struct Origin {
  SteadyClock::time_point steady;
  std::uint64_t ticks;
};

Origin read_origin() noexcept {
  Origin origin{SteadyClock::now(), 0};
#if defined(__x86_64__)
  origin.ticks = __rdtsc();
#endif
  return origin;
}

const Origin kOrigin = read_origin();

// Nanoseconds per counter tick, over at least 10 ms since start-up.
double nanoseconds_per_tick() noexcept {
#if defined(__x86_64__)
  constexpr auto kSpan = std::chrono::milliseconds(10);
  SteadyClock::time_point steady = SteadyClock::now();
  while (steady - kOrigin.steady < kSpan) steady = SteadyClock::now();  // only a process younger than kSpan waits
  const std::uint64_t ticks = __rdtsc();
  const auto nanoseconds = std::chrono::duration_cast<std::chrono::nanoseconds>(steady - kOrigin.steady).count();
  return ticks > kOrigin.ticks ? static_cast<double>(nanoseconds) / static_cast<double>(ticks - kOrigin.ticks) : 1.0;
#else
  return 1.0;
#endif
}

}  // namespace

namespace detail {
const bool interval_clock_uses_tsc = invariant_tsc();
}  // namespace detail

std::chrono::nanoseconds IntervalClock::elapsed(Ticks from, Ticks to) noexcept {
  const Ticks ticks = to > from ? to - from : 0;
  if (!detail::interval_clock_uses_tsc) return std::chrono::nanoseconds(static_cast<std::int64_t>(ticks));
  static const double kNanosecondsPerTick = nanoseconds_per_tick();
  return std::chrono::nanoseconds(std::llround(static_cast<double>(ticks) * kNanosecondsPerTick));
}

}  // namespace passepartout
