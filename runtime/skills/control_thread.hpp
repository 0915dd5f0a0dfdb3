// ControlThread: the one thread that changes the skill set — loads, swaps,
// publishes, and destroys retired slots (dlopen/dlclose happen only here).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>

namespace passepartout {

// Runs posted tasks in order on one thread. post() and run() from any thread;
// the destructor runs what is queued, then joins. Tasks posted after the
// thread stopped run inline on the poster (so a late slot release still
// destroys the slot instead of leaking it). The thread publishes its running
// hook (crash_context.hpp), so a skill's hook stuck on it (create, self-test,
// state export and import) is named at shutdown as "on the control thread".
class ControlThread {
 public:
  ControlThread();
  ~ControlThread();
  ControlThread(const ControlThread&) = delete;
  ControlThread& operator=(const ControlThread&) = delete;

  void post(std::function<void()> task) { queue_->post(std::move(task)); }
  bool is_current() const noexcept { return std::this_thread::get_id() == queue_->thread_id(); }

  // Waits until no task runs or waits, or `deadline` passes; true when idle.
  // Any thread but the control thread itself.
  bool wait_idle_until(std::chrono::steady_clock::time_point deadline);

  // Runs `f` on the control thread and returns its result; inline when
  // already there. Exceptions propagate to the caller.
  template <class F>
  auto run(F&& f) -> std::invoke_result_t<F&> {
    using R = std::invoke_result_t<F&>;
    if (is_current()) return f();
    std::packaged_task<R()> task(std::forward<F>(f));
    auto done = task.get_future();
    post([&task] { task(); });
    return done.get();
  }

  // The queue outlives the thread for whoever still holds it (slot deleters).
  class Queue {
   public:
    void post(std::function<void()> task);
    std::thread::id thread_id() const noexcept;

   private:
    friend class ControlThread;
    mutable std::mutex mutex_;  // guards everything below
    std::condition_variable ready_;
    std::condition_variable idle_;  // a task finished with nothing queued
    std::deque<std::function<void()>> tasks_;
    bool running_ = false;  // the thread is in a task
    bool stopped_ = false;
    std::thread::id thread_id_;
  };
  std::shared_ptr<Queue> queue() const noexcept { return queue_; }

 private:
  void loop();

  std::shared_ptr<Queue> queue_;
  std::thread thread_;
};

}  // namespace passepartout
