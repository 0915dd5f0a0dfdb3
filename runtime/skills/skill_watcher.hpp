// SkillWatcher: watches the manifest and plugin folders with inotify and
// rescans once they have been quiet for a while, so dropping in a new library
// or manifest hot-swaps it; a half-written library is never loaded.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "skills/skill_host.hpp"

namespace passepartout {

// Owns one thread that waits on inotify. Any change to a `*.yaml`/`*.yml`
// manifest or a `*.so` library (written and closed, renamed in or out,
// deleted) starts a quiet period of `debounce`; every further change restarts
// it. When it ends the host rescans (requester "watcher"). A library that is
// not yet a complete ELF file is deferred by the rescan and retried after
// another quiet period. The host must outlive the watcher.
//
// Besides the skills, `files` (the daemon's config files) are watched the
// same way, through their folders: once a change to one of them has been
// quiet for `debounce`, `files_changed` runs on the watcher's thread.
class SkillWatcher {
 public:
  struct WatchedFiles {
    std::vector<std::filesystem::path> files;
    std::function<void()> files_changed;
  };
  static Result<std::unique_ptr<SkillWatcher>> start(
      SkillHost& host, std::chrono::milliseconds debounce = std::chrono::milliseconds(250), WatchedFiles files = {});
  ~SkillWatcher();  // request_stop(), then joins
  SkillWatcher(const SkillWatcher&) = delete;
  SkillWatcher& operator=(const SkillWatcher&) = delete;

  // Asks the thread to end, without waiting: it ends after the rescan it may
  // be running (which waits for the control thread). Any thread.
  void request_stop() noexcept;

  // Rescans the watcher has run so far.
  std::uint64_t rescans() const noexcept { return rescans_.load(std::memory_order_acquire); }

 private:
  SkillWatcher(SkillHost& host, std::chrono::milliseconds debounce, int inotify_fd, int stop_fd);
  void run();
  // Whether the event of watch `wd` for `name` is one of the watched files.
  bool is_watched_file(int wd, std::string_view name) const;

  SkillHost& host_;
  std::chrono::milliseconds debounce_;
  int inotify_fd_;
  int stop_fd_;  // an eventfd: written once to stop
  std::atomic<std::uint64_t> rescans_{0};
  WatchedFiles files_;
  std::vector<std::pair<int, std::string>> file_watches_;  // (watch of its folder, its name)
  std::thread thread_;
};

}  // namespace passepartout
