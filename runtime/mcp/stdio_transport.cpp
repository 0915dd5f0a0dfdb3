// The stdio transport: a server program on three pipes, one JSON-RPC message
// a line on its stdout, its stderr read line by line, its end seen through a
// pidfd. Every descriptor is watched by the io_context; nothing blocks but
// the reaping of a process already killed.
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <utility>

// GCC 12 reports a "potential null pointer dereference" inside Asio's
// scheduler (a false positive); silenced for Asio's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#pragma GCC diagnostic pop

#include "base/errno_text.hpp"
#include "mcp/transport.hpp"

extern char** environ;

namespace passepartout::mcp {

namespace {

namespace asio = boost::asio;
using Descriptor = asio::posix::stream_descriptor;

// A line of stderr longer than this is cut (the rest of it dropped).
constexpr std::size_t kMaxStderrLine = 4096;
// How long a server that closed its output may take to exit, and one that
// exited may take to let its last output be read, before the group is killed.
constexpr std::chrono::milliseconds kExitGrace{2000};
// How long close() waits for SIGTERM to end the server before SIGKILL.
constexpr std::chrono::milliseconds kTermGrace{1000};

std::string signal_name(int signal) {
  if (const char* abbrev = ::sigabbrev_np(signal); abbrev != nullptr) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(signal);
}

std::string mebibytes(std::size_t bytes) {
  constexpr std::size_t kMiB = std::size_t{1024} * 1024;
  if (bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// Where `name` is: itself when it holds a slash, else the first executable
// file of that name in the folders of the PATH of `env` (the child's).
Result<std::string> find_program(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return name;
    return fail(errno == ENOENT ? ErrorCode::not_found : ErrorCode::io_error, errno_text(errno));
  }
  std::string_view path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& entry : env) {
    if (entry.starts_with("PATH=")) path = std::string_view(entry).substr(5);
  }
  std::string_view rest = path;
  while (true) {
    const std::size_t colon = rest.find(':');
    const std::string_view folder = rest.substr(0, colon);
    std::string candidate = std::string(folder.empty() ? "." : folder) + "/" + name;
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return fail(ErrorCode::not_found, "no program '" + name + "' on its PATH (" + std::string(path) + ")");
}

// The child's environment: PATH, HOME and LANG of ours unless the entry gives
// them, then the entry's own variables.
std::vector<std::string> child_environment(const StdioCommand& command) {
  std::vector<std::string> env;
  auto given = [&](std::string_view name) {
    for (const auto& [key, value] : command.env) {
      if (key == name) return true;
    }
    return false;
  };
  for (const char* name : {"PATH", "HOME", "LANG"}) {
    if (given(name)) continue;
    if (const char* value = std::getenv(name); value != nullptr) env.push_back(std::string(name) + "=" + value);
  }
  for (const auto& [key, value] : command.env) env.push_back(std::string(key).append("=").append(value));
  return env;
}

class StdioTransport final : public Transport, public std::enable_shared_from_this<StdioTransport> {
 public:
  StdioTransport(asio::io_context& io, const StdioCommand& command, TransportEvents events, pid_t pid, int in, int out,
                 int err, int pidfd)
      : io_(io),
        name_(command.name),
        max_message_(command.max_message_bytes),
        events_(std::move(events)),
        pid_(pid),
        stdin_(io, asio::local::stream_protocol(), in),
        stdout_(io, out),
        stderr_(io, err),
        exit_(io, pidfd),
        grace_(io) {}

  ~StdioTransport() override {
    // The io_context may no longer run: whatever is left of the group goes now.
    if (!reaped_) {
      ::kill(-pid_, SIGKILL);
      reap(0);
    }
  }

  StdioTransport(const StdioTransport&) = delete;
  StdioTransport& operator=(const StdioTransport&) = delete;

  void begin() {
    read_stdout();
    read_stderr();
    watch_exit();
  }

  void send(std::string message) override {
    asio::dispatch(io_, [self = shared_from_this(), message = std::move(message)]() mutable {
      if (self->closed_ || self->input_broken_) return;
      message.push_back('\n');
      self->outgoing_.push_back(std::move(message));
      if (self->outgoing_.size() == 1) self->write_next();
    });
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    events_ = {};
    stop_reading();  // the exit stays watched: it ends the grace below early
    boost::system::error_code ignored;
    stdin_.close(ignored);
    if (reaped_) return;
    ::kill(-pid_, SIGTERM);
    grace_.expires_after(kTermGrace);
    grace_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (error || self->reaped_) return;
      ::kill(-self->pid_, SIGKILL);
      self->reap(0);
    });
  }

  pid_t pid() const noexcept override { return pid_; }

 private:
  void write_next() {
    asio::async_write(stdin_, asio::buffer(outgoing_.front()),
                      [self = shared_from_this()](const boost::system::error_code& error, std::size_t) {
                        if (error) {
                          // The server stopped reading (EPIPE): its end is reported by its exit.
                          self->input_broken_ = true;
                          self->outgoing_.clear();
                          return;
                        }
                        self->outgoing_.pop_front();
                        if (!self->outgoing_.empty() && !self->closed_) self->write_next();
                      });
  }

