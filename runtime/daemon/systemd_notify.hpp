// SystemdNotifier: the service manager's notification protocol (READY=1,
// STATUS=..., STOPPING=1, WATCHDOG=1), spoken over $NOTIFY_SOCKET without libsystemd.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace passepartout {

// Sends datagrams to the socket systemd named in NOTIFY_SOCKET (a path, or an
// abstract name starting with '@'). Without NOTIFY_SOCKET every call does
// nothing and returns false. Thread-safe (each notify is one sendto()).
class SystemdNotifier {
 public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID, then removes them
  // from the environment so the daemon's children do not inherit them.
  // Call before the process starts any thread (unsetenv is not thread-safe).
  static SystemdNotifier from_environment();
  // For tests: a notifier sending to `socket` with the given watchdog period.
  SystemdNotifier(std::string socket, std::optional<std::chrono::microseconds> watchdog);
  SystemdNotifier() = default;

  bool enabled() const noexcept { return !socket_.empty(); }
  // Sends `state`, e.g. "READY=1\nSTATUS=serving"; false when it could not be sent.
  bool notify(std::string_view state) const;
  // How often to send WATCHDOG=1: half of WATCHDOG_USEC, when the watchdog
  // is on for this process.
  std::optional<std::chrono::microseconds> watchdog_period() const noexcept;

 private:
  std::string socket_;
  std::optional<std::chrono::microseconds> watchdog_;
};

}  // namespace passepartout
