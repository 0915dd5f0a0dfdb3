// The metrics endpoint over Boost.Beast: one strand for the acceptor and its
// few connections, each request read whole (bounded, timed) and answered
// from MetricsEndpoints. Beast stays inside this file.
#include "daemon/metrics_listener.hpp"

// GCC 12 reports a "potential null pointer dereference" inside Asio's
// scheduler once it is inlined (a false positive, as in server.cpp);
// silenced for Asio's and Beast's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#pragma GCC diagnostic pop

#include <cerrno>
#include <exception>
#include <future>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "base/log.hpp"
#include "daemon/close_on_exec.hpp"

namespace passepartout {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {

constexpr std::string_view kComponent = "metrics";
constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";
constexpr std::string_view kTextContentType = "text/plain; charset=utf-8";

class Session;

}  // namespace

struct MetricsListener::State : std::enable_shared_from_this<MetricsListener::State> {
  State(asio::io_context& io, MetricsListenerOptions o, MetricsEndpoints e)
      : strand(asio::make_strand(io)),
        acceptor(strand),
        retry(strand),
        options(std::move(o)),
        endpoints(std::move(e)) {}

  asio::strand<asio::io_context::executor_type> strand;
  tcp::acceptor acceptor;
  asio::steady_timer retry;  // after an accept error (descriptors exhausted), before the next accept
  const MetricsListenerOptions options;
  const MetricsEndpoints endpoints;
  std::uint16_t port = 0;
  bool stop_called = false;  // the owner's thread

  // The strand's:
  bool stopped = false;
  std::size_t open = 0;
  std::vector<std::weak_ptr<Session>> sessions;

  void accept();
  void admit(tcp::socket socket);
};

namespace {

// One connection: requests read and answered one after another (keep-alive).
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<MetricsListener::State> state, tcp::socket socket)
      : state_(std::move(state)), stream_(std::move(socket)), buffer_(state_->options.max_request_bytes) {}
  ~Session() { --state_->open; }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(state_->options.max_request_bytes));
    parser_->body_limit(0);
    stream_.expires_after(state_->options.timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, std::size_t) { self->on_read(ec); });
  }

  void close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  void on_read(error_code ec) {
    if (state_->stopped || ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
        ec == beast::error::timeout) {
      close();
      return;
    }
    if (ec == http::error::header_limit)
      return respond(http::status::request_header_fields_too_large, "request too large\n", false);
    if (ec == http::error::body_limit || ec == http::error::unexpected_body) {
      return respond(http::status::payload_too_large, "a request to this endpoint has no body\n", false);
    }
    if (ec) return respond(http::status::bad_request, "malformed request\n", false);

    const auto& request = parser_->get();
    const bool keep = request.keep_alive();
    if (request.method() != http::verb::get) {
      return respond(http::status::method_not_allowed, "method not allowed: only GET\n", keep);
    }
    std::string_view target(request.target().data(), request.target().size());
    target = target.substr(0, target.find('?'));
    if (target == "/metrics") {
      std::string text = state_->endpoints.metrics ? state_->endpoints.metrics() : std::string();
      return respond(http::status::ok, std::move(text), keep, kMetricsContentType);
    }
    if (target == "/healthz") return respond(http::status::ok, "ok\n", keep);
    if (target == "/readyz") {
      std::string reason = state_->endpoints.not_ready ? state_->endpoints.not_ready() : std::string();
      if (reason.empty()) return respond(http::status::ok, "ready\n", keep);
      return respond(http::status::service_unavailable, std::move(reason) + "\n", keep);
    }
    respond(http::status::not_found, "not found: try /metrics, /healthz or /readyz\n", keep);
  }

  void respond(http::status status, std::string body, bool keep_alive,
               std::string_view content_type = kTextContentType) {
    response_ = {};
    response_.version(11);
    response_.result(status);
    response_.set(http::field::server, "passepartout");
    response_.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
    if (status == http::status::method_not_allowed) response_.set(http::field::allow, "GET");
    response_.body() = std::move(body);
    response_.keep_alive(keep_alive);
    response_.prepare_payload();
    stream_.expires_after(state_->options.timeout);
    http::async_write(stream_, response_,
                      [self = shared_from_this()](error_code ec, std::size_t) { self->on_write(ec); });
  }

  void on_write(error_code ec) {
    if (ec || state_->stopped || !response_.keep_alive()) {
      close();
      return;
    }
    read();
  }

  std::shared_ptr<MetricsListener::State> state_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> parser_;
  http::response<http::string_body> response_;
};

}  // namespace

