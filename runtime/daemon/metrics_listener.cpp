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

#include <atomic>
#include <cerrno>
#include <exception>
#include <future>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/log.hpp"
#include "daemon/admission.hpp"
#include "daemon/close_on_exec.hpp"
#include "daemon/peer_owner.hpp"

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
  std::size_t open = 0;                                 // sessions counted against the limits
  std::unordered_map<std::string, std::size_t> groups;  // of those, by PeerGroup::key
  std::vector<std::weak_ptr<Session>> sessions;
  LoopbackOwners owners;

  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> evicted{0};
  ThrottledWarning evictions{kComponent};

  void accept();
  void admit(tcp::socket socket);
  // Takes a session out of the counts (once: at its eviction or its end).
  void uncount(const std::string& group) {
    --open;
    auto found = groups.find(group);
    if (found != groups.end() && --found->second == 0) groups.erase(found);
  }
  // The session to close so a new one fits, from `group` when given, else from all.
  std::shared_ptr<Session> choose_eviction(const std::string* group);
};

namespace {

// One connection: requests read and answered one after another (keep-alive).
// Waiting for a request is bounded by `timeout`; once its first byte has
// arrived, the whole request by `request_timeout`.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<MetricsListener::State> state, tcp::socket socket, std::string group)
      : state_(std::move(state)),
        stream_(std::move(socket)),
        buffer_(state_->options.max_request_bytes),
        group_(std::move(group)) {
    standing_.since = std::chrono::steady_clock::now();
  }
  ~Session() {
    if (counted_) state_->uncount(group_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& group() const noexcept { return group_; }
  const Standing& standing() const noexcept { return standing_; }
  bool counted() const noexcept { return counted_; }

  // Waits for the next request's first bytes, unless some are here already
  // (a pipelined request).
  void read() {
    if (buffer_.size() > 0) return read_request();
    stream_.expires_after(state_->options.timeout);
    const std::size_t room = state_->options.max_request_bytes;
    stream_.async_read_some(buffer_.prepare(room), [self = shared_from_this()](error_code ec, std::size_t got) {
      if (ec) return self->on_read(ec);
      self->buffer_.commit(got);
      self->read_request();
    });
  }

  void close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  // Closed to make room: out of the counts at once, the socket closed now.
  void evict() {
    counted_ = false;
    state_->uncount(group_);
    close();
  }

 private:
  void read_request() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(state_->options.max_request_bytes));
    parser_->body_limit(0);
    stream_.expires_after(state_->options.request_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(error_code ec) {
    if (state_->stopped || ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
        ec == beast::error::timeout || ec == asio::error::eof) {
      close();
      return;
    }
    if (ec == http::error::header_limit)
      return respond(http::status::request_header_fields_too_large, "request too large\n", false);
    if (ec == http::error::body_limit || ec == http::error::unexpected_body) {
      return respond(http::status::payload_too_large, "a request to this endpoint has no body\n", false);
    }
    if (ec) return respond(http::status::bad_request, "malformed request\n", false);
    standing_.spoke = true;

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
    standing_.since = std::chrono::steady_clock::now();  // caught up: the reply was taken
    read();
  }

  std::shared_ptr<MetricsListener::State> state_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> parser_;
  http::response<http::string_body> response_;
  const std::string group_;
  Standing standing_;    // every session may be closed for room: nothing here is authenticated
  bool counted_ = true;  // in the state's counts
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

std::shared_ptr<Session> MetricsListener::State::choose_eviction(const std::string* group) {
  std::shared_ptr<Session> victim;
  for (const auto& weak : sessions) {
    auto session = weak.lock();
    if (!session || !session->counted()) continue;
    if (group != nullptr && session->group() != *group) continue;
    if (!victim || evict_before(session->standing(), victim->standing())) victim = std::move(session);
  }
  return victim;
}

void MetricsListener::State::admit(tcp::socket socket) {
  set_close_on_exec(socket.native_handle());  // accepted without SOCK_CLOEXEC (close_on_exec.hpp)
  error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  const std::string peer = ec ? std::string("tcp") : remote.address().to_string() + ":" + std::to_string(remote.port());
  PeerGroup group = peer_group(owners, socket.native_handle(), ec ? std::string("tcp") : remote.address().to_string());
  accepted.fetch_add(1, std::memory_order_relaxed);
  std::erase_if(sessions, [](const std::weak_ptr<Session>& s) { return s.expired(); });
  const auto in_group = groups.find(group.key);
  const bool group_full = in_group != groups.end() && in_group->second >= options.max_connections_per_peer;
  if (group_full || open >= options.max_connections) {
    if (auto victim = choose_eviction(group_full ? &group.key : nullptr)) {
      victim->evict();
      evicted.fetch_add(1, std::memory_order_relaxed);
      evictions.warn(fmt::format(
          "a connection was closed to make room for one from {}: {} (the limit is {}); of "
          "them it had done the least for the longest",
          peer, group_full ? "too many connections from " + group.describe() : std::string("too many connections"),
          group_full ? options.max_connections_per_peer : options.max_connections));
    }
  }
  ++open;
  ++groups[group.key];
  auto session = std::make_shared<Session>(shared_from_this(), std::move(socket), std::move(group.key));
  sessions.push_back(session);
  session->read();
}

Result<std::unique_ptr<MetricsListener>> MetricsListener::start(asio::io_context& io, MetricsListenerOptions options,
                                                                MetricsEndpoints endpoints) {
  if (options.max_connections == 0 || options.max_connections_per_peer == 0) {
    return fail(ErrorCode::invalid_input, "metrics: the connection limits must be at least 1");
  }
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

MetricsListenerCounters MetricsListener::counters() const noexcept {
  return {state_->accepted.load(std::memory_order_relaxed), state_->evicted.load(std::memory_order_relaxed)};
}

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
