// WireReply: where a handler writes its reply; each frame is encoded on the
// calling thread and handed to its connection's strand.
#include "daemon/reply.hpp"

#include <utility>

#include "base/log.hpp"
#include "daemon/connection.hpp"

namespace passepartout {

using detail::Connection;
using detail::kComponent;

bool detail::ReplyState::post(std::optional<std::string> frame, bool final) {
  std::lock_guard lock(hub->posts_mutex);
  if (!hub->posts_open) return false;
  const std::shared_ptr<Connection> target = connection.lock();
  if (!target || target->is_closed()) return false;
  target->deliver(request_id, std::move(frame), final);
  return true;
}

// --- WireReply ------------------------------------------------------------------

bool WireReply::send(const Value& frame) {
  if (!state_ || state_->finished.load(std::memory_order_acquire)) return false;
  auto encoded = state_->hub->codec.encode(frame);
  if (!encoded) {
    log_message(LogLevel::warn, kComponent, "reply frame not sent: {}", encoded.error().message);
    return false;
  }
  return state_->post(std::move(*encoded), false);
}

bool WireReply::finish(const Value& frame) {
  if (!state_ || state_->finished.exchange(true)) return false;
  const FrameCodec& codec = state_->hub->codec;
  auto encoded = codec.encode(frame);
  if (!encoded) {
    log_message(LogLevel::warn, kComponent, "final reply frame not sent: {}", encoded.error().message);
    auto replacement = codec.encode(make_error_response(wire_error::kReplyTooLarge, encoded.error().message));
    state_->post(replacement ? std::optional<std::string>(std::move(*replacement)) : std::nullopt, true);
    return false;
  }
  return state_->post(std::move(*encoded), true);
}

void WireReply::finish() {
  if (state_ && !state_->finished.exchange(true)) state_->post(std::nullopt, true);
}

bool WireReply::is_open() const noexcept {
  if (!state_ || state_->finished.load(std::memory_order_acquire)) return false;
  const std::shared_ptr<Connection> target = state_->connection.lock();
  return target && !target->is_closed();
}

void WireReply::on_close(InlineFunction<void()> hook) {
  if (!state_ || state_->finished.load(std::memory_order_acquire)) return;
  const std::shared_ptr<Connection> target = state_->connection.lock();
  if (!target) {  // the connection is gone
    if (hook) hook();
    return;
  }
  target->on_close(state_->request_id, std::move(hook));
}

const ConnectionInfo& WireReply::connection() const noexcept {
  static const ConnectionInfo kNone;
  return state_ ? state_->info : kNone;
}

}  // namespace passepartout
