// MetricsListener: the daemon's loopback HTTP endpoint for monitoring:
// GET /metrics (Prometheus text format), /healthz and /readyz.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/result.hpp"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace passepartout {

// What the endpoints answer with. Both are called on the listener's strand,
// one request at a time; they must not block for long.
struct MetricsEndpoints {
  std::function<std::string()> metrics;    // GET /metrics: the exposition
  std::function<std::string()> not_ready;  // GET /readyz: "" when ready, else the one-line reason
};

struct MetricsListenerOptions {
  std::string address = "127.0.0.1";
  std::uint16_t port = 9106;  // 0: any free port (MetricsListener::port() says which)
  // Connections open at once, and from one peer (one local user on
  // loopback, else one address: peer_owner.hpp). At either limit a new
  // connection is served by closing one that has done least for longest:
  // one that never completed a request before one that did, then the one
  // longest without progress (admission.hpp). Nobody who sends a complete
  // request is turned away, however many connections sit idle, send slowly
  // or never read.
  std::size_t max_connections = 64;
  std::size_t max_connections_per_peer = 16;
  // A request's line and headers together; past it: 431, and the connection closes.
  std::size_t max_request_bytes = 8192;
  // Once its first byte has arrived, a request must be whole within this.
  std::chrono::milliseconds request_timeout{std::chrono::seconds(2)};
  // A connection waiting for a request (new, or kept alive after a reply)
  // closes after this; a reply must be taken within it too.
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};
};

// Since the listener started.
struct MetricsListenerCounters {
  std::uint64_t accepted = 0;
  std::uint64_t evicted = 0;  // closed to make room for a newer connection (none is ever refused)
};

// Serves HTTP/1.1 on `io` (which the caller runs, and keeps running until
// stop() has returned): GET /metrics, /healthz (200 "ok": the process
// serves), /readyz (200 "ready", or 503 with the reason); any other path
// is 404, any other method 405, a request with a body 413, a malformed one
// 400. Connections are kept alive between requests.
//
// Thread affinity: start(), stop() and the destructor on a thread that does
// not run `io`; everything else happens on a strand of `io`.
class MetricsListener {
 public:
  // Binds and listens; the error names the address and why (a port in use, say).
  static Result<std::unique_ptr<MetricsListener>> start(boost::asio::io_context& io, MetricsListenerOptions options,
                                                        MetricsEndpoints endpoints);
  ~MetricsListener();  // stop()
  MetricsListener(const MetricsListener&) = delete;
  MetricsListener& operator=(const MetricsListener&) = delete;

  // The bound port (the chosen one when the options asked for 0).
  std::uint16_t port() const noexcept;
  MetricsListenerCounters counters() const noexcept;
  // Stops accepting and closes every connection; once it returns the
  // endpoints are not called again. Waits for the strand (at most a few
  // seconds). Idempotent.
  void stop();

  struct State;

 private:
  explicit MetricsListener(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace passepartout
