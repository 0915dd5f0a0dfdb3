// The seams between the logging files, private to runtime/base/log_*.cpp:
// log.cpp routes each line; log_sink.cpp formats and writes it;
// log_batch.cpp holds a thread's lines; log_crash.cpp writes them on a fatal
// signal; log_recent.cpp keeps the recent lines; log_capture.cpp hands them
// to tests.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace spdlog {
class formatter;
namespace sinks {
class sink;
}  // namespace sinks
}  // namespace spdlog

namespace passepartout::log_detail {

// --- log.cpp

// Whether lines are written as JSON lines (configure_logging). Any thread.
bool writes_json_lines() noexcept;
// Sets `line` to "<component>: <message>", reusing its storage; a string that
// once held a long line gives that storage back when a short one replaces it.
void write_line(std::string& line, std::string_view component, std::string_view message);

// --- log_batch.cpp

// Writes all of `bytes` to standard error (retrying short writes and EINTR);
// a line that cannot be written is dropped, as stdio would. Async-signal-safe.
void write_stderr(std::string_view bytes) noexcept;

// The lines a thread holds: until flush_log_batch() on a batching thread,
// else only while the sink builds the line. A thread changes its text only
// while `state` is `editing`; the fatal-signal handler writes a text only after
// moving its `state` from `idle` to `claimed`, which it never gives back (the
// process is ending), so it never reads a text being changed and the owner
// never changes one being read.
//
// One cache line each: the event loops flush after every round of work, and
// two threads' slots sharing a line made every flush a transfer of that line
// between the cores (two loops then did 1.5 times what one does, not twice).
struct alignas(64) HeldLines {
  enum State : int { idle, editing, claimed };
  std::atomic<int> state{idle};
  std::atomic<bool> taken{false};  // a registry slot in use by a thread
  std::string text;
};

// While the owner changes its text.
class Editing {
 public:
  explicit Editing(HeldLines& held) noexcept : held_(held) {
    for (;;) {
      int expected = HeldLines::idle;
      if (held_.state.compare_exchange_strong(expected, HeldLines::editing, std::memory_order_acquire)) return;
      // Claimed by the fatal-signal handler: the process is ending; wait for it.
      if (expected == HeldLines::claimed) ::pause();
    }
  }
  ~Editing() { held_.state.store(HeldLines::idle, std::memory_order_release); }
  Editing(const Editing&) = delete;
  Editing& operator=(const Editing&) = delete;

 private:
  HeldLines& held_;
};

// The batching threads' held lines: kRegisteredThreads slots the
// fatal-signal handler can walk without locks, a slot in use while `taken`.
inline constexpr std::size_t kRegisteredThreads = 64;
HeldLines* held_lines_slots();

// The calling thread's held lines, whether it batches (set_log_batching), and
// the most it holds before writing them whatever the level.
HeldLines& thread_held_lines() noexcept;
bool is_thread_batching() noexcept;
inline constexpr std::size_t kMaxHeldBytes = 64 * 1024;
// Writes what `held` holds and empties it; its owner thread only.
void write_held(HeldLines& held) noexcept;

// --- log_sink.cpp

// Standard error, as the logger's one sink; the text format's formatter.
std::shared_ptr<spdlog::sinks::sink> make_stderr_sink();
std::unique_ptr<spdlog::formatter> make_text_line_formatter();

// --- log_recent.cpp

// Keeps "<component>: <message>" among the recent lines: the calling
// thread's LogScope's, or the process-wide ring's.
void keep_recent_line(std::string_view component, std::string_view message);

// --- log_capture.cpp

// Whether a LogCapture is alive. Any thread.
bool any_log_capture() noexcept;

// Hands "<component>: <message>" to every LogCapture alive; takes no lock
// while there is none.
void feed_log_captures(std::string_view component, std::string_view message);

}  // namespace passepartout::log_detail
