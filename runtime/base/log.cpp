// Logging through spdlog, plus the capture observers tests attach.
#include "base/log.hpp"

#include <spdlog/details/os.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <utility>

#include "base/utf8.hpp"

namespace passepartout {
namespace {

std::mutex captures_mutex;  // guards captures
std::vector<LogCapture*> captures;
std::atomic<std::size_t> capture_count{0};  // captures.size(): no lock taken while it is 0

// The newest kRecentLogLines lines logged outside any LogScope (seed B14);
// guarded by ring_mutex. ring_total counts every line it ever took: readers
// compare it with what they copied last, and scoped lines record it to be
// ordered among these.
std::mutex ring_mutex;
RecentLines& process_ring() {
  static RecentLines* const ring = new RecentLines(kRecentLogLines);  // never destroyed: logging outlives statics
  return *ring;
}
std::atomic<std::uint64_t> ring_total{0};

thread_local RecentLines* current_scope = nullptr;

// Sets `line` to "<component>: <message>", reusing its storage; a string that
// once held a long line gives that storage back when a short one replaces it.
void write_line(std::string& line, std::string_view component, std::string_view message) {
  constexpr std::size_t kKeptCapacity = 1024;
  const std::size_t size = component.size() + 2 + message.size();
  if (line.capacity() > kKeptCapacity && size <= kKeptCapacity) std::string().swap(line);
  line.clear();
  line.reserve(size);
  line.append(component).append(": ", 2).append(message);
}

// A thread's copy of the ring, oldest first, taken when ring_total moved.
struct RingCopy {
  std::uint64_t total = ~std::uint64_t{0};
  std::vector<std::string> lines;
};
thread_local RingCopy ring_copy;

const RingCopy& fresh_ring_copy() {
  RingCopy& copy = ring_copy;
  if (copy.total == ring_total.load(std::memory_order_acquire)) return copy;
  std::lock_guard lock(ring_mutex);
  const RecentLines& ring = process_ring();
  copy.lines.resize(ring.size());
  for (std::size_t n = 0; n < ring.size(); ++n) copy.lines[n] = ring.newest(ring.size() - 1 - n).text;
  copy.total = ring_total.load(std::memory_order_relaxed);
  return copy;
}

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::debug: return spdlog::level::debug;
    case LogLevel::info: return spdlog::level::info;
    case LogLevel::warn: return spdlog::level::warn;
    case LogLevel::error: return spdlog::level::err;
  }
  return spdlog::level::info;
}

std::atomic<bool> json_lines{false};  // set by configure_logging()

// Writes all of `bytes` to standard error (retrying short writes and EINTR);
// a line that cannot be written is dropped, as stdio would.
void write_stderr(std::string_view bytes) noexcept {
  while (!bytes.empty()) {
    const ssize_t written = ::write(STDERR_FILENO, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return;
    }
    bytes.remove_prefix(static_cast<std::size_t>(written));
  }
}

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

// The batching threads' held lines, in slots the fatal-signal handler can
// walk without locks. Never destroyed: a thread may log during static
// destruction. A thread that finds no free slot still batches, unregistered.
constexpr std::size_t kRegisteredThreads = 64;
HeldLines* registry() {
  static HeldLines* const slots = new HeldLines[kRegisteredThreads];
  return slots;
}

HeldLines* take_slot() noexcept {
  HeldLines* const slots = registry();
  for (std::size_t i = 0; i < kRegisteredThreads; ++i) {
    bool expected = false;
    if (slots[i].taken.compare_exchange_strong(expected, true, std::memory_order_acquire)) return &slots[i];
  }
  return nullptr;
}

void write_held(HeldLines& held) noexcept;

// A signal stack of its own for a batching thread, so that the fatal-signal
// handler also runs when the thread overflowed its stack (a skill's runaway
// recursion). Left alone when the thread already has one.
class AltStack {
 public:
  void install() noexcept {
    stack_t current{};
    if (::sigaltstack(nullptr, &current) != 0 || (current.ss_flags & SS_DISABLE) == 0) return;
    const std::size_t size = std::max<std::size_t>(64 * 1024, static_cast<std::size_t>(SIGSTKSZ));
    memory_.reset(new (std::nothrow) char[size]);
    if (!memory_) return;
    stack_t mine{};
    mine.ss_sp = memory_.get();
    mine.ss_size = size;
    if (::sigaltstack(&mine, nullptr) != 0) memory_.reset();
  }
  void remove() noexcept {
    if (!memory_) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    ::sigaltstack(&off, nullptr);
    memory_.reset();
  }

