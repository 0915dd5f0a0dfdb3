// Server: the daemon's listeners (a Unix socket and loopback TCP) and its
// connections, speaking the framed protocol; requests go to a RequestHandler.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/inline_function.hpp"
#include "base/result.hpp"
#include "daemon/frame_codec.hpp"
#include "daemon/protocol.hpp"
#include "value/value.hpp"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace passepartout {

enum class Transport { unix_socket, tcp };

const char* to_string(Transport transport) noexcept;

// Who sent a request.
struct ConnectionInfo {
  std::uint64_t connection_id = 0;  // unique per server, from 1
  Transport transport = Transport::tcp;
  std::string peer;  // "127.0.0.1:54321", or the socket path for the Unix socket
  // For this request: true on the Unix socket (its 0600 mode is the check),
  // and over TCP when the request carried `:AUTH "<token>"` equal to the
  // configured token. Operator requests must check it.
  bool authenticated = false;
  // Who sent this request, for the audit log: "wire uid=1000 pid=4242" on the
  // Unix socket (SO_PEERCRED when the connection was accepted), "wire
  // token=<label> peer=<address>" over TCP once authenticated, else "wire
  // peer=<address>". Never the token itself.
  std::string requester;
};

namespace detail {
struct ReplyState;
}  // namespace detail

// Where a handler writes the reply to one request: any number of frames with
// send() (stream chunks, progress), then one final frame with finish(). The
// connection takes its next request only after the reply finished.
//
// Copyable; all copies are the same reply. Any thread, at any time: after the
// reply finished, the connection closed or the server stopped, calls do
// nothing and return false. Dropping every copy without finish() finishes
// the reply with no final frame (for requests that need no answer).
// Frames are encoded on the calling thread; a frame over the frame limit is
// not sent (send() returns false; finish() sends a REPLY-TOO-LARGE error
// response in its place). (Not the pipeline's ReplySink, an interface the
// daemon implements on top of this one.)
class WireReply {
 public:
  WireReply() = default;  // answers nothing; every call returns false
  explicit WireReply(std::shared_ptr<detail::ReplyState> state) : state_(std::move(state)) {}

  bool send(const Value& frame);
  bool finish(const Value& frame);
  void finish();
  // The reply has not finished and the connection is still open.
  bool is_open() const noexcept;
  // Runs `hook` once if the connection closes before the reply has finished
  // (the client went away, a reset, the server cut it off): on the
  // connection's strand, or at once, on this thread, when it has closed
  // already. A reply keeps one hook: a later call replaces it, null removes
  // it; once the reply has finished it is dropped. The hook must not block.
  void on_close(InlineFunction<void()> hook);
  // The connection the request came from (empty for a default sink).
  const ConnectionInfo& connection() const noexcept;

 private:
  std::shared_ptr<detail::ReplyState> state_;
};

// Receives every message except (:TYPE :HEALTH-CHECK), which the server
// answers itself. Messages of one connection arrive one at a time, in order;
// different connections call concurrently, so implementations are
// thread-safe. handle() runs on an io thread: it must not block (hand slow
// work elsewhere and keep the sink). An exception escaping handle() finishes
// the reply with an INTERNAL error response.
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // `message` is the decoded datum (usually a plist) without its :AUTH key.
  virtual void handle(Value message, const ConnectionInfo& connection, WireReply reply) = 0;
  // The connection has closed: no more of its requests will come. On its strand.
  virtual void closed(const ConnectionInfo& connection) { (void)connection; }
};

// The health status for (:TYPE :HEALTH-CHECK); called on an io thread, must be quick.
using HealthProbe = std::function<HealthReport()>;

struct ServerOptions {
  // Unix socket path (at most 107 bytes); empty for none. Created with mode
  // 0600; an existing socket file is replaced only when nothing answers on it.
  std::filesystem::path unix_socket_path;
  bool listen_tcp = true;
  std::string tcp_address = "127.0.0.1";  // anything but loopback is logged as a warning
  std::uint16_t tcp_port = 9105;          // 0 picks a free port (see Server::tcp_port())
  // The token a TCP request carries as :AUTH to count as authenticated;
  // empty: no TCP request is authenticated.
  std::string auth_token;
  // How the token is named in requesters: "<file name>#<first 8 hex of its
  // sha256>", never the token; "token" when empty.
  std::string auth_token_label;
  // Handshake contents; an empty version means this build's version.
  std::string version;
  std::vector<std::string> capabilities = {"AUTH", "HEALTH-CHECK", "STREAM-CHUNK"};