  void read_stdout() {
    stdout_.async_read_some(asio::buffer(out_buffer_),
                            [self = shared_from_this()](const boost::system::error_code& error, std::size_t n) {
                              if (self->closed_) return;
                              if (error) {
                                self->output_ended_ = true;
                                self->output_ended();
                                return;
                              }
                              self->take_output(std::string_view(self->out_buffer_.data(), n));
                              if (!self->closed_ && !self->output_ended_) self->read_stdout();
                            });
  }

  // Splits what arrived into lines and hands each message on, unless one
  // passes the cap: then the server is over, whatever it does next.
  void take_output(std::string_view bytes) {
    std::size_t start = 0;
    while (start < bytes.size()) {
      const std::size_t newline = bytes.find('\n', start);
      const std::size_t end = newline == std::string_view::npos ? bytes.size() : newline;
      if (line_.size() + (end - start) > max_message_) {
        finish("mcp server '" + name_ + "' answered over " + mebibytes(max_message_) + " in one message");
        return;
      }
      line_.append(bytes.substr(start, end - start));
      if (newline == std::string_view::npos) return;
      start = newline + 1;
      std::string message = std::move(line_);
      line_.clear();
      if (!message.empty() && message.back() == '\r') message.pop_back();
      if (message.empty()) continue;
      if (events_.on_message) events_.on_message(std::move(message));
      if (closed_) return;
    }
  }

  void read_stderr() {
    stderr_.async_read_some(asio::buffer(err_buffer_),
                            [self = shared_from_this()](const boost::system::error_code& error, std::size_t n) {
                              if (self->closed_ || error) return;
                              self->take_stderr(std::string_view(self->err_buffer_.data(), n));
                              if (!self->closed_) self->read_stderr();
                            });
  }

  void take_stderr(std::string_view bytes) {
    for (const char c : bytes) {
      if (c == '\n') {
        std::string line = std::exchange(err_line_, std::string());
        err_cut_ = false;
        if (line.empty()) continue;
        last_err_line_ = line;
        if (events_.on_stderr) events_.on_stderr(std::move(line));
        if (closed_) return;
      } else if (err_line_.size() < kMaxStderrLine) {
        err_line_.push_back(c);
      } else if (!err_cut_) {
        err_line_ += " [cut]";
        err_cut_ = true;
      }
    }
  }

  void watch_exit() {
    exit_.async_wait(Descriptor::wait_read, [self = shared_from_this()](const boost::system::error_code& error) {
      if (error || self->reaped_) return;
      self->reap(WNOHANG);
      if (!self->reaped_) {
        self->watch_exit();  // not yet a zombie (a spurious wake)
        return;
      }
      if (self->closed_) {
        self->grace_.cancel();
        return;
      }
      if (self->output_ended_) {
        self->finish(self->exit_reason_);
        return;
      }
      // Its last words may still be in the pipe: read them, then report.
      self->grace_.expires_after(kExitGrace);
      self->grace_.async_wait([self](const boost::system::error_code& timer_error) {
        if (!timer_error) self->finish(self->exit_reason_);
      });
    });
  }

