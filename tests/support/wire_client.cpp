// WireClient: blocking POSIX sockets with send and receive timeouts.
#include "support/wire_client.hpp"

#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "daemon/protocol.hpp"
#include "support/loopback.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout::testing {

WireClient::WireClient(int fd, std::chrono::seconds wait) : fd_(fd), wait_(wait) {
  timeval timeout{};
  timeout.tv_sec = wait.count();
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
}

WireClient::WireClient(WireClient&& other) noexcept
    : fd_(other.fd_), wait_(other.wait_), decoder_(std::move(other.decoder_)) {
  other.fd_ = -1;
}

WireClient::~WireClient() { close(); }

WireClient WireClient::tcp(std::uint16_t port, std::chrono::seconds wait) {
  const int fd = connect_loopback(port);
  if (fd < 0) FAIL("connect to 127.0.0.1:" << port << ": " << std::strerror(-fd));
  return WireClient(fd, wait);
}

std::optional<WireClient> WireClient::try_tcp(std::uint16_t port, std::chrono::seconds wait) {
  const int fd = connect_loopback(port);
  if (fd == -ECONNREFUSED || fd == -ECONNRESET) return std::nullopt;
  if (fd < 0) FAIL("connect to 127.0.0.1:" << port << ": " << std::strerror(-fd));
  return WireClient(fd, wait);
}

WireClient WireClient::local(const std::filesystem::path& path, std::chrono::seconds wait) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string native = path.string();
  REQUIRE(native.size() < sizeof address.sun_path);
  std::memcpy(address.sun_path, native.data(), native.size());
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const int error = errno;
    ::close(fd);
    FAIL("connect to " << native << ": " << std::strerror(error));
  }
  return WireClient(fd, wait);
}

void WireClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void WireClient::reset() {
  const linger abort{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  close();
}

void WireClient::shutdown_write() { ::shutdown(fd_, SHUT_WR); }

void WireClient::send_raw(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0) FAIL("send: " << std::strerror(errno));
    bytes.remove_prefix(static_cast<std::size_t>(sent));
  }
}

void WireClient::send(const Value& message) {
  auto frame = FrameCodec(FrameLimits{kMaxFrameCodePoints, 128, 4096}).encode(message);
  REQUIRE(frame.has_value());
  send_raw(*frame);
}

void WireClient::send(std::string_view message_text) {
  auto message = read_sexp(message_text);
  INFO(message_text);
  REQUIRE(message.has_value());
  send(*message);
}

std::optional<Value> WireClient::read_frame() {
  for (;;) {
    if (auto message = decoder_.next()) return message;
    if (decoder_.failed()) FAIL("the client could not decode a frame: " << decoder_.error()->message);
    char buffer[4096];
    const ssize_t got = ::recv(fd_, buffer, sizeof buffer, 0);
    if (got == 0) return std::nullopt;
    if (got < 0 && errno == ECONNRESET) return std::nullopt;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) FAIL("no frame within " << wait_.count() << " s");
    if (got < 0) FAIL("recv: " << std::strerror(errno));
    decoder_.feed(std::string_view(buffer, static_cast<std::size_t>(got)));
  }
}

Value WireClient::expect_frame() {
  auto frame = read_frame();
  REQUIRE(frame.has_value());
  return *frame;
}

Value WireClient::expect_handshake() {
  const Value hello = expect_frame();
  INFO(to_sexp(hello));
  REQUIRE(is_handshake(hello));
  return hello;
}

Value WireClient::request(std::string_view message_text) {
  send(message_text);
  return expect_frame();
}

bool WireClient::closed_by_server() {
  if (read_frame().has_value()) return false;
  close();
  return true;
}

}  // namespace passepartout::testing
