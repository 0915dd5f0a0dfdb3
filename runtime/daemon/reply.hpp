// ReplyState: one request's reply, shared by the copies of its WireReply;
// private to runtime/daemon.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "daemon/server.hpp"
#include "daemon/server_state.hpp"

namespace passepartout::detail {

// One request's reply: shared by the copies of its WireReply.
struct ReplyState {
  ReplyState(std::weak_ptr<Connection> reply_connection, std::shared_ptr<ReplyHub> reply_hub, std::uint64_t id,
             ConnectionInfo connection_info)
      : connection(std::move(reply_connection)),
        hub(std::move(reply_hub)),
        request_id(id),
        info(std::move(connection_info)) {}
  ReplyState(const ReplyState&) = delete;
  ReplyState& operator=(const ReplyState&) = delete;

  // The last copy of the sink is gone: the request ends, with no final frame
  // if none was sent.
  ~ReplyState() {
    if (finished.exchange(true)) return;
    try {
      post(std::nullopt, true);
    } catch (...) {  // NOLINT(bugprone-empty-catch): nothing to report to; the connection closes on its own
    }
  }

  // Hands a frame (or just the end of the request) to the connection's strand.
  bool post(std::optional<std::string> frame, bool final);

  const std::weak_ptr<Connection> connection;
  const std::shared_ptr<ReplyHub> hub;
  const std::uint64_t request_id;
  const ConnectionInfo info;
  std::atomic<bool> finished{false};
};

}  // namespace passepartout::detail
