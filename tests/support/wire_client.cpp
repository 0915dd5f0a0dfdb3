// WireClient: blocking POSIX sockets with send and receive timeouts.
#include "support/wire_client.hpp"

#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "daemon/protocol.hpp"
#include "support/loopback.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout::testing {

namespace {

// Catch2's assertions are not thread-safe: on the test's own thread a broken
// expectation is a Catch failure; on a thread a test started (clients in
// parallel) it is an exception for that test to collect and report.
const std::thread::id kTestThread = std::this_thread::get_id();  // static initialisation runs on main's thread

bool on_test_thread() { return std::this_thread::get_id() == kTestThread; }

[[noreturn]] void wire_fail(const std::string& message) {
  if (on_test_thread()) FAIL(message);
  throw std::runtime_error("wire client: " + message);
}

void wire_require(bool holds, const std::string& what) {
  if (on_test_thread()) {
    INFO(what);
    REQUIRE(holds);
  } else if (!holds) {
    throw std::runtime_error("wire client: " + what);
  }
}

template <typename... Parts>
std::string text_of(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

}  // namespace

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
  if (fd < 0) wire_fail(text_of("connect to 127.0.0.1:", port, ": ", std::strerror(-fd)));
  return WireClient(fd, wait);
}

std::optional<WireClient> WireClient::try_tcp(std::uint16_t port, std::chrono::seconds wait) {
  const int fd = connect_loopback(port);
  if (fd == -ECONNREFUSED || fd == -ECONNRESET) return std::nullopt;
  if (fd < 0) wire_fail(text_of("connect to 127.0.0.1:", port, ": ", std::strerror(-fd)));
  return WireClient(fd, wait);
}

WireClient WireClient::local(const std::filesystem::path& path, std::chrono::seconds wait) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  wire_require(fd >= 0, "a Unix socket");
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string native = path.string();
  wire_require(native.size() < sizeof address.sun_path, "a socket path that fits: " + native);
  std::memcpy(address.sun_path, native.data(), native.size());
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const int error = errno;
    ::close(fd);
    wire_fail(text_of("connect to ", native, ": ", std::strerror(error)));
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
    if (sent < 0) wire_fail(text_of("send: ", std::strerror(errno)));
    bytes.remove_prefix(static_cast<std::size_t>(sent));
  }
}

void WireClient::send(const Value& message) {
  auto frame = FrameCodec(FrameLimits{kMaxFrameCodePoints, 128, 4096}).encode(message);
  wire_require(frame.has_value(), "a message that frames: " + to_sexp(message));
  send_raw(*frame);
}

void WireClient::send(std::string_view message_text) {
  auto message = read_sexp(message_text);
  wire_require(message.has_value(), "a message that reads: " + std::string(message_text));
  send(*message);
}

std::optional<Value> WireClient::read_frame() {
  for (;;) {
    if (auto message = decoder_.next()) return message;
    if (decoder_.failed()) wire_fail(text_of("the client could not decode a frame: ", decoder_.error()->message));
    char buffer[4096];
    const ssize_t got = ::recv(fd_, buffer, sizeof buffer, 0);
    if (got == 0) return std::nullopt;
    if (got < 0 && errno == ECONNRESET) return std::nullopt;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      wire_fail(text_of("no frame within ", wait_.count(), " s"));
    if (got < 0) wire_fail(text_of("recv: ", std::strerror(errno)));
    decoder_.feed(std::string_view(buffer, static_cast<std::size_t>(got)));
  }
}

Value WireClient::expect_frame() {
  auto frame = read_frame();
  wire_require(frame.has_value(), "a frame before the connection closed");
  return *frame;
}

Value WireClient::expect_handshake() {
  const Value hello = expect_frame();
  wire_require(is_handshake(hello), "a handshake: " + to_sexp(hello));
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
