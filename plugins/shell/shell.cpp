// shell: the shell actuator. Runs the command of an approved `:TARGET :SHELL`
// action with `<shell> -c` in the configured working directory, inside the
// sandbox (sandbox.hpp), bounded in time and output, and answers as the seed's
// shell actuator did (I3).
#include <passepartout/skill.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox.hpp"
#include "skill_config.hpp"
#include "skill_text.hpp"
#include "unique_fd.hpp"

namespace {

using passepartout::Action;
using passepartout::Signal;
using passepartout::ValueRef;
using passepartout::bundled::decimal;
using passepartout::bundled::error_text;
using passepartout::bundled::expand_home;
using passepartout::bundled::Fd;
using passepartout::bundled::positive_integer;
using passepartout::bundled::string_list;
using passepartout::shell::Launch;
using passepartout::shell::Sandbox;

using Clock = std::chrono::steady_clock;

constexpr double kDefaultTimeout = 30.0;                  // seconds (seed I3)
constexpr double kDefaultTimeoutLimit = 600.0;            // seconds
constexpr std::int64_t kDefaultMaxOutput = 100000;        // characters (seed I3)
constexpr std::int64_t kDefaultMaxOutputLimit = 1000000;  // characters
// After the command exits, how long to wait for the pipes to close: a command
// that leaves a background process holding them must not run into its timeout.
constexpr std::chrono::milliseconds kDrainAfterExit{100};

// What a command's environment holds of the daemon's without being asked for
// (config pass_env adds names).
constexpr const char* kPassedEnvironment[] = {"PATH",     "SHELL",       "LANG", "LC_ALL",
                                              "LC_CTYPE", "LC_MESSAGES", "TERM", "TZ"};
// What the skill sets itself, whatever the daemon's environment or pass_env say.
constexpr const char* kSetEnvironment[] = {"HOME", "USER", "LOGNAME", "TMPDIR"};

// Seconds as the seed printed them: an integer without a fraction, else the shortest form.
std::string seconds_text(double seconds) {
  char buffer[64];
  if (seconds == static_cast<double>(static_cast<long long>(seconds))) {
    std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(seconds));
  } else {
    std::snprintf(buffer, sizeof buffer, "%g", seconds);
  }
  return buffer;
}

// --- config ------------------------------------------------------------------------

// A positive number of seconds at `key`, or `fallback` when absent.
double positive_seconds(const ValueRef& config, std::string_view key, std::string_view name, double fallback) {
  const ValueRef value = config.get(key);
  if (value.is_nil()) return fallback;
  if ((!value.is_integer() && !value.is_float()) || !(value.as_float() > 0.0)) {
    throw std::invalid_argument("config " + std::string(name) + ": expected a positive number of seconds, got " +
                                value.print());
  }
  return value.as_float();
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// --- text ----------------------------------------------------------------------------

// Length of the well-formed UTF-8 sequence at the start of `text`, or 0 when
// it is ill-formed (overlong, surrogate, above U+10FFFF or truncated).
std::size_t utf8_sequence(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

// `bytes` as valid UTF-8: each ill-formed byte becomes U+FFFD (what a process
// writes need not be text, and a string value must be).
std::string as_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    const std::size_t length = utf8_sequence(bytes);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      bytes.remove_prefix(1);
    } else {
      out.append(bytes.data(), length);
      bytes.remove_prefix(length);
    }
  }
  return out;
}

// Byte length of the first `count` code points of valid UTF-8 `text`, or
// npos when it holds no more than `count` code points.
std::size_t prefix_of_code_points(std::string_view text, std::size_t count) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0U) != 0x80U) {
      if (seen == count) return i;
      ++seen;
    }
  }
  return std::string_view::npos;
}

// --- running a command -----------------------------------------------------------------

// Bytes read from one pipe, keeping at most `limit` of them.
struct Capture {
  std::string bytes;
  std::size_t limit = 0;
  bool dropped = false;

  void append(const char* data, std::size_t n) {
    const std::size_t room = limit - bytes.size();
    if (n > room) dropped = true;
    bytes.append(data, n < room ? n : room);
  }
};

struct Outcome {
  bool timed_out = false;
  int exit_code = 0;  // 128 + signal when a signal ended it
  Capture out;
  Capture err;
};

// Reads what is available on `fd` into `capture`; false at end of file or on error.
bool drain(int fd, Capture& capture) {
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      capture.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
}

// Whether the child has exited, without reaping it (its pid, and so its
// process group id, stays reserved until waitpid).
bool has_exited(pid_t pid) {
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
  return info.si_pid == pid;
}

