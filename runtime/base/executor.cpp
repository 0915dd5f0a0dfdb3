// ThreadPool over a shared Boost.Asio io_context, EventLoops over one io_context
// per thread.
#include "base/executor.hpp"

#include <boost/asio/defer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/crash_context.hpp"
#include "base/log.hpp"

namespace passepartout {

namespace asio = boost::asio;

namespace {

// Runs `task`; an exception it throws is logged and dropped, so one bad task
// cannot take a thread with it.
void run_logged(const Executor::Task& task, std::string_view what) {
  try {
    task();
  } catch (const std::exception& e) {
    log_message(LogLevel::error, "executor", "{} threw: {}", what, e.what());
  } catch (...) {
    log_message(LogLevel::error, "executor", "{} threw an exception that is not a std::exception", what);
  }
}

}  // namespace

// --- shared by ThreadPool and EventLoops ---------------------------------------

namespace {

// Handlers a polling loop runs in one round, at most.
constexpr std::size_t kHandlersPerRound = 16;
// An event loop writes its held log lines before it sleeps, and otherwise
// after this many rounds of work or, when it polls, this long after the last
// write: a request's lines are not written between it and its reply, nor
// (when client and loop share a CPU) between the reply and the next request.
constexpr std::size_t kBusyRoundsPerLogWrite = 64;
constexpr std::chrono::milliseconds kLogWriteInterval{1};

// What the loops of one EventLoops share to poll together: while any of them
// has had work within idle_poll, the others poll too instead of sleeping, and
// one that went to sleep is woken when another becomes busy. A thread
// waiting on a reply from a loop (a client on the same machine, blocked in
// recv) then waits on a CPU that keeps running: waking it there is an
// interrupt to a running CPU, where a CPU that has halted must first be
// brought back (about 23 µs on the virtual machine of the README's figures,
// more than half of a round trip).
class PoolPulse {
 public:
  using Clock = std::chrono::steady_clock;

  PoolPulse(std::size_t loops, std::chrono::nanoseconds idle_poll) : idle_poll_(idle_poll), loops_(loops) {}
  // Before the loops start.
  void set_context(std::size_t loop, asio::io_context& context) { loops_[loop].context = &context; }

