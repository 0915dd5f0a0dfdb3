// Listener: accepts connections on one endpoint (a Unix socket or TCP) and
// hands them to admit(); private to runtime/daemon.
#pragma once

// See server_state.hpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#pragma GCC diagnostic pop

#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "base/log.hpp"
#include "base/result.hpp"
#include "daemon/peer_owner.hpp"
#include "daemon/server.hpp"
#include "daemon/server_state.hpp"

namespace passepartout::detail {

// Pause before accepting again after accept() failed (e.g. out of descriptors).
inline constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

// Registers `socket` as a connection and starts it, or sends it away when its
// transport or its peer is at its limit, or the server is stopping.
// At a TCP limit (all connections, or those of the newcomer's group), the
// connection that has done least for longest is closed to make room
// (admission.hpp); only when none may be, the newcomer is refused.
void admit(const std::shared_ptr<ServerState>& server, GenericSocket socket, ConnectionInfo info, PeerGroup group);

// Accepts connections on one endpoint, on its own strand (on the first
// io_context), and hands each new connection to the next io_context in turn.
template <class Protocol>
class Listener : public std::enable_shared_from_this<Listener<Protocol>> {
 public:
  using Acceptor = typename Protocol::acceptor;
  using Socket = typename Protocol::socket::template rebind_executor<Strand>::other;

  Listener(std::vector<asio::io_context*> contexts, std::shared_ptr<ServerState> server, Transport transport)
      : contexts_(std::move(contexts)),
        server_(std::move(server)),
        strand_(asio::make_strand(*contexts_.front())),
        acceptor_(strand_),
        retry_timer_(strand_),
        transport_(transport) {}

  // For setting up before start(), on the starting thread.
  Acceptor& acceptor() noexcept { return acceptor_; }

  void start() {
    asio::post(strand_, [self = this->shared_from_this()] { self->accept(); });
  }
  void close() {
    asio::post(strand_, [self = this->shared_from_this()] {
      self->closed_ = true;
      error_code ignored;
      self->acceptor_.close(ignored);
      self->retry_timer_.cancel();
      std::lock_guard lock(self->close_mutex_);
      self->acceptor_closed_ = true;
      self->close_done_.notify_all();
    });
  }
  // Waits until the acceptor closed (after close()), so the port and socket
  // no longer accept; false when `timeout` passed first (the io_context is
  // not running). Never from an io thread.
  bool wait_closed(std::chrono::milliseconds timeout) {
    std::unique_lock lock(close_mutex_);
    return close_done_.wait_for(lock, timeout, [this] { return acceptor_closed_; });
  }

 private:
  void accept() {
    if (closed_) return;
    asio::io_context& context = *contexts_[next_context_++ % contexts_.size()];
    auto peer = std::make_shared<Socket>(asio::make_strand(context));
    acceptor_.async_accept(*peer, [self = this->shared_from_this(), peer](const error_code& error) {
      self->on_accept(error, std::move(*peer));
    });
  }

  void on_accept(const error_code& error, Socket peer) {
    if (closed_ || error == asio::error::operation_aborted) return;
    if (error) {
      log_message(LogLevel::warn, kComponent, std::string("accept failed: ") + error.message());
      retry_timer_.expires_after(kAcceptRetryDelay);
      retry_timer_.async_wait([self = this->shared_from_this()](const error_code& waited) {
        if (!waited) self->accept();
      });
      return;
    }
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      // Replies are often two small frames (the answer, then the end of the
      // exchange); with Nagle's algorithm the second waits for the peer's
      // delayed ACK, some 40 ms. Frames are written whole, so send at once.
      error_code ignored;
      peer.set_option(asio::ip::tcp::no_delay(true), ignored);
    }
    ConnectionInfo info;
    info.transport = transport_;
    info.peer = peer_name(peer);
    info.requester = requester_of(peer, info.peer);
    PeerGroup group;
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      group = peer_group(owners_, peer.native_handle(), address_of(peer));
    }
    admit(server_, GenericSocket(std::move(peer)), std::move(info), std::move(group));
    accept();
  }

  // "wire uid=<uid> pid=<pid>" of the Unix socket's peer process
  // (SO_PEERCRED, as the kernel saw it at connect); "wire peer=<address>"
  // over TCP, until a request authenticates (Connection::dispatch).
  static std::string requester_of(Socket& peer, const std::string& address) {
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      return "wire peer=" + address;
    } else {
      ucred credentials{};
      socklen_t size = sizeof credentials;
      if (::getsockopt(peer.native_handle(), SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) return "wire unix";
      return "wire uid=" + std::to_string(credentials.uid) + " pid=" + std::to_string(credentials.pid);
    }
  }

  static std::string address_of(Socket& peer) {
    error_code error;
    const auto endpoint = peer.remote_endpoint(error);
    return error ? std::string("tcp") : endpoint.address().to_string();
  }

  std::string peer_name(Socket& peer) const {
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      error_code error;
      const auto endpoint = peer.remote_endpoint(error);
      if (error) return "tcp";
      return endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
    } else {
      return server_->options.unix_socket_path.string();
    }
  }

  const std::vector<asio::io_context*> contexts_;
  std::size_t next_context_ = 0;  // on the strand
  const std::shared_ptr<ServerState> server_;
  Strand strand_;
  Acceptor acceptor_;
  asio::steady_timer retry_timer_;
  std::mutex close_mutex_;  // guards acceptor_closed_
  std::condition_variable close_done_;
  bool acceptor_closed_ = false;
  const Transport transport_;
  bool closed_ = false;
  LoopbackOwners owners_;  // on the strand
};

using TcpListener = Listener<asio::ip::tcp>;
using UnixListener = Listener<asio::local::stream_protocol>;

// Makes room for the Unix socket at `path`: nothing there is fine; a socket
// file nobody answers on is stale and removed; anything else is refused.
Result<void> prepare_unix_path(const std::string& path);

}  // namespace passepartout::detail
