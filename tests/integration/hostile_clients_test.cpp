// Clients that hold connections and do nothing useful with them, against the
// real daemon's two TCP listeners (the framed protocol and the metrics
// endpoint): idle ones, ones sending their request a byte a second, ones
// pipelining requests whose answers they never read, and another local user
// reconnecting as fast as it is cut off. Throughout, a well-behaved client
// asks every 100 ms, on a fresh connection each time, as a liveness probe
// does: every request must be answered, none refused. Its latencies are
// printed (p50 and p99), not asserted: the promise is "answered".
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/frame_codec.hpp"
#include "daemon/protocol.hpp"
#include "integration/daemon_process.hpp"
#include "support/http_client.hpp"
#include "support/loopback.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;
using testing::DaemonProcess;
using testing::WireClient;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kScript = R"(rules:
  - match: '(?i)\bhello\b'
    reply: "Hello! How can I help?"
)";

constexpr int kAsks = 20;  // the well-behaved client's requests per scenario, 100 ms apart
constexpr auto kCadence = 100ms;
constexpr int kHostile = 200;               // idle and slow connections
constexpr int kPipelining = 64;             // connections pipelining requests they never read
constexpr int kPipelinedRequests = 10'000;  // each

DaemonProcess::Options daemon_options() {
  DaemonProcess::Options options;
  options.script = std::string(kScript);
  options.metrics_port = "0";
  return options;
}

// The daemon's open descriptors and resident memory, from /proc.
struct Footprint {
  long descriptors = 0;
  long resident_kib = 0;
};

Footprint footprint_of(pid_t pid) {
  Footprint footprint;
  const fs::path proc = fs::path("/proc") / std::to_string(pid);
  std::error_code ignored;
  for (auto it = fs::directory_iterator(proc / "fd", ignored); it != fs::directory_iterator(); it.increment(ignored)) {
    ++footprint.descriptors;
  }
  std::ifstream status(proc / "status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) footprint.resident_kib = std::stol(line.substr(6));
  }
  return footprint;
}

// Latencies of one kind of request, for the output.
struct Latencies {
  std::string what;
  std::vector<double> ms;
  void add(Clock::duration took) { ms.push_back(std::chrono::duration<double, std::milli>(took).count()); }
  std::string summary() {
    std::sort(ms.begin(), ms.end());
    const auto at = [&](double q) {
      if (ms.empty()) return 0.0;
      return ms[std::min(ms.size() - 1, static_cast<std::size_t>(q * static_cast<double>(ms.size())))];
    };
    for (double m : ms) std::printf("%.1f ", m);
    char text[160];
    std::snprintf(text, sizeof text, "%s: %zu answered, p50 %.1f ms, p99 %.1f ms", what.c_str(), ms.size(), at(0.5),
                  at(0.99));
    return text;
  }
};

// Connections a hostile client holds, and what it does with them.
enum class Behaviour { idle, slow, pipelining };
enum class Listener { framed, metrics };

class Hostile {
 public:
  Hostile(Behaviour behaviour, Listener listener, std::uint16_t port, int count)
      : behaviour_(behaviour), listener_(listener) {
    for (int i = 0; i < count; ++i) {
      const int fd = testing::connect_loopback(port);
      REQUIRE(fd >= 0);
      if (behaviour == Behaviour::pipelining) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      fds_.push_back(fd);
    }
    if (behaviour == Behaviour::slow) {
      // Half a request, then a byte a second.
      const std::string start = listener == Listener::metrics ? "GET /metr" : "0000";
      for (const int fd : fds_) (void)!::send(fd, start.data(), start.size(), MSG_NOSIGNAL);
    }
    if (behaviour == Behaviour::pipelining) {
      const std::string one = listener == Listener::metrics
                                  ? std::string("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                                  : *FrameCodec(FrameLimits{}).encode(*read_sexp("(:TYPE :HEALTH-CHECK)"));
      for (int i = 0; i < kPipelinedRequests; ++i) requests_ += one;
      sent_.assign(fds_.size(), 0);
    }
    thread_ = std::thread([this] { run(); });
  }
  ~Hostile() { stop(); }
  Hostile(const Hostile&) = delete;
  Hostile& operator=(const Hostile&) = delete;

  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    for (const int fd : fds_) ::close(fd);
    fds_.clear();
  }

