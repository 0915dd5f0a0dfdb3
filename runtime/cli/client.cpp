// Client: the blocking connection `passepartout` commands use to talk to the
// daemon; every wait is a poll() bounded by the caller's deadline.
#include "cli/client.hpp"
#include "base/errno_text.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "cli/terminal_text.hpp"
#include "daemon/protocol.hpp"

namespace passepartout::cli {

namespace {

using Clock = Client::Clock;

// Milliseconds left until `deadline` for poll(): 0 once it has passed.
int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<std::int64_t>(left, 1 << 30));
}

// Waits for `events` on `fd` until `deadline`: 1 ready, 0 timed out, -1 error (errno set).
int wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    return ready;
  }
}

// Connects the non-blocking socket `fd` to `address` before `deadline`;
// 0 on success, else the errno (ETIMEDOUT when the deadline passed).
int connect_before(int fd, const sockaddr* address, socklen_t size, Clock::time_point deadline) {
  if (::connect(fd, address, size) == 0) return 0;
  if (errno != EINPROGRESS && errno != EINTR) return errno;
  const int ready = wait_for(fd, POLLOUT, deadline);
  if (ready == 0) return ETIMEDOUT;
  if (ready < 0) return errno;
  int error = 0;
  socklen_t length = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
  return error;
}

// Opens a non-blocking socket connected to `endpoint` before `deadline`;
// -1 with `why` set when that fails.
int connect_socket(const Endpoint& endpoint, Clock::time_point deadline, std::string& why) {
  if (!endpoint.is_tcp()) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string path = endpoint.socket_path.string();
    if (path.size() >= sizeof address.sun_path) {
      why = "the socket path is longer than " + std::to_string(sizeof address.sun_path - 1) + " bytes";
      return -1;
    }
    std::memcpy(address.sun_path, path.data(), path.size());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      why = errno_text(errno);
      return -1;
    }
    if (const int failed = connect_before(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address, deadline)) {
      ::close(fd);
      why = errno_text(failed);
      return -1;
    }
    return fd;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(endpoint.port);
  if (const int failed = ::getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &found)) {
    why = ::gai_strerror(failed);
    return -1;
  }
  int fd = -1;
  int last_error = ECONNREFUSED;
  for (const addrinfo* candidate = found; candidate != nullptr; candidate = candidate->ai_next) {
    fd = ::socket(candidate->ai_family, candidate->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, candidate->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      continue;
    }
    last_error = connect_before(fd, candidate->ai_addr, candidate->ai_addrlen, deadline);
    if (last_error == 0) {
      const int one = 1;  // each request is one whole frame: send it at once (no Nagle delay)
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      break;
    }
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) why = errno_text(last_error);
  return fd;
}

}  // namespace