  FrameLimits frame_limits;  // for both directions
  // A connection with nothing to do (no frame begun, no request pending)
  // for this long gets a TIMEOUT error response and is closed; zero: never.
  std::chrono::milliseconds idle_timeout = std::chrono::minutes(30);
  // A frame whose first prefix character arrived must be complete within this.
  std::chrono::milliseconds read_timeout = std::chrono::seconds(30);
  // Open TCP connections. At this limit, or at max_connections_per_peer, a
  // new connection is served by closing (BUSY, no linger) the one of them,
  // not authenticated nor being handled, that has done least for longest:
  // never spoke before spoke, then the longest without progress. When none
  // may be closed, the new one gets a BUSY error response and is closed at
  // once, without a connection's buffers or a linger.
  std::size_t max_connections = 1024;
  // Open connections on the Unix socket, counted apart from TCP's: no number of
  // TCP clients can lock the operator out.
  std::size_t max_unix_connections = 64;
  // Open TCP connections from one peer: one local user on loopback (the
  // kernel names the owner of the other end: peer_owner.hpp), else one address.
  std::size_t max_connections_per_peer = 64;
  // A connection that has not sent a complete request this long after it
  // opened gets a TIMEOUT error response and is closed (zero: no such bound);
  // once it has spoken, idle_timeout applies.
  std::chrono::milliseconds handshake_timeout = std::chrono::seconds(10);
  // Decoded requests waiting behind the one being handled; reading pauses beyond.
  std::size_t max_queued_requests = 64;
  // Reply bytes not yet written to a slow client; beyond it the connection is closed.
  std::size_t max_queued_write_bytes = std::size_t{64} * 1024 * 1024;
  // Reply bytes not yet written, all connections together; beyond it the
  // connection holding the most is closed (with a logged reason) until the
  // total is within it again, and the others keep being served.
  std::size_t max_total_queued_write_bytes = std::size_t{256} * 1024 * 1024;
  // How long a closing connection waits for the client to close its side
  // after the last frame (so that frame is not lost to a reset).
  std::chrono::milliseconds linger = std::chrono::seconds(2);
  // io threads when the server runs its own io_context.
  std::size_t threads = 2;
};

// Snapshot of the server's counters (for the daemon's status request).
struct ServerCounters {
  std::uint64_t connections_open = 0;
  std::uint64_t connections_open_tcp = 0;   // of connections_open, over TCP
  std::uint64_t connections_open_unix = 0;  // of connections_open, on the Unix socket
  std::uint64_t connections_total = 0;      // admitted since start (rejected ones not included)
  std::uint64_t connections_rejected = 0;   // over a connection limit or while stopping
  std::uint64_t connections_evicted = 0;    // closed to make room for a newer one at a TCP limit
  std::uint64_t closed_for_replies = 0;     // closed for holding the most unread replies over the total budget
  std::uint64_t queued_write_bytes = 0;     // reply bytes not yet written, all connections
  std::uint64_t frames_in = 0;              // messages decoded
  std::uint64_t frames_out = 0;             // frames written
  std::uint64_t errors = 0;                 // malformed frames, timeouts, handler failures, stuck writers
};

// Listens, accepts, runs connections. Each connection sends the handshake
// first, then reads frames; a malformed or oversized frame gets an error
// response (after the replies to the requests before it) and closes that
// connection only. Each connection has its own strand and write queue (one
// write in flight at a time); replies to the requests of one connection
// leave in order. A client that ends its side of the stream (half-close)
// still gets the answers to what it sent; a reset closes at once, and the
// sinks of its requests then do nothing. Closing sends FIN and waits up to
// `linger` for the client's, so the last frame is not lost to a reset.
//
// Thread affinity: start, stop and the destructor from a thread that is not
// one of the io_context's (stop waits); everything else from any thread.
class Server {
 public:
  // Binds the listeners and starts serving on an io_context of its own, run by
  // options.threads threads. The server shares ownership of the handler, so
  // it lives as long as a connection can still call it.
  static Result<std::unique_ptr<Server>> start(ServerOptions options, std::shared_ptr<RequestHandler> handler,
                                               HealthProbe health = {});
  // The same on the caller's io_contexts (at least one), which the caller
  // runs: they must keep running until stop() has returned and stay alive
  // while reply sinks may still be used. The listeners run on the first; each
  // new connection goes to the next in turn. The daemon serves this way on
  // its pipeline's event loops, so a request, its signal and its reply stay
  // on one thread.
  static Result<std::unique_ptr<Server>> start(std::vector<boost::asio::io_context*> contexts, ServerOptions options,
                                               std::shared_ptr<RequestHandler> handler, HealthProbe health = {});

  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The bound TCP port (the chosen one when options.tcp_port was 0); 0 without TCP.
  std::uint16_t tcp_port() const noexcept;
  const std::filesystem::path& unix_socket_path() const noexcept;
  ServerCounters counters() const;

  // Stops accepting (the Unix socket file is removed) and drains every
  // connection: requests already being handled may still reply, queued ones
  // get SHUTTING-DOWN, then each connection closes. Returns at once.
  void begin_stop();
  // begin_stop(), then waits up to `grace` for the connections to close,
  // closes what is left, and (with its own io_context) joins its threads.
  // Later reply sinks do nothing. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

  // Waits until exactly `count` connections are open; false on timeout.
  bool wait_connections_open_for_test(std::size_t count, std::chrono::milliseconds timeout) const;
  // After begin_stop(): waits until the listeners have closed (every
  // connection they accepted has been admitted or refused); false on timeout.
  bool wait_listeners_closed_for_test(std::chrono::milliseconds timeout) const;

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace passepartout
