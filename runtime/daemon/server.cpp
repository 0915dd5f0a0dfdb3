// Server: starts the listeners on its own io_context or the caller's, keeps
// the registry of connections, and stops them all gracefully.
#include "daemon/server.hpp"

// See server_state.hpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/executor_work_guard.hpp>
#pragma GCC diagnostic pop

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <thread>
#include <utility>

#include "base/errno_text.hpp"
#include "base/log.hpp"
#include "daemon/close_on_exec.hpp"
#include "daemon/connection.hpp"
#include "daemon/listener.hpp"
#include "daemon/server_state.hpp"

namespace passepartout {

const char* to_string(Transport transport) noexcept {
  switch (transport) {
    case Transport::unix_socket:
      return "unix";
    case Transport::tcp:
      return "tcp";
  }
  return "tcp";
}

namespace detail {

std::vector<std::shared_ptr<Connection>> ServerState::open_connections() const {
  std::vector<std::shared_ptr<Connection>> open;
  open.reserve(connections.size());
  for (const auto& entry : connections) {
    if (auto connection = entry.second.connection.lock()) open.push_back(std::move(connection));
  }
  return open;
}

void ServerState::shed_largest() {
  std::shared_ptr<Connection> largest;
  std::size_t most = 0;
  {
    std::lock_guard lock(connections_mutex);
    for (const auto& entry : connections) {
      auto connection = entry.second.connection.lock();
      if (!connection) continue;
      const std::size_t queued = connection->queued_bytes();
      if (queued > most) {
        most = queued;
        largest = std::move(connection);
      }
    }
  }
  if (largest) largest->close_for_replies(most);
}

}  // namespace detail

namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using detail::Connection;
using detail::kComponent;
using detail::milliseconds_text;
using detail::prepare_unix_path;
using detail::ServerState;
using detail::TcpListener;
using detail::UnixListener;

// After the grace period, how long stop() waits for forcibly closed connections.
constexpr auto kForceCloseWait = std::chrono::seconds(2);

}  // namespace

// --- Server -----------------------------------------------------------------------

struct Server::Impl {
  // Declared first: destroyed last, after everything that uses it.
  std::unique_ptr<asio::io_context> owned_context;
  std::vector<asio::io_context*> contexts;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::vector<std::thread> threads;

  std::shared_ptr<ServerState> state;
  std::shared_ptr<TcpListener> tcp_listener;
  std::shared_ptr<UnixListener> unix_listener;
  std::uint16_t tcp_port = 0;
  std::filesystem::path unix_path;
  dev_t unix_device = 0;
  ino_t unix_inode = 0;

  std::mutex stop_mutex;       // serialises stop()
  bool stopped = false;        // guarded by stop_mutex
  std::mutex unix_path_mutex;  // guards unix_path once serving

  // Waits until the listeners have closed (after begin_stop()); false when
  // `timeout` passed first for either.
  bool wait_listeners_closed(std::chrono::milliseconds timeout) {
    bool closed = true;
    if (tcp_listener) closed = tcp_listener->wait_closed(timeout) && closed;
    if (unix_listener) closed = unix_listener->wait_closed(timeout) && closed;
    return closed;
  }

  // Stops accepting and drains the connections; later calls do nothing.
  void begin_stop() {
    std::vector<std::shared_ptr<Connection>> open;
    {
      std::lock_guard lock(state->connections_mutex);
      if (state->draining) return;
      state->draining = true;
      open = state->open_connections();
    }
    if (tcp_listener) tcp_listener->close();
    if (unix_listener) unix_listener->close();
    {
      std::lock_guard lock(unix_path_mutex);
      remove_unix_socket();
    }
    for (const auto& connection : open) connection->drain();
  }

  // Removes the socket file if it is still the one this server bound.
  void remove_unix_socket() {
    if (unix_path.empty()) return;
    struct stat status {};
    if (::lstat(unix_path.c_str(), &status) == 0 && status.st_dev == unix_device && status.st_ino == unix_inode) {
      ::unlink(unix_path.c_str());
    }
    unix_path.clear();
  }

