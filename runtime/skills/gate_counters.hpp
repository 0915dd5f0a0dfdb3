// GateCounters: what a slot's gate has decided (passes, rewrites, blocks, approvals,
// failures) and how long it took, counted without contention on the hot path.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/thread_shards.hpp"

namespace passepartout {

struct GateCounts {
  std::uint64_t passes = 0;
  std::uint64_t rewrites = 0;
  std::uint64_t blocks = 0;
  std::uint64_t approvals = 0;
  std::uint64_t failures = 0;
  std::uint64_t timed_calls = 0;  // calls whose latency was measured (a sample)
  std::uint64_t timed_ns = 0;     // total latency of the measured calls

  std::uint64_t calls() const { return passes + rewrites + blocks + approvals + failures; }
  // Mean latency of the sampled calls, or 0 when none was sampled.
  std::uint64_t mean_ns() const { return timed_calls == 0 ? 0 : timed_ns / timed_calls; }
};

// Counters of one gate, sharded per thread (thread_shard()). Written from any
// thread (each to its own shard), read (summed) from any thread; a read is a
// consistent-enough snapshot for monitoring, not a transaction.
class GateCounters {
 public:
  enum Field : std::size_t { passes, rewrites, blocks, approvals, failures, timed_calls, timed_ns, kFields };

  GateCounters() : shards_(std::make_unique<Shard[]>(kThreadShards)) {}

  // `shard` is the calling thread's (thread_shard()).
  void add(std::size_t shard, Field field, std::uint64_t n = 1) noexcept {
    add_in_shard(shards_[shard].cells[field], shard, n);
  }

  GateCounts read() const noexcept;

 private:
  struct alignas(64) Shard {
    std::array<std::atomic<std::uint64_t>, kFields> cells{};
  };
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace passepartout
