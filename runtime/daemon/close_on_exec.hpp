// Close-on-exec for the daemon's sockets. Asio as Debian 12 ships it (Boost
// 1.74) opens and accepts sockets without SOCK_CLOEXEC: without this, a
// program the daemon or a skill starts would inherit the listening sockets and
// keep them (and the port, and the socket file's clients) after the daemon died.
#pragma once

#include <fcntl.h>

namespace passepartout {

// Marks `fd` close-on-exec; false (errno set) when fcntl fails.
inline bool set_close_on_exec(int fd) noexcept {
  const int flags = ::fcntl(fd, F_GETFD);
  return flags >= 0 && ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) == 0;
}

}  // namespace passepartout