  Result<void> open_unix(const ServerOptions& options) {
    const std::string path = options.unix_socket_path.string();
    if (auto prepared = prepare_unix_path(path); !prepared) return prepared;
    unix_listener = std::make_shared<UnixListener>(contexts, state, Transport::unix_socket);
    auto& acceptor = unix_listener->acceptor();
    error_code error;
    acceptor.open(asio::local::stream_protocol(), error);
    if (error) return fail(ErrorCode::io_error, "cannot open a unix socket: " + error.message());
    if (!set_close_on_exec(acceptor.native_handle())) {
      return fail(ErrorCode::io_error, "cannot make the unix socket close-on-exec: " + errno_text(errno));
    }
    // Linux creates the socket file with the socket's own mode (less the
    // umask): set it before bind so the file never grants more than 0600.
    ::fchmod(acceptor.native_handle(), S_IRUSR | S_IWUSR);
    acceptor.bind(asio::local::stream_protocol::endpoint(path), error);
    if (error) return fail(ErrorCode::io_error, "cannot bind unix socket '" + path + "': " + error.message());
    unix_path = options.unix_socket_path;
    struct stat status {};
    if (::lstat(path.c_str(), &status) != 0 || !S_ISSOCK(status.st_mode) || status.st_uid != ::geteuid()) {
      return fail(ErrorCode::io_error, "unix socket '" + path + "' is not the socket just bound");
    }
    unix_device = status.st_dev;
    unix_inode = status.st_ino;
    // Elsewhere the mode is fixed here; nobody can connect before listen().
    if ((status.st_mode & 07777) != (S_IRUSR | S_IWUSR)) {
      if (::chmod(path.c_str(), S_IRUSR | S_IWUSR) != 0) {
        return fail(ErrorCode::io_error, "cannot make unix socket '" + path + "' mode 0600: " + errno_text(errno));
      }
    }
    acceptor.listen(asio::socket_base::max_listen_connections, error);
    if (error) return fail(ErrorCode::io_error, "cannot listen on unix socket '" + path + "': " + error.message());
    return {};
  }

  Result<void> open_tcp(const ServerOptions& options) {
    error_code error;
    const auto address = asio::ip::make_address(options.tcp_address, error);
    if (error) return fail(ErrorCode::invalid_input, "'" + options.tcp_address + "' is not an IP address");
    const std::string where = options.tcp_address + ":" + std::to_string(options.tcp_port);
    if (!address.is_loopback()) {
      log_message(LogLevel::warn, kComponent, "listening on {}, which is not a loopback address", where);
    }
    tcp_listener = std::make_shared<TcpListener>(contexts, state, Transport::tcp);
    auto& acceptor = tcp_listener->acceptor();
    const asio::ip::tcp::endpoint endpoint(address, options.tcp_port);
    acceptor.open(endpoint.protocol(), error);
    if (!error && !set_close_on_exec(acceptor.native_handle())) {
      return fail(ErrorCode::io_error, "cannot make the socket for " + where + " close-on-exec: " + errno_text(errno));
    }
    if (!error) acceptor.set_option(asio::socket_base::reuse_address(true), error);
    if (!error) acceptor.bind(endpoint, error);
    if (!error) acceptor.listen(asio::socket_base::max_listen_connections, error);
    if (error) return fail(ErrorCode::io_error, "cannot listen on " + where + ": " + error.message());
    tcp_port = acceptor.local_endpoint(error).port();
    if (error) return fail(ErrorCode::io_error, "cannot read the port of " + where + ": " + error.message());
    return {};
  }
};

namespace {

Result<void> validate(const ServerOptions& options, const std::shared_ptr<RequestHandler>& handler) {
  if (!handler) return fail(ErrorCode::invalid_input, "daemon server: no request handler");
  if (options.unix_socket_path.empty() && !options.listen_tcp) {
    return fail(ErrorCode::invalid_input, "daemon server: neither a unix socket path nor TCP to listen on");
  }
  const std::size_t max_payload = options.frame_limits.max_payload_code_points;
  if (max_payload == 0 || max_payload > kMaxFrameCodePoints) {
    return fail(ErrorCode::invalid_input, "daemon server: the frame limit must be 1.." +
                                              std::to_string(kMaxFrameCodePoints) + " code points, not " +
                                              std::to_string(max_payload));
  }
  if (options.frame_limits.max_depth == 0) return fail(ErrorCode::invalid_input, "daemon server: nesting limit 0");
  if (options.max_connections == 0) return fail(ErrorCode::invalid_input, "daemon server: max_connections is 0");
  if (options.max_queued_requests == 0) {
    return fail(ErrorCode::invalid_input, "daemon server: max_queued_requests is 0");
  }
  return {};
}

}  // namespace

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  try {
    stop();
  } catch (const std::exception& error) {
    log_message(LogLevel::error, kComponent, "stopping the server failed: {}", error.what());
  } catch (...) {
    log_message(LogLevel::error, kComponent, "stopping the server failed");
  }
}

Result<std::unique_ptr<Server>> Server::start(ServerOptions options, std::shared_ptr<RequestHandler> handler,
                                              HealthProbe health) {
  auto context = std::make_unique<asio::io_context>();
  const std::size_t threads = options.threads == 0 ? 1 : options.threads;
  auto server = start({context.get()}, std::move(options), std::move(handler), std::move(health));
  if (!server) return server;
  Impl& impl = *(*server)->impl_;
  impl.owned_context = std::move(context);
  impl.guard.emplace(impl.owned_context->get_executor());
  impl.threads.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) {
    impl.threads.emplace_back([context = impl.owned_context.get()] {
      for (;;) {
        try {
          context->run();
          return;
        } catch (const std::exception& error) {
          log_message(LogLevel::error, kComponent, "io thread: {}", error.what());
        } catch (...) {
          log_message(LogLevel::error, kComponent, "io thread: unknown exception");
        }
      }
    });
  }
  return server;
}

