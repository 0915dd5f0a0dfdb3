// Admitting accepted sockets as connections (or refusing them at a limit), and
// preparing the Unix socket's path.
#include "daemon/listener.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "daemon/close_on_exec.hpp"
#include "daemon/connection.hpp"

namespace passepartout::detail {

namespace {

// Sends a refused connection away for almost nothing: the error response in
// one non-blocking write, then closed at once (no connection, no read
// buffer, no linger). A client that sent bytes first may see a reset instead.
void refuse(const std::shared_ptr<ServerState>& server, GenericSocket& socket, const Value& rejection) {
  auto frame = server->codec.encode(rejection);
  error_code ignored;
  socket.non_blocking(true, ignored);
  if (frame) socket.write_some(asio::buffer(*frame), ignored);  // the error instead of the handshake
  socket.shutdown(asio::socket_base::shutdown_both, ignored);
  socket.close(ignored);
}

}  // namespace

namespace {

// The open TCP connection to close so that one more fits, when one may be:
// from `group` when given, else from all. The caller holds connections_mutex.
std::shared_ptr<Connection> choose_eviction(ServerState& server, const std::string* group,
                                            ServerState::Registered*& chosen) {
  std::shared_ptr<Connection> victim;
  Standing victim_standing;
  chosen = nullptr;
  for (auto& [id, registered] : server.connections) {
    if (!registered.counted || registered.transport != Transport::tcp) continue;
    if (group != nullptr && registered.group != *group) continue;
    auto connection = registered.connection.lock();
    if (!connection) continue;
    const Standing standing = connection->standing();
    if (!standing.evictable) continue;
    if (!victim || evict_before(standing, victim_standing)) {
      victim = std::move(connection);
      victim_standing = standing;
      chosen = &registered;
    }
  }
  return victim;
}

}  // namespace

void admit(const std::shared_ptr<ServerState>& server, GenericSocket socket, ConnectionInfo info, PeerGroup group) {
  set_close_on_exec(socket.native_handle());  // accepted without SOCK_CLOEXEC (close_on_exec.hpp)
  info.connection_id = server->next_connection_id.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t id = info.connection_id;
  const bool tcp = info.transport == Transport::tcp;
  if (!tcp) group.key.clear();
  std::optional<Value> rejection;
  std::shared_ptr<Connection> evicted;
  std::string eviction_reason;
  {
    std::lock_guard lock(server->connections_mutex);
    const ServerOptions& options = server->options;
    if (server->draining) {
      rejection = make_error_response(wire_error::kShuttingDown, "the daemon is stopping");
    } else if (!tcp && server->open_unix >= options.max_unix_connections) {
      rejection = make_error_response(wire_error::kBusy, "too many connections on the Unix socket (the limit is " +
                                                             std::to_string(options.max_unix_connections) + ")");
    } else if (tcp) {
      // At a limit, the connection that has done least for longest makes
      // room (admission.hpp); only when none may, the newcomer is refused.
      const auto in_group = server->per_peer.find(group.key);
      const bool group_full =
          in_group != server->per_peer.end() && in_group->second >= options.max_connections_per_peer;
      const bool all_full = server->open_tcp >= options.max_connections;
      if (group_full || all_full) {
        const std::string limit =
            group_full ? "too many connections from " + group.describe() + " (the limit is " +
                             std::to_string(options.max_connections_per_peer) + ")"
                       : "too many TCP connections (the limit is " + std::to_string(options.max_connections) + ")";
        ServerState::Registered* chosen = nullptr;
        evicted = choose_eviction(*server, group_full ? &group.key : nullptr, chosen);
        if (evicted) {
          eviction_reason = limit;
          server->uncount(*chosen);
        } else {
          rejection = make_error_response(wire_error::kBusy, limit + "; every one of them is authenticated or busy");
        }
      }
    }
    if (!rejection) {
      if (tcp) {
        ++server->open_tcp;
        ++server->per_peer[group.key];
      } else {
        ++server->open_unix;
      }
    }
  }
  if (evicted) {
    server->connections_evicted.fetch_add(1, std::memory_order_relaxed);
    const ConnectionInfo& old = evicted->info();
    server->admission_warnings.warn(fmt::format(
        "connection {} ({}) closed to make room for connection {} from {}: {}; of those that may be closed, it had "
        "done the least for the longest",
        old.connection_id, old.peer, id, info.peer, eviction_reason));
    evicted->evict("closed to make room for a newer connection: " + eviction_reason);
  }
  if (rejection) {
    server->connections_rejected.fetch_add(1, std::memory_order_relaxed);
    server->admission_warnings.warn(fmt::format("connection {} from {} refused: {}", id, info.peer,
                                                rejection->path({"PAYLOAD", "MESSAGE"}).text()));
    refuse(server, socket, *rejection);
    return;
  }
  // Not make_shared: reply sinks may keep weak references long after the
  // connection is gone, and they should not keep its buffers allocated.
  // NOLINTNEXTLINE(modernize-make-shared): weak references must not pin the connection's memory
  auto connection = std::shared_ptr<Connection>(new Connection(server, std::move(socket), std::move(info)));
  {
    std::lock_guard lock(server->connections_mutex);
    server->connections.emplace(
        id, ServerState::Registered{connection, tcp ? Transport::tcp : Transport::unix_socket, std::move(group.key)});
    server->connections_total.fetch_add(1, std::memory_order_relaxed);
  }
  server->connections_changed.notify_all();
  connection->start();
}

Result<void> prepare_unix_path(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return fail(ErrorCode::invalid_input, "unix socket path '" + path + "' is " + std::to_string(path.size()) +
                                              " bytes, the limit is " +
                                              std::to_string(sizeof(sockaddr_un{}.sun_path) - 1));
  }
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) {
    const int error = errno;
    if (error == ENOENT) return {};
    return fail(ErrorCode::io_error, "cannot inspect unix socket path '" + path + "': " + errno_text(error));
  }
  if (!S_ISSOCK(status.st_mode)) {
    return fail(ErrorCode::refused, "unix socket path '" + path + "' exists and is not a socket; not replacing it");
  }
  // Non-blocking, so a live server with a full backlog answers EAGAIN instead of blocking us.
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe < 0) return fail(ErrorCode::io_error, "cannot create a socket: " + errno_text(errno));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  const int connected = ::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int error = errno;
  ::close(probe);
  if (connected == 0 || error == EAGAIN || error == EINPROGRESS) {
    return fail(ErrorCode::refused, "another server answers on unix socket '" + path + "'");
  }
  if (error != ECONNREFUSED) {
    return fail(ErrorCode::io_error, "cannot probe unix socket '" + path + "': " + errno_text(error));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return fail(ErrorCode::io_error, "cannot remove stale unix socket '" + path + "': " + errno_text(errno));
  }
  log_message(LogLevel::info, kComponent, "removed stale unix socket '{}'", path);
  return {};
}

}  // namespace passepartout::detail