 private:
  std::unique_ptr<char[]> memory_;  // installed when set
};

// The calling thread's logging state; it writes what it holds when the thread ends.
struct ThreadLog {
  bool batching = false;
  HeldLines* slot = nullptr;  // registered while batching
  HeldLines own;              // otherwise
  AltStack alt_stack;         // while batching

  HeldLines& held() noexcept { return slot != nullptr ? *slot : own; }
  void release_slot() noexcept {
    if (slot == nullptr) return;
    write_held(*slot);
    {
      Editing editing(*slot);
      std::string().swap(slot->text);
    }
    slot->taken.store(false, std::memory_order_release);
    slot = nullptr;
  }
  ThreadLog() = default;
  ThreadLog(const ThreadLog&) = delete;
  ThreadLog& operator=(const ThreadLog&) = delete;
  ~ThreadLog() {
    write_held(own);
    release_slot();
    alt_stack.remove();
  }
};
thread_local ThreadLog thread_log;
constexpr std::size_t kMaxHeldBytes = 64 * 1024;

void write_held(HeldLines& held) noexcept {
  // Only the owner changes its text, and this is the owner: nothing held,
  // nothing to claim (the usual case, after every round of an event loop).
  if (held.text.empty()) return;
  Editing editing(held);
  if (held.text.empty()) return;
  write_stderr(held.text);
  held.text.clear();
}

void write_held() noexcept { write_held(thread_log.held()); }

// Standard error, coloured only on a colour terminal. A line is formatted by
// the thread's own copy of the formatter (the threads share no lock per line)
// and written in one write(2) (spdlog's own console sinks format, write and
// flush under one lock). On a thread that batches (set_log_batching), lines
// below warn are held and written together by flush_log_batch(); a warning or
// an error writes what is held, then itself.
class StderrSink final : public spdlog::sinks::sink {
 public:
  StderrSink()
      : colours_(spdlog::details::os::in_terminal(stderr) && spdlog::details::os::is_color_terminal()),
        formatter_(std::make_unique<spdlog::pattern_formatter>()) {}

  void log(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    msg.color_range_start = 0;
    msg.color_range_end = 0;
    thread_formatter().format(msg, formatted);
    HeldLines& held = thread_log.held();
    bool write_now = false;
    {
      Editing editing(held);
      std::string& out = held.text;
      const std::string_view line(formatted.data(), formatted.size());
      if (colours_ && msg.color_range_end > msg.color_range_start) {
        out.append(line.substr(0, msg.color_range_start));
        out.append(colour(msg.level));
        out.append(line.substr(msg.color_range_start, msg.color_range_end - msg.color_range_start));
        out.append("\033[m");
        out.append(line.substr(msg.color_range_end));
      } else {
        out.append(line);
      }
      write_now = !thread_log.batching || msg.level >= spdlog::level::warn || out.size() >= kMaxHeldBytes;
    }
    if (write_now) write_held(held);
  }
  void flush() override {}
  void set_pattern(const std::string& pattern) override {
    set_formatter(std::make_unique<spdlog::pattern_formatter>(pattern));
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    std::lock_guard lock(mutex_);
    formatter_ = std::move(formatter);
    version_.store(next_version(), std::memory_order_release);
  }

 private:
  // The calling thread's copy of formatter_, cloned again once it changed
  // (a formatter caches the current second, so threads cannot share one).
  spdlog::formatter& thread_formatter() {
    struct Copy {
      const StderrSink* sink = nullptr;
      std::uint64_t version = 0;
      std::unique_ptr<spdlog::formatter> formatter;
    };
    thread_local Copy copy;
    const std::uint64_t version = version_.load(std::memory_order_acquire);
    if (copy.sink != this || copy.version != version || !copy.formatter) {
      std::lock_guard lock(mutex_);
      copy.formatter = formatter_->clone();
      copy.sink = this;
      copy.version = version_.load(std::memory_order_relaxed);
    }
    return *copy.formatter;
  }

