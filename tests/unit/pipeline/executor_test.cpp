// Executor: the thread pool and the event loops (post, post_after, stop; the
// loops' affinity and idle polling), waiting on results rather than sleeping; the one sleep is the idle
// window whose CPU time the last test measures.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <time.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/executor.hpp"
#include "base/log.hpp"
#include "support/async_wait.hpp"

using namespace passepartout;
using passepartout::testing::Awaited;
using passepartout::testing::CountDown;

namespace {

using Clock = std::chrono::steady_clock;

// The threads that ran `expected` tasks, one entry per task; wait() returns
// once all have run.
class ThreadsSeen {
 public:
  explicit ThreadsSeen(std::size_t expected) : done_(expected) {}
  // Called by each task.
  void record() {
    {
      std::lock_guard lock(mutex_);
      ids_.insert(std::this_thread::get_id());
    }
    done_.arrive();
  }
  bool wait() { return done_.wait(); }
  std::size_t tasks() {
    std::lock_guard lock(mutex_);
    return ids_.size();
  }
  std::size_t threads() {
    std::lock_guard lock(mutex_);
    return std::set<std::thread::id>(ids_.begin(), ids_.end()).size();
  }

 private:
  std::mutex mutex_;  // guards ids_
  std::multiset<std::thread::id> ids_;
  CountDown done_;
};

// Event loops as the daemon runs them: each polls 200 µs after its last work
// before it sleeps.
class PollingEventLoops final : public Executor {
 public:
  explicit PollingEventLoops(std::size_t threads) : loops_(threads, std::chrono::microseconds(200)) {}
  void post(Task&& task) override { loops_.post(std::move(task)); }
  void post_after(std::chrono::nanoseconds delay, Task task) override { loops_.post_after(delay, std::move(task)); }
  void stop() { loops_.stop(); }
  std::size_t size() const noexcept { return loops_.size(); }

 private:
  EventLoops loops_;
};

}  // namespace

TEMPLATE_TEST_CASE("a pool has at least one thread", "[pipeline][executor]", ThreadPool, EventLoops,
                   PollingEventLoops) {
  TestType none(0);
  CHECK(none.size() == 1);
  TestType three(3);
  CHECK(three.size() == 3);
}

TEMPLATE_TEST_CASE("a pool runs posted tasks on its own threads", "[pipeline][executor]", ThreadPool, EventLoops,
                   PollingEventLoops) {
  TestType pool(2);
  constexpr std::size_t kTasks = 1000;
  CountDown done(kTasks);
  std::atomic<std::size_t> on_caller{0};
  const std::thread::id caller = std::this_thread::get_id();
  for (std::size_t i = 0; i < kTasks; ++i) {
    pool.post([&] {
      if (std::this_thread::get_id() == caller) ++on_caller;
      done.arrive();
    });
  }
  REQUIRE(done.wait());
  CHECK(on_caller == 0);
}

TEMPLATE_TEST_CASE("a delayed task runs once its delay has passed", "[pipeline][executor]", ThreadPool, EventLoops,
                   PollingEventLoops) {
  TestType pool(1);
  Awaited<Clock::time_point> ran;
  const Clock::time_point start = Clock::now();
  pool.post_after(std::chrono::milliseconds(30), [&] { ran.set(Clock::now()); });
  auto at = ran.wait();
  REQUIRE(at.has_value());
  CHECK(*at - start >= std::chrono::milliseconds(30));
}

TEMPLATE_TEST_CASE("delayed tasks run in the order of their deadlines", "[pipeline][executor]", ThreadPool, EventLoops,
                   PollingEventLoops) {
  TestType pool(1);
  std::mutex order_mutex;
  std::vector<int> order;
  CountDown done(3);
  auto record = [&](int n) {
    return [&, n] {
      {
        std::lock_guard lock(order_mutex);
        order.push_back(n);
      }
      done.arrive();
    };
  };
  pool.post_after(std::chrono::milliseconds(60), record(3));
  pool.post_after(std::chrono::milliseconds(0), record(1));
  pool.post_after(std::chrono::milliseconds(20), record(2));
  REQUIRE(done.wait());
  CHECK(order == std::vector<int>{1, 2, 3});
}

TEMPLATE_TEST_CASE("stopping drops delayed tasks without waiting for them", "[pipeline][executor]", ThreadPool,
                   EventLoops, PollingEventLoops) {
  auto ran = std::make_shared<std::atomic<bool>>(false);
  const Clock::time_point start = Clock::now();
  {
    TestType pool(2);
    pool.post_after(std::chrono::hours(1), [ran] { *ran = true; });
    pool.stop();
    pool.stop();  // idempotent
  }
  CHECK_FALSE(*ran);
  CHECK(Clock::now() - start < std::chrono::seconds(10));
}

