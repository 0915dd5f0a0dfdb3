// WorkerProcess: the host's handle on one skill worker process — spawning it,
// its lanes, one request and its reply with a deadline, and why it died.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "skills/worker_channel.hpp"
#include "value/value.hpp"

namespace passepartout {

// The distinctive exit status of a worker whose allocation failed under its
// memory limit (its std::new_handler exits with it).
inline constexpr int kWorkerMemoryLimitStatus = 86;

struct WorkerSpawn {
  std::filesystem::path executable;    // the `passepartout` executable
  std::vector<std::string> arguments;  // after argv[0], starting with "skill-worker"
  std::size_t lanes = 4;
  std::uint64_t memory_limit = 0;  // bytes, for the reason of a death by it
  // Told the system calls the worker's sandbox denied during a call ("openat"),
  // from the thread that made the call; empty: ignored.
  std::function<void(const std::vector<std::string>&)> on_denial;
};

// Created and used from any thread: calls run concurrently, one per lane.
// The process is killed (SIGKILL) and reaped when the object is destroyed.
class WorkerProcess {
 public:
  // Starts the worker with its lanes on fds 3, 4, ... and nothing else open.
  static Result<std::shared_ptr<WorkerProcess>> spawn(const WorkerSpawn& spec);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Called with each log line the worker forwards (level as pp_log_level).
  using LogSink = std::function<void(std::int64_t level, const std::string& text)>;

  // Sends `request` as a `kind` frame on a free lane and waits for the reply
  // until `budget` has passed. Failed (ErrorCode::failed) with the reason when
  // the worker is dead, dies, gives no answer in time (it is then killed) or
  // writes garbage (likewise); every other call in flight then fails at once.
  Result<Value> call(FrameKind kind, const Value& request, std::chrono::milliseconds budget, const LogSink& log);

  // Kills the worker for `reason` (harmless when already dead).
  void kill_for(const std::string& reason);

  pid_t pid() const noexcept { return pid_; }
  bool is_dead() const;
  // Why it died ("skill process died: SIGSEGV"); empty while it lives.
  std::string death_reason() const;

 private:
  struct Lane {
    int fd = -1;
    bool busy = false;
  };
  WorkerProcess(pid_t pid, const std::vector<int>& fds, const WorkerSpawn& spec);
  // Marks it dead (killing and reaping it) and wakes every waiter; returns the reason.
  std::string die(const std::string& killed_for);

  pid_t pid_;
  std::uint64_t memory_limit_;
  std::function<void(const std::vector<std::string>&)> on_denial_;
  mutable std::mutex mutex_;  // guards lanes_' busy flags, next_id_, dead_, reason_
  std::condition_variable lane_freed_;
  std::vector<Lane> lanes_;
  std::uint64_t next_id_ = 1;
  bool dead_ = false;
  std::string reason_;
};

}  // namespace passepartout
