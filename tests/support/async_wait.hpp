// Test support for asynchronous code: wait for a value or a count from other
// threads with a generous timeout, never by sleeping.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

namespace passepartout::testing {

// Long enough for a loaded CI machine or a sanitizer build; a test that hits
// it has hung.
inline constexpr std::chrono::seconds kAsyncTimeout{30};

// Receives one value from any thread; counts how often it was set.
template <class T>
class Awaited {
 public:
  void set(T value) {
    std::lock_guard lock(mutex_);
    ++times_set_;
    if (!value_) value_ = std::move(value);
    ready_.notify_all();
  }
  // The value, or nullopt after `timeout`.
  std::optional<T> wait(std::chrono::milliseconds timeout = kAsyncTimeout) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return value_.has_value(); });
    return value_;
  }
  bool is_set() const {
    std::lock_guard lock(mutex_);
    return value_.has_value();
  }
  std::size_t times_set() const {
    std::lock_guard lock(mutex_);
    return times_set_;
  }

 private:
  mutable std::mutex mutex_;  // guards value_ and times_set_
  std::condition_variable ready_;
  std::optional<T> value_;
  std::size_t times_set_ = 0;
};

// Counts events from any thread; waits until a number of them happened.
class CountDown {
 public:
  explicit CountDown(std::size_t count) : remaining_(count) {}
  void arrive() {
    std::lock_guard lock(mutex_);
    if (remaining_ > 0) --remaining_;
    if (remaining_ == 0) done_.notify_all();
  }
  // True when every event happened before `timeout`.
  bool wait(std::chrono::milliseconds timeout = kAsyncTimeout) {
    std::unique_lock lock(mutex_);
    return done_.wait_for(lock, timeout, [&] { return remaining_ == 0; });
  }

 private:
  std::mutex mutex_;  // guards remaining_
  std::condition_variable done_;
  std::size_t remaining_;
};

// Whether `condition` became true within `timeout`, asked every few
// milliseconds: for state another process or a server changes (a
// reconnection, a row), which nothing here can be told about. False: it
// never did.
template <class Condition>
bool wait_until(Condition condition, std::chrono::milliseconds timeout = kAsyncTimeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace passepartout::testing
