// The daemon as a child process: posix_spawn, pipes read with poll() deadlines.
#include "integration/daemon_process.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "value/sexp_printer.hpp"

namespace passepartout::testing {
namespace fs = std::filesystem;

std::string as_daemon_user() { return ::geteuid() == 0 ? "    user: root\n" : ""; }

std::string read_text_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void copy_bundled_skills(const fs::path& plugins, const fs::path& manifests) {
  fs::create_directories(plugins);
  fs::create_directories(manifests);
  for (const auto& entry : fs::directory_iterator(PP_PLUGIN_DIR)) {
    if (entry.path().extension() == ".so") fs::copy_file(entry.path(), plugins / entry.path().filename());
  }
  for (const auto& entry : fs::directory_iterator(PP_MANIFEST_DIR)) {
    fs::copy_file(entry.path(), manifests / entry.path().filename());
  }
}
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Spawns the executable with stdin from /dev/null (or, given `in_fd`, from a
// pipe whose write end it returns there), stdout into a pipe (its read end
// returned in `out_fd`) and stderr into `err_file`.
pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& env, int& out_fd,
            const fs::path& err_file, int* in_fd = nullptr) {
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  int input_fds[2] = {-1, -1};
  if (in_fd != nullptr) REQUIRE(::pipe2(input_fds, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (in_fd != nullptr) {
    posix_spawn_file_actions_adddup2(&actions, input_fds[0], 0);
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> argv_strings{PP_PASSEPARTOUT_EXE};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<std::string> env_strings = env;
  auto argv = c_strings(argv_strings);
  auto envp = c_strings(env_strings);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, PP_PASSEPARTOUT_EXE, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (in_fd != nullptr) ::close(input_fds[0]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    if (in_fd != nullptr) ::close(input_fds[1]);
    FAIL("posix_spawn " << PP_PASSEPARTOUT_EXE << ": " << std::strerror(spawned));
  }
  out_fd = pipe_fds[0];
  if (in_fd != nullptr) *in_fd = input_fds[1];
  return pid;
}

// Reads from `fd` until `done(text)` or EOF or the deadline; returns what was read.
template <class Done>
std::string read_until(int fd, Clock::time_point deadline, Done done) {
  std::string text;
  char buffer[4096];
  while (!done(text)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got <= 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  return text;
}

// Polls waitpid until the child exits or the deadline passes (a short nap
// between polls: a child's exit has no descriptor to wait on here).
std::optional<int> wait_child(pid_t pid, Clock::time_point deadline, bool& reaped) {
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      reaped = true;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return std::nullopt;
    }
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(5ms);
  }
}

}  // namespace

std::vector<std::string> hermetic_env(const fs::path& home) {
  std::vector<std::string> env{"HOME=" + home.string(), "LANG=C.UTF-8"};
  for (const char* name :
       {"PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "LD_LIBRARY_PATH"}) {
    if (const char* value = std::getenv(name)) env.push_back(std::string(name) + "=" + value);
  }
  return env;
}

ProcessRun run_passepartout(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  TempDir scratch;
  int out_fd = -1;
  const pid_t pid = spawn(args, env, out_fd, scratch.path() / "stderr");
  const auto deadline = Clock::now() + kProcessWait;
  ProcessRun run;
  run.out = read_until(out_fd, deadline, [](const std::string&) { return false; });  // to EOF
  ::close(out_fd);
  bool reaped = false;
  auto status = wait_child(pid, deadline, reaped);
  if (!reaped) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  run.exit_status = status.value_or(-1);
  run.err = read_text_file(scratch.path() / "stderr");
  return run;
}

ProcessRun run_passepartout(const std::vector<std::string>& args, const std::vector<std::string>& env,
                            std::string_view input) {
  InteractiveProcess process(args, env);
  process.write(input);
  return process.finish();
}

InteractiveProcess::InteractiveProcess(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  ::signal(SIGPIPE, SIG_IGN);  // a child that exited early makes write() fail, not the test die
  pid_ = spawn(args, env, out_fd_, dir_.path() / "stderr", &in_fd_);
}

InteractiveProcess::~InteractiveProcess() {
  if (in_fd_ >= 0) ::close(in_fd_);
  if (out_fd_ >= 0) ::close(out_fd_);
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void InteractiveProcess::write(std::string_view text) {
  REQUIRE(in_fd_ >= 0);
  while (!text.empty()) {
    const ssize_t put = ::write(in_fd_, text.data(), text.size());
    if (put < 0 && errno == EINTR) continue;
    REQUIRE(put > 0);
    text.remove_prefix(static_cast<std::size_t>(put));
  }
}

bool InteractiveProcess::wait_for_output(std::string_view text, std::size_t count, std::chrono::milliseconds timeout) {
  auto seen = [&](const std::string& so_far) {
    std::size_t n = 0;
    for (auto at = so_far.find(text); at != std::string::npos; at = so_far.find(text, at + text.size())) ++n;
    return n >= count;
  };
  const auto deadline = Clock::now() + timeout;
  while (!seen(out_)) {
    const std::string more = read_until(out_fd_, deadline, [](const std::string& got) { return !got.empty(); });
    if (more.empty()) return seen(out_);  // the deadline, or the end of its output
    out_ += more;
  }
  return true;
}

std::string InteractiveProcess::err() const { return read_text_file(dir_.path() / "stderr"); }

ProcessRun InteractiveProcess::finish() {
  if (in_fd_ >= 0) ::close(in_fd_);
  in_fd_ = -1;
  const auto deadline = Clock::now() + kProcessWait;
  ProcessRun run;
  run.out = out_ + read_until(out_fd_, deadline, [](const std::string&) { return false; });  // to EOF
  ::close(out_fd_);
  out_fd_ = -1;
  const auto status = wait_child(pid_, deadline, reaped_);
  run.exit_status = status.value_or(-1);
  run.err = err();
  return run;
}

DaemonProcess::DaemonProcess(Options options) : socket_(options.socket) {
  const fs::path script = dir_.path() / "script.yaml";
  std::ofstream(script) << options.script;
  std::vector<std::string> args{"daemon",
                                "--port",
                                "0",
                                "--socket",
                                socket_path().string(),
                                "--state-dir",
                                state_dir().string(),
                                "--provider",
                                options.provider,
                                "--script",
                                script.string(),
                                "--context-log-limit",
                                "0",
                                "--heartbeat-interval",
                                "0"};
  if (!options.metrics_port.empty()) {
    args.push_back("--metrics-port");
    args.push_back(options.metrics_port);
  }
  if (options.copy_manifests) {
    fs::create_directories(manifest_dir());
    for (const auto& entry : fs::directory_iterator(PP_MANIFEST_DIR)) {
      fs::copy_file(entry.path(), manifest_dir() / entry.path().filename());
    }
    if (options.edit_manifests) options.edit_manifests(manifest_dir());
    args.push_back("--manifests");
    args.push_back(manifest_dir().string());
  }
  if (!options.state_from.empty()) fs::copy(options.state_from, state_dir(), fs::copy_options::recursive);
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<std::string> env = hermetic_env(dir_.path());
  env.insert(env.end(), options.extra_env.begin(), options.extra_env.end());

  int out_fd = -1;
  pid_ = spawn(args, env, out_fd, dir_.path() / "daemon.log");
  constexpr std::string_view kPrefix = "listening on 127.0.0.1:";
  const std::string out = read_until(out_fd, Clock::now() + kProcessWait, [&](const std::string& text) {
    const std::size_t at = text.find(kPrefix);
    return at != std::string::npos && text.find('\n', at) != std::string::npos;
  });
  ::close(out_fd);  // the daemon prints nothing more on stdout
  const std::size_t at = out.find(kPrefix);
  if (at != std::string::npos) port_ = static_cast<std::uint16_t>(std::stoi(out.substr(at + kPrefix.size())));
  if (port_ == 0) FAIL("the daemon did not start; stdout:\n" << out << "\nlog:\n" << log());
  constexpr std::string_view kMetrics = "metrics on 127.0.0.1:";
  if (const std::size_t m = out.find(kMetrics); m != std::string::npos) {
    metrics_port_ = static_cast<std::uint16_t>(std::stoi(out.substr(m + kMetrics.size())));
  }
}

DaemonProcess::~DaemonProcess() {
  if (pid_ <= 0 || reaped_) return;
  // A daemon that ended on its own while the test thought it ran (a crash, a
  // sanitizer's report) leaves its log on standard error: the temporary
  // folder holding it goes with this object.
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    const std::string how = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                              : "was killed by signal " + std::to_string(WTERMSIG(status));
    const std::string text = log();
    constexpr std::size_t kTail = 16384;
    std::fprintf(stderr, "the test's daemon (pid %d) %s before the test ended; the end of its log:\n%s\n",
                 static_cast<int>(pid_), how.c_str(),
                 text.size() > kTail ? text.substr(text.size() - kTail).c_str() : text.c_str());
    return;
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

std::string DaemonProcess::log() const { return read_text_file(dir_.path() / "daemon.log"); }

bool DaemonProcess::wait_for_log(std::string_view text, std::chrono::milliseconds timeout) const {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    if (log().find(text) != std::string::npos) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);  // the daemon appends to the file; polled, like wait_child
  }
}

std::string DaemonProcess::token() const {
  std::string text = read_text_file(state_dir() / "token");
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

void DaemonProcess::signal(int number) const { REQUIRE(::kill(pid_, number) == 0); }

std::optional<int> DaemonProcess::wait_exit(std::chrono::milliseconds timeout) {
  return wait_child(pid_, Clock::now() + timeout, reaped_);
}

std::string user_input(std::string_view text, std::string_view request_id, std::string_view token) {
  std::string message =
      "(:TYPE :EVENT :META (:SOURCE :TUI) :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"" + std::string(text) + "\"))";
  if (!request_id.empty()) message.insert(message.size() - 1, " :REQUEST-ID \"" + std::string(request_id) + "\"");
  if (!token.empty()) message.insert(message.size() - 1, " :AUTH \"" + std::string(token) + "\"");
  return message;
}

std::string exchange(WireClient& client, const std::string& message, std::string_view request_id) {
  client.send(message);
  std::string seen;
  for (;;) {
    const Value frame = client.expect_frame();
    seen += to_sexp(frame) + "\n";
    if (frame.at("REQUEST-ID").text() == request_id) return seen;
  }
}

std::string converse(WireClient& client, std::string_view text, std::string_view request_id) {
  return exchange(client, user_input(text, request_id), request_id);
}

std::string ask(const DaemonProcess& daemon, std::string_view text, std::string_view request_id) {
  WireClient user = WireClient::local(daemon.socket_path());
  user.expect_handshake();
  return converse(user, text, request_id);
}

std::string ask_for_approval(const DaemonProcess& daemon, std::string_view text, std::string_view request_id) {
  WireClient client = WireClient::local(daemon.socket_path());
  client.expect_handshake();
  client.send(user_input(text, request_id));
  std::string token;
  for (;;) {
    const Value frame = client.expect_frame();
    INFO(to_sexp(frame));
    if (frame.path({"PAYLOAD", "SENSOR"}).is_keyword("APPROVAL-REQUIRED")) {
      token = std::string(frame.path({"PAYLOAD", "TOKEN"}).text());
    }
    if (frame.at("REQUEST-ID").text() == request_id) break;
  }
  REQUIRE(token.size() == 32);
  return token;
}

}  // namespace passepartout::testing