  // Loop `self` ran work at `now`: the pool is busy until now + idle_poll.
  // Written at most four times per idle_poll (one shared line, rarely
  // written); each time, loops found asleep get an empty task, which wakes them.
  void busy(std::size_t self, Clock::time_point now) {
    const Clock::rep until = (now + idle_poll_).time_since_epoch().count();
    if (busy_until_.load(std::memory_order_relaxed) > until - idle_poll_.count() / 4) return;
    busy_until_.store(until, std::memory_order_relaxed);
    for (std::size_t i = 0; i < loops_.size(); ++i) {
      if (i != self && loops_[i].sleeping.load(std::memory_order_seq_cst)) asio::post(*loops_[i].context, [] {});
    }
  }
  bool is_busy(Clock::time_point now) const {
    return now.time_since_epoch().count() < busy_until_.load(std::memory_order_relaxed);
  }
  // Around the blocking wait of loop `self`. A loop that goes to sleep just as
  // another becomes busy may miss its wake-up; it is woken at the next
  // refresh of busy_until, a quarter of idle_poll later at most.
  void sleeping(std::size_t self, bool asleep) { loops_[self].sleeping.store(asleep, std::memory_order_seq_cst); }
  // Loop `self` polled, found nothing, and yields before polling again.
  void count_idle_poll(std::size_t self) {
    LoopState& loop = loops_[self];
    loop.idle_polls.store(loop.idle_polls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  std::uint64_t idle_polls() const {
    std::uint64_t sum = 0;
    for (const LoopState& loop : loops_) sum += loop.idle_polls.load(std::memory_order_relaxed);
    return sum;
  }

 private:
  struct alignas(64) LoopState {
    asio::io_context* context = nullptr;
    std::atomic<bool> sleeping{false};
    std::atomic<std::uint64_t> idle_polls{0};  // written by its loop only
  };
  const std::chrono::nanoseconds idle_poll_;
  alignas(64) std::atomic<Clock::rep> busy_until_{0};
  std::vector<LoopState> loops_;
};

// The tasks a loop's own thread posts to its loop, in the order posted. They
// run after the task that posted them, ahead of whatever waits in Asio's
// queue, so a chain of steps (a signal's, each posting the next) runs back to
// back. Through Asio, each step went behind the scheduler's reactor marker,
// and the reactor ran (an epoll_wait) between every two steps: four system
// calls in every daemon request. While it holds tasks it holds work on the
// context, so the context does not stop under them. Its loop's thread alone
// touches it.
class OwnTasks {
 public:
  explicit OwnTasks(asio::io_context& context) : context_(context) {}
  ~OwnTasks() {
    if (size_ != 0) context_.get_executor().on_work_finished();
  }
  OwnTasks(const OwnTasks&) = delete;
  OwnTasks& operator=(const OwnTasks&) = delete;

  void push(Executor::Task&& task) {
    if (size_ == slots_.size()) grow();
    if (size_ == 0) context_.get_executor().on_work_started();
    slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(task);
    ++size_;
  }

  // Runs tasks in order, those they post meanwhile included, until none is
  // left or `limit` ran; returns how many ran.
  std::size_t run(std::size_t limit) {
    std::size_t ran = 0;
    while (ran < limit && size_ != 0) {
      // Moved out first: the task may post, and the ring may grow under it.
      const Executor::Task task = std::move(slots_[head_]);
      slots_[head_] = nullptr;
      head_ = (head_ + 1) & (slots_.size() - 1);
      if (--size_ == 0) context_.get_executor().on_work_finished();
      run_logged(task, "a pool task");
      ++ran;
    }
    return ran;
  }

 private:
  // Doubles the ring (a power of two, so an index wraps with a mask), oldest first.
  void grow() {
    std::vector<Executor::Task> bigger(slots_.empty() ? 64 : 2 * slots_.size());
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  asio::io_context& context_;
  std::vector<Executor::Task> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

// Runs `body` until it returns; whatever Asio itself lets escape from it (tasks
// run through run_logged) is logged, and `body` runs again.
template <class Body>
void run_until_done(Body&& body) {
  for (;;) {
    try {
      body();
      return;
    } catch (const std::exception& e) {
      log_message(LogLevel::error, "executor", "a pool thread caught: {}", e.what());
    } catch (...) {
      log_message(LogLevel::error, "executor", "a pool thread caught an exception that is not a std::exception");
    }
  }
}

// Runs `context` until it stops.
void run_context(asio::io_context& context) {
  run_until_done([&] { context.run(); });
}

// Runs an event loop: `context` and the tasks its thread posts to `own`, in
// rounds of at most kHandlersPerRound, each Asio handler followed by the own
// tasks it posted, and Asio's queue polled at least once a round, so that
// neither queue can keep the other waiting for long.
// The thread's log lines are held (set_log_batching) and written before it
// sleeps, every kBusyRoundsPerLogWrite rounds of work, and, when it polls,
// kLogWriteInterval after the last write.
//
// With `idle_poll` above zero, the thread goes on polling (the reactor without
// blocking, then whatever became ready) for that long after its last handler
// before it sleeps in the reactor: a request that arrives meanwhile is picked
// up without the thread being woken. Between polls it yields the CPU, so a
// poller never holds up a thread that shares its CPU. With a `pulse`, the
// loop `self` of a pool also polls while another loop of the pool is busy.
void run_event_loop(asio::io_context& context, OwnTasks& own, std::chrono::nanoseconds idle_poll, PoolPulse* pulse,
                    std::size_t self) {
  using Clock = std::chrono::steady_clock;
  const bool polls = idle_poll > std::chrono::nanoseconds::zero();
  set_log_batching(true);
  // A round is at most kHandlersPerRound handlers, so that a loop kept busy
  // (a task that keeps posting the next) still writes its log lines and
  // tells the pool it is busy between rounds.
  const auto round = [&] {
    // First what the handler before the round posted (run_one's, when the
    // loop slept), then Asio's queue at least once.
    std::size_t ran = own.run(kHandlersPerRound / 2);
    while (ran < kHandlersPerRound) {
      const std::size_t from_asio = context.poll_one();
      ran += from_asio;
      const std::size_t from_own = ran < kHandlersPerRound ? own.run(kHandlersPerRound - ran) : 0;
      ran += from_own;
      if (from_asio == 0 && from_own == 0) break;
    }
    return ran;
  };
  run_until_done([&] {
    Clock::time_point poll_until = Clock::now() + idle_poll;
    // After work: the time it read, when the loop polls.
    const auto ran_work = [&]() -> Clock::time_point {
      if (!polls) return {};
      const Clock::time_point now = Clock::now();
      poll_until = now + idle_poll;
      if (pulse != nullptr) pulse->busy(self, now);
      return now;
    };
    // Since the held log lines were last written.
    std::size_t busy_rounds = 0;
    Clock::time_point last_log_write = Clock::now();
    const auto write_logs = [&](Clock::time_point now) {
      flush_log_batch();
      busy_rounds = 0;
      last_log_write = now;
    };
    // Own tasks hold work on the context: it stops only once they ran too.
    while (!context.stopped()) {
      const std::size_t ran = round();
      if (ran != 0) {
        const Clock::time_point now = ran_work();
        // `now` is read only when the loop polls (the daemon's loops do).
        if (++busy_rounds == kBusyRoundsPerLogWrite || (polls && now - last_log_write >= kLogWriteInterval)) {
          write_logs(now);
        }
        continue;
      }
      if (polls) {
        const Clock::time_point now = Clock::now();
        if (now < poll_until || (pulse != nullptr && pulse->is_busy(now))) {
          if (now - last_log_write >= kLogWriteInterval) write_logs(now);
          // Whatever else wants this CPU (often the very client just
          // answered, woken here because the waker was expected to sleep)
          // runs first.
          if (pulse != nullptr) pulse->count_idle_poll(self);
          std::this_thread::yield();
          continue;
        }
      }
      write_logs(Clock::now());  // what is held leaves before the loop sleeps
      // Nothing ran in the round, so no own task waits: sleeping is safe.
      if (pulse != nullptr) pulse->sleeping(self, true);
      const std::size_t woken_by = context.run_one();
      if (pulse != nullptr) pulse->sleeping(self, false);
      if (woken_by != 0) ran_work();
    }
  });
  set_log_batching(false);
}

// The delayed tasks of a pool, each an Asio timer registered so that stop()
// can cancel those still waiting, and the pool's stopped flag.
class DelayedTasks {
 public:
  // Read without the lock on every post.
  bool stopped() const noexcept { return stopped_.load(std::memory_order_acquire); }

  // Starts a timer on `context` that runs `task` after `delay`; drops the
  // task after stop(). Registered and started under the lock, so stop()
  // either sees the timer and cancels it or the timer is never started.
  void start(asio::io_context& context, std::chrono::nanoseconds delay, Executor::Task task) {
    std::lock_guard lock(mutex_);
    if (stopped_.load(std::memory_order_relaxed)) return;
    auto timer = std::make_shared<asio::steady_timer>(context, delay);
    timers_.insert(timer);
    timer->async_wait([this, timer, task = std::move(task)](const boost::system::error_code& error) {
      {
        std::lock_guard inner(mutex_);
        timers_.erase(timer);
      }
      if (!error) run_logged(task, "a delayed pool task");
    });
  }

  // Sets the stopped flag and cancels the waiting timers; false when it was
  // already set.
  bool stop() {
    std::lock_guard lock(mutex_);
    if (stopped_.load(std::memory_order_relaxed)) return false;
    stopped_.store(true, std::memory_order_release);
    for (const auto& timer : timers_) timer->cancel();
    return true;
  }

 private:
  std::atomic<bool> stopped_{false};
  std::mutex mutex_;  // guards timers_ and the change of stopped_
  std::unordered_set<std::shared_ptr<asio::steady_timer>> timers_;
};

}  // namespace

// --- ThreadPool ---------------------------------------------------------------

struct ThreadPool::Impl {
  asio::io_context context;
  asio::executor_work_guard<asio::io_context::executor_type> guard{context.get_executor()};
  std::vector<std::thread> threads;
  DelayedTasks delayed;

  bool is_pool_thread() const {
    const std::thread::id self = std::this_thread::get_id();
    return std::any_of(threads.begin(), threads.end(), [&](const std::thread& t) { return t.get_id() == self; });
  }
};

ThreadPool::ThreadPool(std::size_t threads) : impl_(std::make_unique<Impl>()), size_(threads == 0 ? 1 : threads) {
  impl_->threads.reserve(size_);
  try {
    for (std::size_t i = 0; i < size_; ++i) {
      impl_->threads.emplace_back([impl = impl_.get()] {
        publish_running_hook("a thread pool");  // a hook stuck here is named at shutdown
        run_context(impl->context);
      });
    }
  } catch (...) {
    // The threads already started must be joined before the pool goes away.
    stop();
    throw;
  }
}

// stop() throws only when a join fails, which leaves nothing to recover: terminating is right.
ThreadPool::~ThreadPool() { stop(); }  // NOLINT(bugprone-exception-escape)

// After stop() a task is dropped at once rather than left in a queue no
// thread will run; it also keeps a task that re-posts itself from holding
// stop() forever.
//
// defer, not post: from a pool thread the task joins that thread's private
// queue (no other thread is woken for it); from elsewhere both are the same.
void ThreadPool::post(Task&& task) {
  if (impl_->delayed.stopped()) return;
  asio::defer(impl_->context, [task = std::move(task)] { run_logged(task, "a pool task"); });
}

asio::io_context& ThreadPool::context() noexcept { return impl_->context; }

void ThreadPool::post_after(std::chrono::nanoseconds delay, Task task) {
  impl_->delayed.start(impl_->context, delay, std::move(task));
}

void ThreadPool::stop() {
  // A pool thread joining itself would deadlock; the header forbids it.
  assert(!impl_->is_pool_thread());
  if (!impl_->delayed.stop()) return;
  impl_->guard.reset();
  for (std::thread& thread : impl_->threads) {
    if (thread.joinable()) thread.join();
  }
}

// --- EventLoops ---------------------------------------------------------------

namespace {

// The loop the calling thread runs, if it runs one: posts from there stay there.
struct CurrentLoop {
  const void* owner = nullptr;  // the EventLoops::Impl
  asio::io_context* context = nullptr;
  OwnTasks* own = nullptr;  // what the thread posts to its own loop
};
thread_local CurrentLoop current_loop;

}  // namespace

struct EventLoops::Impl {
  struct Loop {
    // Made by the loop's own thread, so that it and what Asio allocates for
    // it (its scheduler, written on every task) come from that thread's
    // malloc arena: made one after another by one thread, one loop's
    // scheduler ended in the cache line where the next loop's io_context
    // began, and every task on either loop moved that line between the
    // cores (two loops did 1.5 times what one does; trivial tasks, 15-20
    // million a second against 30-35 million for two pools of one loop).
    //
    // Concurrency hint 1: the scheduler knows one thread runs it, so a task
    // posted from that thread goes on its private queue without a lock or a
    // wake-up (other threads may still post, under the lock).
    std::unique_ptr<asio::io_context> context;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
    std::thread thread;
  };
  std::vector<std::unique_ptr<Loop>> loops;
  std::atomic<std::size_t> turn{0};
  DelayedTasks delayed;
  std::chrono::nanoseconds idle_poll{0};
  std::unique_ptr<PoolPulse> pulse;  // with idle_poll

  asio::io_context& next_in_turn() {
    return *loops[turn.fetch_add(1, std::memory_order_relaxed) % loops.size()]->context;
  }
  // The calling thread's own loop, or the next in turn from any other thread.
  asio::io_context& pick() { return current_loop.owner == this ? *current_loop.context : next_in_turn(); }
};

EventLoops::EventLoops(std::size_t threads, std::chrono::nanoseconds idle_poll)
    : impl_(std::make_unique<Impl>()), size_(threads == 0 ? 1 : threads) {
  impl_->idle_poll = idle_poll;
  impl_->loops.reserve(size_);
  for (std::size_t i = 0; i < size_; ++i) impl_->loops.push_back(std::make_unique<Impl::Loop>());
  if (idle_poll > std::chrono::nanoseconds::zero()) impl_->pulse = std::make_unique<PoolPulse>(size_, idle_poll);

  // Each thread makes its loop's io_context, then waits until every loop has
  // one (a loop may post to any other) before it runs; the constructor
  // returns once all are made, or throws what making one threw. The threads
  // share `sync` with the constructor, so it outlives whichever finishes last.
  struct Sync {
    std::mutex mutex;  // guards made, failure
    std::condition_variable all_made;
    std::size_t made = 0;
    std::exception_ptr failure;
  };
  auto sync = std::make_shared<Sync>();
  std::size_t started = 0;
  try {
    for (; started < size_; ++started) {
      Impl::Loop& loop = *impl_->loops[started];
      loop.thread = std::thread([impl = impl_.get(), &loop, i = started, size = size_, sync] {
        std::exception_ptr error;
        try {
          loop.context = std::make_unique<asio::io_context>(1);
          loop.guard.emplace(loop.context->get_executor());
          if (impl->pulse) impl->pulse->set_context(i, *loop.context);
        } catch (...) {
          error = std::current_exception();
        }
        {
          std::unique_lock lock(sync->mutex);
          if (error && !sync->failure) sync->failure = error;
          if (++sync->made == size) sync->all_made.notify_all();
          sync->all_made.wait(lock, [&] { return sync->made == size; });
          if (sync->failure) return;  // the constructor throws; nothing runs
        }
        publish_running_hook("an event loop");  // a hook stuck here is named at shutdown
        OwnTasks own(*loop.context);
        current_loop = CurrentLoop{impl, loop.context.get(), &own};
        run_event_loop(*loop.context, own, impl->idle_poll, impl->pulse.get(), i);
        current_loop = CurrentLoop{};
      });
    }
  } catch (...) {
    // A thread could not be started: the ones that were stop waiting and end.
    {
      std::lock_guard lock(sync->mutex);
      if (!sync->failure) sync->failure = std::current_exception();
      sync->made += size_ - started;
      sync->all_made.notify_all();
    }
    for (std::size_t i = 0; i < started; ++i) impl_->loops[i]->thread.join();
    throw;
  }
  std::unique_lock lock(sync->mutex);
  sync->all_made.wait(lock, [&] { return sync->made == size_; });
  if (sync->failure) {
    const std::exception_ptr failure = sync->failure;
    lock.unlock();
    for (auto& loop : impl_->loops) loop->thread.join();
    std::rethrow_exception(failure);
  }
}

EventLoops::~EventLoops() { stop(); }  // NOLINT(bugprone-exception-escape): as ~ThreadPool

void EventLoops::post(Task&& task) {
  if (impl_->delayed.stopped()) return;
  if (current_loop.owner == impl_.get()) {
    current_loop.own->push(std::move(task));
    return;
  }
  asio::post(impl_->next_in_turn(), [task = std::move(task)] { run_logged(task, "a pool task"); });
}

void EventLoops::post_to_each(const Task& task) {
  if (impl_->delayed.stopped()) return;
  for (auto& loop : impl_->loops) {
    asio::post(*loop->context, [task] { run_logged(task, "a pool task"); });
  }
}

void EventLoops::post_after(std::chrono::nanoseconds delay, Task task) {
  impl_->delayed.start(impl_->pick(), delay, std::move(task));
}

void EventLoops::stop() {
  // A loop joining itself would deadlock; the header forbids it.
  assert(current_loop.owner != impl_.get());
  if (!impl_->delayed.stop()) return;
  for (auto& loop : impl_->loops) loop->guard.reset();
  for (auto& loop : impl_->loops) {
    if (loop->thread.joinable()) loop->thread.join();
  }
}

std::uint64_t EventLoops::idle_polls() const noexcept {
  return impl_->pulse != nullptr ? impl_->pulse->idle_polls() : 0;
}

std::vector<asio::io_context*> EventLoops::contexts() const {
  std::vector<asio::io_context*> out;
  out.reserve(impl_->loops.size());
  for (const auto& loop : impl_->loops) out.push_back(loop->context.get());
  return out;
}

}  // namespace passepartout
