// Executor: where asynchronous work runs. The pipeline, providers and timers
// post tasks to one; nothing on it may block waiting for another task.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/inline_function.hpp"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace passepartout {

class Executor {
 public:
  using Task = InlineFunction<void()>;  // a step's closure is kept without an allocation

  virtual ~Executor() = default;

  // Runs `task` soon on one of the executor's threads. Any thread.
  virtual void post(Task&& task) = 0;
  // Runs `task` once `delay` has passed. Any thread. Tasks still waiting when
  // the executor stops are dropped without running.
  virtual void post_after(std::chrono::nanoseconds delay, Task task) = 0;
};

// A fixed pool of threads sharing one io_context (Boost.Asio, kept out of this
// header): any idle thread takes the next task, so it suits work that blocks
// (commands, file tools). Stops and joins in the destructor, dropping tasks
// not yet run.
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

  void post(Task&& task) override;
  void post_after(std::chrono::nanoseconds delay, Task task) override;

  // Stops taking work, lets the tasks already queued (not delayed ones) run,
  // and joins the threads. Idempotent; the destructor calls it. Never from
  // one of the pool's own threads.
  void stop();
  std::size_t size() const noexcept { return size_; }

  // The io_context the threads run, for I/O objects that should share them.
  // Stop those before the pool.
  boost::asio::io_context& context() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::size_t size_;
};

// Event loops: one io_context per thread, each run by its thread alone, for
// work that never blocks (the pipeline's steps, the daemon's connections).
//
// A task posted from one of the loops' threads runs on that same thread once
// the current task returns: a signal's steps, its reply and the connection it
// came from stay on one thread, with no lock taken and no other thread woken
// on the way. Such tasks run in the order posted, right after the task that
// posted them and ahead of what waits in the loop's io_context (so a chain of
// steps runs without a trip through Asio's scheduler and its reactor between
// them), and a loop's rounds alternate the two queues so neither starves.
// A task posted from any other thread goes to the loops in turn, and the
// daemon hands new connections to them in turn (contexts()). Work does not
// move between loops afterwards, as with one worker process per core: a task
// that blocks holds up its own loop, so blocking work belongs on a
// ThreadPool.
//
// With `idle_poll` above zero a loop, after its last piece of work, polls its
// reactor (yielding the CPU between polls) for that long before it sleeps, so
// work arriving meanwhile does not have to wake it; and while any loop of the
// pool is busy, the others poll too (one asleep is woken), so that a thread
// they serve, blocked waiting for a reply, waits on a CPU that has not halted.
// When the whole pool is idle, every loop sleeps.
//
// The loops batch their log lines (set_log_batching): what they logged is
// written in one go before a loop sleeps, after 64 rounds of work, and, when
// it polls, a millisecond after its last write.
//
// Stopping, throwing tasks and post after stop() behave as in ThreadPool.
class EventLoops final : public Executor {
 public:
  explicit EventLoops(std::size_t threads, std::chrono::nanoseconds idle_poll = {});
  ~EventLoops() override;
  EventLoops(const EventLoops&) = delete;
  EventLoops& operator=(const EventLoops&) = delete;

  void post(Task&& task) override;
  void post_after(std::chrono::nanoseconds delay, Task task) override;
  // Posts a copy of `task` to every loop (a liveness probe, say). Any thread.
  void post_to_each(const Task& task);

  // As ThreadPool::stop(): queued tasks run, delayed ones are dropped, the
  // threads are joined. Idempotent; never from one of the loops' threads.
  void stop();
  std::size_t size() const noexcept { return size_; }

  // Polls that found nothing to do, over all loops since they started (0
  // without idle_poll): how much the loops spin while waiting for work.
  std::uint64_t idle_polls() const noexcept;

  // The loops' io_contexts, one per thread, for I/O objects that should run
  // on them (the daemon hands each new connection to the next one). Stop
  // those before the loops.
  std::vector<boost::asio::io_context*> contexts() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::size_t size_;
};

}  // namespace passepartout