void MetricsListener::State::accept() {
  acceptor.async_accept([self = shared_from_this()](error_code ec, tcp::socket socket) {
    if (self->stopped || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Descriptors exhausted, say: try again shortly instead of spinning.
      log_message(LogLevel::warn, kComponent, "accepting a metrics connection failed: {}", ec.message());
      self->retry.expires_after(std::chrono::milliseconds(100));
      self->retry.async_wait([self](error_code waited) {
        if (!waited && !self->stopped) self->accept();
      });
      return;
    }
    self->admit(std::move(socket));
    self->accept();
  });
}

void MetricsListener::State::admit(tcp::socket socket) {
  set_close_on_exec(socket.native_handle());  // accepted without SOCK_CLOEXEC (close_on_exec.hpp)
  if (open >= options.max_connections) {
    // Refused for almost nothing: one non-blocking write, then closed.
    static constexpr std::string_view kBusy =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n"
        "Connection: close\r\n\r\ntoo many connections\n";
    error_code ignored;
    socket.non_blocking(true, ignored);
    socket.write_some(asio::buffer(kBusy.data(), kBusy.size()), ignored);
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    return;
  }
  ++open;
  auto session = std::make_shared<Session>(shared_from_this(), std::move(socket));
  std::erase_if(sessions, [](const std::weak_ptr<Session>& s) { return s.expired(); });
  sessions.push_back(session);
  session->read();
}

Result<std::unique_ptr<MetricsListener>> MetricsListener::start(asio::io_context& io, MetricsListenerOptions options,
                                                                MetricsEndpoints endpoints) {
  auto state = std::make_shared<State>(io, std::move(options), std::move(endpoints));
  const std::string where = state->options.address + ":" + std::to_string(state->options.port);
  error_code ec;
  const auto address = asio::ip::make_address(state->options.address, ec);
  if (ec) return fail(ErrorCode::invalid_input, "metrics: '" + state->options.address + "' is not an IP address");
  const tcp::endpoint endpoint(address, state->options.port);
  state->acceptor.open(endpoint.protocol(), ec);
  if (!ec && !set_close_on_exec(state->acceptor.native_handle())) {
    ec = error_code(errno, boost::system::system_category());
  }
  if (!ec) state->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) state->acceptor.bind(endpoint, ec);
  if (!ec) state->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    error_code ignored;
    state->acceptor.close(ignored);
    return fail(ErrorCode::io_error, "cannot listen on " + where + ": " + ec.message());
  }
  state->port = state->acceptor.local_endpoint(ec).port();
  asio::post(state->strand, [state] { state->accept(); });
  return std::unique_ptr<MetricsListener>(new MetricsListener(std::move(state)));
}

MetricsListener::MetricsListener(std::shared_ptr<State> state) : state_(std::move(state)) {}

// A destructor must not throw: what stop() throws (a failed post) is logged instead.
MetricsListener::~MetricsListener() {
  try {
    stop();
  } catch (const std::exception& error) {
    log_message(LogLevel::error, kComponent, "stopping the metrics listener failed: {}", error.what());
  } catch (...) {
    log_message(LogLevel::error, kComponent, "stopping the metrics listener failed");
  }
}

std::uint16_t MetricsListener::port() const noexcept { return state_->port; }

void MetricsListener::stop() {
  if (state_->stop_called) return;
  state_->stop_called = true;
  auto closed = std::make_shared<std::promise<void>>();
  std::future<void> done = closed->get_future();
  asio::post(state_->strand, [state = state_, closed] {
    state->stopped = true;
    error_code ignored;
    state->acceptor.close(ignored);
    state->retry.cancel();
    for (const auto& weak : state->sessions) {
      if (auto session = weak.lock()) session->close();
    }
    state->sessions.clear();
    closed->set_value();
  });
  // The io_context may already have stopped (a failed start): then nothing runs the post, and nothing can call the
  // endpoints either.
  if (done.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    log_message(LogLevel::warn, kComponent, "the metrics listener did not stop within 5 s");
  }
}

}  // namespace passepartout
