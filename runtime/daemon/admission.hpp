// Making room at a connection limit, shared by the protocol's listeners and
// the metrics endpoint: which open connection is closed so that a new one
// is served, and the throttled log line that says so.
//
// Refusing the newcomer at a limit lets whoever holds the open connections,
// doing nothing with them, keep every other client out for as long as they
// like. Closing instead the connection that has done least for longest
// means a client that connects and completes a request is served however
// many connections sit idle, send slowly or never read; only connections
// that have shown they are worth keeping (an authenticated client, a
// request being handled) are never closed for room.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace passepartout {

// What admission weighs of one open connection.
struct Standing {
  // False for a connection that must not be closed for room: it proved it
  // holds the token, or a request of its is being handled.
  bool evictable = true;
  // It has completed a request. One that has not (silent since it opened,
  // or still sending its first request) goes first.
  bool spoke = false;
  // When it last made progress: opened, or last caught up (nothing being
  // handled, every reply written). The oldest goes first.
  std::chrono::steady_clock::time_point since{};
  // Its connection id: ids grow in the order connections were admitted.
  std::uint64_t id = 0;
};

// True when `a` is closed for room before `b`: never-spoke before spoke;
// of two that never spoke, the one admitted first (the moment its handshake
// was written out is the daemon's doing, not the client's, and under load
// it says nothing of which waited longer); of two that spoke, the longer
// without progress.
inline bool evict_before(const Standing& a, const Standing& b) noexcept {
  if (a.spoke != b.spoke) return !a.spoke;
  if (!a.spoke) return a.id < b.id;
  return a.since < b.since;
}

// A warning logged at most once a minute, carrying how many were not
// logged since: a flood of refusals or evictions is one line a minute.
// Any thread.
class ThrottledWarning {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ThrottledWarning(std::string_view component, Clock::duration interval = std::chrono::minutes(1))
      : component_(component), interval_(interval) {}

  // Logs `message` (with " (N more like it in the last minute)" when some
  // were held back) unless a line went out less than the interval ago.
  void warn(std::string_view message, Clock::time_point now = Clock::now());

 private:
  const std::string component_;
  const Clock::duration interval_;
  std::mutex mutex_;
  Clock::time_point last_{};
  bool logged_ = false;
  std::uint64_t held_ = 0;
};

}  // namespace passepartout
