// The real daemon: `passepartout daemon` run as a child process with the
// scripted provider and every bundled skill, measured from outside over TCP
// loopback: request round trip, throughput with 64 clients (and the CPU each
// request took in the daemon and in the clients, which share the machine's
// cores), cold start and idle memory.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "daemon/frame_codec.hpp"
#include "support/loopback.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

#include "daemon_process.hpp"

namespace {
namespace fs = std::filesystem;
using namespace passepartout;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using namespace passepartout::bench;

constexpr int kWarmup = 1000;
constexpr int kRttRequests = 20000;
constexpr int kClients = 64;
constexpr auto kRpsDuration = 2s;
constexpr int kColdStarts = 5;

// The same requests to the floor server, which answers each with
// `reply_bytes` bytes and nothing else.
class FloorClient {
 public:
  FloorClient(std::uint16_t port, std::size_t reply_bytes, std::string token)
      : fd_(connect_client(port)), buffer_(reply_bytes, '\0'), token_(std::move(token)) {}
  ~FloorClient() { ::close(fd_); }
  FloorClient(const FloorClient&) = delete;
  FloorClient& operator=(const FloorClient&) = delete;

  void chat(long id) {
    frame_request(id, token_, frame_);
    send_all(fd_, frame_);
    std::size_t got_total = 0;
    while (got_total < buffer_.size()) {
      const ssize_t got = ::recv(fd_, buffer_.data() + got_total, buffer_.size() - got_total, 0);
      if (got <= 0) die("the floor server stopped answering");
      got_total += static_cast<std::size_t>(got);
    }
  }

 private:
  int fd_;
  std::string buffer_;
  std::string token_;
  std::string frame_;
};

template <typename MakeClient>
std::vector<double> round_trips(MakeClient make_client) {
  std::vector<double> rtt;
  rtt.reserve(kRttRequests);
  auto client = make_client();
  long id = 0;
  for (int i = 0; i < kWarmup; ++i) client->chat(++id);
  for (int i = 0; i < kRttRequests; ++i) {
    const auto sent = Clock::now();
    client->chat(++id);
    rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - sent).count());
  }
  return rtt;
}

// CPU time (user and system) of this process, the clients' side, in microseconds.
double own_cpu_us() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto us = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec); };
  return us(usage.ru_utime) + us(usage.ru_stime);
}

// What kClients connections got through, and the CPU it took on each side.
struct Throughput {
  double requests_per_s = 0;
  double server_cpu_us_per_request = 0;  // the server process, kernel time included
  double client_cpu_us_per_request = 0;  // the clients (this process), kernel time included
};

// Requests per second of kClients connections, one thread each, making
// sequential requests for kRpsDuration to `server`.
template <typename MakeClient>
Throughput throughput(const ServerProcess& server, MakeClient make_client) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<long> completed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&] {
      auto client = make_client();
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      long id = 0, done = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        client->chat(++id);
        ++done;
      }
      completed.fetch_add(done);
    });
  }
  while (ready.load() < kClients) std::this_thread::sleep_for(1ms);
  const double server_cpu = server.cpu_us();
  const double client_cpu = own_cpu_us();
  const auto began = Clock::now();
  go.store(true);
  std::this_thread::sleep_for(kRpsDuration);
  stop.store(true);
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - began).count();
  const auto requests = static_cast<double>(completed.load());
  return {requests / seconds, (server.cpu_us() - server_cpu) / requests, (own_cpu_us() - client_cpu) / requests};
}

void BM_Daemon(benchmark::State& state) {
  for (auto _ : state) {
    // Cold starts: fresh temp dir each time, spawn to `listening on`.
    std::vector<double> starts;
    for (int i = 0; i < kColdStarts; ++i) {
      Scratch scratch;
      ServerProcess daemon(scratch.root, daemon_args(scratch.root));
      starts.push_back(std::chrono::duration<double, std::milli>(daemon.start_time()).count());
      if (!daemon.stop()) die("the daemon did not stop cleanly on SIGTERM:\n" + daemon.log());
    }

    std::size_t reply_bytes = 0;
    std::string token;  // the daemon's: the floor clients send the same bytes
    std::vector<double> rtt;
    Throughput rps;
    double idle_rss = 0;
    {
      Scratch scratch;
      ServerProcess daemon(scratch.root, daemon_args(scratch.root));
      std::this_thread::sleep_for(500ms);
      idle_rss = daemon.rss_mb();
      token = slurp(scratch.root / "token");
      while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
      rtt = round_trips([&] {
        auto client = std::make_unique<Client>(daemon.port(), token);
        client->chat(0);
        reply_bytes = client->received();
        return client;
      });
      rps = throughput(daemon, [&] { return std::make_unique<Client>(daemon.port(), token); });
      if (!daemon.stop()) die("the daemon did not stop cleanly on SIGTERM:\n" + daemon.log());
    }

    // The same clients against a server that only answers, with the
    // daemon's message sizes: what the machine's loopback and scheduler cost.
    std::vector<double> floor_rtt;
    Throughput floor_rps;
    {
      Scratch scratch;
      ServerProcess floor(scratch.root, {PP_FLOOR_SERVER_EXE, std::to_string(reply_bytes)});
      floor_rtt = round_trips([&] { return std::make_unique<FloorClient>(floor.port(), reply_bytes, token); });
      floor_rps = throughput(floor, [&] { return std::make_unique<FloorClient>(floor.port(), reply_bytes, token); });
    }

    state.counters["rtt_p50_us"] = percentile(rtt, 0.50);
    state.counters["rtt_p99_us"] = percentile(rtt, 0.99);
    state.counters["rps_64_clients"] = rps.requests_per_s;
    state.counters["daemon_cpu_us_per_request"] = rps.server_cpu_us_per_request;
    state.counters["client_cpu_us_per_request"] = rps.client_cpu_us_per_request;
    state.counters["cold_start_ms"] = percentile(starts, 0.50);
    state.counters["idle_rss_mb"] = idle_rss;
    state.counters["floor_rtt_p50_us"] = percentile(floor_rtt, 0.50);
    state.counters["floor_rps_64_clients"] = floor_rps.requests_per_s;
    state.counters["floor_cpu_us_per_request"] = floor_rps.server_cpu_us_per_request;
    state.counters["floor_client_cpu_us_per_request"] = floor_rps.client_cpu_us_per_request;
    state.counters["reply_bytes"] = static_cast<double>(reply_bytes);
  }
}

}  // namespace

BENCHMARK(BM_Daemon)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
