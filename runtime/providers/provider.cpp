#include "providers/provider.hpp"

#include <utility>

namespace passepartout {

void CancelSignal::cancel() {
  Stop stop;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
    stop = std::move(stop_);
    stop_ = nullptr;
  }
  if (stop) stop();
}

void CancelSignal::on_cancel(Stop stop) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!cancelled_.load(std::memory_order_acquire)) {
      stop_ = std::move(stop);
      return;
    }
  }
  if (stop) stop();
}

void CancelSignal::clear() {
  Stop dropped;
  std::lock_guard<std::mutex> lock(mutex_);
  dropped = std::move(stop_);
  stop_ = nullptr;
}

const char* to_string(FailureClass failure) noexcept {
  switch (failure) {
    case FailureClass::none:
      return "none";
    case FailureClass::authentication:
      return "authentication";
    case FailureClass::bad_request:
      return "bad_request";
    case FailureClass::unknown_model:
      return "unknown_model";
    case FailureClass::context_length:
      return "context_length";
    case FailureClass::quota:
      return "quota";
    case FailureClass::rate_limited:
      return "rate_limited";
    case FailureClass::overloaded:
      return "overloaded";
    case FailureClass::server_error:
      return "server_error";
    case FailureClass::transport:
      return "transport";
    case FailureClass::timeout:
      return "timeout";
    case FailureClass::truncated:
      return "truncated";
    case FailureClass::unparseable:
      return "unparseable";
    case FailureClass::too_large:
      return "too_large";
    case FailureClass::cancelled:
      return "cancelled";
    case FailureClass::over_budget:
      return "over_budget";
    case FailureClass::other:
      return "other";
  }
  return "other";
}

}  // namespace passepartout
