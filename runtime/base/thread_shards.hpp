// Per-thread shards: state that every signal touches, split so that each
// thread mostly writes cache lines of its own (ShardedCounter, Published<T>).
//
// Why: a lock word or reference count that two cores both write on every
// signal moves between their caches each time, and on a virtual machine each
// move costs about as much as a gate (see "Nothing shared is written per
// signal" in the README).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

namespace passepartout {

inline constexpr std::size_t kThreadShards = 32;

// The calling thread's shard, fixed for the thread's life. A thread that asks
// gets a shard of its own, 1..kThreadShards-1, which it alone writes (and
// gives back when it ends); threads beyond that share shard 0, which is
// therefore only ever changed with atomic read-modify-writes.
std::size_t thread_shard() noexcept;

// Adds `n` to `cell`, which lives in shard `shard` (the calling thread's):
// a plain load and store when the thread is the shard's only writer, an
// atomic add in the shared shard 0.
template <class T>
void add_in_shard(std::atomic<T>& cell, std::size_t shard, T n) noexcept {
  if (shard == 0) {
    cell.fetch_add(n, std::memory_order_relaxed);
  } else {
    cell.store(cell.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
}

// A count many threads change: each adds to its own shard; a read sums them
// (exact once the writers are quiet, and never torn).
class ShardedCounter {
 public:
  void add(std::int64_t n) noexcept {
    const std::size_t shard = thread_shard();
    add_in_shard(shards_[shard].value, shard, n);
  }
  std::int64_t sum() const noexcept {
    std::int64_t total = 0;
    for (const Shard& shard : shards_) total += shard.value.load(std::memory_order_relaxed);
    return total;
  }

 private:
  struct alignas(64) Shard {
    std::atomic<std::int64_t> value{0};
  };
  std::array<Shard, kThreadShards> shards_{};
};

// `N` counts many threads add to, as N ShardedCounters would, but with each
// shard's N cells on cache lines of their own: a thread adds to its shard; a
// read sums the shards (exact once the writers are quiet, never torn).
template <std::size_t N>
class ShardedCounters {
 public:
  ShardedCounters() : shards_(std::make_unique<Shard[]>(kThreadShards)) {}

  void add(std::size_t index, std::uint64_t n = 1) noexcept {
    const std::size_t shard = thread_shard();
    add_in_shard(shards_[shard].cells[index], shard, n);
  }
  std::uint64_t sum(std::size_t index) const noexcept {
    std::uint64_t total = 0;
    for (std::size_t shard = 0; shard < kThreadShards; ++shard) {
      total += shards_[shard].cells[index].load(std::memory_order_relaxed);
    }
    return total;
  }
  static constexpr std::size_t size() noexcept { return N; }

 private:
  struct alignas(64) Shard {
    std::array<std::atomic<std::uint64_t>, N> cells{};
  };
  std::unique_ptr<Shard[]> shards_;
};

// The lock of one shard of a Published value: held for a pointer copy, and
// wanted by two threads at once only while a publish() passes (or in the
// shared shard 0). Taken and given back with two atomic operations where a
// mutex costs two calls; a waiter spins briefly, then yields, in case the
// holder was preempted.
class ShardLock {
 public:
  void lock() noexcept {
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    lock_contended();
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  void lock_contended() noexcept;
  std::atomic<bool> locked_{false};
};

// A value that one writer publishes and many threads read, each read taking
// its own reference (a signal's registry snapshot, a call's provider lineup:
// Published<const Snapshot>).
//
// Each shard holds an alias of the value with a reference count of its own,
// so a reader locks and counts on its shard's cache line only; the alias
// keeps the value alive until the last reference taken through that shard is
// gone. Nothing is cached per thread: once every reader has let go of an old
// value, the value is gone, as with a single shared_ptr.
//
// get() from any thread. publish() from any thread, one writer at a time;
// once it returns, every get() sees the new value.
template <class T>
class Published {
 public:
  explicit Published(std::shared_ptr<T> initial) { publish(std::move(initial)); }
  Published(const Published&) = delete;
  Published& operator=(const Published&) = delete;

  std::shared_ptr<T> get() const {
    const Shard& shard = shards_[thread_shard()];
    std::lock_guard guard(shard.lock);
    return shard.value;
  }

  void publish(const std::shared_ptr<T>& next) {
    for (Shard& shard : shards_) {
      std::shared_ptr<T> alias;
      if (next) alias = std::shared_ptr<T>(next.get(), [keep = next](T*) {});
      {
        std::lock_guard guard(shard.lock);
        alias.swap(shard.value);
      }
      // `alias` now holds the shard's previous value and is released here,
      // outside the lock: it may be the last reference to that value.
    }
  }

 private:
  struct alignas(64) Shard {
    mutable ShardLock lock;  // guards value (the pointer, not what it points to)
    std::shared_ptr<T> value;
  };
  std::array<Shard, kThreadShards> shards_;
};

}  // namespace passepartout
