// Test support: a loopback HTTP/1.1 server (Boost.Beast, its own thread) that
// plays scripted responses, with pauses and failures, and records what it got.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace passepartout::testing {

// One piece of a response body, written after `pause` (the stub's own timer).
struct StubChunk {
  std::string bytes;
  std::chrono::milliseconds pause{0};
};

struct StubResponse {
  enum class Ending : std::uint8_t {
    normal,           // the whole response, the connection kept for the next request
    reset,            // after the chunks, the connection is reset (RST), the body unfinished
    close_unanswered  // the connection is closed before anything is written
  };
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<StubChunk> chunks;
  bool chunked = true;                      // chunked transfer encoding, else a Content-Length
  std::chrono::milliseconds head_pause{0};  // before the status line: a stall before the first byte
  Ending ending = Ending::normal;

  // A plain answer with a Content-Length.
  static StubResponse text(std::string body, int status = 200);
};

struct StubRequest {
  std::string method;
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower case
  std::string body;
  std::size_t connection = 0;                       // which connection it came on, counted from 1
  std::string header(std::string_view name) const;  // empty when absent
};

// Listens on 127.0.0.1, port 0. Responses are taken from the queue in order,
// then the default one (200 "ok"). Every method may be called from any thread.
class HttpStub {
 public:
  HttpStub();
  ~HttpStub();
  HttpStub(const HttpStub&) = delete;
  HttpStub& operator=(const HttpStub&) = delete;

  std::uint16_t port() const noexcept;
  // "http://127.0.0.1:<port><target>", or with `host` instead of 127.0.0.1.
  std::string url(std::string_view target = "/", std::string_view host = "127.0.0.1") const;

  void enqueue(StubResponse response);
  void set_default(StubResponse response);

  std::vector<StubRequest> requests() const;
  std::size_t connections_accepted() const;
  // Connections the client closed (or reset): seen as the end of reading.
  std::size_t connections_closed() const;
  // Waits until `count` connections were closed by the client; false after `timeout`.
  bool wait_connections_closed(std::size_t count, std::chrono::milliseconds timeout) const;
  // Waits until `count` requests arrived; false after `timeout`.
  bool wait_requests(std::size_t count, std::chrono::milliseconds timeout) const;

  struct Impl;  // the server and its records (http_stub.cpp)

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace passepartout::testing
