// Per-thread shard assignment and the summing read of GateCounters.
#include "skills/gate_counters.hpp"

#include <bitset>
#include <mutex>

namespace passepartout {
namespace {

std::mutex shard_mutex;                       // guards used_shards
std::bitset<kCounterShards> used_shards{1};   // shard 0 is the shared overflow shard

// Owns the calling thread's shard and gives it back when the thread exits.
struct ShardLease {
  std::size_t index = 0;
  ShardLease() {
    std::lock_guard lock(shard_mutex);
    for (std::size_t i = 1; i < kCounterShards; ++i) {
      if (!used_shards[i]) {
        used_shards[i] = true;
        index = i;
        return;
      }
    }
  }
  ~ShardLease() {
    if (index == 0) return;
    std::lock_guard lock(shard_mutex);
    used_shards[index] = false;
  }
  ShardLease(const ShardLease&) = delete;
  ShardLease& operator=(const ShardLease&) = delete;
};

}  // namespace

std::size_t this_thread_counter_shard() noexcept {
  thread_local ShardLease lease;
  return lease.index;
}

GateCounts GateCounters::read() const noexcept {
  std::array<std::uint64_t, kFields> sum{};
  for (std::size_t s = 0; s < kCounterShards; ++s) {
    for (std::size_t f = 0; f < kFields; ++f) sum[f] += shards_[s].cells[f].load(std::memory_order_relaxed);
  }
  return GateCounts{sum[passes], sum[rewrites], sum[blocks], sum[approvals],
                    sum[failures], sum[timed_calls], sum[timed_ns]};
}

}  // namespace passepartout
