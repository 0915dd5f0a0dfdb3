// Logging for the runtime and, through the host table, for skills.
// Lines go to spdlog; the prompt's LOGS section and observers (tests) see them too.
#pragma once

#include <fmt/core.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace passepartout {

enum class LogLevel { debug, info, warn, error };

const char* to_string(LogLevel level) noexcept;

// How lines are written to standard error: text ("<time> <level> <component>:
// <message>", coloured only when stderr is a terminal) or JSON lines (one
// object per line: {"time":"...","level":"...","component":"...","message":"..."}).
enum class LogFormat { text, json };

// Sends log lines at `min_level` and above to standard error in `format`.
// Call once at start-up (again to change the level or format); any thread after.
void configure_logging(LogLevel min_level, LogFormat format = LogFormat::text);

// Logs `message` from `component` (e.g. "loader", or a skill's name). Any thread.
void log_message(LogLevel level, std::string_view component, std::string_view message);

// Whether a line at `level` goes anywhere: to standard error, to a
// LogCapture, or (info and above) to the recent lines. Any thread.
bool is_logged(LogLevel level) noexcept;

// Formats `format` with `args`, then logs as log_message does: what the
// overload below calls.
void log_formatted(LogLevel level, std::string_view component, fmt::string_view format, fmt::format_args args);

// Logs the message `format` makes of `args` (fmt's syntax, checked when
// compiled: log_message(LogLevel::info, "loader", "loaded '{}'", name)),
// formatting it only when is_logged(level). Any thread.
template <typename... Args>
void log_message(LogLevel level, std::string_view component, fmt::format_string<Args...> format, Args&&... args) {
  if (is_logged(level)) log_formatted(level, component, format, fmt::make_format_args(args...));
}

// The calling thread's scratch string, cleared, for building a message that
// goes straight to log_message without allocating each time. Valid until the
// next call on the same thread: build, log, done.
std::string& log_line_buffer() noexcept;

// Batching, for the event loops: while it is on for the calling thread, its
// lines below warn are held and written to standard error together by
// flush_log_batch(), one write(2) for everything a batch of work logged (a
// request's lines, say). A warning or an error writes what is held and then
// itself at once, and so does anything once 64 KiB are held. Turning batching
// off, or the thread's end, writes what is held. Both calling thread only.
void set_log_batching(bool on) noexcept;
void flush_log_batch() noexcept;

// Installs handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT that write
// what the batching threads hold (all but a line a thread is adding at that
// instant) and an error line naming the signal, then hand the signal to the
// disposition that was there before (the default: the process dies of it, and
// a core dump or a restart by systemd follows as configured). A batching
// thread gets a signal stack of its own, so this works after a stack overflow
// too. Once; later calls do nothing. The daemon calls it at start-up.
void write_held_logs_on_fatal_signals();

// How many recent lines the process-wide ring keeps (seed B14), and the most a
// RecentLines keeps.
inline constexpr std::size_t kRecentLogLines = 100;

// Recent log lines, a ring: the process-wide one, and one per conversation (a
// pipeline session) for its prompts' LOGS section. Lines at info and above
// logged on a thread while a LogScope names a session's lines go there
// instead of the process-wide ring, so one session's prompt never shows
// another's lines (their approval tokens, say), and threads serving
// different sessions share nothing when they log.
//
// No lock: one thread at a time logs into a session's lines and reads them (a
// session's steps run one after another, each handing over to the next); the
// process-wide ring is guarded inside log.cpp.
class RecentLines {
 public:
  // Keeps the newest `capacity` lines (at least 1, at most kRecentLogLines).
  explicit RecentLines(std::size_t capacity = 20);

  struct Line {
    std::uint64_t after = 0;  // how many process-wide lines had been logged before it
    std::string_view text;    // "<component>: <message>", valid until the next add()
  };

  std::size_t size() const noexcept { return entries_.size() - first_; }
  void add(std::string_view component, std::string_view message);
  // The line `age` places back from the newest (0 is the newest; age < size()).
  Line newest(std::size_t age) const noexcept { return line(entries_.size() - 1 - age); }
  // The newest `count` lines (count <= size()), oldest first, each but the
  // last followed by '\n': a view of the kept text, valid until the next add().
  std::string_view newest_text(std::size_t count) const noexcept;

  // The lines from the newest back:
  // for (NewestFirst at(lines); at.left() != 0; at.next()) use(at.line());
  class NewestFirst {
   public:
    NewestFirst() noexcept = default;  // no lines
    explicit NewestFirst(const RecentLines& lines) noexcept : lines_(&lines), left_(lines.size()) {}
    std::size_t left() const noexcept { return left_; }
    Line line() const noexcept { return lines_->newest(lines_->size() - left_); }  // while left() != 0
    // The line a later next() reaches: 0 is line(); ahead < left().
    Line ahead(std::size_t ahead) const noexcept { return lines_->newest(lines_->size() - left_ + ahead); }
    void next() noexcept { --left_; }

   private:
    const RecentLines* lines_ = nullptr;
    std::size_t left_ = 0;
  };

 private:
  // Where a line's text lies in text_.
  struct Entry {
    std::uint64_t after;
    std::size_t offset;
    std::size_t size;
  };
  Line line(std::size_t index) const noexcept {
    const Entry& entry = entries_[index];
    return {entry.after, std::string_view(text_).substr(entry.offset, entry.size)};
  }
  // Drops the lines no longer kept (those before first_) from text_ and entries_.
  void compact();

  // The lines, oldest first, each followed by '\n', one after another: the
  // newest ones are one piece of text, which a prompt's LOGS section takes
  // whole. Dropped lines leave when as many are dropped as are kept, so
  // adding a line copies each byte at most once more.
  std::string text_;
  std::vector<Entry> entries_;  // the kept ones from first_
  std::size_t first_ = 0;
  std::size_t capacity_;
};

// While alive, the calling thread's lines go to `lines` (null: back to the
// process-wide ring). Scopes nest; each restores the one before it.
class LogScope {
 public:
  explicit LogScope(RecentLines* lines) noexcept;
  ~LogScope();
  LogScope(const LogScope&) = delete;
  LogScope& operator=(const LogScope&) = delete;

 private:
  RecentLines* previous_;
};

// The newest `count` lines logged at info level or above outside any
// LogScope (at most 100 are kept), oldest first, formatted "<component>:
// <message>". Any thread.
std::vector<std::string> recent_log_lines(std::size_t count);
// The newest `count` lines among `scope`'s (when given) and the process-wide
// ring's, in the order they were logged, appended to `out`, each but the last
// followed by '\n'. Any thread (that may read `scope`). Reads no lock and
// copies nothing shared unless a process-wide line was logged since the
// thread's last call.
void append_recent_log_lines(std::string& out, std::size_t count, const RecentLines* scope = nullptr);
// The same text, as a view: of `scope`'s own text when its lines are all
// it takes (valid until its next add()), else of `scratch`, which it is
// built in. For a prompt: usually nothing is copied.
std::string_view recent_log_text(std::size_t count, const RecentLines* scope, std::string& scratch);

// Collects every line logged while it is alive, formatted "<component>: <message>".
// For tests and diagnostics; thread-safe.
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<std::string> lines() const;
  bool contains(std::string_view needle) const;

  void append(std::string line);  // called by the logger

 private:
  mutable std::mutex lines_mutex_;
  std::vector<std::string> lines_;
};

}  // namespace passepartout
