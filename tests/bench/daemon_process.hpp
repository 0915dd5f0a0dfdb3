// The real daemon as a child process and a blocking client of it, for the
// benchmarks that measure it from outside (bench_daemon, bench_providers).
#pragma once

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
#include <optional>
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

namespace passepartout::bench {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::chrono::seconds kWait{30};

// The daemon running now, killed by die() so that no child outlives the bench.
inline std::atomic<pid_t> live_daemon{-1};

[[noreturn]] inline void die(const std::string& message) {
  std::fprintf(stderr, "bench: %s\n", message.c_str());
  if (const pid_t pid = live_daemon.load(); pid > 0) ::kill(pid, SIGKILL);
  std::exit(1);
}

inline std::string slurp(const fs::path& file) {
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
  // `extra_env`: NAME=value entries added to the child's small environment.
  ServerProcess(const fs::path& dir, std::vector<std::string> args, const std::vector<std::string>& extra_env = {})
      : dir_(dir) {
    std::vector<std::string> env{"HOME=" + dir.string(), "LANG=C.UTF-8"};
    env.insert(env.end(), extra_env.begin(), extra_env.end());
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
    constexpr std::string_view kMetrics = "metrics on 127.0.0.1:";
    if (const std::size_t m = out.find(kMetrics); m != std::string::npos) {
      metrics_port_ = static_cast<std::uint16_t>(std::stoi(out.substr(m + kMetrics.size())));
    }
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
  // The metrics endpoint's port (`metrics on 127.0.0.1:<port>`); 0 when it has none.
  std::uint16_t metrics_port() const noexcept { return metrics_port_; }
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
  std::uint16_t metrics_port_ = 0;
  Clock::duration start_time_{};
};

// `passepartout daemon` in `dir` with the scripted provider and every bundled skill.
inline std::vector<std::string> daemon_args(const fs::path& dir) {
  return {PP_PASSEPARTOUT_EXE,
          "daemon",
          "--port",
          "0",
          "--socket",
          (dir / "s.sock").string(),
          "--state-dir",
          dir.string(),
          "--provider",
          "scripted",
          "--script",
          (dir / "script.yaml").string(),
          "--manifests",
          PP_MANIFEST_DIR,
          "--plugins",
          PP_PLUGIN_DIR,
          "--metrics-port",
          "0"};
}

// A client connection to the server under test: no Nagle delay, reads bounded by kWait.
inline int connect_client(std::uint16_t port) {
  const int fd = testing::connect_loopback(port);
  if (fd < 0) die(std::string("connect: ") + std::strerror(-fd));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval timeout{};
  timeout.tv_sec = kWait.count();
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

inline void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent <= 0) die(std::string("send: ") + std::strerror(errno));
    bytes.remove_prefix(static_cast<std::size_t>(sent));
  }
}

// The chat request every client sends, framed, with `id` as its :REQUEST-ID
// and the daemon's `token` (every TCP request carries it, as the CLI's do);
// on the session `session` when one is given.
inline void frame_request(long id, const std::string& token, std::string& frame, std::string_view session = {}) {
  std::string text = "(:TYPE :EVENT :META (:SOURCE :TUI";
  if (!session.empty()) {
    text += " :SESSION-ID \"";
    text += session;
    text += '"';
  }
  text += ") :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"ping\") :REQUEST-ID \"";
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

  // Sends the chat request `id` ("ping"), on `session` when one is given.
  void send_chat(long id, std::string_view session = {}) {
    frame_request(id, token_, frame_, session);
    send_all(fd_, frame_);
  }

  // One chat exchange: "ping" in, frames until the :RESPONSE with its id.
  void chat(long id, std::string_view session = {}) {
    send_chat(id, session);
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

  int fd() const noexcept { return fd_; }

  // The next frame if one is complete with what the socket holds now, else
  // nothing: for a caller polling many clients.
  std::optional<Value> try_read_frame() {
    for (;;) {
      if (auto message = decoder_.next()) return std::move(*message);
      if (decoder_.failed()) die("the client could not decode a frame: " + decoder_.error()->message);
      char buffer[8192];
      const ssize_t got = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return std::nullopt;
      if (got == 0) die("the daemon closed the connection");
      if (got < 0) die(std::string("recv: ") + std::strerror(errno));
      received_ += static_cast<std::size_t>(got);
      decoder_.feed(std::string_view(buffer, static_cast<std::size_t>(got)));
    }
  }

  // The next frame from the daemon, waiting for it.
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

 private:
  int fd_;
  std::string token_;
  FrameDecoder decoder_;
  std::string frame_;
  std::size_t received_ = 0;
};

inline double percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

// Round trips of one client making sequential requests, in microseconds.
}  // namespace passepartout::bench
