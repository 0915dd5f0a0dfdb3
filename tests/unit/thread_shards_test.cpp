// Per-thread shards: counters that sum what every thread added, and published
// values that readers on any thread see whole and that go away with their
// last reader.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "base/thread_shards.hpp"

namespace passepartout {
namespace {

struct Tracked {
  explicit Tracked(int v, std::atomic<int>& alive) : value(v), alive_(alive) { alive_.fetch_add(1); }
  ~Tracked() { alive_.fetch_sub(1); }
  Tracked(const Tracked&) = delete;
  Tracked& operator=(const Tracked&) = delete;
  const int value;

 private:
  std::atomic<int>& alive_;
};

}  // namespace

TEST_CASE("each live thread has a shard of its own, given back when it ends", "[thread-shards]") {
  const std::size_t mine = thread_shard();
  CHECK(mine < kThreadShards);
  CHECK(thread_shard() == mine);  // fixed for the thread's life
  std::size_t first = 0;
  std::size_t second = 0;
  std::atomic<int> asked{0};
  std::atomic<bool> leave{false};
  const auto hold = [&](std::size_t& shard) {
    shard = thread_shard();
    asked.fetch_add(1);
    while (!leave.load()) std::this_thread::yield();
  };
  std::thread a(hold, std::ref(first));
  std::thread b(hold, std::ref(second));
  while (asked.load() < 2) std::this_thread::yield();
  CHECK(first != 0);  // the shared shard only once 31 threads hold one
  CHECK(second != 0);
  CHECK(first != second);
  CHECK(first != mine);
  leave = true;
  a.join();
  b.join();
  std::size_t later = 0;
  std::thread([&] { later = thread_shard(); }).join();
  CHECK(later <= std::min(first, second));  // the lowest free shard: theirs were given back
}

TEST_CASE("a sharded counter sums what every thread added", "[thread-shards][concurrency]") {
  ShardedCounter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&counter, t] {
      for (int i = 0; i < 10'000; ++i) counter.add(t % 2 == 0 ? 2 : -1);
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(counter.sum() == 2 * 20'000 - 20'000);
}

TEST_CASE("sharded counters sum each cell over every thread apart from the others", "[thread-shards][concurrency]") {
  ShardedCounters<3> counters;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&counters, t] {
      for (int i = 0; i < 10'000; ++i) counters.add(static_cast<std::size_t>(t % 2), 1 + static_cast<std::uint64_t>(t));
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(counters.sum(0) == 10'000 * (1 + 3));  // threads 0 and 2
  CHECK(counters.sum(1) == 10'000 * (2 + 4));  // threads 1 and 3
  CHECK(counters.sum(2) == 0);
}

TEST_CASE("a published value is what get() returns, and null once null is published", "[thread-shards]") {
  std::atomic<int> alive{0};
  Published<const Tracked> cell(std::make_shared<const Tracked>(1, alive));
  REQUIRE(cell.get() != nullptr);
  CHECK(cell.get()->value == 1);
  cell.publish(std::make_shared<const Tracked>(2, alive));
  CHECK(cell.get()->value == 2);
  CHECK(alive == 1);  // nobody held the first: it is gone
  cell.publish(nullptr);
  CHECK(cell.get() == nullptr);
  CHECK(alive == 0);
}

TEST_CASE("a replaced value lives while a reader holds it, and goes with its last reader", "[thread-shards]") {
  std::atomic<int> alive{0};
  Published<const Tracked> cell(std::make_shared<const Tracked>(1, alive));
  std::shared_ptr<const Tracked> held = cell.get();
  std::shared_ptr<const Tracked> from_another_thread;
  std::thread([&] { from_another_thread = cell.get(); }).join();
  cell.publish(std::make_shared<const Tracked>(2, alive));
  CHECK(alive == 2);
  CHECK(held->value == 1);
  held.reset();
  CHECK(alive == 2);  // a reference taken through another shard still holds it
  from_another_thread.reset();
  CHECK(alive == 1);
  CHECK(cell.get()->value == 2);
}

TEST_CASE("readers on many threads see only whole published values while the writer replaces them",
          "[thread-shards][concurrency]") {
  std::atomic<int> alive{0};
  Published<const Tracked> cell(std::make_shared<const Tracked>(0, alive));
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      int last = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const std::shared_ptr<const Tracked> value = cell.get();
        // One writer publishes 0, 1, 2, ...: a reader never goes back.
        if (value == nullptr || value->value < last) wrong.fetch_add(1);
        if (value != nullptr) last = value->value;
      }
    });
  }
  for (int i = 1; i <= 2'000; ++i) cell.publish(std::make_shared<const Tracked>(i, alive));
  stop = true;
  for (auto& reader : readers) reader.join();
  CHECK(wrong == 0);
  CHECK(cell.get()->value == 2'000);
  CHECK(alive == 1);  // every replaced value went with its last reader
}

TEST_CASE("a shard lock lets one thread at a time in, however many want it", "[thread-shards][concurrency]") {
  ShardLock lock;
  std::uint64_t count = 0;  // plain: only the lock keeps the increments whole
  constexpr int kThreads = 4;
  constexpr int kEach = 20'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        std::lock_guard guard(lock);
        const std::uint64_t seen = count;
        // Now and then the holder gives up its CPU: the others wait on a
        // holder not running. Not on every turn: on a busy machine each yield
        // waits out other processes' time slices, and 80,000 of them took
        // minutes.
        if (i % 64 == 0) std::this_thread::yield();
        count = seen + 1;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(count == std::uint64_t{kThreads} * kEach);
}

}  // namespace passepartout