 private:
  void run() {
    int tick = 0;
    while (!stop_.load()) {
      if (behaviour_ == Behaviour::slow && tick % 50 == 0) {
        const char byte = listener_ == Listener::metrics ? 'i' : '0';
        for (const int fd : fds_) (void)!::send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      if (behaviour_ == Behaviour::pipelining) {
        // As much as the sockets take, never reading a reply.
        for (std::size_t i = 0; i < fds_.size(); ++i) {
          while (sent_[i] < requests_.size()) {
            const ssize_t sent =
                ::send(fds_[i], requests_.data() + sent_[i], requests_.size() - sent_[i], MSG_NOSIGNAL | MSG_DONTWAIT);
            if (sent <= 0) break;
            sent_[i] += static_cast<std::size_t>(sent);
          }
        }
      }
      ++tick;
      std::this_thread::sleep_for(20ms);  // the hostile client's own pace; the test waits on nothing here
    }
  }

  const Behaviour behaviour_;
  const Listener listener_;
  std::vector<int> fds_;
  std::string requests_;
  std::vector<std::size_t> sent_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A child process, as the unprivileged user nobody, holding `count`
// connections to each port and reconnecting each one the moment the daemon
// closes it. Single-threaded, and only async-signal-safe calls after the fork.
class ChurningUser {
 public:
  ChurningUser(std::vector<std::uint16_t> ports, int count) {
    int ready[2];
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(stop_, O_CLOEXEC) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(stop_[1]);  // or its poll would never see the parent's end
      ::close(ready[0]);
      run(ports, count, ready[1], stop_[0]);
    }
    ::close(ready[1]);
    ::close(stop_[0]);
    char ok = 0;
    REQUIRE(::read(ready[0], &ok, 1) == 1);
    ::close(ready[0]);
    REQUIRE(ok == 'y');
  }
  ~ChurningUser() {
    ::close(stop_[1]);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  ChurningUser(const ChurningUser&) = delete;
  ChurningUser& operator=(const ChurningUser&) = delete;

 private:
  [[noreturn]] static void run(const std::vector<std::uint16_t>& ports, int count, int ready, int stop) {
    constexpr int kMax = 512;
    pollfd polled[kMax + 1];
    std::uint16_t port_of[kMax];
    int n = 0;
    char ok = 'n';
    if (::setgid(65534) == 0 && ::setuid(65534) == 0) {
      ok = 'y';
      for (const std::uint16_t port : ports) {
        for (int i = 0; i < count && n < kMax; ++i, ++n) {
          polled[n] = {testing::connect_loopback(port), POLLIN, 0};
          port_of[n] = port;
          if (polled[n].fd < 0) ok = 'n';
        }
      }
    }
    (void)!::write(ready, &ok, 1);
    polled[n] = {stop, POLLIN, 0};
    for (;;) {
      if (::poll(polled, static_cast<nfds_t>(n + 1), 1000) < 0) continue;
      if (polled[n].revents != 0) ::_exit(0);
      for (int i = 0; i < n; ++i) {
        if (polled[i].revents == 0) continue;
        char sink[4096];
        const ssize_t got = polled[i].fd >= 0 ? ::recv(polled[i].fd, sink, sizeof sink, 0) : 0;
        if (got > 0) continue;  // what the daemon said on closing it
        if (polled[i].fd >= 0) ::close(polled[i].fd);
        polled[i].fd = testing::connect_loopback(port_of[i]);  // at once: as fast as it is cut off
      }
    }
  }

  pid_t pid_ = -1;
  int stop_[2] = {-1, -1};
};

// The well-behaved metrics client: /healthz and /metrics on fresh connections.
void scrape_every_100ms(std::uint16_t port, Latencies& health, Latencies& metrics) {
  auto next = Clock::now();
  for (int i = 0; i < kAsks; ++i) {
    auto start = Clock::now();
    const auto healthz = testing::http_get(port, "/healthz");
    INFO("ask " << i);
    REQUIRE(healthz.status == 200);
    health.add(Clock::now() - start);
    start = Clock::now();
    const auto scrape = testing::http_get(port, "/metrics");
    REQUIRE(scrape.status == 200);
    metrics.add(Clock::now() - start);
    next += kCadence;
    std::this_thread::sleep_until(next);  // the client's cadence, not a wait for the daemon
  }
}

// The well-behaved framed client: a health check and a chat with the token,
// each on a fresh TCP connection.
void ask_every_100ms(const DaemonProcess& daemon, Latencies& health, Latencies& chat) {
  const std::string token = daemon.token();
  auto next = Clock::now();
  for (int i = 0; i < kAsks; ++i) {
    INFO("ask " << i);
    auto start = Clock::now();
    {
      WireClient client = WireClient::tcp(daemon.port());
      client.expect_handshake();  // a BUSY refusal instead fails here
      client.send("(:TYPE :HEALTH-CHECK :AUTH \"" + token + "\")");
      REQUIRE(is_health_response(client.expect_frame()));
    }
    health.add(Clock::now() - start);
    start = Clock::now();
    {
      WireClient client = WireClient::tcp(daemon.port());
      client.expect_handshake();
      const std::string id = "probe-" + std::to_string(i);
      const std::string seen = testing::exchange(client, testing::user_input("hello", id, token), id);
      REQUIRE(seen.find("Hello! How can I help?") != std::string::npos);
    }
    chat.add(Clock::now() - start);
    next += kCadence;
    std::this_thread::sleep_until(next);  // the client's cadence, not a wait for the daemon
  }
}

// Waits until the daemon holds no more descriptors than `bound` (the hostile
// connections it closed, gone); false when it still does after 15 s.
bool descriptors_settle(pid_t pid, long bound) {
  const auto until = Clock::now() + 15s;
  while (footprint_of(pid).descriptors > bound) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(20ms);  // polls /proc
  }
  return true;
}

const char* name_of(Behaviour behaviour) {
  switch (behaviour) {
    case Behaviour::idle:
      return "idle";
    case Behaviour::slow:
      return "slow";
    case Behaviour::pipelining:
      return "pipelining";
  }
  return "?";
}

// The daemon's connection figures from status, over the Unix socket.
Value status_payload(const DaemonProcess& daemon) {
  WireClient op = WireClient::local(daemon.socket_path());
  op.expect_handshake();
  op.send("(:TYPE :OPERATOR :COMMAND :STATUS)");
  const Value response = op.expect_frame();
  REQUIRE(is_ok_response(response));
  return response.at("PAYLOAD");
}

}  // namespace

