// ControlThread's queue and loop.
#include "skills/control_thread.hpp"

#include "base/crash_context.hpp"

namespace passepartout {

void ControlThread::Queue::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    if (!stopped_) {
      tasks_.push_back(std::move(task));
      ready_.notify_one();
      return;
    }
  }
  task();  // the control thread is gone: whoever posts runs it
}

std::thread::id ControlThread::Queue::thread_id() const noexcept {
  std::lock_guard lock(mutex_);
  return thread_id_;
}

ControlThread::ControlThread() : queue_(std::make_shared<Queue>()) {
  std::unique_lock lock(queue_->mutex_);
  thread_ = std::thread([this] { loop(); });
  queue_->thread_id_ = thread_.get_id();
}

ControlThread::~ControlThread() {
  post([q = queue_.get()] {
    std::lock_guard lock(q->mutex_);
    q->stopped_ = true;
  });
  thread_.join();
  // Anything posted between the stop task and the join ran inline or is here.
  std::deque<std::function<void()>> rest;
  {
    std::lock_guard lock(queue_->mutex_);
    rest.swap(queue_->tasks_);
    queue_->thread_id_ = std::thread::id();
  }
  for (auto& task : rest) task();
}

bool ControlThread::wait_idle_until(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(queue_->mutex_);
  return queue_->idle_.wait_until(lock, deadline, [this] { return !queue_->running_ && queue_->tasks_.empty(); });
}

void ControlThread::loop() {
  publish_running_hook("the control");  // a hook stuck here is named at shutdown
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(queue_->mutex_);
      queue_->ready_.wait(lock, [this] { return !queue_->tasks_.empty() || queue_->stopped_; });
      if (queue_->tasks_.empty()) return;  // stopped and drained
      task = std::move(queue_->tasks_.front());
      queue_->tasks_.pop_front();
      queue_->running_ = true;
    }
    task();
    task = nullptr;  // what the task held goes before the thread counts as idle
    std::lock_guard lock(queue_->mutex_);
    queue_->running_ = false;
    if (queue_->tasks_.empty()) queue_->idle_.notify_all();
    if (queue_->stopped_ && queue_->tasks_.empty()) return;
  }
}

}  // namespace passepartout
