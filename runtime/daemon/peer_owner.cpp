// The owner of a loopback TCP peer, from the kernel's socket diagnostics
// (linux/inet_diag.h): an exact lookup of one socket, not a dump of all.
#include "daemon/peer_owner.hpp"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "base/errno_text.hpp"
#include "base/log.hpp"

namespace passepartout {

namespace {

constexpr std::string_view kComponent = "daemon";

// The addresses of one end as the diagnostics name them (network order).
struct End {
  int family = AF_UNSPEC;
  std::array<std::uint32_t, 4> address{};
  std::uint16_t port = 0;  // network order
};

bool is_v4_loopback(std::uint32_t address_network_order) noexcept {
  return (ntohl(address_network_order) >> 24) == 127;
}

// `storage` as an End, with a v4-mapped IPv6 address (::ffff:127.0.0.1) as
// the IPv4 one: the peer's socket is then an IPv4 socket, and found as one.
bool end_of(const sockaddr_storage& storage, End& end) noexcept {
  if (storage.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(storage);
    end.family = AF_INET;
    end.address[0] = in.sin_addr.s_addr;
    end.port = in.sin_port;
    return true;
  }
  if (storage.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(storage);
    end.port = in6.sin6_port;
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      end.family = AF_INET;
      std::memcpy(end.address.data(), &in6.sin6_addr.s6_addr[12], 4);
    } else {
      end.family = AF_INET6;
      std::memcpy(end.address.data(), in6.sin6_addr.s6_addr, 16);
    }
    return true;
  }
  return false;
}

bool is_loopback(const End& end) noexcept {
  if (end.family == AF_INET) return is_v4_loopback(end.address[0]);
  return end.family == AF_INET6 && end.address[0] == 0 && end.address[1] == 0 && end.address[2] == 0 &&
         ntohl(end.address[3]) == 1;  // ::1
}

}  // namespace

LoopbackOwners::~LoopbackOwners() {
  if (netlink_ >= 0) ::close(netlink_);
}

std::optional<uid_t> LoopbackOwners::owner_of(int fd) {
  sockaddr_storage local{};
  sockaddr_storage peer{};
  socklen_t local_size = sizeof local;
  socklen_t peer_size = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0) {
    return std::nullopt;
  }
  End ours;
  End theirs;
  if (!end_of(local, ours) || !end_of(peer, theirs) || !is_loopback(theirs) || ours.family != theirs.family) {
    return std::nullopt;
  }
  if (unavailable_) return std::nullopt;
  if (netlink_ < 0) {
    netlink_ = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (netlink_ < 0) {
      unavailable_ = true;
      log_message(LogLevel::warn, kComponent,
                  "cannot ask the kernel who owns a loopback connection ({}): TCP limits count loopback peers by "
                  "address, so all local users share them",
                  errno_text(errno));
      return std::nullopt;
    }
    // The kernel answers at once; the bound only keeps a wedged answer from holding the listener.
    const timeval bound{0, 100'000};
    ::setsockopt(netlink_, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  }

  // The peer's socket: its source is the peer, its destination us.
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } message{};
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST;
  message.header.nlmsg_seq = ++sequence_;
  message.request.sdiag_family = static_cast<std::uint8_t>(theirs.family);
  message.request.sdiag_protocol = IPPROTO_TCP;
  message.request.idiag_states = ~0U;
  message.request.id.idiag_sport = theirs.port;
  message.request.id.idiag_dport = ours.port;
  std::memcpy(message.request.id.idiag_src, theirs.address.data(), sizeof message.request.id.idiag_src);
  std::memcpy(message.request.id.idiag_dst, ours.address.data(), sizeof message.request.id.idiag_dst);
  message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(netlink_, &message, sizeof message, 0, reinterpret_cast<const sockaddr*>(&kernel), sizeof kernel) !=
      static_cast<ssize_t>(sizeof message)) {
    return std::nullopt;
  }
  // One answer: the socket (inet_diag_msg and its attributes), or an error.
  alignas(nlmsghdr) std::array<char, 8192> answer{};
  for (;;) {
    const ssize_t got = ::recv(netlink_, answer.data(), answer.size(), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < static_cast<ssize_t>(sizeof(nlmsghdr))) return std::nullopt;
    // (NLMSG_OK and NLMSG_DATA, without their C casts.)
    nlmsghdr header{};
    std::memcpy(&header, answer.data(), sizeof header);
    if (header.nlmsg_len < sizeof header || header.nlmsg_len > static_cast<std::size_t>(got)) return std::nullopt;
    if (header.nlmsg_seq != sequence_) continue;  // a late answer to an earlier lookup that timed out
    constexpr std::size_t kHeaderSize = (sizeof(nlmsghdr) + NLMSG_ALIGNTO - 1) & ~std::size_t{NLMSG_ALIGNTO - 1};
    if (header.nlmsg_type != SOCK_DIAG_BY_FAMILY || header.nlmsg_len < kHeaderSize + sizeof(inet_diag_msg)) {
      return std::nullopt;  // NLMSG_ERROR: no such socket (it closed meanwhile), or not allowed
    }
    inet_diag_msg found_message{};
    std::memcpy(&found_message, answer.data() + kHeaderSize, sizeof found_message);
    const inet_diag_msg* found = &found_message;
    return static_cast<uid_t>(found->idiag_uid);
  }
}

std::string PeerGroup::describe() const {
  if (key.rfind("uid ", 0) == 0) return "local user " + key.substr(4);
  return key;
}

PeerGroup peer_group(LoopbackOwners& owners, int fd, const std::string& address) {
  if (const auto owner = owners.owner_of(fd)) return PeerGroup{"uid " + std::to_string(*owner)};
  return PeerGroup{address};
}

}  // namespace passepartout
