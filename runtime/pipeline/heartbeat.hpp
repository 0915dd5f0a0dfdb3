// Heartbeat (seed H1, Decisions 9): a timer on the executor that, every
// `interval`, saves memory when the auto-save interval has come round and
// then injects (:TYPE :EVENT :PAYLOAD (:SENSOR :HEARTBEAT :UNIX-TIME <n>)),
// which skills with a heartbeat trigger receive like any other signal.
//
// No thread of its own: each tick is a delayed task on the executor, and the
// next tick is scheduled from the current one. A tick whose previous
// heartbeat is still being processed skips the injection (heartbeats never
// pile up behind a slow provider) but still counts toward the auto-save.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace passepartout {

class Executor;
class Pipeline;

struct HeartbeatOptions {
  std::chrono::milliseconds interval{std::chrono::seconds(60)};             // HEARTBEAT_INTERVAL
  std::chrono::milliseconds auto_save_interval{std::chrono::seconds(300)};  // MEMORY_AUTO_SAVE_INTERVAL
};

class Heartbeat {
 public:
  // `save_memory` (may be empty) runs on the executor every
  // max(1, auto_save_interval / interval) ticks, before that tick's heartbeat.
  Heartbeat(Executor& executor, Pipeline& pipeline, HeartbeatOptions options, std::function<void()> save_memory);
  ~Heartbeat();  // stop()
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Schedules the first tick one interval from now. Idempotent.
  void start();
  // Waits for a tick that is running (its save and injection; not the
  // heartbeat's processing), and no tick starts after it returns. Never from
  // `save_memory`. Idempotent.
  void stop() noexcept;

  std::uint64_t ticks() const noexcept;       // ticks run so far
  std::uint64_t heartbeats() const noexcept;  // heartbeat signals injected
  std::uint64_t saves() const noexcept;       // auto-saves run

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace passepartout