  void output_ended() {
    if (reaped_) {
      finish(exit_reason_);
      return;
    }
    grace_.expires_after(kExitGrace);
    grace_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (error || self->closed_) return;
      self->finish("mcp server '" + self->name_ + "' closed its output and was stopped");
    });
  }

  // The transport is over: the group is killed, the process reaped, the
  // session told why, once.
  void finish(const std::string& reason) {
    if (closed_) return;
    const std::string why = reason == exit_reason_ && exit_failed_ ? with_last_words(reason) : reason;
    closed_ = true;
    stop_reading();
    boost::system::error_code ignored;
    stdin_.close(ignored);
    exit_.close(ignored);
    grace_.cancel();
    ::kill(-pid_, SIGKILL);  // what it left running, or itself
    if (!reaped_) reap(0);
    auto on_closed = std::move(events_.on_closed);
    events_ = {};
    if (on_closed) on_closed(why);
  }

  // A failed exit's reason with the last line the process wrote to stderr
  // (what a program that could not start says): what is still in the pipe
  // is read first, since the process is gone.
  std::string with_last_words(const std::string& reason) {
    std::array<char, 4096> buffer{};
    for (int rounds = 0; rounds < 64; ++rounds) {
      const ssize_t n = ::read(stderr_.native_handle(), buffer.data(), buffer.size());
      if (n <= 0) break;
      take_stderr(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
    }
    std::string last = err_line_.empty() ? last_err_line_ : err_line_;
    if (last.empty()) return reason;
    constexpr std::size_t kMaxQuoted = 300;
    if (last.size() > kMaxQuoted) last = last.substr(0, kMaxQuoted) + "...";
    return reason + ": " + last;
  }

  void stop_reading() {
    boost::system::error_code ignored;
    stdout_.close(ignored);
    stderr_.close(ignored);
  }

  // waitpid with `flags`; on success records why the process ended.
  void reap(int flags) {
    int status = 0;
    pid_t reaped = 0;
    do {
      reaped = ::waitpid(pid_, &status, flags);
    } while (reaped < 0 && errno == EINTR);
    if (reaped != pid_) {
      if (reaped < 0) reaped_ = true;  // ECHILD: someone else reaped it
      return;
    }
    reaped_ = true;
    exit_failed_ = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (WIFEXITED(status)) {
      exit_reason_ = "mcp server '" + name_ + "' exited with status " + std::to_string(WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
      exit_reason_ = "mcp server '" + name_ + "' died: " + signal_name(WTERMSIG(status));
    } else {
      exit_reason_ = "mcp server '" + name_ + "' ended";
    }
  }

  asio::io_context& io_;
  std::string name_;
  std::size_t max_message_;
  TransportEvents events_;
  pid_t pid_;
  asio::local::stream_protocol::socket stdin_;
  Descriptor stdout_;
  Descriptor stderr_;
  Descriptor exit_;
  asio::steady_timer grace_;
  std::array<char, 65536> out_buffer_{};
  std::array<char, 4096> err_buffer_{};
  std::string line_;
  std::string err_line_;
  std::string last_err_line_;
  bool err_cut_ = false;
  bool exit_failed_ = false;
  std::deque<std::string> outgoing_;
  bool closed_ = false;
  bool input_broken_ = false;
  bool output_ended_ = false;
  bool reaped_ = false;
  std::string exit_reason_;
};

// Both ends of a pipe, close-on-exec; the child's end is dup2'ed to 0, 1 or 2.
struct Pipe {
  int read = -1;
  int write = -1;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

Result<std::shared_ptr<Transport>> start_stdio(asio::io_context& io, const StdioCommand& command,
                                               TransportEvents events) {
  const std::string what = "cannot start mcp server '" + command.name + "' (" + command.command + ")";
  if (command.command.empty()) return fail(ErrorCode::invalid_input, what + ": no command given");
  std::array<Pipe, 3> pipes;  // stdin, stdout, stderr
  auto close_pipes = [&] {
    for (Pipe& pipe : pipes) {
      close_fd(pipe.read);
      close_fd(pipe.write);
    }
  };
  for (std::size_t i = 0; i < pipes.size(); ++i) {
    int fds[2];
    // The server's stdin is a socket: writing to a server that is gone fails
    // with EPIPE instead of raising SIGPIPE (Asio sends with MSG_NOSIGNAL), in
    // whatever process this runs. fds[0] is the server's end, as for a pipe.
    const int made = i == 0 ? ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) : ::pipe2(fds, O_CLOEXEC);
    if (made != 0) {
      const std::string reason = errno_text(errno);
      close_pipes();
      return fail(ErrorCode::io_error, std::string(what).append(": ").append(reason));
    }
    pipes[i] = {fds[0], fds[1]};
  }

  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, pipes[0].read, 0);
  ::posix_spawn_file_actions_adddup2(&actions, pipes[1].write, 1);
  ::posix_spawn_file_actions_adddup2(&actions, pipes[2].write, 2);
  ::posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (!command.working_dir.empty()) ::posix_spawn_file_actions_addchdir_np(&actions, command.working_dir.c_str());
  posix_spawnattr_t attributes;
  ::posix_spawnattr_init(&attributes);
  sigset_t defaults;
  ::sigfillset(&defaults);
  sigset_t none;
  ::sigemptyset(&none);
  ::posix_spawnattr_setsigdefault(&attributes, &defaults);
  ::posix_spawnattr_setsigmask(&attributes, &none);
  ::posix_spawnattr_setpgroup(&attributes, 0);
  ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);

  std::vector<std::string> env = child_environment(command);
  auto program = find_program(command.command, env);
  if (!program) {
    close_pipes();
    ::posix_spawn_file_actions_destroy(&actions);
    ::posix_spawnattr_destroy(&attributes);
    return fail(program.error().code, what + ": " + program.error().message);
  }
  std::vector<std::string> args = command.launcher;
  args.push_back(*program);
  args.insert(args.end(), command.args.begin(), command.args.end());
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attributes);
  close_fd(pipes[0].read);
  close_fd(pipes[1].write);
  close_fd(pipes[2].write);
  if (spawned != 0) {
    close_pipes();
    return fail(spawned == ENOENT ? ErrorCode::not_found : ErrorCode::io_error, what + ": " + errno_text(spawned));
  }
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    const std::string reason = errno_text(errno);
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    close_pipes();
    return fail(ErrorCode::io_error, what + ": pidfd_open: " + reason);
  }
  for (const int fd : {pipes[0].write, pipes[1].read, pipes[2].read}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  auto transport = std::make_shared<StdioTransport>(io, command, std::move(events), pid, pipes[0].write, pipes[1].read,
                                                    pipes[2].read, pidfd);
  transport->begin();
  return std::shared_ptr<Transport>(std::move(transport));
}

}  // namespace passepartout::mcp