  // Versions are never reused, not even by another sink at the same address.
  static std::uint64_t next_version() {
    static std::atomic<std::uint64_t> last{0};
    return last.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  static std::string_view colour(spdlog::level::level_enum level) {
    switch (level) {
      case spdlog::level::trace: return "\033[37m";
      case spdlog::level::debug: return "\033[36m";
      case spdlog::level::info: return "\033[32m";
      case spdlog::level::warn: return "\033[33m\033[1m";
      case spdlog::level::err: return "\033[31m\033[1m";
      case spdlog::level::critical: return "\033[1m\033[41m";
      default: return "\033[m";
    }
  }

  const bool colours_;
  std::mutex mutex_;  // guards formatter_
  std::unique_ptr<spdlog::formatter> formatter_;
  std::atomic<std::uint64_t> version_{next_version()};  // changes with formatter_
};

// The text format, "<local time> <level> <text>": what the pattern
// "%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v" writes, byte for byte, in a fifth of the
// time (23 against 107 ns for a line of the pipeline's). The pattern
// formatter runs one virtual formatter per field for every line, two lines in
// every daemon request; this one rebuilds the date and time up to the second
// once a second and appends the rest.
class TextLineFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    using namespace std::chrono;
    const auto since_epoch = msg.time.time_since_epoch();
    const auto second = duration_cast<seconds>(since_epoch);
    if (second != cached_second_) {
      const std::time_t time = second.count();
      std::tm local{};
      ::localtime_r(&time, &local);
      char* out = cached_;
      const auto put = [&out](int number, int width, char after) {
        for (int i = width - 1; i >= 0; --i, number /= 10) out[i] = static_cast<char>('0' + number % 10);
        out[width] = after;
        out += width + 1;
      };
      put(local.tm_year + 1900, 4, '-');
      put(local.tm_mon + 1, 2, '-');
      put(local.tm_mday, 2, 'T');
      put(local.tm_hour, 2, ':');
      put(local.tm_min, 2, ':');
      put(local.tm_sec, 2, '.');
      cached_second_ = second;
    }
    dest.append(cached_, cached_ + kCachedSize);
    const auto millis = static_cast<int>(duration_cast<milliseconds>(since_epoch - second).count());
    const char tail[] = {static_cast<char>('0' + millis / 100), static_cast<char>('0' + millis / 10 % 10),
                         static_cast<char>('0' + millis % 10), ' '};
    dest.append(tail, tail + sizeof tail);
    msg.color_range_start = dest.size();
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    dest.append(level.data(), level.data() + level.size());
    msg.color_range_end = dest.size();
    dest.push_back(' ');
    append_escaped(dest, std::string_view(msg.payload.data(), msg.payload.size()));
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<TextLineFormatter>(); }

  // `text` with control characters escaped (\n, \r, \t, \xHH), so one line
  // of the log is always one of the daemon's, whatever a client or a model
  // put in a keyword, string or source it mentions. One scan when there are
  // none, the usual case.
  static void append_escaped(spdlog::memory_buf_t& dest, std::string_view text) {
    const auto is_control = [](char c) {
      const auto byte = static_cast<unsigned char>(c);
      return byte < 0x20 || byte == 0x7f;
    };
    const char* const end = text.data() + text.size();
    const char* from = text.data();
    for (const char* at = std::find_if(from, end, is_control); at != end; at = std::find_if(from, end, is_control)) {
      dest.append(from, at);
      static constexpr char kHex[] = "0123456789abcdef";
      const auto byte = static_cast<unsigned char>(*at);
      const char escaped[] = {'\\', 'x', kHex[byte >> 4], kHex[byte & 0xf]};
      if (*at == '\n') {
        dest.append(std::string_view("\\n"));
      } else if (*at == '\r') {
        dest.append(std::string_view("\\r"));
      } else if (*at == '\t') {
        dest.append(std::string_view("\\t"));
      } else {
        dest.append(escaped, escaped + sizeof escaped);
      }
      from = at + 1;
    }
    dest.append(from, end);
  }

 private:
  static constexpr std::size_t kCachedSize = 20;  // "2026-11-25T09:01:40."
  std::chrono::seconds cached_second_{-1};
  char cached_[kCachedSize] = {};
};

// Appends `text` as a JSON string (invalid UTF-8 repaired as replace_invalid_utf8 does).
void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  const std::string valid = replace_invalid_utf8(text);
  for (char c : valid) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          out += "\\u00";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// The fatal-signal handler and its async-signal-safe helpers (no locks, no
