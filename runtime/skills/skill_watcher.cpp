// SkillWatcher: the inotify loop, its debounce, and retries of deferred libraries.
#include "skills/skill_watcher.hpp"
#include "base/errno_text.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "base/log.hpp"

namespace passepartout {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kEvents =
    IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB;

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Editors' and installers' temporary files are not skills.
bool is_relevant(std::string_view name) {
  if (name.empty() || name.front() == '.') return false;
  return ends_with(name, ".yaml") || ends_with(name, ".yml") || ends_with(name, ".so");
}

}  // namespace

Result<std::unique_ptr<SkillWatcher>> SkillWatcher::start(SkillHost& host, std::chrono::milliseconds debounce,
                                                          WatchedFiles files) {
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return fail(ErrorCode::io_error, "watcher: inotify_init1 failed: " + errno_text(errno));
  for (const auto& dir : {host.options().manifest_dir, host.options().plugin_dir}) {
    if (::inotify_add_watch(fd, dir.c_str(), kEvents) < 0) {
      std::string reason = errno_text(errno);
      ::close(fd);
      return fail(ErrorCode::io_error, "watcher: cannot watch " + dir.string() + ": " + reason);
    }
  }
  int stop = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop < 0) {
    std::string reason = errno_text(errno);
    ::close(fd);
    return fail(ErrorCode::io_error, "watcher: eventfd failed: " + reason);
  }
  auto watcher = std::unique_ptr<SkillWatcher>(new SkillWatcher(host, debounce, fd, stop));
  for (const std::filesystem::path& file : files.files) {
    const std::filesystem::path folder = file.parent_path().empty() ? "." : file.parent_path();
    const int wd = ::inotify_add_watch(fd, folder.c_str(), kEvents);
    if (wd < 0) {
      log_message(LogLevel::warn, "watcher", "not watching {}: {}", file.string(), errno_text(errno));
      continue;
    }
    watcher->file_watches_.emplace_back(wd, file.filename().string());
  }
  watcher->files_ = std::move(files);
  watcher->thread_ = std::thread([w = watcher.get()] { w->run(); });
  return watcher;
}

SkillWatcher::SkillWatcher(SkillHost& host, std::chrono::milliseconds debounce, int inotify_fd, int stop_fd)
    : host_(host), debounce_(debounce), inotify_fd_(inotify_fd), stop_fd_(stop_fd) {}

void SkillWatcher::request_stop() noexcept {
  std::uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(stop_fd_, &one, sizeof one);
}

SkillWatcher::~SkillWatcher() {
  request_stop();
  if (thread_.joinable()) thread_.join();
  ::close(inotify_fd_);
  ::close(stop_fd_);
}

bool SkillWatcher::is_watched_file(int wd, std::string_view name) const {
  for (const auto& [watch, file] : file_watches_) {
    if (watch == wd && name == file) return true;
  }
  return false;
}

void SkillWatcher::run() {
  bool pending = false;        // a quiet period is running
  Clock::time_point due{};     // when it ends
  bool files_pending = false;  // the same, for the watched files
  Clock::time_point files_due{};
  unsigned deferred_retries = 0;
  alignas(inotify_event) std::array<char, std::size_t{16} * 1024> buffer{};

  for (;;) {
    int timeout_ms = -1;
    for (const auto& [waiting, when] : {std::pair{pending, due}, std::pair{files_pending, files_due}}) {
      if (!waiting) continue;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when - Clock::now()).count();
      const int ms = static_cast<int>(std::max<long long>(0, left));
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    }
    std::array<pollfd, 2> fds{pollfd{inotify_fd_, POLLIN, 0}, pollfd{stop_fd_, POLLIN, 0}};
    int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      log_message(LogLevel::error, "watcher", "poll failed: {}", errno_text(errno));
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) return;

    if ((fds[0].revents & POLLIN) != 0) {
      bool relevant = false;
      for (;;) {
        ssize_t n = ::read(inotify_fd_, buffer.data(), buffer.size());
        if (n <= 0) break;
        for (std::size_t offset = 0; offset < static_cast<std::size_t>(n);) {
          const auto* event = reinterpret_cast<const inotify_event*>(buffer.data() + offset);
          std::string_view name = event->len > 0 ? std::string_view(event->name) : std::string_view();
          const bool overflow = (event->mask & IN_Q_OVERFLOW) != 0;
          if (overflow || is_relevant(name)) relevant = true;
          if (overflow || is_watched_file(event->wd, name)) {
            files_pending = true;
            files_due = Clock::now() + debounce_;
          }
          offset += sizeof(inotify_event) + event->len;
        }
      }
      if (relevant) {
        pending = true;
        due = Clock::now() + debounce_;  // restart the quiet period
        deferred_retries = 0;
      }
      continue;
    }

    if (files_pending && Clock::now() >= files_due) {
      files_pending = false;
      if (files_.files_changed) files_.files_changed();
    }
    if (pending && Clock::now() >= due) {
      pending = false;
      RescanResult result = host_.rescan("watcher");
      rescans_.fetch_add(1, std::memory_order_release);
      for (const Error& e : result.manifest_errors) log_message(LogLevel::warn, "watcher", e.message);
      if (!result.deferred.empty()) {
        // Still being written: look again after another quiet period, backing off.
        ++deferred_retries;
        auto wait = deferred_retries <= 10 ? debounce_ : std::chrono::milliseconds(5000);
        pending = true;
        due = Clock::now() + wait;
        for (const auto& d : result.deferred) log_message(LogLevel::info, "watcher", "deferred {}", d);
      }
    }
  }
}

}  // namespace passepartout
