// ProviderHealth: what the cascade remembers of one provider between calls —
// its run of retriable failures and the cooldown it earns, and the figures
// `passepartout status` shows (calls, failures by class, latency, tokens).
// Lock-free: every member may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "providers/provider.hpp"

namespace passepartout {

// When a provider is set aside (seed D2-D4, Decisions 9).
struct CooldownPolicy {
  int after_failures = 3;                                      // consecutive retriable failures; 0: never
  std::chrono::milliseconds length{std::chrono::seconds(30)};  // then it is tried again
};

// A provider's figures at one moment.
struct ProviderFigures {
  std::uint64_t calls = 0;                                       // attempts (a retry is an attempt)
  std::uint64_t successes = 0;                                   // content or tool calls
  std::vector<std::pair<FailureClass, std::uint64_t>> failures;  // classes seen, in enum order
  std::chrono::microseconds latency_p50{0};                      // of answered attempts; 0: none yet
  std::chrono::microseconds latency_p99{0};
  std::int64_t tokens_in = 0;
  std::int64_t tokens_out = 0;
  int consecutive_failures = 0;                         // retriable ones in a row
  std::chrono::system_clock::time_point cooling_until;  // epoch: not cooling down
};

class ProviderHealth {
 public:
  using Clock = std::chrono::steady_clock;

  // The attempt answered, after `latency`.
  void succeeded(std::chrono::nanoseconds latency, const TokenUsage& usage) noexcept;
  // The attempt failed with `failure` after `latency`. A retriable failure
  // extends the run that sets the provider aside (`policy`); true when this
  // one started a cooldown.
  bool failed(FailureClass failure, std::chrono::nanoseconds latency, const CooldownPolicy& policy,
              Clock::time_point now = Clock::now()) noexcept;
  // True while set aside; `until` then says until when.
  bool cooling_down(Clock::time_point now, Clock::time_point* until = nullptr) const noexcept;

  ProviderFigures figures(Clock::time_point now = Clock::now()) const;

  // The latency of answered and failed attempts (not cancelled ones) as
  // metrics serve it: upper bounds in seconds, the attempts in each bucket
  // alone (the last: above every bound), and the sum of their latencies.
  static constexpr std::array<double, 12> kLatencyBounds{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120};
  struct LatencyHistogram {
    std::array<std::uint64_t, kLatencyBounds.size() + 1> counts{};
    double sum_seconds = 0;
  };
  LatencyHistogram latency_histogram() const noexcept;

 private:
  // Latency histogram: four buckets per doubling from 1 µs, about 19 %
  // apart, up to about 2^32 µs (71 minutes); what is longer counts in the last.
  static constexpr std::size_t kBuckets = 4 * 32;
  static std::size_t bucket_of(std::chrono::nanoseconds latency) noexcept;
  static std::chrono::microseconds bucket_value(std::size_t bucket) noexcept;
  std::chrono::microseconds percentile(double p) const noexcept;

  std::atomic<std::uint64_t> calls_{0};
  std::atomic<std::uint64_t> successes_{0};
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(FailureClass::other) + 1> failures_{};
  std::array<std::atomic<std::uint64_t>, kBuckets> latency_{};
  void observe(std::chrono::nanoseconds latency) noexcept;
  std::array<std::atomic<std::uint64_t>, kLatencyBounds.size() + 1> latency_seconds_{};  // kLatencyBounds' buckets
  std::atomic<std::uint64_t> latency_ns_sum_{0};
  std::atomic<std::int64_t> tokens_in_{0};
  std::atomic<std::int64_t> tokens_out_{0};
  std::atomic<int> consecutive_{0};
  std::atomic<Clock::rep> cooling_until_{0};  // steady_clock ticks; 0: not cooling down
};

}  // namespace passepartout