int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Kills and reaps a child that is still unreaped when it goes out of scope,
// so that no failure on the way leaves a process or a zombie behind.
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid) : pid_(pid) {}
  ~ChildGuard() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    reap(pid_);
  }
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  // Reaps the child now and returns its exit code (see reap).
  int release() {
    const int code = reap(pid_);
    pid_ = -1;
    return code;
  }

 private:
  pid_t pid_;
};

// Runs `<shell> -c <command>` in the sandbox with stdin from /dev/null,
// reading stdout and stderr (at most `limit` bytes of each) until it exits or
// `timeout` passes; on timeout its whole process group is killed. The child is
// always reaped before this returns, and no descriptor of it is left open.
Outcome run(const Sandbox& sandbox, const std::string& shell, const std::string& command, char* const* envp,
            std::chrono::nanoseconds timeout, std::size_t limit) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error("shell: cannot create a pipe: " + error_text(errno));
  }
  Fd out_read(out_pipe[0]);
  Fd out_write(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error("shell: cannot create a pipe: " + error_text(errno));
  }
  Fd err_read(err_pipe[0]);
  Fd err_write(err_pipe[1]);
  // The child's ends block (a command writing faster than it is read must
  // wait, not fail with EAGAIN); each end of a pipe has its own flags.
  ::fcntl(out_write.get(), F_SETFL, 0);
  ::fcntl(err_write.get(), F_SETFL, 0);

  std::string shell_arg = shell;
  std::string dash_c = "-c";
  std::string command_arg = command;
  char* argv[] = {shell_arg.data(), dash_c.data(), command_arg.data(), nullptr};
  const pid_t pid = sandbox.spawn(Launch{shell.c_str(), argv, envp, out_write.get(), err_write.get()});
  ChildGuard child(pid);
  out_write.reset();
  err_write.reset();

  // Exit notification without a thread or a signal handler: a pidfd polls
  // readable when the child exits. Without one (old kernel), poll in short steps.
  Fd exit_fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));

  Outcome outcome;
  outcome.out.limit = limit;
  outcome.err.limit = limit;
  const Clock::time_point deadline = Clock::now() + timeout;
  Clock::time_point stop_at = deadline;
  bool exited = false;
  for (;;) {
    if (!exited && has_exited(pid)) {
      exited = true;
      stop_at = std::min(deadline, Clock::now() + kDrainAfterExit);
    }
    if (exited && !out_read.is_open() && !err_read.is_open()) break;
    const Clock::time_point now = Clock::now();
    if (now >= stop_at) {
      outcome.timed_out = !exited;
      break;
    }
    auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(stop_at - now).count() + 1;
    if (!exit_fd.is_open() && !exited && wait_ms > 10) wait_ms = 10;

    pollfd fds[3];
    nfds_t count = 0;
    if (out_read.is_open()) fds[count++] = pollfd{out_read.get(), POLLIN, 0};
    if (err_read.is_open()) fds[count++] = pollfd{err_read.get(), POLLIN, 0};
    if (exit_fd.is_open() && !exited) fds[count++] = pollfd{exit_fd.get(), POLLIN, 0};
    if (::poll(fds, count, static_cast<int>(wait_ms)) < 0 && errno != EINTR) {
      throw std::runtime_error("shell: poll failed: " + error_text(errno));
    }
    if (out_read.is_open() && !drain(out_read.get(), outcome.out)) out_read.reset();
    if (err_read.is_open() && !drain(err_read.get(), outcome.err)) err_read.reset();
  }

  // Whatever the command started and left running in its process group
  // (`cmd &`, `nohup cmd &`) ends with it, timed out or not: an action's
  // effects stop when its answer is given. Not reaped yet, so the group id is
  // still this child's: no stranger can be hit. (A process that made itself
  // a new session escapes, as it would any process group.)
  ::kill(-pid, SIGKILL);
  if (outcome.timed_out) ::kill(pid, SIGKILL);
  outcome.exit_code = child.release();
  return outcome;
}

// Whether `text` (valid UTF-8) is longer than `cap` characters.
bool is_longer(const std::string& text, std::size_t cap) {
  return prefix_of_code_points(text, cap) != std::string_view::npos;
}

// `text` (valid UTF-8) cut to `cap` characters with the seed's note, or unchanged.
std::string capped(const std::string& text, std::size_t cap) {
  const std::size_t cut = prefix_of_code_points(text, cap);
  if (cut == std::string_view::npos) return text;
  return text.substr(0, cut) + "\n... (output truncated to " + decimal(static_cast<long long>(cap)) + " chars)";
}

