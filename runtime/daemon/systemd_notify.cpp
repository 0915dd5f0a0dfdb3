// The sd_notify protocol by hand: one AF_UNIX datagram per notification.
#include "daemon/systemd_notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace passepartout {

SystemdNotifier::SystemdNotifier(std::string socket, std::optional<std::chrono::microseconds> watchdog)
    : socket_(std::move(socket)), watchdog_(watchdog) {}

SystemdNotifier SystemdNotifier::from_environment() {
  std::string socket;
  if (const char* value = std::getenv("NOTIFY_SOCKET"); value != nullptr) socket = value;
  std::optional<std::chrono::microseconds> watchdog;
  if (const char* usec = std::getenv("WATCHDOG_USEC"); usec != nullptr) {
    std::uint64_t n = 0;
    const std::string_view text(usec);
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    bool mine = true;  // WATCHDOG_PID, when set, must be this process
    if (const char* pid = std::getenv("WATCHDOG_PID"); pid != nullptr) mine = std::to_string(::getpid()) == pid;
    if (ec == std::errc() && end == text.data() + text.size() && n > 0 && mine) {
      watchdog = std::chrono::microseconds(static_cast<std::int64_t>(n));
    }
  }
  // Read once at start-up, before any other thread exists, and unset so that
  // children (skills' commands) do not notify in the daemon's name.
  ::unsetenv("NOTIFY_SOCKET");  // NOLINT(concurrency-mt-unsafe): called before any other thread starts
  ::unsetenv("WATCHDOG_USEC");  // NOLINT(concurrency-mt-unsafe): called before any other thread starts
  ::unsetenv("WATCHDOG_PID");   // NOLINT(concurrency-mt-unsafe): called before any other thread starts
  if (socket.size() < 2 || (socket.front() != '/' && socket.front() != '@')) socket.clear();
  return {std::move(socket), watchdog};
}

bool SystemdNotifier::notify(std::string_view state) const {
  if (socket_.empty()) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_.size() >= sizeof address.sun_path) return false;
  std::memcpy(address.sun_path, socket_.data(), socket_.size());
  if (address.sun_path[0] == '@') address.sun_path[0] = '\0';  // an abstract name
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_.size());
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const ssize_t sent =
      ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&address), length);
  ::close(fd);
  return sent == static_cast<ssize_t>(state.size());
}

std::optional<std::chrono::microseconds> SystemdNotifier::watchdog_period() const noexcept {
  if (!watchdog_ || socket_.empty()) return std::nullopt;
  return *watchdog_ / 2;
}

}  // namespace passepartout
