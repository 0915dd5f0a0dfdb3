// HttpClient: HTTP transfers driven by an event loop (libcurl's multi socket
// interface, its sockets and timer watched by Asio); no thread waits on a reply.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/inline_function.hpp"
#include "providers/http_headers.hpp"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace passepartout {

class EventLoops;

// How long a transfer may wait. No total cap: a healthy stream runs as long as
// its chunks keep coming.
struct HttpTimeouts {
  std::chrono::milliseconds connect{10'000};     // name resolution and TCP (and TLS) connect
  std::chrono::milliseconds first_byte{60'000};  // request sent (connection ready) to the first response byte
  std::chrono::milliseconds idle{60'000};        // between two pieces of the response
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  HttpHeaders headers;  // sent as given
  std::string body;     // sent when not empty (and for POST)
  HttpTimeouts timeouts;
  std::size_t max_body = std::size_t{16} << 20U;  // response body bytes; more is too_large
};

enum class HttpOutcome : std::uint8_t {
  complete,            // the whole response arrived (whatever its status)
  cancelled,           // HttpTransfer::cancel, or the client stopped
  connect_timeout,     // no connection within timeouts.connect
  first_byte_timeout,  // connected, but no response byte within timeouts.first_byte
  idle_timeout,        // the response stalled for timeouts.idle between two pieces
  transport_error,     // refused, reset, DNS, TLS, a malformed response
  too_large,           // the body passed max_body
};

// "complete", "idle_timeout", ...: the enumerator's name.
const char* to_string(HttpOutcome outcome) noexcept;

struct HttpResult {
  HttpOutcome outcome = HttpOutcome::transport_error;
  int status = 0;     // the response's status; 0 before its head arrived
  std::string error;  // what went wrong (curl's text for transport_error); empty when complete
};

// What a transfer reports, on its client's loop thread. on_head runs at most
// once, before any on_data; on_done runs exactly once, last. After cancel()
// only on_done(cancelled) follows. Any of on_head and on_data may be empty.
struct HttpCallbacks {
  InlineFunction<void(int status, HttpHeaders&& headers)> on_head;
  InlineFunction<void(std::string_view bytes)> on_data;
  InlineFunction<void(HttpResult&& result)> on_done;
};

namespace detail {
struct HttpTransferState;
struct HttpClientCore;
}  // namespace detail

// A transfer in flight, as start() returned it. Copyable; an empty one does
// nothing. cancel() may be called from any thread, any number of times: it
// marks the transfer at once (nothing more is delivered but on_done(cancelled))
// and posts its removal to the client's loop; after on_done it does nothing.
class HttpTransfer {
 public:
  HttpTransfer() = default;
  explicit HttpTransfer(std::shared_ptr<detail::HttpTransferState> state) : state_(std::move(state)) {}
  void cancel() const;
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::HttpTransferState> state_;
};

// One libcurl multi handle driven by one io_context, which one thread runs:
// every curl call and every callback happens on that thread. Connections are
// kept for the next transfer to the same host, and HTTPS requests to one host
// multiplex over HTTP/2.
//
// Created on any thread; start() and stop() from any thread. Destroy it on its
// loop's thread or once that loop no longer runs; the io_context outlives it.
class HttpClient {
 public:
  explicit HttpClient(boost::asio::io_context& context);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts a transfer. On the loop's thread it begins at once, otherwise it is
  // posted there. After stop(), on_done(cancelled) runs at once on the calling
  // thread.
  HttpTransfer start(HttpRequest request, HttpCallbacks callbacks);

  // Ends every transfer in flight with on_done(cancelled), closes the kept
  // connections and releases every descriptor. Later starts are cancelled at
  // once. Off the loop's thread it waits for the loop to do it (or does it
  // itself when the loop no longer runs). Idempotent; the destructor calls it.
  void stop();

  boost::asio::io_context& context() noexcept;

 private:
  std::shared_ptr<detail::HttpClientCore> core_;
};

// One HttpClient per event loop. start() from a loop's thread uses that loop's
// client; from any other thread it goes to the clients in turn.
// Stop (or destroy) it before the loops.
class HttpClients {
 public:
  explicit HttpClients(const EventLoops& loops);
  ~HttpClients();
  HttpClients(const HttpClients&) = delete;
  HttpClients& operator=(const HttpClients&) = delete;

  HttpTransfer start(HttpRequest request, HttpCallbacks callbacks);
  // Stops every client (HttpClient::stop). Never from a loop's thread.
  void stop();
  std::size_t size() const noexcept { return clients_.size(); }
  HttpClient& client(std::size_t index) noexcept { return *clients_[index]; }

 private:
  std::vector<std::unique_ptr<HttpClient>> clients_;
  std::atomic<std::size_t> turn_{0};  // the next client for a start from outside the loops
};

}  // namespace passepartout