bool is_listening(const Endpoint& endpoint, std::chrono::milliseconds timeout, std::string& why) {
  const int fd = connect_socket(endpoint, Clock::now() + timeout, why);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

std::string Endpoint::describe() const {
  if (!is_tcp()) return socket_path.string();
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Client::Client(Client&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      eof_(other.eof_),
      endpoint_(std::move(other.endpoint_)),
      decoder_(std::move(other.decoder_)),
      handshake_(std::move(other.handshake_)) {}

Client& Client::operator=(Client&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    eof_ = other.eof_;
    endpoint_ = std::move(other.endpoint_);
    decoder_ = std::move(other.decoder_);
    handshake_ = std::move(other.handshake_);
  }
  return *this;
}

Client::~Client() { close(); }

void Client::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Client::open(const Endpoint& endpoint, std::chrono::milliseconds connect_timeout, ClientError& error) {
  close();
  endpoint_ = endpoint;
  decoder_ = FrameDecoder();
  eof_ = false;
  handshake_ = Value();
  const Clock::time_point deadline = Clock::now() + connect_timeout;
  auto unreachable = [&](const std::string& why) {
    close();
    error = ClientError{ClientFailure::unreachable, "cannot reach the daemon at " + endpoint.describe() + ": " + why};
    return false;
  };

  std::string why;
  fd_ = connect_socket(endpoint, deadline, why);
  if (fd_ < 0) return unreachable(why);

  Value first;
  if (!read(first, deadline, error)) {
    if (error.failure == ClientFailure::timeout) {
      error.message = "the daemon at " + endpoint.describe() +
                      " accepted the connection but sent no handshake within " +
                      std::to_string(connect_timeout.count() / 1000) + " s";
    }
    close();
    return false;
  }
  if (is_error_response(first)) {
    const Value& message = first.path({"PAYLOAD", "MESSAGE"});
    error =
        ClientError{ClientFailure::closed,
                    "the daemon at " + endpoint.describe() + " turned the connection away: " +
                        (message.is_string() ? printable(message.text()) : std::string(error_response_code(first)))};
    close();
    return false;
  }
  if (!is_handshake(first)) {
    error =
        ClientError{ClientFailure::bad_frame, "the peer at " + endpoint.describe() + " did not start with a handshake"};
    close();
    return false;
  }
  handshake_ = std::move(first);
  return true;
}

bool Client::alive() const noexcept {
  if (fd_ < 0 || eof_) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return true;  // nothing to read: still there
  if ((p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) return false;
  char byte = 0;
  const ssize_t got = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return got > 0 || (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

std::string Client::daemon_version() const {
  const Value& version = handshake_.path({"PAYLOAD", "VERSION"});
  return version.is_string() ? std::string(version.text()) : std::string();
}

bool Client::send(const Value& message, Clock::time_point deadline, ClientError& error) {
  if (fd_ < 0) {
    error = ClientError{ClientFailure::closed, "not connected to the daemon at " + endpoint_.describe()};
    return false;
  }
  auto frame = FrameCodec().encode(message);
  if (!frame) {
    error = ClientError{ClientFailure::io, "cannot send the request: " + frame.error().message};
    return false;
  }
  std::string_view rest = *frame;
  while (!rest.empty()) {
    const ssize_t sent = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      rest.remove_prefix(static_cast<std::size_t>(sent));
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int ready = wait_for(fd_, POLLOUT, deadline);
      if (ready > 0) continue;
      if (ready == 0) {
        error =
            ClientError{ClientFailure::timeout, "the daemon at " + endpoint_.describe() + " is not taking the request"};
        return false;
      }
    }
    const int failed = errno;
    if (failed == EPIPE || failed == ECONNRESET) {
      error = ClientError{ClientFailure::closed, "the daemon at " + endpoint_.describe() + " closed the connection"};
    } else {
      error = ClientError{ClientFailure::io,
                          "cannot send to the daemon at " + endpoint_.describe() + ": " + errno_text(failed)};
    }
    return false;
  }
  return true;
}

bool Client::read(Value& frame, Clock::time_point deadline, ClientError& error) {
  for (;;) {
    if (auto message = decoder_.next()) {
      frame = std::move(*message);
      return true;
    }
    if (decoder_.failed() && decoder_.error()->kind == FrameErrorKind::truncated) {
      error = ClientError{ClientFailure::closed,
                          "the daemon at " + endpoint_.describe() + " closed the connection in the middle of a frame"};
      return false;
    }
    if (decoder_.failed()) {
      error = ClientError{ClientFailure::bad_frame, "the daemon at " + endpoint_.describe() +
                                                        " sent an unreadable frame: " + decoder_.error()->message};
      return false;
    }
    if (eof_ || fd_ < 0) {
      error = ClientError{ClientFailure::closed, "the daemon at " + endpoint_.describe() + " closed the connection"};
      return false;
    }
    const int ready = wait_for(fd_, POLLIN, deadline);
    if (ready == 0) {
      error = ClientError{ClientFailure::timeout, "no answer from the daemon at " + endpoint_.describe() + " in time"};
      return false;
    }
    if (ready < 0) {
      error = ClientError{ClientFailure::io,
                          "cannot read from the daemon at " + endpoint_.describe() + ": " + errno_text(errno)};
      return false;
    }
    char buffer[16 * 1024];
    const ssize_t got = ::recv(fd_, buffer, sizeof buffer, 0);
    if (got > 0) {
      decoder_.feed(std::string_view(buffer, static_cast<std::size_t>(got)));
      continue;
    }
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (got < 0 && errno != ECONNRESET) {
      error = ClientError{ClientFailure::io,
                          "cannot read from the daemon at " + endpoint_.describe() + ": " + errno_text(errno)};
      return false;
    }
    // End of stream (or a reset): what was complete is still delivered first.
    eof_ = true;
    decoder_.finish();
  }
}

}  // namespace passepartout::cli
