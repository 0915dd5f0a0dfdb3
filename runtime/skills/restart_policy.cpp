// RestartPolicy: backoff and quarantine of a skill's worker process.
#include "skills/restart_policy.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

#include "skills/worker_channel.hpp"

namespace passepartout {

std::string short_death_reason(const std::string& reason) {
  static constexpr std::string_view kDied = "skill process died: ";
  if (reason.rfind(kDied, 0) == 0) return reason.substr(kDied.size());
  static constexpr std::string_view kProcess = "skill process ";
  if (reason.rfind(kProcess, 0) == 0) return reason.substr(kProcess.size());
  return reason;
}

bool RestartPolicy::record_death(TimePoint now, std::string reason) {
  ++total_deaths_;
  last_death_ = std::move(reason);
  while (!deaths_.empty() && now - deaths_.front() >= limits_.window) deaths_.pop_front();
  deaths_.push_back(now);
  // 100 ms after the first death in the window, doubling with each further one, at most max_backoff.
  std::chrono::milliseconds backoff = limits_.first_backoff;
  for (std::size_t i = 1; i < deaths_.size() && backoff < limits_.max_backoff; ++i) backoff *= 2;
  backoff_ = std::min(backoff, limits_.max_backoff);
  next_start_ = now + backoff_;
  if (quarantined_ || deaths_.size() < limits_.max_deaths) return false;
  quarantined_ = true;
  quarantine_reason_ = "quarantined: its process died " + std::to_string(deaths_.size()) + " times in " +
                       human_duration(limits_.window) + ", last: " + short_death_reason(last_death_);
  return true;
}

}  // namespace passepartout
