// WorkerProcess: posix_spawn of the worker, lanes as socket pairs, calls with
// deadlines, and the reason a worker died (signal, exit status, what we killed it for).
#include "skills/worker_process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "base/errno_text.hpp"

extern char** environ;

namespace passepartout {
namespace {

std::string signal_name(int signal) {
  if (const char* abbrev = ::sigabbrev_np(signal); abbrev != nullptr) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(signal);
}

std::string mebibytes(std::uint64_t bytes) { return std::to_string(bytes / (1024ULL * 1024)) + " MiB"; }

// The worker's environment: what a library may reasonably need, and the
// sanitizers' settings so a sanitized build's worker behaves as its host —
// but for fatal signals: a sanitizer would report a skill's segfault and end
// the worker with its own abort, and the host names the death by the signal
// that ended the worker, so the worker leaves those signals to the kernel.
// Nor does a worker check for leaks at exit: inside its sandbox the leak
// checker cannot stop the world, and would turn a skill's exit(3) into an abort.
// Nor does ThreadSanitizer wait its second at exit (atexit_sleep_ms): a worker
// that ends must end before the call's deadline, so the host names why.
std::vector<std::string> worker_environment() {
  std::vector<std::string> env{"PATH=/usr/local/bin:/usr/bin:/bin"};
  for (const char* name : {"XDG_RUNTIME_DIR", "TMPDIR", "LANG", "UBSAN_OPTIONS", "LSAN_OPTIONS"}) {
    if (const char* value = std::getenv(name); value != nullptr) env.push_back(std::string(name) + "=" + value);
  }
  for (const char* name : {"ASAN_OPTIONS", "TSAN_OPTIONS"}) {
    const char* value = std::getenv(name);
    std::string options = value != nullptr && *value != '\0' ? std::string(value) + ":" : std::string();
    options += "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:handle_abort=0:detect_leaks=0";
    if (std::string_view(name) == "TSAN_OPTIONS") options += ":atexit_sleep_ms=0";
    env.push_back(std::string(name) + "=" + options);
  }
  return env;
}

}  // namespace

Result<std::shared_ptr<WorkerProcess>> WorkerProcess::spawn(const WorkerSpawn& spec) {
  std::vector<int> host_fds;
  std::vector<int> worker_fds;
  auto close_all = [&] {
    for (int fd : host_fds) ::close(fd);
    for (int fd : worker_fds) ::close(fd);
  };
  for (std::size_t i = 0; i < spec.lanes; ++i) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      const std::string reason = errno_text(errno);
      close_all();
      return fail(ErrorCode::io_error, "cannot create a channel for the skill process: " + reason);
    }
    host_fds.push_back(pair[0]);
    // Numbered above any fixed target, so no dup2 below overwrites a source still needed.
    const int high = ::fcntl(pair[1], F_DUPFD_CLOEXEC, 100);
    ::close(pair[1]);
    if (high < 0) {
      const std::string reason = errno_text(errno);
      close_all();
      return fail(ErrorCode::io_error, "cannot create a channel for the skill process: " + reason);
    }
    worker_fds.push_back(high);
  }

  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  for (std::size_t i = 0; i < worker_fds.size(); ++i) {
    ::posix_spawn_file_actions_adddup2(&actions, worker_fds[i], static_cast<int>(3 + i));
  }
  ::posix_spawn_file_actions_addclosefrom_np(&actions, static_cast<int>(3 + worker_fds.size()));
  posix_spawnattr_t attributes;
  ::posix_spawnattr_init(&attributes);
  sigset_t defaults;
  ::sigfillset(&defaults);
  sigset_t none;
  ::sigemptyset(&none);
  ::posix_spawnattr_setsigdefault(&attributes, &defaults);
  ::posix_spawnattr_setsigmask(&attributes, &none);
  ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> args{spec.executable.string()};
  args.insert(args.end(), spec.arguments.begin(), spec.arguments.end());
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = worker_environment();
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, spec.executable.c_str(), &actions, &attributes, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attributes);
  for (int fd : worker_fds) ::close(fd);
  worker_fds.clear();
  if (spawned != 0) {
    close_all();
    return fail(ErrorCode::io_error,
                "cannot start the skill process " + spec.executable.string() + ": " + errno_text(spawned));
  }
  return std::shared_ptr<WorkerProcess>(new WorkerProcess(pid, host_fds, spec));
}

WorkerProcess::WorkerProcess(pid_t pid, const std::vector<int>& fds, const WorkerSpawn& spec)
    : pid_(pid), memory_limit_(spec.memory_limit), on_denial_(spec.on_denial) {
  for (int fd : fds) lanes_.push_back(Lane{fd, false});
}

