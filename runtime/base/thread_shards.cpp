// Shard leases: each thread that asks holds a shard of its own while it lives.
#include "base/thread_shards.hpp"

#include <bitset>
#include <thread>

namespace passepartout {
namespace {

std::mutex lease_mutex;                // guards leased
std::bitset<kThreadShards> leased{1};  // shard 0 is the shared overflow shard

// Holds the calling thread's shard and gives it back when the thread ends.
struct ShardLease {
  std::size_t index = 0;
  ShardLease() {
    std::lock_guard lock(lease_mutex);
    for (std::size_t i = 1; i < kThreadShards; ++i) {
      if (!leased[i]) {
        leased[i] = true;
        index = i;
        return;
      }
    }
  }
  ~ShardLease() {
    if (index == 0) return;
    std::lock_guard lock(lease_mutex);
    leased[index] = false;
  }
  ShardLease(const ShardLease&) = delete;
  ShardLease& operator=(const ShardLease&) = delete;
};

}  // namespace

void ShardLock::lock_contended() noexcept {
  for (;;) {
    for (int spin = 0; spin < 64; ++spin) {
      if (!locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire)) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    std::this_thread::yield();
  }
}

std::size_t thread_shard() noexcept {
  thread_local const ShardLease kLease;
  return kLease.index;
}

}  // namespace passepartout
