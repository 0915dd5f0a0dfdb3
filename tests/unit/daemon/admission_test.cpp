// Which connection makes room at a limit, the throttled line that says so,
// and who owns a loopback peer.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "base/log.hpp"
#include "daemon/admission.hpp"
#include "daemon/peer_owner.hpp"
#include "support/loopback.hpp"

namespace passepartout {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A listening loopback socket on a free port, and a connection to it accepted.
struct AcceptedPair {
  int listener = -1;
  int client = -1;
  int accepted = -1;
  AcceptedPair() {
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    REQUIRE(::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listener, 4) == 0);
    REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size) == 0);
    client = testing::connect_loopback(ntohs(address.sin_port));
    REQUIRE(client >= 0);
    accepted = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    REQUIRE(accepted >= 0);
  }
  ~AcceptedPair() {
    for (const int fd : {accepted, client, listener}) {
      if (fd >= 0) ::close(fd);
    }
  }
  AcceptedPair(const AcceptedPair&) = delete;
  AcceptedPair& operator=(const AcceptedPair&) = delete;
};

}  // namespace

TEST_CASE("a connection that never spoke makes room before one that did, then the longest without progress",
          "[daemon]") {
  const Clock::time_point t0 = Clock::now();
  const Standing silent_new{true, false, t0 + 5s, 2};
  const Standing silent_old{true, false, t0, 1};
  const Standing spoke_old{true, true, t0 - 60s, 3};
  const Standing spoke_new{true, true, t0 + 1s, 4};
  CHECK(evict_before(silent_new, spoke_old));  // never spoke goes first, however recent
  CHECK_FALSE(evict_before(spoke_old, silent_new));
  CHECK(evict_before(silent_old, silent_new));
  CHECK(evict_before(spoke_old, spoke_new));
  CHECK_FALSE(evict_before(spoke_new, spoke_new));
  // Of two silent ones, the one admitted first, whenever its handshake went out.
  const Standing silent_first_written_late{true, false, t0 + 9s, 1};
  CHECK(evict_before(silent_first_written_late, silent_new));
}

TEST_CASE("a throttled warning is logged at most once an interval, with the count held back", "[daemon]") {
  LogCapture capture;
  ThrottledWarning warning("daemon", 60s);
  const Clock::time_point t0 = Clock::now();
  warning.warn("connection 1 refused", t0);
  warning.warn("connection 2 refused", t0 + 1s);
  warning.warn("connection 3 refused", t0 + 59s);
  warning.warn("connection 4 refused", t0 + 61s);
  warning.warn("connection 5 refused", t0 + 62s);
  const auto lines = capture.lines();
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].find("connection 1 refused") != std::string::npos);
  CHECK(lines[1].find("connection 4 refused (2 more like it since the last such line)") != std::string::npos);
}

TEST_CASE("the owner of a loopback peer is the user that opened it, as the kernel says", "[daemon]") {
  AcceptedPair pair;
  LoopbackOwners owners;
  const auto owner = owners.owner_of(pair.accepted);
  REQUIRE(owner.has_value());
  CHECK(*owner == ::geteuid());
  // Looked up again, on the same netlink socket.
  CHECK(owners.owner_of(pair.accepted) == owner);
  const PeerGroup group = peer_group(owners, pair.accepted, "127.0.0.1");
  CHECK(group.key == "uid " + std::to_string(::geteuid()));
  CHECK(group.describe() == "local user " + std::to_string(::geteuid()));
}

TEST_CASE("a socket that is not a TCP connection has no loopback owner, and groups by its address", "[daemon]") {
  int pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
  LoopbackOwners owners;
  CHECK_FALSE(owners.owner_of(pair[0]).has_value());
  CHECK(peer_group(owners, pair[0], "10.0.0.7").key == "10.0.0.7");
  CHECK(peer_group(owners, pair[0], "10.0.0.7").describe() == "10.0.0.7");
  ::close(pair[0]);
  ::close(pair[1]);
}

}  // namespace passepartout