TEST_CASE("idle, slow and pipelining TCP clients cannot keep a well-behaved one from the daemon or its metrics",
          "[integration][hostile][concurrency]") {
  const std::vector<Behaviour> behaviours = {Behaviour::idle, Behaviour::slow, Behaviour::pipelining};
  for (const Listener listener : {Listener::metrics, Listener::framed}) {
    for (const Behaviour behaviour : behaviours) {
      const std::string scenario =
          std::string(listener == Listener::metrics ? "metrics" : "framed") + ", " + name_of(behaviour);
      DYNAMIC_SECTION(scenario) {
        DaemonProcess daemon(daemon_options());
        REQUIRE(daemon.metrics_port() != 0);
        const Footprint before = footprint_of(daemon.pid());
        const int count = behaviour == Behaviour::pipelining ? kPipelining : kHostile;
        Hostile hostile(behaviour, listener, listener == Listener::metrics ? daemon.metrics_port() : daemon.port(),
                        count);
        Latencies first{listener == Listener::metrics ? "GET /healthz" : "health check", {}};
        Latencies second{listener == Listener::metrics ? "GET /metrics" : "chat", {}};
        if (listener == Listener::metrics) {
          scrape_every_100ms(daemon.metrics_port(), first, second);
        } else {
          ask_every_100ms(daemon, first, second);
        }
        const Footprint during = footprint_of(daemon.pid());
        std::printf("%s: %s; %s\n", scenario.c_str(), first.summary().c_str(), second.summary().c_str());
        std::printf("%s: descriptors %ld -> %ld, resident %ld -> %ld KiB\n", scenario.c_str(), before.descriptors,
                    during.descriptors, before.resident_kib, during.resident_kib);
        // Bounded by the per-user limits (64 framed, 16 metrics) and what is being closed.
        CHECK(during.descriptors <= before.descriptors + 64 + 16 + 16);
#if !defined(__SANITIZE_ADDRESS__)  // its quarantine keeps freed memory resident (256 MiB by default)
        CHECK(during.resident_kib - before.resident_kib < 256 * 1024);
#endif

        const Value status = status_payload(daemon);
        const std::int64_t evicted =
            status.at(listener == Listener::metrics ? "METRICS-EVICTED" : "CONNECTIONS-EVICTED").as_integer();
        CHECK(evicted >= 1);
        CHECK(status.at("CONNECTIONS-REFUSED").as_integer() == 0);
        hostile.stop();
        CHECK(descriptors_settle(daemon.pid(), before.descriptors + 4));
        // A flood of evictions is a line a minute in the log, not a line each.
        const std::string log = daemon.log();
        std::size_t lines = 0;
        for (std::size_t at = log.find("to make room"); at != std::string::npos;
             at = log.find("to make room", at + 1)) {
          ++lines;
        }
        CHECK(lines <= 2);
        CHECK(::kill(daemon.pid(), 0) == 0);
      }
    }
  }
}

TEST_CASE("another local user reconnecting as fast as it is cut off cannot lock a user out of either listener",
          "[integration][hostile][concurrency]") {
  if (::geteuid() != 0) {
    WARN("skipped: needs root to connect as another user");
    return;
  }
  DaemonProcess daemon(daemon_options());
  REQUIRE(daemon.metrics_port() != 0);
  ChurningUser nobody({daemon.port(), daemon.metrics_port()}, kHostile);
  Latencies health{"health check", {}};
  Latencies chat{"chat", {}};
  ask_every_100ms(daemon, health, chat);
  Latencies healthz{"GET /healthz", {}};
  Latencies metrics{"GET /metrics", {}};
  scrape_every_100ms(daemon.metrics_port(), healthz, metrics);
  std::printf("another user churning: %s; %s; %s; %s\n", health.summary().c_str(), chat.summary().c_str(),
              healthz.summary().c_str(), metrics.summary().c_str());
  // The other user's connections made room among themselves, never from ours.
  const Value status = status_payload(daemon);
  CHECK(status.at("CONNECTIONS-EVICTED").as_integer() >= 1);
  CHECK(status.at("METRICS-EVICTED").as_integer() >= 1);
  CHECK(::kill(daemon.pid(), 0) == 0);
}

}  // namespace passepartout
