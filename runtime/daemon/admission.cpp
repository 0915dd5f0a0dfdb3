#include "daemon/admission.hpp"

#include <string>

#include "base/log.hpp"

namespace passepartout {

void ThrottledWarning::warn(std::string_view message, Clock::time_point now) {
  std::uint64_t held = 0;
  {
    std::lock_guard lock(mutex_);
    if (logged_ && now - last_ < interval_) {
      ++held_;
      return;
    }
    logged_ = true;
    last_ = now;
    held = held_;
    held_ = 0;
  }
  if (held == 0) {
    log_message(LogLevel::warn, component_, message);
  } else {
    log_message(LogLevel::warn, component_, "{} ({} more like it since the last such line)", message, held);
  }
}

}  // namespace passepartout