// Immutable after construction: act() may run on any number of threads at once.
class Shell final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "shell";
  static constexpr const char kVersion[] = "1.0.0";
  static constexpr passepartout::ConfigKeySpec kConfig[] = {
      {"workdir", "string", nullptr, "Required: the folder commands run in, their HOME"},
      {"shell", "string", "/bin/bash (else /bin/sh)", "The shell that runs commands"},
      {"timeout", "number", "30", "Seconds a command may run unless the action asks for less or more"},
      {"timeout_limit", "number", "600", "The most seconds an action may ask for"},
      {"max_output", "integer", "100000", "Characters of output kept unless the action asks otherwise"},
      {"max_output_limit", "integer", "1000000", "The most characters of output an action may ask for"},
      {"pass_env", "list", "[]", "More environment variables passed to commands"},
      {"user", "string", "nobody", "When the daemon is root, commands run as this user (never root)"},
      {"allow_root", "boolean", "false", "true: commands run as root (user is ignored), with a warning"},
      {"network", "boolean", "false", "false: commands cannot open network sockets (seccomp)"},
      {"limits", "map", nullptr, "Per-process limits (setrlimit), each a positive integer"},
      {"disable_landlock_for_test", "boolean", "false", "Tests only: run without the Landlock file rules"}};
  static constexpr const char* kActuators[] = {"shell"};
  static constexpr passepartout::ActuatorSpec kActuatorSpecs[] = {
      {"Runs one shell command in the workspace folder (its HOME) and answers its exit status and output",
       R"json({"type":"object","properties":{)json"
       R"json("cmd":{"type":"string","description":"The command line, run by the shell"},)json"
       R"json("explanation":{"type":"string","description":"Why this command is run, for the security gates and the human who may approve it"},)json"
       R"json("timeout":{"type":"number","description":"Seconds it may run (default 30)"},)json"
       R"json("max-output":{"type":"integer","description":"Characters of output kept (default 100000)"}},)json"
       R"json("required":["cmd","explanation"]})json"}};

  explicit Shell(const ValueRef& config)
      : timeout_(positive_seconds(config, "TIMEOUT", "timeout", kDefaultTimeout)),
        timeout_limit_(positive_seconds(config, "TIMEOUT_LIMIT", "timeout_limit", kDefaultTimeoutLimit)),
        max_output_(positive_integer(config, "MAX_OUTPUT", "max_output", kDefaultMaxOutput)),
        max_output_limit_(positive_integer(config, "MAX_OUTPUT_LIMIT", "max_output_limit", kDefaultMaxOutputLimit)) {
    const ValueRef workdir = config.get("WORKDIR");
    if (!workdir.is_string() || workdir.text().empty()) {
      throw std::invalid_argument("config workdir: required, the folder commands run in; got " + workdir.print());
    }
    workdir_ = expand_home(std::string(workdir.text()));
    if (!is_directory(workdir_)) {
      throw std::invalid_argument("config workdir: '" + workdir_ + "' is not an existing folder");
    }
    const ValueRef shell = config.get("SHELL");
    if (shell.is_nil()) {
      shell_ = is_executable("/bin/bash") ? "/bin/bash" : "/bin/sh";
    } else if (!shell.is_string() || !is_executable(std::string(shell.text()))) {
      throw std::invalid_argument("config shell: expected the path of an executable shell, got " + shell.print());
    } else {
      shell_ = std::string(shell.text());
    }
    if (timeout_ > timeout_limit_) {
      throw std::invalid_argument("config timeout: " + seconds_text(timeout_) + " s is above timeout_limit (" +
                                  seconds_text(timeout_limit_) + " s)");
    }
    if (max_output_ > max_output_limit_) {
      throw std::invalid_argument("config max_output: " + decimal(max_output_) + " is above max_output_limit (" +
                                  decimal(max_output_limit_) + ")");
    }
    std::vector<std::string> names(std::begin(kPassedEnvironment), std::end(kPassedEnvironment));
    for (std::string& name : string_list(config, "PASS_ENV", "pass_env", {})) names.push_back(std::move(name));

    sandbox_.emplace(config, workdir_);
    for (const Sandbox::Notice& notice : sandbox_->notices()) {
      if (notice.is_warning) {
        log_warn(notice.text);
      } else {
        log_info(notice.text);
      }
    }
    log_info(sandbox_->description());

    // The command's environment: a few variables a shell needs, and those
    // the operator names, read once at load; never the daemon's whole
    // environment, which holds the providers' API keys. HOME is the
    // workdir: a command's dotfiles land in its workspace, not the daemon's home.
    environment_ = {"HOME=" + workdir_, "USER=" + sandbox_->user_name(), "LOGNAME=" + sandbox_->user_name(),
                    std::string("TMPDIR=") + Sandbox::kTemporaryFolder};
    for (const std::string& name : names) {
      const bool is_set =
          std::find(std::begin(kSetEnvironment), std::end(kSetEnvironment), name) != std::end(kSetEnvironment);
      if (is_set) continue;
      if (const char* value = std::getenv(name.c_str())) environment_.push_back(name + "=" + value);
    }
    for (std::string& entry : environment_) envp_.push_back(entry.data());
    envp_.push_back(nullptr);
  }

  // The seed's contract (I3), in its order: timeout, then truncation, then the exit code.
  ValueRef act(std::string_view /*target*/, const Action& action, const Signal& /*signal*/) override {
    const ValueRef payload = action.get("PAYLOAD");
    const ValueRef cmd = payload.get("CMD");
    if (!cmd.is_string()) throw std::invalid_argument("shell: :PAYLOAD :CMD must be a string, got " + cmd.print());
    const std::string command(cmd.text());
    if (command.find('\0') != std::string::npos) throw std::invalid_argument("shell: the command contains a NUL byte");

    const double seconds = requested_timeout(payload.get("TIMEOUT"));
    const std::size_t cap = requested_cap(payload.get("MAX-OUTPUT"));
    // Keep one character more than the cap, at up to 4 bytes each, to tell
    // "exactly the cap" from "longer": memory stays bounded whatever the command prints.
    const std::size_t keep = (cap + 1) * 4;
    const Outcome outcome =
        run(*sandbox_, shell_, command, envp_.data(),
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(seconds)), keep);

    const passepartout::Context ctx = action.context();
    if (outcome.timed_out || outcome.exit_code == 124) {
      return ctx.string("ERROR: Command timed out after " + seconds_text(seconds) + " seconds");
    }
    // Bytes were dropped only past (cap + 1) * 4 of them, which hold more than cap characters.
    const std::string out = as_utf8(outcome.out.bytes);
    if (outcome.out.dropped || is_longer(out, cap)) return ctx.string(capped(out, cap));
    if (outcome.exit_code == 0) return ctx.string(out);
    return ctx.string("ERROR [" + decimal(outcome.exit_code) + "]: " + capped(as_utf8(outcome.err.bytes), cap));
  }

  void self_test() override {
    const Outcome outcome = run(*sandbox_, shell_, "echo ok", envp_.data(), std::chrono::seconds(10), 64);
    if (outcome.timed_out || outcome.exit_code != 0 || outcome.out.bytes != "ok\n") {
      throw std::runtime_error("self-test: '" + shell_ + " -c \"echo ok\"' in " + workdir_ +
                               " did not print ok (exit " + decimal(outcome.exit_code) + ")");
    }
  }

 private:
  // :PAYLOAD :TIMEOUT in seconds (the config's default when absent), at most timeout_limit.
  double requested_timeout(const ValueRef& value) const {
    if (value.is_nil()) return timeout_;
    if ((!value.is_integer() && !value.is_float()) || !(value.as_float() > 0.0)) {
      throw std::invalid_argument("shell: :TIMEOUT must be a positive number of seconds, got " + value.print());
    }
    return value.as_float() < timeout_limit_ ? value.as_float() : timeout_limit_;
  }

  // :PAYLOAD :MAX-OUTPUT in characters (the config's default when absent), at most max_output_limit.
  std::size_t requested_cap(const ValueRef& value) const {
    if (value.is_nil()) return static_cast<std::size_t>(max_output_);
    if (!value.is_integer() || value.as_integer() <= 0) {
      throw std::invalid_argument("shell: :MAX-OUTPUT must be a positive integer, got " + value.print());
    }
    return static_cast<std::size_t>(value.as_integer() < max_output_limit_ ? value.as_integer() : max_output_limit_);
  }

  double timeout_;
  double timeout_limit_;
  std::int64_t max_output_;
  std::int64_t max_output_limit_;
  std::string workdir_;
  std::string shell_;
  std::optional<Sandbox> sandbox_;        // set by the constructor; neither copied nor moved
  std::vector<std::string> environment_;  // "NAME=value"
  std::vector<char*> envp_;               // into environment_, then NULL
};

}  // namespace

PASSEPARTOUT_SKILL(Shell);
