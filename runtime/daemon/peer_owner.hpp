// Who is on the other end of a TCP connection, for the listeners' limits:
// the local user owning a loopback peer, else the peer's address.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace passepartout {

// Every local user connects from 127.0.0.1, so a limit per address lets one
// user's connections lock out every other's. For a loopback peer the kernel
// knows better: its socket diagnostics (NETLINK_SOCK_DIAG, what `ss -e`
// reads) look the peer's own socket up by the connection's four addresses
// and name the user owning it. No privilege is needed (the owner is in
// /proc/net/tcp for anyone to read).
//
// One lookup is one netlink request and its answer, some microseconds.
// Not thread-safe: one per listener, used on its strand.
class LoopbackOwners {
 public:
  LoopbackOwners() = default;
  ~LoopbackOwners();
  LoopbackOwners(const LoopbackOwners&) = delete;
  LoopbackOwners& operator=(const LoopbackOwners&) = delete;

  // The user owning the peer's socket of the accepted TCP socket `fd` when
  // that peer is on a loopback address; nothing when it is not, or when the
  // kernel does not say (no such socket any more, diagnostics unavailable).
  std::optional<uid_t> owner_of(int fd);

 private:
  int netlink_ = -1;
  bool unavailable_ = false;  // the netlink socket could not be opened: not tried again
  unsigned sequence_ = 0;
};

// What a connection's limits count it under: "uid 1000" for a loopback peer
// whose owner is known, else its address ("127.0.0.1", "::1", "10.0.0.7").
// Never the port.
struct PeerGroup {
  std::string key;
  // For messages: "local user 1000" or "127.0.0.1".
  std::string describe() const;
};

// The group of accepted TCP socket `fd` whose peer address is `address`.
PeerGroup peer_group(LoopbackOwners& owners, int fd, const std::string& address);

}  // namespace passepartout
