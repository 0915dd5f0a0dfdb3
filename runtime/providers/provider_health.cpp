#include "providers/provider_health.hpp"

#include <algorithm>
#include <cmath>

namespace passepartout {

std::size_t ProviderHealth::bucket_of(std::chrono::nanoseconds latency) noexcept {
  const double us = static_cast<double>(latency.count()) / 1000.0;
  if (us <= 1.0) return 0;
  const auto bucket = static_cast<std::size_t>(std::log2(us) * 4.0);
  return bucket < kBuckets ? bucket : kBuckets - 1;
}

std::chrono::microseconds ProviderHealth::bucket_value(std::size_t bucket) noexcept {
  // The bucket's middle, geometrically.
  return std::chrono::microseconds(std::llround(std::exp2((static_cast<double>(bucket) + 0.5) / 4.0)));
}

void ProviderHealth::observe(std::chrono::nanoseconds latency) noexcept {
  latency_[bucket_of(latency)].fetch_add(1, std::memory_order_relaxed);
  const double seconds = std::chrono::duration<double>(latency).count();
  std::size_t bucket = 0;
  while (bucket < kLatencyBounds.size() && seconds > kLatencyBounds[bucket]) ++bucket;
  latency_seconds_[bucket].fetch_add(1, std::memory_order_relaxed);
  latency_ns_sum_.fetch_add(static_cast<std::uint64_t>(std::max<std::int64_t>(0, latency.count())),
                            std::memory_order_relaxed);
}

ProviderHealth::LatencyHistogram ProviderHealth::latency_histogram() const noexcept {
  LatencyHistogram h;
  for (std::size_t i = 0; i < h.counts.size(); ++i) h.counts[i] = latency_seconds_[i].load(std::memory_order_relaxed);
  h.sum_seconds = static_cast<double>(latency_ns_sum_.load(std::memory_order_relaxed)) / 1e9;
  return h;
}

void ProviderHealth::succeeded(std::chrono::nanoseconds latency, const TokenUsage& usage) noexcept {
  calls_.fetch_add(1, std::memory_order_relaxed);
  successes_.fetch_add(1, std::memory_order_relaxed);
  observe(latency);
  if (usage.input > 0) tokens_in_.fetch_add(usage.input, std::memory_order_relaxed);
  if (usage.output > 0) tokens_out_.fetch_add(usage.output, std::memory_order_relaxed);
  consecutive_.store(0, std::memory_order_relaxed);
}

bool ProviderHealth::failed(FailureClass failure, std::chrono::nanoseconds latency, const CooldownPolicy& policy,
                            Clock::time_point now) noexcept {
  calls_.fetch_add(1, std::memory_order_relaxed);
  failures_[static_cast<std::size_t>(failure)].fetch_add(1, std::memory_order_relaxed);
  if (failure != FailureClass::cancelled) observe(latency);
  if (!is_retriable(failure)) return false;
  const int run = consecutive_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (policy.after_failures <= 0 || run < policy.after_failures) return false;
  consecutive_.store(0, std::memory_order_relaxed);  // the cooldown is the run's consequence; a new run starts after
  cooling_until_.store((now + policy.length).time_since_epoch().count(), std::memory_order_relaxed);
  return true;
}

bool ProviderHealth::cooling_down(Clock::time_point now, Clock::time_point* until) const noexcept {
  const Clock::rep ticks = cooling_until_.load(std::memory_order_relaxed);
  if (ticks == 0 || now.time_since_epoch().count() >= ticks) return false;
  if (until != nullptr) *until = Clock::time_point(Clock::duration(ticks));
  return true;
}

std::chrono::microseconds ProviderHealth::percentile(double p) const noexcept {
  std::uint64_t total = 0;
  for (const auto& bucket : latency_) total += bucket.load(std::memory_order_relaxed);
  if (total == 0) return std::chrono::microseconds(0);
  const auto rank = static_cast<std::uint64_t>(std::ceil(p * static_cast<double>(total)));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += latency_[i].load(std::memory_order_relaxed);
    if (seen >= rank) return bucket_value(i);
  }
  return bucket_value(kBuckets - 1);
}

ProviderFigures ProviderHealth::figures(Clock::time_point now) const {
  ProviderFigures f;
  f.calls = calls_.load(std::memory_order_relaxed);
  f.successes = successes_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < failures_.size(); ++i) {
    const std::uint64_t n = failures_[i].load(std::memory_order_relaxed);
    if (n > 0) f.failures.emplace_back(static_cast<FailureClass>(i), n);
  }
  f.latency_p50 = percentile(0.5);
  f.latency_p99 = percentile(0.99);
  f.tokens_in = tokens_in_.load(std::memory_order_relaxed);
  f.tokens_out = tokens_out_.load(std::memory_order_relaxed);
  f.consecutive_failures = consecutive_.load(std::memory_order_relaxed);
  Clock::time_point until;
  if (cooling_down(now, &until)) {
    f.cooling_until =
        std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(until - now);
  }
  return f;
}

}  // namespace passepartout
