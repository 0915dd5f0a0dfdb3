// Numbering of threads into shards.
#include "thread_shards.hpp"

namespace passepartout {

std::size_t thread_shard() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t shard = next.fetch_add(1, std::memory_order_relaxed) % kThreadShards;
  return shard;
}

}  // namespace passepartout
