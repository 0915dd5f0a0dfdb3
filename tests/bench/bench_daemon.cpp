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

namespace {
namespace fs = std::filesystem;
using namespace passepartout;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::chrono::seconds kWait{30};
constexpr int kWarmup = 1000;
constexpr int kRttRequests = 20000;
constexpr int kClients = 64;
constexpr auto kRpsDuration = 2s;
constexpr int kColdStarts = 5;

// The daemon running now, killed by die() so that no child outlives the bench.
std::atomic<pid_t> live_daemon{-1};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "bench_daemon: %s\n", message.c_str());
  if (const pid_t pid = live_daemon.load(); pid > 0) ::kill(pid, SIGKILL);
  std::exit(1);
}

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A temp dir with the script in it, removed at the end.
struct Scratch {
  fs::path root;
  Scratch() {
    std::random_device random;
    root = fs::temp_directory_path() / ("passepartout-bench-daemon-" + std::to_string(random()));
    fs::create_directories(root);
    std::ofstream(root / "script.yaml") << "rules:\n  - match: \"ping\"\n    reply: \"pong\"\n";
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

// A server run as a child process, stdout a pipe, stderr `dir`/daemon.log;
// construction returns once it printed `listening on 127.0.0.1:<port>`.
class ServerProcess {
 public:
  ServerProcess(const fs::path& dir, std::vector<std::string> args) : dir_(dir) {
    std::vector<std::string> env{"HOME=" + dir.string(), "LANG=C.UTF-8"};
    for (const char* name : {"PATH", "LD_LIBRARY_PATH"}) {
      if (const char* value = std::getenv(name)) env.push_back(std::string(name) + "=" + value);
    }
    auto c_strings = [](std::vector<std::string>& strings) {
      std::vector<char*> out;
      for (auto& s : strings) out.push_back(s.data());
      out.push_back(nullptr);
      return out;
    };
    auto argv = c_strings(args);
    auto envp = c_strings(env);

    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) die("pipe2 failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    const std::string log_file = (dir / "daemon.log").string();
    posix_spawn_file_actions_addopen(&actions, 2, log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);

    const auto started = Clock::now();
    const int spawned = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_fds[1]);
    if (spawned == 0) live_daemon.store(pid_);
    if (spawned != 0) {
      ::close(pipe_fds[0]);
      die("posix_spawn " + args[0] + ": " + std::strerror(spawned));
    }

    // Reads stdout until the `listening on 127.0.0.1:<port>` line is complete.
    constexpr std::string_view kPrefix = "listening on 127.0.0.1:";
    const auto deadline = started + kWait;
    std::string out;
    char buffer[4096];
    for (;;) {
      const std::size_t at = out.find(kPrefix);
      if (at != std::string::npos && out.find('\n', at) != std::string::npos) break;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      pollfd p{pipe_fds[0], POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      const ssize_t got = ::read(pipe_fds[0], buffer, sizeof buffer);
      if (got <= 0) break;
      out.append(buffer, static_cast<std::size_t>(got));
    }
    start_time_ = Clock::now() - started;
    ::close(pipe_fds[0]);  // the daemon prints nothing more on stdout
    const std::size_t at = out.find(kPrefix);
    if (at != std::string::npos) port_ = static_cast<std::uint16_t>(std::stoi(out.substr(at + kPrefix.size())));
    if (port_ == 0) die(args[0] + " did not start; stdout:\n" + out + "\nlog:\n" + slurp(dir / "daemon.log"));
  }

  ~ServerProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    live_daemon.store(-1);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  pid_t pid() const noexcept { return pid_; }
  Clock::duration start_time() const noexcept { return start_time_; }

  // SIGTERM, then waits (SIGKILL after kWait). False when it did not exit cleanly.
  bool stop() {
    ::kill(pid_, SIGTERM);
    live_daemon.store(-1);
    const auto deadline = Clock::now() + kWait;
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
      }
      if (Clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        reaped_ = true;
        return false;
      }
      std::this_thread::sleep_for(2ms);
    }
  }

  // CPU time (user and system) the server has used so far, in microseconds.
  double cpu_us() const {
    std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const std::size_t name_end = text.rfind(')');  // the command name may hold spaces
    if (name_end == std::string::npos) die("no /proc stat for the server");
    std::istringstream fields(text.substr(name_end + 2));
    std::string field;
    for (int i = 3; i < 14; ++i) fields >> field;  // state .. cmajflt: fields 3 to 13
    double user = 0, system = 0;
    fields >> user >> system;  // utime, stime: fields 14 and 15, in clock ticks
    return (user + system) * 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }

