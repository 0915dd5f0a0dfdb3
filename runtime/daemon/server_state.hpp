// What the server's parts share, private to runtime/daemon: the socket and
// timer types, the state the listeners, connections and reply sinks all hold.
#pragma once

// GCC 12 reports a "potential null pointer dereference" inside Asio's epoll
// reactor once it is inlined here (a false positive: the scheduler's thread
// info is always set on an io thread); silenced for Asio's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#pragma GCC diagnostic pop

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "base/errno_text.hpp"
#include "base/log.hpp"
#include "daemon/admission.hpp"
#include "daemon/frame_codec.hpp"
#include "daemon/server.hpp"

namespace passepartout::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
// Sockets and timers name their executor's type: with the type-erased
// any_io_executor, every asynchronous operation copied the strand into a
// heap-allocated wrapper (ten allocations a request).
using Strand = asio::strand<asio::io_context::executor_type>;
using GenericSocket = asio::basic_stream_socket<asio::generic::stream_protocol, Strand>;
using Timer =
    asio::basic_waitable_timer<std::chrono::steady_clock, asio::wait_traits<std::chrono::steady_clock>, Strand>;

inline constexpr std::string_view kComponent = "daemon";

inline std::string milliseconds_text(std::chrono::milliseconds duration) {
  return std::to_string(duration.count()) + " ms";
}

class Connection;

// What reply sinks need from the server: the codec and the gate that keeps
// them from posting to an io_context being torn down. Deliberately holds no
// handler, so a handler keeping sinks forms no ownership cycle.
struct ReplyHub {
  explicit ReplyHub(const FrameLimits& limits) : codec(limits) {}

  const FrameCodec codec;
  // Sinks post to a connection only under this lock while posts_open. One
  // lock for every connection: it is held only to hand a frame to a strand,
  // and a gate per connection measured no faster with 64 clients (see
  // BM_Daemon), so the single gate stays.
  std::mutex posts_mutex;
  bool posts_open = true;
};

// What the listeners, the connections and the reply sinks share. Lives as
// long as any of them.
struct ServerState {
  // A connection as the registry counts it.
  struct Registered {
    std::weak_ptr<Connection> connection;
    Transport transport;
    std::string group;    // TCP: what its limit counts it under (PeerGroup::key)
    bool counted = true;  // in open_tcp/open_unix and per_peer (false once closed for room)
  };

  ServerState(ServerOptions server_options, std::shared_ptr<RequestHandler> request_handler, HealthProbe probe)
      : options(std::move(server_options)),
        codec(options.frame_limits),
        hub(std::make_shared<ReplyHub>(options.frame_limits)),
        handler(std::move(request_handler)),
        health(std::move(probe)) {}

  HealthReport health_report() const {
    if (!health) return {};
    try {
      return health();
    } catch (const std::exception& error) {
      log_message(LogLevel::warn, kComponent, std::string("health probe failed: ") + error.what());
    } catch (...) {
      log_message(LogLevel::warn, kComponent, "health probe failed");
    }
    return {};
  }

  // The connections still alive; the caller holds connections_mutex.
  std::vector<std::shared_ptr<Connection>> open_connections() const;

  void unregister(std::uint64_t id) {
    {
      std::lock_guard lock(connections_mutex);
      auto found = connections.find(id);
      if (found == connections.end()) return;
      if (found->second.counted) uncount(found->second);
      connections.erase(found);
    }
    connections_changed.notify_all();
  }

  // Takes `registered` out of the counts the limits see; the caller holds
  // connections_mutex. A connection closed for room leaves them at once,
  // before its strand has closed it.
  void uncount(Registered& registered) {
    registered.counted = false;
    if (registered.transport == Transport::unix_socket) {
      --open_unix;
      return;
    }
    --open_tcp;
    auto peer = per_peer.find(registered.group);
    if (peer != per_peer.end() && --peer->second == 0) per_peer.erase(peer);
  }

  // Counts `bytes` of replies queued (positive) or written or dropped
  // (negative); true when all connections together now hold more than the budget.
  bool add_queued(std::int64_t bytes) noexcept {
    const std::int64_t total = queued_write_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    return bytes > 0 && total > static_cast<std::int64_t>(options.max_total_queued_write_bytes);
  }
  // Closes the connection holding the most unread replies (see
  // ServerOptions::max_total_queued_write_bytes). Any thread.
  void shed_largest();

  const ServerOptions options;
  const FrameCodec codec;
  const std::shared_ptr<ReplyHub> hub;
  const std::shared_ptr<RequestHandler> handler;
  const HealthProbe health;
  std::string handshake_frame;  // set before the first accept

  std::atomic<std::uint64_t> connections_total{0};
  std::atomic<std::uint64_t> connections_rejected{0};
  std::atomic<std::uint64_t> connections_evicted{0};  // closed to make room for a new one
  std::atomic<std::uint64_t> frames_in{0};
  std::atomic<std::uint64_t> frames_out{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> next_connection_id{1};
  std::atomic<std::uint64_t> closed_for_replies{0};
  std::atomic<std::int64_t> queued_write_bytes{0};  // all connections' unwritten reply bytes

  // Refusals and evictions: a line a minute at most.
  ThrottledWarning admission_warnings{kComponent};

  mutable std::mutex connections_mutex;  // guards connections, the counts and draining
  mutable std::condition_variable connections_changed;
  std::unordered_map<std::uint64_t, Registered> connections;
  std::size_t open_tcp = 0;
  std::size_t open_unix = 0;
  std::unordered_map<std::string, std::size_t> per_peer;  // open TCP connections by PeerGroup::key
  bool draining = false;
};

}  // namespace passepartout::detail