TEMPLATE_TEST_CASE("stopping lets the tasks already queued run, and drops what is posted later", "[pipeline][executor]",
                   ThreadPool, EventLoops, PollingEventLoops) {
  TestType pool(1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  Awaited<bool> first_running;
  std::atomic<int> ran{0};
  pool.post([&, released] {
    // From the pool's own thread (an event loop's own queue) and from outside, below.
    for (int i = 0; i < 10; ++i) pool.post([&] { ++ran; });
    first_running.set(true);
    released.wait();
  });
  REQUIRE(first_running.wait());
  for (int i = 0; i < 10; ++i) pool.post([&] { ++ran; });

  std::thread stopper([&] { pool.stop(); });
  release.set_value();
  stopper.join();
  CHECK(ran == 20);

  pool.post([&] { ++ran; });
  pool.post_after(std::chrono::milliseconds(0), [&] { ++ran; });
  CHECK(ran == 20);
}

TEMPLATE_TEST_CASE("a task that throws is logged and the pool goes on", "[pipeline][executor]", ThreadPool, EventLoops,
                   PollingEventLoops) {
  LogCapture log;
  TestType pool(1);
  Awaited<bool> after;
  pool.post([] { throw std::runtime_error("task exploded"); });
  pool.post_after(std::chrono::milliseconds(1), [] { throw std::runtime_error("timer exploded"); });
  pool.post_after(std::chrono::milliseconds(5), [&] { after.set(true); });
  REQUIRE(after.wait());
  CHECK(log.contains("executor: a pool task threw: task exploded"));
  CHECK(log.contains("executor: a delayed pool task threw: timer exploded"));
}

TEMPLATE_TEST_CASE("posting from many threads while the pool stops neither crashes nor hangs",
                   "[pipeline][executor][concurrency]", ThreadPool, EventLoops, PollingEventLoops) {
  auto ran = std::make_shared<std::atomic<int>>(0);
  {
    TestType pool(2);
    std::atomic<bool> go{false};
    std::vector<std::thread> posters;
    for (int t = 0; t < 4; ++t) {
      posters.emplace_back([&, ran] {
        while (!go.load()) std::this_thread::yield();
        for (int i = 0; i < 2000; ++i) {
          pool.post([ran] { ++*ran; });
          pool.post_after(std::chrono::microseconds(i % 50), [ran] { ++*ran; });
        }
      });
    }
    go = true;
    pool.stop();
    for (std::thread& poster : posters) poster.join();
  }
  CHECK(ran->load() <= 16000);
}

TEST_CASE("a task posted from an event loop runs on that loop's thread", "[pipeline][executor]") {
  EventLoops loops(2);
  constexpr int kChains = 8;
  constexpr int kSteps = 50;
  std::atomic<int> moved{0};
  CountDown done(kChains);
  std::function<void(std::thread::id, int)> step = [&](std::thread::id first, int left) {
    if (std::this_thread::get_id() != first) ++moved;
    if (left == 0) {
      done.arrive();
      return;
    }
    loops.post([&, first, left] { step(first, left - 1); });
  };
  for (int c = 0; c < kChains; ++c) loops.post([&] { step(std::this_thread::get_id(), kSteps); });
  REQUIRE(done.wait());
  CHECK(moved == 0);
}

// A signal's steps each post the next: run back to back, with nothing from
// the io_context's queue (the reactor, another connection's completion)
// between them.
TEST_CASE("tasks an event loop posts to itself run in order, right after the task that posted them",
          "[pipeline][executor][concurrency]") {
  for (const auto idle_poll : {std::chrono::microseconds(0), std::chrono::microseconds(200)}) {
    EventLoops loops(1, idle_poll);
    boost::asio::io_context& context = *loops.contexts().at(0);
    // Once the loop has worked, it usually waits in the reactor (when it does
    // not poll) by the time the next task comes: that task then arrives by
    // the loop's blocking wait, the other path to the same order.
    CountDown warm(1);
    loops.post([&] { warm.arrive(); });
    REQUIRE(warm.wait());
    std::string order;  // written by the loop's thread only
    CountDown done(1);
    loops.post([&] {
      order += 'A';
      boost::asio::post(context, [&] {  // queued in the io_context first
        order += 'X';
        done.arrive();
      });
      loops.post([&] {
        order += 'B';
        loops.post([&] { order += 'D'; });
      });
      loops.post([&] { order += 'C'; });
    });
    REQUIRE(done.wait());
    CHECK(order == "ABCDX");
  }
}

TEST_CASE("an event loop's own tasks never keep its io_context's work waiting", "[pipeline][executor][concurrency]") {
  EventLoops loops(1);
  boost::asio::io_context& context = *loops.contexts().at(0);
  std::atomic<bool> other_ran{false};
  CountDown done(1);
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(10);
  // A chain of tasks that only ends once the io_context's task has run.
  std::function<void()> step = [&] {
    if (!other_ran.load() && Clock::now() < give_up) {
      loops.post(step);
    } else {
      done.arrive();
    }
  };
  CountDown chain_started(1);
  loops.post([&] {
    chain_started.arrive();
    step();
  });
  REQUIRE(chain_started.wait());
  boost::asio::post(context, [&] { other_ran = true; });
  REQUIRE(done.wait());
  CHECK(other_ran);
}

TEST_CASE("tasks posted from elsewhere go to every event loop in turn", "[pipeline][executor]") {
  constexpr std::size_t kLoops = 3;
  EventLoops loops(kLoops);
  ThreadsSeen seen(kLoops);
  for (std::size_t i = 0; i < kLoops; ++i) loops.post([&] { seen.record(); });
  REQUIRE(seen.wait());
  CHECK(seen.threads() == kLoops);
  CHECK(loops.contexts().size() == kLoops);
}

TEST_CASE("post_to_each reaches every event loop once", "[pipeline][executor]") {
  constexpr std::size_t kLoops = 3;
  EventLoops loops(kLoops);
  ThreadsSeen seen(kLoops);
  // From inside a loop too: the copies still go to every loop, not just this one.
  loops.post([&] { loops.post_to_each([&] { seen.record(); }); });
  REQUIRE(seen.wait());
  CHECK(seen.tasks() == kLoops);
  CHECK(seen.threads() == kLoops);
}

TEST_CASE("event loops that poll after work still go to sleep when idle", "[pipeline][executor]") {
  const auto process_cpu = [] {
    timespec now{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
  };
  EventLoops loops(2, std::chrono::microseconds(200));
  CountDown done(2);
  loops.post([&] { done.arrive(); });
  loops.post([&] { done.arrive(); });
  REQUIRE(done.wait());
  // Both loops worked just now; over an idle window they poll 200 µs each,
  // then sleep. Polling on would cost the whole window on each loop.
  constexpr auto kWindow = std::chrono::milliseconds(300);
  const auto before = process_cpu();
  std::this_thread::sleep_for(kWindow);
  const auto used = process_cpu() - before;
  CHECK(used < kWindow / 4);
}

// A client on the same machine waiting on a loop's reply waits on a CPU that
// keeps running (the other loop polls there) rather than one that halted.
TEST_CASE("while one polling event loop works, the others poll instead of sleeping, and sleep again after",
          "[pipeline][executor][concurrency]") {
  using namespace std::chrono_literals;
  EventLoops loops(2, 200us);
  CountDown started(2);
  loops.post_to_each([&] { started.arrive(); });
  REQUIRE(started.wait());
  // Idle, each loop polls 200 µs and then sleeps: the count stops. Waits
  // until it has not moved for 20 ms (a loaded machine may take a while to
  // give a loop the CPU it needs to see that), 10 s at most.
  const auto settled = [&] {
    const Clock::time_point give_up = Clock::now() + 10s;
    std::uint64_t last = loops.idle_polls();
    while (Clock::now() < give_up) {
      std::this_thread::sleep_for(20ms);
      const std::uint64_t now = loops.idle_polls();
      if (now == last) return true;
      last = now;
    }
    return false;
  };
  REQUIRE(settled());
  const std::uint64_t asleep = loops.idle_polls();

  // One loop works: a task that posts itself again (a loop's posts stay on
  // that loop), a few microseconds of work each time. The working loop never
  // finds nothing to do, so the idle polls counted meanwhile are the other
  // loop's: woken, it polls instead of sleeping. The work goes on until ten
  // are counted (10 s at most), read by the task itself before its own loop
  // can go idle.
  CountDown finished(1);
  std::uint64_t during = 0;
  const Clock::time_point give_up = Clock::now() + 10s;
  std::function<void()> work = [&] {
    const Clock::time_point spin_until = Clock::now() + 5us;
    while (Clock::now() < spin_until) {
    }
    during = loops.idle_polls() - asleep;
    if (during < 10 && Clock::now() < give_up) {
      loops.post(work);
    } else {
      finished.arrive();
    }
  };
  loops.post(work);
  REQUIRE(finished.wait());
  CHECK(during >= 10);

  // Once the work is over, both go back to sleep.
  CHECK(settled());
}

TEST_CASE("event loops without idle polling count no idle polls", "[pipeline][executor]") {
  EventLoops loops(2);
  CountDown done(2);
  loops.post_to_each([&] { done.arrive(); });
  REQUIRE(done.wait());
  CHECK(loops.idle_polls() == 0);
}
