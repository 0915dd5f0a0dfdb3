// Executor: where asynchronous work runs. The pipeline, providers and timers
// post tasks to one; nothing on it may block waiting for another task.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace passepartout {

class Executor {
 public:
  using Task = std::function<void()>;

  virtual ~Executor() = default;

  // Runs `task` soon on one of the executor's threads. Any thread.
  virtual void post(Task task) = 0;
  // Runs `task` once `delay` has passed. Any thread. Tasks still waiting when
  // the executor stops are dropped without running.
  virtual void post_after(std::chrono::nanoseconds delay, Task task) = 0;
};

// A strand: tasks posted to it run one at a time, in the order posted, on the
// underlying executor's threads. Signals of one session go through one.
class Strand final : public Executor {
 public:
  explicit Strand(Executor& executor);
  ~Strand() override;
  Strand(const Strand&) = delete;
  Strand& operator=(const Strand&) = delete;

  void post(Task task) override;
  void post_after(std::chrono::nanoseconds delay, Task task) override;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// A fixed pool of threads running an io_context (Boost.Asio, kept out of this
// header). Stops and joins in the destructor, dropping tasks not yet run.
// After stop(), post and post_after drop their task. A task that throws is
// logged and dropped; the thread goes on.
//
// A task posted from one of the pool's own threads is queued on that thread
// and runs there once the current task returns, unless an idle thread takes
// it first: a chain of tasks (a signal's steps, a reply's write) stays on one
// thread instead of waking another for every step. Work that piles up still
// spreads over every thread.
class ThreadPool final : public Executor {
 public:
  explicit ThreadPool(std::size_t threads);
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void post(Task task) override;
  void post_after(std::chrono::nanoseconds delay, Task task) override;

  // Stops taking work, lets the tasks already queued (not delayed ones) run,
  // and joins the threads. Idempotent; the destructor calls it. Never from
  // one of the pool's own threads.
  void stop();
  std::size_t size() const noexcept { return size_; }

  // The io_context the threads run, for I/O objects that should share them
  // (the daemon's listeners and connections). Stop those before the pool.
  boost::asio::io_context& context() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::size_t size_;
};

}  // namespace passepartout
