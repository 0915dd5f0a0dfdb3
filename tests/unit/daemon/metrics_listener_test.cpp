// The metrics endpoint over real loopback sockets: routes, methods, bounds on
// request size, slow clients and concurrent connections, and stopping.
#include <catch2/catch.hpp>

// GCC 12's false "potential null pointer dereference" in Asio's scheduler (as in server.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#pragma GCC diagnostic pop

#include <unistd.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>

#include "daemon/metrics_listener.hpp"
#include "support/http_client.hpp"

namespace passepartout {
namespace {

using testing::http_get;
using testing::HttpConnection;
using namespace std::chrono_literals;

// An io_context run by one thread, and a listener on it at a free port.
struct Endpoint {
  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work{io.get_executor()};
  std::thread thread{[this] { io.run(); }};
  std::atomic<int> scrapes{0};
  const std::string reason;  // /readyz's; "" when ready
  std::unique_ptr<MetricsListener> listener;

  explicit Endpoint(MetricsListenerOptions options = with_port_0(), std::string not_ready = "")
      : reason(std::move(not_ready)) {
    auto started = MetricsListener::start(io, options,
                                          MetricsEndpoints{[this] {
                                                             scrapes.fetch_add(1);
                                                             return std::string("# TYPE x gauge\nx 1\n");
                                                           },
                                                           [this] { return reason; }});
    REQUIRE(started.has_value());
    listener = std::move(*started);
  }
  ~Endpoint() {
    listener.reset();
    work.reset();
    thread.join();
  }
  static MetricsListenerOptions with_port_0() {
    MetricsListenerOptions options;
    options.port = 0;
    return options;
  }
  std::uint16_t port() const { return listener->port(); }
};

}  // namespace

TEST_CASE("metrics endpoint serves /metrics, /healthz and /readyz and refuses the rest", "[daemon][metrics]") {
  Endpoint endpoint;
  REQUIRE(endpoint.port() != 0);

  const auto metrics = http_get(endpoint.port(), "/metrics");
  CHECK(metrics.status == 200);
  CHECK(metrics.header("content-type") == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(metrics.body == "# TYPE x gauge\nx 1\n");

  const auto health = http_get(endpoint.port(), "/healthz");
  CHECK(health.status == 200);
  CHECK(health.body == "ok\n");

  CHECK(http_get(endpoint.port(), "/readyz").status == 200);
  CHECK(http_get(endpoint.port(), "/metrics?x=1").status == 200);
  CHECK(http_get(endpoint.port(), "/").status == 404);
  CHECK(http_get(endpoint.port(), "/metricsx").status == 404);
  const auto post = http_get(endpoint.port(), "/metrics", "POST");
  CHECK(post.status == 405);
  CHECK(post.header("allow") == "GET");
  CHECK(http_get(endpoint.port(), "/metrics", "DELETE").status == 405);
}

TEST_CASE("metrics endpoint answers /readyz 503 with the reason it is given", "[daemon][metrics]") {
  Endpoint endpoint(Endpoint::with_port_0(), "not ready: no skill is loaded");
  const auto ready = http_get(endpoint.port(), "/readyz");
  CHECK(ready.status == 503);
  CHECK(ready.body == "not ready: no skill is loaded\n");
}

TEST_CASE("metrics endpoint keeps a connection alive across requests", "[daemon][metrics]") {
  Endpoint endpoint;
  HttpConnection connection(endpoint.port());
  REQUIRE(connection.connected());
  for (int i = 0; i < 5; ++i) CHECK(connection.request("GET", "/metrics").status == 200);
  CHECK(endpoint.scrapes.load() == 5);
}

TEST_CASE("metrics endpoint bounds the request's size and refuses a body", "[daemon][metrics]") {
  MetricsListenerOptions options = Endpoint::with_port_0();
  options.max_request_bytes = 1024;
  Endpoint endpoint(options);
  SECTION("headers past the bound") {
    HttpConnection connection(endpoint.port());
    connection.send_raw("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Long: " + std::string(4096, 'a') + "\r\n\r\n");
    CHECK(connection.read_reply().status == 431);
    CHECK(connection.closed_by_peer());
  }
  SECTION("a body") {
    HttpConnection connection(endpoint.port());
    connection.send_raw("GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    CHECK(connection.read_reply().status == 413);
    CHECK(connection.closed_by_peer());
  }
  SECTION("not HTTP") {
    HttpConnection connection(endpoint.port());
    connection.send_raw("\x01\x02 nonsense\r\n\r\n");
    CHECK(connection.read_reply().status == 400);
  }
  CHECK(endpoint.scrapes.load() == 0);
}

TEST_CASE("metrics endpoint closes a client that does not finish its request in time", "[daemon][metrics]") {
  MetricsListenerOptions options = Endpoint::with_port_0();
  options.request_timeout = 200ms;
  Endpoint endpoint(options);
  HttpConnection connection(endpoint.port(), 10s);
  REQUIRE(connection.send_raw("GET /metrics HTTP/1.1\r\n"));  // and never the rest
  const auto start = std::chrono::steady_clock::now();
  CHECK(connection.closed_by_peer());  // the read returns at the close, well before its own 10 s
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK(http_get(endpoint.port(), "/healthz").status == 200);  // still serving
}

TEST_CASE("metrics endpoint waits for a request longer than it waits for the rest of one", "[daemon][metrics]") {
  MetricsListenerOptions options = Endpoint::with_port_0();
  options.request_timeout = 200ms;
  options.timeout = 10s;
  Endpoint endpoint(options);
  HttpConnection connection(endpoint.port(), 10s);
  REQUIRE(connection.request("GET", "/healthz").status == 200);
  // Kept alive and idle well past the request timeout, it is still served:
  // only a request begun and not finished has the short bound.
  std::this_thread::sleep_for(500ms);  // longer than request_timeout, on purpose: the bound under test
  CHECK(connection.request("GET", "/healthz").status == 200);
}

TEST_CASE("metrics endpoint at its limit closes the connection that has done least for longest and serves the new one",
          "[daemon][metrics]") {
  MetricsListenerOptions options = Endpoint::with_port_0();
  options.max_connections = 2;
  Endpoint endpoint(options);
  HttpConnection slow(endpoint.port());
  REQUIRE(slow.send_raw("GET /metr"));  // never finishes: it never completed a request
  HttpConnection scraper(endpoint.port());
  REQUIRE(scraper.request("GET", "/healthz").status == 200);
  HttpConnection third(endpoint.port());
  CHECK(third.request("GET", "/healthz").status == 200);
  CHECK(slow.closed_by_peer());
  CHECK(scraper.request("GET", "/metrics").status == 200);  // the one that spoke stays, while `third` is open too
  CHECK(endpoint.listener->counters().evicted == 1);
  CHECK(endpoint.listener->counters().accepted == 3);
}

TEST_CASE("metrics endpoint bounds the connections of one peer below the total", "[daemon][metrics]") {
  MetricsListenerOptions options = Endpoint::with_port_0();
  options.max_connections = 10;
  options.max_connections_per_peer = 2;
  Endpoint endpoint(options);
  HttpConnection first(endpoint.port());
  REQUIRE(first.request("GET", "/healthz").status == 200);
  HttpConnection second(endpoint.port());
  REQUIRE(second.request("GET", "/healthz").status == 200);
  HttpConnection third(endpoint.port());
  CHECK(third.request("GET", "/healthz").status == 200);
  CHECK(first.closed_by_peer());  // the one idle longest, of this user's two
  CHECK(endpoint.listener->counters().evicted == 1);
}

TEST_CASE("metrics endpoint refuses a port in use with a message naming it", "[daemon][metrics]") {
  Endpoint endpoint;
  boost::asio::io_context io;
  MetricsListenerOptions options;
  options.port = endpoint.port();
  auto second = MetricsListener::start(io, options, {});
  REQUIRE_FALSE(second.has_value());
  CHECK(second.error().message.find("cannot listen on 127.0.0.1:" + std::to_string(endpoint.port())) !=
        std::string::npos);
}

TEST_CASE("a stopped metrics endpoint accepts nothing more", "[daemon][metrics]") {
  Endpoint endpoint;
  const std::uint16_t port = endpoint.port();
  HttpConnection open(port);
  REQUIRE(open.request("GET", "/healthz").status == 200);
  endpoint.listener->stop();
  CHECK(open.closed_by_peer());
  const int fd = testing::connect_loopback(port);
  if (fd >= 0) ::close(fd);
  CHECK(fd < 0);
}

}  // namespace passepartout