// allocation, no stdio: write(2), clock_gettime and plain arithmetic).
constexpr std::array<int, 5> kFatalSignals{SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
std::array<struct sigaction, kFatalSignals.size()> previous_actions{};

const char* signal_name(int number) noexcept {
  switch (number) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
  }
  return "a fatal signal";
}

// Appends to a fixed buffer, dropping what does not fit.
class CrashLine {
 public:
  CrashLine& text(std::string_view s) noexcept {
    for (const char c : s) {
      if (size_ < sizeof buffer_) buffer_[size_++] = c;
    }
    return *this;
  }
  CrashLine& number(std::uint64_t n, int width = 1) noexcept {
    char digits[20];
    int count = 0;
    do {
      digits[count++] = static_cast<char>('0' + n % 10);
      n /= 10;
    } while (n != 0 && count < 20);
    for (int i = count; i < width; ++i) text("0");
    while (count > 0) text(std::string_view(&digits[--count], 1));
    return *this;
  }
  std::string_view view() const noexcept { return {buffer_, size_}; }

 private:
  char buffer_[256];
  std::size_t size_ = 0;
};

// The local time's offset from UTC when the handlers were installed (the
// handler cannot consult the time zone); a change of daylight saving time
// since then shows as an hour off.
long utc_offset_seconds = 0;

// The local time as the log lines show theirs: "2026-11-22T12:00:00.000",
// then "+0100" in JSON lines.
void put_time(CrashLine& line, bool with_offset) noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  // std::chrono's calendar types are plain arithmetic: safe in a signal handler.
  using namespace std::chrono;
  const sys_seconds local{seconds(now.tv_sec + utc_offset_seconds)};
  const sys_days day = floor<days>(local);
  const year_month_day date{day};
  const hh_mm_ss<seconds> time{local - day};
  line.number(static_cast<std::uint64_t>(static_cast<int>(date.year())), 4).text("-");
  line.number(static_cast<unsigned>(date.month()), 2).text("-");
  line.number(static_cast<unsigned>(date.day()), 2).text("T");
  line.number(static_cast<std::uint64_t>(time.hours().count()), 2).text(":");
  line.number(static_cast<std::uint64_t>(time.minutes().count()), 2).text(":");
  line.number(static_cast<std::uint64_t>(time.seconds().count()), 2).text(".");
  line.number(static_cast<std::uint64_t>(now.tv_nsec / 1'000'000), 3);
  if (!with_offset) return;
  const long offset_minutes = (utc_offset_seconds < 0 ? -utc_offset_seconds : utc_offset_seconds) / 60;
  line.text(utc_offset_seconds < 0 ? "-" : "+");
  line.number(static_cast<std::uint64_t>(offset_minutes / 60), 2).number(static_cast<std::uint64_t>(offset_minutes % 60), 2);
}

extern "C" void on_fatal_signal(int number, siginfo_t* info, void* /*context*/) {
  const int saved_errno = errno;
  // What every batching thread holds, but a text its thread is changing right now.
  HeldLines* const slots = registry();
  for (std::size_t i = 0; i < kRegisteredThreads; ++i) {
    if (!slots[i].taken.load(std::memory_order_acquire)) continue;
    int expected = HeldLines::idle;
    if (slots[i].state.compare_exchange_strong(expected, HeldLines::claimed, std::memory_order_acquire)) {
      write_stderr(slots[i].text);
    }
  }
  CrashLine line;
  const std::string_view message = "fatal signal; the process stops";
  if (json_lines.load(std::memory_order_relaxed)) {
    line.text("{\"time\":\"");
    put_time(line, true);
    line.text("\",\"level\":\"error\",\"component\":\"crash\",\"message\":\"").text(signal_name(number));
    line.text(": ").text(message).text("\"}\n");
  } else {
    put_time(line, false);
    line.text(" error crash: ").text(signal_name(number)).text(": ").text(message).text("\n");
  }
  write_stderr(line.view());

  // The previous disposition handles the signal again: a fault recurs when
  // this handler returns; a signal that was sent is sent again.
  for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
    if (kFatalSignals[i] == number) ::sigaction(number, &previous_actions[i], nullptr);
  }
  if (info == nullptr || info->si_code <= 0) ::raise(number);
  errno = saved_errno;
}

}  // namespace

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
  }
  return "info";
}