WorkerProcess::~WorkerProcess() {
  die("stopped");
  for (const Lane& lane : lanes_) ::close(lane.fd);
}

bool WorkerProcess::is_dead() const {
  std::lock_guard lock(mutex_);
  return dead_;
}

std::string WorkerProcess::death_reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}

void WorkerProcess::kill_for(const std::string& reason) { die(reason); }

std::string WorkerProcess::die(const std::string& killed_for) {
  std::unique_lock lock(mutex_);
  if (dead_) return reason_;
  // Whatever it was doing, it is over: SIGKILL is harmless when it already
  // exited, and the reaped status says what ended it.
  ::kill(pid_, SIGKILL);
  int status = 0;
  pid_t reaped = 0;
  do {
    reaped = ::waitpid(pid_, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  if (reaped == pid_ && WIFEXITED(status) && WEXITSTATUS(status) == kWorkerMemoryLimitStatus) {
    reason_ = "killed: memory limit (" + mebibytes(memory_limit_) + ")";
  } else if (reaped == pid_ && WIFEXITED(status)) {
    reason_ = "skill process exited with status " + std::to_string(WEXITSTATUS(status));
  } else if (reaped == pid_ && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && !killed_for.empty()) {
    reason_ = killed_for;
  } else if (reaped == pid_ && WIFSIGNALED(status)) {
    reason_ = "skill process died: " + signal_name(WTERMSIG(status));
  } else {
    reason_ = killed_for.empty() ? std::string("skill process ended") : killed_for;
  }
  dead_ = true;
  lock.unlock();
  // Wakes calls waiting for a lane; calls in flight see their lane close at
  // once, since the kernel closed the worker's ends of every lane.
  lane_freed_.notify_all();
  return reason_;
}

Result<Value> WorkerProcess::call(FrameKind kind, const Value& request, std::chrono::milliseconds budget,
                                  const LogSink& log) {
  const Deadline deadline = std::chrono::steady_clock::now() + budget;
  const std::string no_answer = "no answer in " + human_duration(budget);
  Lane* lane = nullptr;
  std::uint64_t id = 0;
  {
    std::unique_lock lock(mutex_);
    const bool got = lane_freed_.wait_until(lock, deadline, [&] {
      if (dead_) return true;
      for (Lane& candidate : lanes_) {
        if (!candidate.busy) {
          lane = &candidate;
          return true;
        }
      }
      return false;
    });
    if (dead_) return fail(ErrorCode::failed, reason_);
    if (!got || lane == nullptr) {
      return fail(ErrorCode::failed, no_answer + ": every channel to the skill process stayed busy");
    }
    lane->busy = true;
    id = next_id_++;
  }
  auto release = [&] {
    {
      std::lock_guard lock(mutex_);
      lane->busy = false;
    }
    lane_freed_.notify_one();
  };
  auto failed = [&](const ChannelError& error) -> Result<Value> {
    std::string reason;
    switch (error.fault) {
      case ChannelFault::timeout:
        reason = die(no_answer);
        break;
      case ChannelFault::garbage:
        reason = die("skill process wrote garbage on its channel: " + error.message);
        break;
      case ChannelFault::closed:
        reason = die("");
        break;
    }
    release();
    return fail(ErrorCode::failed, reason);
  };

  if (auto error = write_frame(lane->fd, kind, id, request, deadline)) return failed(*error);
  for (;;) {
    FrameOrError read = read_frame(lane->fd, deadline);
    if (!read.frame) return failed(read.error);
    Frame& frame = *read.frame;
    if (frame.kind == FrameKind::log) {
      const auto items = frame.value.items();
      if (items.size() != 2 || !items[0].is_integer() || !items[1].is_string()) {
        return failed({ChannelFault::garbage, "a log frame that is not (level \"text\")"});
      }
      if (log) log(items[0].as_integer(), std::string(items[1].text()));
      continue;
    }
    if (frame.kind == FrameKind::denial) {
      std::vector<std::string> names;
      for (const Value& item : frame.value.items()) {
        if (!item.is_string()) return failed({ChannelFault::garbage, "a denial frame that is not (\"name\" ...)"});
        names.emplace_back(item.text());
      }
      if (on_denial_ && !names.empty()) on_denial_(names);
      continue;
    }
    if (frame.kind != FrameKind::reply || frame.id != id) {
      return failed({ChannelFault::garbage, "a frame of kind " + std::to_string(static_cast<int>(frame.kind)) +
                                                " for request " + std::to_string(frame.id) + " where the reply to " +
                                                std::to_string(id) + " was due"});
    }
    release();
    return std::move(frame.value);
  }
}

}  // namespace passepartout