Result<std::unique_ptr<Server>> Server::start(std::vector<asio::io_context*> contexts, ServerOptions options,
                                              std::shared_ptr<RequestHandler> handler, HealthProbe health) {
  if (contexts.empty() || std::find(contexts.begin(), contexts.end(), nullptr) != contexts.end()) {
    return fail(ErrorCode::invalid_input, "the server needs at least one io_context");
  }
  if (auto valid = validate(options, handler); !valid) return Unexpected<Error>(std::move(valid).error());
  if (options.version.empty()) options.version = PASSEPARTOUT_VERSION;

  auto impl = std::make_unique<Impl>();
  impl->contexts = std::move(contexts);
  impl->state = std::make_shared<ServerState>(std::move(options), std::move(handler), std::move(health));
  const ServerOptions& opts = impl->state->options;
  auto handshake = impl->state->codec.encode(make_handshake(opts.version, opts.capabilities));
  if (!handshake) return Unexpected<Error>(std::move(handshake).error());
  impl->state->handshake_frame = std::move(*handshake);

  if (!opts.unix_socket_path.empty()) {
    if (auto opened = impl->open_unix(opts); !opened) {
      impl->remove_unix_socket();
      return Unexpected<Error>(std::move(opened).error());
    }
  }
  if (opts.listen_tcp) {
    if (auto opened = impl->open_tcp(opts); !opened) {
      impl->remove_unix_socket();
      return Unexpected<Error>(std::move(opened).error());
    }
  }
  if (impl->unix_listener) impl->unix_listener->start();
  if (impl->tcp_listener) impl->tcp_listener->start();
  if (impl->tcp_listener) {
    log_message(LogLevel::info, kComponent, "listening on {}:{}", opts.tcp_address, impl->tcp_port);
  }
  if (impl->unix_listener)
    log_message(LogLevel::info, kComponent, "listening on unix socket {}", impl->unix_path.string());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

std::uint16_t Server::tcp_port() const noexcept { return impl_->tcp_port; }

const std::filesystem::path& Server::unix_socket_path() const noexcept {
  return impl_->state->options.unix_socket_path;
}

ServerCounters Server::counters() const {
  const ServerState& state = *impl_->state;
  ServerCounters counters;
  {
    std::lock_guard lock(state.connections_mutex);
    counters.connections_open = state.connections.size();
    counters.connections_open_tcp = state.open_tcp;
    counters.connections_open_unix = state.open_unix;
  }
  counters.connections_total = state.connections_total.load(std::memory_order_relaxed);
  counters.connections_rejected = state.connections_rejected.load(std::memory_order_relaxed);
  counters.connections_evicted = state.connections_evicted.load(std::memory_order_relaxed);
  counters.frames_in = state.frames_in.load(std::memory_order_relaxed);
  counters.frames_out = state.frames_out.load(std::memory_order_relaxed);
  counters.errors = state.errors.load(std::memory_order_relaxed);
  counters.closed_for_replies = state.closed_for_replies.load(std::memory_order_relaxed);
  counters.queued_write_bytes =
      static_cast<std::uint64_t>(std::max<std::int64_t>(0, state.queued_write_bytes.load(std::memory_order_relaxed)));
  return counters;
}

void Server::begin_stop() { impl_->begin_stop(); }

void Server::stop(std::chrono::milliseconds grace) {
  std::lock_guard stop_lock(impl_->stop_mutex);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->begin_stop();
  // The listeners close on their strands; wait for that before the io_context
  // may stop, or a stopped server would keep its port accepting.
  impl_->wait_listeners_closed(grace);
  ServerState& state = *impl_->state;
  {
    std::unique_lock lock(state.connections_mutex);
    const auto all_closed = [&state] { return state.connections.empty(); };
    if (!state.connections_changed.wait_for(lock, grace, all_closed)) {
      std::vector<std::shared_ptr<Connection>> left = state.open_connections();
      lock.unlock();
      log_message(LogLevel::warn, kComponent, "{} connection(s) still busy after {}; closing them", left.size(),
                  milliseconds_text(grace));
      for (const auto& connection : left) connection->force_close();
      left.clear();
      lock.lock();
      state.connections_changed.wait_for(lock, kForceCloseWait, all_closed);
    }
  }
  {
    std::lock_guard lock(state.hub->posts_mutex);
    state.hub->posts_open = false;
  }
  if (impl_->owned_context) {
    impl_->guard.reset();
    impl_->owned_context->stop();
    for (std::thread& thread : impl_->threads) {
      if (thread.joinable()) thread.join();
    }
  }
}

bool Server::wait_connections_open_for_test(std::size_t count, std::chrono::milliseconds timeout) const {
  ServerState& state = *impl_->state;
  std::unique_lock lock(state.connections_mutex);
  return state.connections_changed.wait_for(lock, timeout, [&] { return state.connections.size() == count; });
}

bool Server::wait_listeners_closed_for_test(std::chrono::milliseconds timeout) const {
  return impl_->wait_listeners_closed(timeout);
}

}  // namespace passepartout