void configure_logging(LogLevel min_level, LogFormat format) {
  auto logger = spdlog::get("passepartout");
  if (!logger) {
    logger = std::make_shared<spdlog::logger>("passepartout", std::make_shared<StderrSink>());
    spdlog::register_logger(logger);
  }
  if (format == LogFormat::json) {
    // log_message() supplies the escaped "component" and "message" members.
    logger->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l",%v})");
  } else {
    logger->set_formatter(std::make_unique<TextLineFormatter>());
  }
  logger->set_level(to_spdlog(min_level));
  json_lines.store(format == LogFormat::json, std::memory_order_relaxed);
  spdlog::set_default_logger(std::move(logger));
}

void log_message(LogLevel level, std::string_view component, std::string_view message) {
  if (json_lines.load(std::memory_order_relaxed)) {
    std::string members = "\"component\":";
    append_json_string(members, component);
    members += ",\"message\":";
    append_json_string(members, message);
    spdlog::log(to_spdlog(level), "{}", members);
  } else if (spdlog::logger* logger = spdlog::default_logger_raw(); logger->should_log(to_spdlog(level))) {
    // "<component>: <message>" built here: spdlog's "{}: {}" costs a format
    // string's parse on every line.
    thread_local std::string text;
    write_line(text, component, message);
    logger->log(to_spdlog(level), spdlog::string_view_t(text.data(), text.size()));
  }
  if (capture_count.load(std::memory_order_acquire) != 0) {
    std::lock_guard lock(captures_mutex);
    std::string line;
    write_line(line, component, message);
    for (LogCapture* capture : captures) capture->append(line);
  }
  if (level == LogLevel::debug) return;  // the prompt's LOGS section sees info and above
  if (RecentLines* scope = current_scope) {
    scope->add(component, message);
    return;
  }
  std::lock_guard lock(ring_mutex);
  process_ring().add(component, message);
  ring_total.fetch_add(1, std::memory_order_release);
}

std::string& log_line_buffer() noexcept {
  thread_local std::string buffer;
  buffer.clear();
  return buffer;
}

void set_log_batching(bool on) noexcept {
  ThreadLog& log = thread_log;
  if (on == log.batching) return;
  if (on) {
    write_held(log.own);
    log.slot = take_slot();
    log.alt_stack.install();
  } else {
    log.release_slot();
    log.alt_stack.remove();
  }
  log.batching = on;
}

void flush_log_batch() noexcept { write_held(); }

void write_held_logs_on_fatal_signals() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    registry();  // allocated now, not in the handler
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    if (::localtime_r(&now, &local) != nullptr) utc_offset_seconds = local.tm_gmtoff;
    struct sigaction action{};
    action.sa_sigaction = on_fatal_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;  // a batching thread's own stack, when it has one
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
      ::sigaction(kFatalSignals[i], &action, &previous_actions[i]);
    }
  });
}

RecentLines::RecentLines(std::size_t capacity) : capacity_(std::clamp<std::size_t>(capacity, 1, kRecentLogLines)) {}

void RecentLines::add(std::string_view component, std::string_view message) {
  if (first_ >= capacity_) compact();
  const std::size_t size = component.size() + 2 + message.size();
  entries_.push_back(Entry{ring_total.load(std::memory_order_acquire), text_.size(), size});
  text_.append(component).append(": ", 2).append(message).push_back('\n');
  if (entries_.size() - first_ > capacity_) ++first_;
}

void RecentLines::compact() {
  const std::size_t dropped = entries_[first_].offset;
  text_.erase(0, dropped);
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(first_));
  for (Entry& entry : entries_) entry.offset -= dropped;
  first_ = 0;
  // Storage a burst of long lines needed goes back once they are gone.
  constexpr std::size_t kKeptBytes = 16 * 1024;
  if (text_.capacity() > kKeptBytes && text_.capacity() > 4 * text_.size()) text_.shrink_to_fit();
}

std::string_view RecentLines::newest_text(std::size_t count) const noexcept {
  if (count == 0) return {};
  const Entry& oldest = entries_[entries_.size() - count];
  const Entry& newest = entries_.back();
  return std::string_view(text_).substr(oldest.offset, newest.offset + newest.size - oldest.offset);
}

