// GateCounters: what a slot's gate has decided (passes, rewrites, blocks, approvals,
// failures) and how long it took, counted without contention on the hot path.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

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

// The calling thread's counter shard. Each thread that verifies gets its own
// shard (up to kCounterShards - 1 threads), which it alone writes with plain
// loads and stores; threads beyond that share shard 0 with atomic adds.
// Any thread; the index is stable for the thread's life.
std::size_t this_thread_counter_shard() noexcept;

inline constexpr std::size_t kCounterShards = 32;

// Counters of one gate, sharded per thread. Written from any thread (each to
// its own shard), read (summed) from any thread; a read is a consistent-enough
// snapshot for monitoring, not a transaction.
class GateCounters {
 public:
  enum Field : std::size_t { passes, rewrites, blocks, approvals, failures, timed_calls, timed_ns, kFields };

  GateCounters() : shards_(std::make_unique<Shard[]>(kCounterShards)) {}

  void add(std::size_t shard, Field field, std::uint64_t n = 1) noexcept {
    std::atomic<std::uint64_t>& cell = shards_[shard].cells[field];
    if (shard == 0) {
      cell.fetch_add(n, std::memory_order_relaxed);
    } else {  // this thread is the shard's only writer
      cell.store(cell.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
  }

  GateCounts read() const noexcept;

 private:
  struct alignas(64) Shard {
    std::array<std::atomic<std::uint64_t>, kFields> cells{};
  };
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace passepartout
