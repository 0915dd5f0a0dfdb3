// Cancelling model calls: each reasoning call has a CancelSignal, cancelled
// when its client goes away, the pipeline is interrupted, or the host stops
// making calls; a cancelled call ends its signal's loop quietly.
#include <exception>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeline/run.hpp"

namespace passepartout {

std::shared_ptr<CancelSignal> Run::begin_call() {
  auto cancel = std::make_shared<CancelSignal>();
  {
    std::lock_guard lock(session->shard.mutex);
    session->call = cancel;
  }
  // Read after the call is registered (both sides take the shard's lock): a
  // stop that came before is seen here, one that comes after finds the call.
  if (pipeline->calls_stopped()) {
    cancel->cancel();
  } else if (reply) {
    // Weak: the sink keeps its hook until the next call or the reply's end.
    reply->on_close([weak = std::weak_ptr<CancelSignal>(cancel)] {
      if (const std::shared_ptr<CancelSignal> alive = weak.lock()) alive->cancel();
    });
  }
  return cancel;
}

bool Run::call_ended(const CascadeOutcome& outcome) {
  // The call's signal, which the session's lent request held for it.
  const std::shared_ptr<CancelSignal> cancel = std::move(session->request.cancel);
  session->request.cancel = nullptr;
  {
    std::lock_guard lock(session->shard.mutex);
    if (session->call == cancel) session->call = nullptr;
  }
  // Only a call the cascade ended as cancelled: a provider that cannot stop
  // (the scripted one) answers, and the loop goes on with its answer.
  if (!outcome.cancelled) return false;
  const bool interrupted = pipeline->interrupt_flag.load(std::memory_order_acquire);
  std::string_view why = "cancelled";
  if (interrupted) {
    why = "the pipeline was interrupted";
  } else if (pipeline->calls_cancelled.load(std::memory_order_acquire)) {
    why = "model calls were stopped";
  } else if (reply != nullptr && !reply->is_open()) {
    why = "the client went away";
  }
  log_message(LogLevel::info, kPipelineComponent, "REASON: the model call was cancelled ({}); the loop ends", why);
  finish(interrupted ? "interrupt" : "cancelled");
  return true;
}

void Pipeline::Impl::cancel_calls_in_flight() noexcept {
  try {
    std::vector<std::shared_ptr<CancelSignal>> calls;
    for (SessionShard& shard : session_shards) {
      std::lock_guard lock(shard.mutex);
      for (const auto& [id, session] : shard.sessions) {
        if (session->call) calls.push_back(session->call);
      }
    }
    // Outside the locks: a provider's stop may complete its call here.
    for (const std::shared_ptr<CancelSignal>& call : calls) call->cancel();
    if (!calls.empty()) {
      log_message(LogLevel::info, kPipelineComponent, "{} model call(s) in flight cancelled", calls.size());
    }
  } catch (const std::exception& error) {
    log_message(LogLevel::error, kPipelineComponent, "cancelling the model calls in flight failed: {}", error.what());
  }
}

void Pipeline::cancel_calls() noexcept {
  if (impl_->calls_cancelled.exchange(true, std::memory_order_acq_rel)) return;
  impl_->cancel_calls_in_flight();
}

}  // namespace passepartout