LogScope::LogScope(RecentLines* lines) noexcept : previous_(std::exchange(current_scope, lines)) {}
LogScope::~LogScope() {
  current_scope = previous_;
}

std::vector<std::string> recent_log_lines(std::size_t count) {
  if (count == 0) return {};
  const RingCopy& ring = fresh_ring_copy();
  count = std::min(count, ring.lines.size());
  return {ring.lines.end() - static_cast<std::ptrdiff_t>(count), ring.lines.end()};
}

namespace {

// The merge behind append_recent_log_lines() and recent_log_text(): appends to
// `out`, or, when `scope`'s newest lines are all it takes, returns them as a
// view and leaves `out` alone.
std::optional<std::string_view> merge_recent_log_lines(std::string& out, std::size_t count,
                                                        const RecentLines* scope) {
  if (count == 0) return std::string_view();
  const RingCopy& ring = fresh_ring_copy();
  // Merge from the newest back: process-wide line number `total` (1-based)
  // came before a scoped line whose `after` is at least that number.
  std::size_t ring_left = ring.lines.size();
  // The usual prompt: the session's newest lines all came after every
  // process-wide line, so they are the answer, and they lie one after another.
  if (scope != nullptr && scope->size() >= count && (ring_left == 0 || scope->newest(count - 1).after >= ring.total)) {
    return scope->newest_text(count);
  }
  // Neither source holds more than kRecentLogLines lines: the merge fits here,
  // left uninitialised (zeroing 200 string_views cost more than the merge).
  struct Piece {
    const char* data;
    std::size_t size;
  };
  Piece picked[2 * kRecentLogLines];  // newest first
  std::size_t picked_count = 0;
  std::size_t bytes = 0;
  RecentLines::NewestFirst scoped = scope != nullptr ? RecentLines::NewestFirst(*scope) : RecentLines::NewestFirst();
  while (picked_count < count && (ring_left != 0 || scoped.left() != 0)) {
    std::string_view text;
    const std::uint64_t ring_number = ring.total - (ring.lines.size() - ring_left);
    if (scoped.left() != 0 && (ring_left == 0 || scoped.line().after >= ring_number)) {
      text = scoped.line().text;
      scoped.next();
    } else {
      text = ring.lines[--ring_left];
    }
    picked[picked_count++] = Piece{text.data(), text.size()};
    bytes += text.size();
  }
  if (picked_count == 0) return std::nullopt;
  bytes += picked_count - 1;  // the line breaks
  // One resize, then plain copies.
  const std::size_t start = out.size();
  out.resize(start + bytes);
  char* at = out.data() + start;
  for (std::size_t i = picked_count; i > 0; --i) {
    std::memcpy(at, picked[i - 1].data, picked[i - 1].size);
    at += picked[i - 1].size;
    if (i != 1) *at++ = '\n';
  }
  return std::nullopt;
}

}  // namespace

void append_recent_log_lines(std::string& out, std::size_t count, const RecentLines* scope) {
  if (const std::optional<std::string_view> view = merge_recent_log_lines(out, count, scope)) out.append(*view);
}

std::string_view recent_log_text(std::size_t count, const RecentLines* scope, std::string& scratch) {
  scratch.clear();
  if (const std::optional<std::string_view> view = merge_recent_log_lines(scratch, count, scope)) return *view;
  return scratch;
}

LogCapture::LogCapture() {
  std::lock_guard lock(captures_mutex);
  captures.push_back(this);
  capture_count.store(captures.size(), std::memory_order_release);
}

LogCapture::~LogCapture() {
  std::lock_guard lock(captures_mutex);
  captures.erase(std::remove(captures.begin(), captures.end(), this), captures.end());
  capture_count.store(captures.size(), std::memory_order_release);
}

std::vector<std::string> LogCapture::lines() const {
  std::lock_guard lock(lines_mutex_);
  return lines_;
}

bool LogCapture::contains(std::string_view needle) const {
  std::lock_guard lock(lines_mutex_);
  return std::any_of(lines_.begin(), lines_.end(),
                     [&](const std::string& line) { return line.find(needle) != std::string::npos; });
}

void LogCapture::append(std::string line) {
  std::lock_guard lock(lines_mutex_);
  lines_.push_back(std::move(line));
}

}  // namespace passepartout
