// ThreadPool over a Boost.Asio io_context, and Strand over any Executor.
#include "pipeline/executor.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "log.hpp"

namespace passepartout {

namespace asio = boost::asio;

namespace {

// Runs `task`; an exception it throws is logged and dropped, so one bad task
// cannot take a thread or a strand's queue with it.
void run_logged(const Executor::Task& task, std::string_view what) {
  try {
    task();
  } catch (const std::exception& e) {
    log_message(LogLevel::error, "executor", std::string(what) + " threw: " + e.what());
  } catch (...) {
    log_message(LogLevel::error, "executor", std::string(what) + " threw an exception that is not a std::exception");
  }
}

}  // namespace

// --- Strand -------------------------------------------------------------------

// The queue outlives the Strand object while a drain is scheduled, so a Strand
// may be destroyed with tasks in flight: they still run, in order.
struct Strand::State : std::enable_shared_from_this<Strand::State> {
  explicit State(Executor& target) : executor(target) {}

  void push(Task task) {
    {
      std::lock_guard lock(mutex);
      queue.push_back(std::move(task));
      if (running) return;
      running = true;
    }
    executor.post([self = shared_from_this()] { self->drain(); });
  }

  // Runs what is queued, one task at a time; a task that throws is logged and
  // dropped (the executor's own policy would otherwise lose the whole queue).
  void drain() {
    for (;;) {
      Task task;
      {
        std::lock_guard lock(mutex);
        if (queue.empty()) {
          running = false;
          return;
        }
        task = std::move(queue.front());
        queue.pop_front();
      }
      run_logged(task, "a strand task");
    }
  }

  Executor& executor;
  std::mutex mutex;  // guards queue and running
  std::deque<Task> queue;
  bool running = false;
};

Strand::Strand(Executor& executor) : state_(std::make_shared<State>(executor)) {}
Strand::~Strand() = default;

void Strand::post(Task task) { state_->push(std::move(task)); }

void Strand::post_after(std::chrono::nanoseconds delay, Task task) {
  state_->executor.post_after(delay, [state = state_, task = std::move(task)]() mutable {
    state->push(std::move(task));
  });
}

// --- ThreadPool ---------------------------------------------------------------

struct ThreadPool::Impl {
  asio::io_context context;
  asio::executor_work_guard<asio::io_context::executor_type> guard{context.get_executor()};
  std::vector<std::thread> threads;
  // Read without the lock on every post; set under the lock, before the timers are cancelled.
  std::atomic<bool> stopped{false};
  std::mutex mutex;  // guards timers and the change of stopped
  std::unordered_set<std::shared_ptr<asio::steady_timer>> timers;

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
        // Tasks run through run_logged, so run() returns only when the pool
        // stops; the loop is for anything Asio itself might let escape.
        for (;;) {
          try {
            impl->context.run();
            return;
          } catch (const std::exception& e) {
            log_message(LogLevel::error, "executor", std::string("a pool thread caught: ") + e.what());
          } catch (...) {
            log_message(LogLevel::error, "executor", "a pool thread caught an exception that is not a std::exception");
          }
        }
      });
    }
  } catch (...) {
    // The threads already started must be joined before the pool goes away.
    stop();
    throw;
  }
}

ThreadPool::~ThreadPool() { stop(); }

// After stop() a task is dropped at once rather than left in a queue no
// thread will run; it also keeps a task that re-posts itself from holding
// stop() forever.
//
// defer, not post: from a pool thread the task joins that thread's private
// queue (no other thread is woken for it); from elsewhere both are the same.
void ThreadPool::post(Task task) {
  if (impl_->stopped.load(std::memory_order_acquire)) return;
  asio::defer(impl_->context, [task = std::move(task)] { run_logged(task, "a pool task"); });
}

asio::io_context& ThreadPool::context() noexcept { return impl_->context; }

void ThreadPool::post_after(std::chrono::nanoseconds delay, Task task) {
  // Registered and started under the lock, so stop() either sees the timer
  // and cancels it or the timer is never started.
  std::lock_guard lock(impl_->mutex);
  if (impl_->stopped.load(std::memory_order_relaxed)) return;
  auto timer = std::make_shared<asio::steady_timer>(impl_->context, delay);
  impl_->timers.insert(timer);
  timer->async_wait([impl = impl_.get(), timer, task = std::move(task)](const boost::system::error_code& error) {
    {
      std::lock_guard inner(impl->mutex);
      impl->timers.erase(timer);
    }
    if (!error) run_logged(task, "a delayed pool task");
  });
}

void ThreadPool::stop() {
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopped.load(std::memory_order_relaxed)) return;
    // A pool thread joining itself would deadlock; the header forbids it.
    assert(!impl_->is_pool_thread());
    impl_->stopped.store(true, std::memory_order_release);
    for (const auto& timer : impl_->timers) timer->cancel();
  }
  impl_->guard.reset();
  for (std::thread& thread : impl_->threads) {
    if (thread.joinable()) thread.join();
  }
}

}  // namespace passepartout
