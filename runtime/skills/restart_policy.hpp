// RestartPolicy: when a skill's dead worker process may start again (backoff
// doubling from 100 ms to 30 s), and when it has died too often (quarantine).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>

namespace passepartout {

// Plain logic over the time points it is given, so a test drives it with a
// fake clock. Not thread-safe: its owner guards it.
class RestartPolicy {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  struct Limits {
    std::chrono::milliseconds first_backoff{100};
    std::chrono::milliseconds max_backoff{30'000};
    std::size_t max_deaths = 5;  // this many deaths within `window` quarantine the skill
    std::chrono::milliseconds window{600'000};
  };

  RestartPolicy() = default;
  explicit RestartPolicy(Limits limits) : limits_(limits) {}

  // Records a death at `now` for `reason` ("skill process died: SIGSEGV").
  // Returns true when this death quarantines the skill.
  bool record_death(TimePoint now, std::string reason);
  // Records a successful restart.
  void record_restart() noexcept { ++restarts_; }

  // When the worker may start again (meaningful after a death).
  TimePoint next_start() const noexcept { return next_start_; }
  bool may_start(TimePoint now) const noexcept { return !quarantined_ && now >= next_start_; }
  // How long the current backoff is (0 before any death).
  std::chrono::milliseconds backoff() const noexcept { return backoff_; }

  bool quarantined() const noexcept { return quarantined_; }
  // "quarantined: its process died 5 times in 10 minutes, last: SIGSEGV; ..."; empty when not.
  const std::string& quarantine_reason() const noexcept { return quarantine_reason_; }
  const std::string& last_death() const noexcept { return last_death_; }
  std::uint64_t restarts() const noexcept { return restarts_; }
  std::uint64_t deaths() const noexcept { return total_deaths_; }

 private:
  Limits limits_;
  std::deque<TimePoint> deaths_;  // within the window, oldest first
  std::chrono::milliseconds backoff_{0};
  TimePoint next_start_{};
  bool quarantined_ = false;
  std::string quarantine_reason_;
  std::string last_death_;
  std::uint64_t restarts_ = 0;
  std::uint64_t total_deaths_ = 0;
};

// "SIGSEGV" of "skill process died: SIGSEGV"; the reason itself otherwise.
std::string short_death_reason(const std::string& reason);

}  // namespace passepartout