  // VmRSS of the daemon, in MiB.
  double rss_mb() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
    }
    die("no VmRSS for the daemon");
  }

  std::string log() const { return slurp(dir_ / "daemon.log"); }

 private:
  fs::path dir_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::uint16_t port_ = 0;
  Clock::duration start_time_{};
};

// `passepartout daemon` in `dir` with the scripted provider and every bundled skill.
std::vector<std::string> daemon_args(const fs::path& dir) {
  return {PP_PASSEPARTOUT_EXE, "daemon",        "--port",     "0",          "--socket", (dir / "s.sock").string(),
          "--state-dir",       dir.string(),    "--provider", "scripted",   "--script", (dir / "script.yaml").string(),
          "--manifests",       PP_MANIFEST_DIR, "--plugins",  PP_PLUGIN_DIR};
}

// A client connection to the server under test: no Nagle delay, reads bounded by kWait.
int connect_client(std::uint16_t port) {
  const int fd = testing::connect_loopback(port);
  if (fd < 0) die(std::string("connect: ") + std::strerror(-fd));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval timeout{};
  timeout.tv_sec = kWait.count();
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent <= 0) die(std::string("send: ") + std::strerror(errno));
    bytes.remove_prefix(static_cast<std::size_t>(sent));
  }
}

// The chat request every client sends, framed, with `id` as its :REQUEST-ID
// and the daemon's `token` (every TCP request carries it, as the CLI's do).
void frame_request(long id, const std::string& token, std::string& frame) {
  std::string text = "(:TYPE :EVENT :META (:SOURCE :TUI) :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"ping\") :REQUEST-ID \"";
  text += std::to_string(id);
  text += "\" :AUTH \"";
  text += token;
  text += "\")";
  auto message = read_sexp(text);
  if (!message) die("the request does not read: " + message.error().message);
  frame.clear();
  if (!FrameCodec().encode_into(*message, frame)) die("the request could not be framed");
}

// A blocking TCP client of the daemon: sends chat requests and reads frames
// up to the :RESPONSE that ends each exchange.
class Client {
 public:
  Client(std::uint16_t port, std::string token) : fd_(connect_client(port)), token_(std::move(token)) {
    const Value hello = read_frame();
    if (!hello.path({"PAYLOAD", "ACTION"}).is_keyword("HANDSHAKE")) die("no handshake: " + to_sexp(hello));
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // One chat exchange: "ping" in, frames until the :RESPONSE with its id.
  void chat(long id) {
    frame_request(id, token_, frame_);
    send_all(fd_, frame_);
    received_ = 0;
    const std::string request_id = std::to_string(id);
    bool replied = false;
    for (;;) {
      const Value frame = read_frame();
      if (frame.at("TYPE").is_keyword("RESPONSE") && frame.at("REQUEST-ID").text() == request_id) {
        if (!frame.at("STATUS").is_keyword("OK")) die("the exchange failed: " + to_sexp(frame));
        break;
      }
      if (frame.path({"PAYLOAD", "TEXT"}).text() == "pong") replied = true;
    }
    if (!replied) die("the exchange ended without the scripted reply");
  }

  // Bytes the daemon sent for the last exchange (its reply and the response).
  std::size_t received() const noexcept { return received_; }

 private:
  Value read_frame() {
    for (;;) {
      if (auto message = decoder_.next()) return std::move(*message);
      if (decoder_.failed()) die("the client could not decode a frame: " + decoder_.error()->message);
      char buffer[8192];
      const ssize_t got = ::recv(fd_, buffer, sizeof buffer, 0);
      if (got == 0) die("the daemon closed the connection");
      if (got < 0) die(std::string("recv: ") + std::strerror(errno));
      received_ += static_cast<std::size_t>(got);
      decoder_.feed(std::string_view(buffer, static_cast<std::size_t>(got)));
    }
  }

  int fd_;
  std::string token_;
  FrameDecoder decoder_;
  std::string frame_;
  std::size_t received_ = 0;
};

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

double percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

// Round trips of one client making sequential requests, in microseconds.
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
