// Heartbeat: a self-rescheduling delayed task on the executor.
#include "pipeline/heartbeat.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <utility>

#include "base/executor.hpp"
#include "base/log.hpp"
#include "pipeline/pipeline.hpp"

namespace passepartout {

struct Heartbeat::State : std::enable_shared_from_this<Heartbeat::State> {
  Executor& executor;
  Pipeline& pipeline;
  HeartbeatOptions options;
  std::function<void()> save_memory;
  std::uint64_t ticks_per_save = 1;

  std::mutex ticking;  // held by a running tick; stop() takes it to wait one out
  std::atomic<bool> running{false};
  std::atomic<bool> heartbeat_in_flight{false};
  std::atomic<std::uint64_t> ticks{0};
  std::atomic<std::uint64_t> heartbeats{0};
  std::atomic<std::uint64_t> saves{0};

  State(Executor& on, Pipeline& into, HeartbeatOptions chosen, std::function<void()> save)
      : executor(on), pipeline(into), options(chosen), save_memory(std::move(save)) {
    const auto interval = std::max(chosen.interval.count(), std::chrono::milliseconds::rep{1});
    ticks_per_save = static_cast<std::uint64_t>(
        std::max<std::chrono::milliseconds::rep>(1, chosen.auto_save_interval.count() / interval));
  }

  void schedule() {
    executor.post_after(options.interval, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->tick();
    });
  }

  void tick() {
    std::lock_guard lock(ticking);
    if (!running.load(std::memory_order_acquire)) return;
    const std::uint64_t n = ticks.fetch_add(1, std::memory_order_relaxed) + 1;
    // H1: the counter reaching auto-save/interval saves memory, then the heartbeat goes in.
    if (save_memory && n % ticks_per_save == 0) {
      try {
        save_memory();
        saves.fetch_add(1, std::memory_order_relaxed);
      } catch (const std::exception& e) {
        log_message(LogLevel::error, "heartbeat", "memory auto-save failed: {}", e.what());
      }
    }
    if (!heartbeat_in_flight.exchange(true, std::memory_order_acq_rel)) {
      heartbeats.fetch_add(1, std::memory_order_relaxed);
      pipeline.inject(heartbeat_signal(), nullptr, [weak = weak_from_this()](const LoopReport&) {
        if (auto self = weak.lock()) self->heartbeat_in_flight.store(false, std::memory_order_release);
      });
    } else {
      log_message(LogLevel::debug, "heartbeat", "the previous heartbeat is still being processed; tick {} skips", n);
    }
    if (running.load(std::memory_order_acquire)) schedule();
  }
};

Heartbeat::Heartbeat(Executor& executor, Pipeline& pipeline, HeartbeatOptions options,
                     std::function<void()> save_memory)
    : state_(std::make_shared<State>(executor, pipeline, options, std::move(save_memory))) {}

Heartbeat::~Heartbeat() { stop(); }

void Heartbeat::start() {
  if (state_->running.exchange(true, std::memory_order_acq_rel)) return;
  state_->schedule();
}

void Heartbeat::stop() noexcept {
  std::lock_guard lock(state_->ticking);
  state_->running.store(false, std::memory_order_release);
}

std::uint64_t Heartbeat::ticks() const noexcept { return state_->ticks.load(std::memory_order_relaxed); }
std::uint64_t Heartbeat::heartbeats() const noexcept { return state_->heartbeats.load(std::memory_order_relaxed); }
std::uint64_t Heartbeat::saves() const noexcept { return state_->saves.load(std::memory_order_relaxed); }

}  // namespace passepartout
