// Daemon: the headless runtime behind `passepartout daemon`. Boots memory,
// skills, providers, the pipeline and its heartbeat, serves the framed
// protocol on a Unix socket and loopback TCP, and stops cleanly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.hpp"
#include "daemon/daemon_config.hpp"
#include "daemon/protocol.hpp"

namespace passepartout {

// Lifecycle: start() boots (seed H6: memory, skills, startup diagnostics,
// heartbeat, listeners) and returns once the listeners are up; serve() blocks
// until SIGTERM, SIGINT or an operator's :SHUTDOWN (request_stop()), then
// stops accepting, lets the signals in flight finish (at most the configured
// grace), saves memory and returns the exit status. SIGHUP rescans the
// manifest folder. Boot is fail-open: a skill that does not load is
// disabled and the health is DEGRADED; only what makes serving impossible
// (a listener that cannot bind, an unusable state folder) fails start().
//
// Thread affinity: start(), serve() and the destructor on one thread that is
// none of the daemon's own (the process's main thread); request_stop() and
// the accessors from any thread.
class Daemon {
 public:
  static Result<std::unique_ptr<Daemon>> start(DaemonConfig config);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Serves until a stop is requested, then shuts down; returns 0 after a
  // clean stop, 1 when saving memory failed.
  int serve();
  // Begins the stop serve() is waiting for, as SIGTERM does. Idempotent.
  void request_stop(std::string_view why);

  // The bound TCP port (0 without TCP) and the Unix socket.
  std::uint16_t tcp_port() const noexcept;
  const std::filesystem::path& socket_path() const noexcept;
  HealthReport health() const;

  struct Impl;

 private:
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// True for an address only this machine can reach: 127.0.0.0/8, ::1, "localhost".
bool is_loopback_address(std::string_view address);

}  // namespace passepartout
