// The watchdog thread and the registry of per-thread GateWatch records.
#include "pipeline/gate_watchdog.hpp"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "skills/registry.hpp"

namespace passepartout {
namespace {

class Watchdog {
 public:
  static Watchdog& instance() {
    static Watchdog watchdog;
    return watchdog;
  }

  void add(GateWatch* watch) {
    std::lock_guard lock(mutex_);
    watches_.push_back(watch);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }

  void remove(GateWatch* watch) {
    std::lock_guard lock(mutex_);
    watches_.erase(std::remove(watches_.begin(), watches_.end(), watch), watches_.end());
  }

  void set_budget(std::chrono::milliseconds budget) {
    budget_ms_.store(std::max<std::int64_t>(budget.count(), 4), std::memory_order_relaxed);
    wake_.notify_all();
  }
  std::chrono::milliseconds budget() const {
    return std::chrono::milliseconds(budget_ms_.load(std::memory_order_relaxed));
  }
  std::uint64_t late_calls() const noexcept { return late_calls_.load(std::memory_order_relaxed); }

  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  static constexpr std::int64_t kScansPerBudget = 4;

  // A quarter of the finest budget in use: the default's, or the smallest
  // `gate_timeout` of a loaded gate; at least 1 ms.
  std::chrono::milliseconds period() const {
    std::int64_t finest = budget_ms_.load(std::memory_order_relaxed);
    finest = std::min<std::int64_t>(finest, Snapshot::finest_gate_budget_ms());
    return std::chrono::milliseconds(std::max<std::int64_t>(finest / kScansPerBudget, 1));
  }

  void run() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, period(), [this] { return stopping_; });
      if (stopping_) break;
      const auto now = std::chrono::steady_clock::now();
      const std::chrono::milliseconds fallback = budget();
      for (GateWatch* watch : watches_) {
        if (watch->scan(now, fallback)) late_calls_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  std::mutex mutex_;  // guards watches_, thread_, stopping_
  std::condition_variable wake_;
  std::vector<GateWatch*> watches_;
  std::thread thread_;
  bool stopping_ = false;
  std::atomic<std::int64_t> budget_ms_{1000};
  std::atomic<std::uint64_t> late_calls_{0};
};

// Registers the thread's watch for the thread's life.
struct WatchLease {
  GateWatch watch;
  Watchdog& watchdog = Watchdog::instance();  // constructed first, so it outlives every lease
  WatchLease() { watchdog.add(&watch); }
  ~WatchLease() { watchdog.remove(&watch); }
  WatchLease(const WatchLease&) = delete;
  WatchLease& operator=(const WatchLease&) = delete;
};

}  // namespace

GateWatch& GateWatchdog::this_thread() {
  thread_local WatchLease lease;
  return lease.watch;
}

void GateWatchdog::set_budget(std::chrono::milliseconds budget) { Watchdog::instance().set_budget(budget); }

std::chrono::milliseconds GateWatchdog::budget() { return Watchdog::instance().budget(); }

std::uint64_t GateWatchdog::late_calls() noexcept { return Watchdog::instance().late_calls(); }

}  // namespace passepartout
