// Logging through spdlog, plus the capture observers tests attach.
#include "log.hpp"

#include <spdlog/details/os.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>

#include "value/utf8.hpp"

namespace passepartout {
namespace {

std::mutex captures_mutex;                 // guards captures
std::vector<LogCapture*> captures;
// The newest kRecentLines lines (seed B14), a ring; guarded by captures_mutex.
constexpr std::size_t kRecentLines = 100;
std::vector<std::string> recent;
std::size_t recent_next = 0;

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

// The lines a batching thread holds until flush_log_batch().
struct HeldLines {
  bool batching = false;
  std::string text;
};
thread_local HeldLines held_lines;
constexpr std::size_t kMaxHeldBytes = 64 * 1024;

void write_held() noexcept {
  if (held_lines.text.empty()) return;
  write_stderr(held_lines.text);
  held_lines.text.clear();
}

// Standard error, coloured only on a colour terminal. A line is formatted
// under the sink's lock and written outside it, in one write(2) (spdlog's own
// console sinks write and flush under the lock). On a thread that batches
// (set_log_batching), lines below warn are held and written together by
// flush_log_batch(); a warning or an error writes what is held, then itself.
class StderrSink final : public spdlog::sinks::sink {
 public:
  StderrSink()
      : colours_(spdlog::details::os::in_terminal(stderr) && spdlog::details::os::is_color_terminal()),
        formatter_(std::make_unique<spdlog::pattern_formatter>()) {}

  void log(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    {
      std::lock_guard lock(mutex_);
      msg.color_range_start = 0;
      msg.color_range_end = 0;
      formatter_->format(msg, formatted);
    }
    std::string& out = held_lines.text;
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
    if (!held_lines.batching || msg.level >= spdlog::level::warn || out.size() >= kMaxHeldBytes) write_held();
  }
  void flush() override {}
  void set_pattern(const std::string& pattern) override {
    std::lock_guard lock(mutex_);
    formatter_ = std::make_unique<spdlog::pattern_formatter>(pattern);
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    std::lock_guard lock(mutex_);
    formatter_ = std::move(formatter);
  }

 private:
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
  std::mutex mutex_;  // guards formatter_ (it caches the current second)
  std::unique_ptr<spdlog::formatter> formatter_;
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
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
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
  } else {
    spdlog::log(to_spdlog(level), "{}: {}", component, message);
  }
  std::string line;
  line.reserve(component.size() + 2 + message.size());
  line.append(component).append(": ").append(message);
  std::lock_guard lock(captures_mutex);
  for (LogCapture* capture : captures) capture->append(line);
  if (level == LogLevel::debug) return;  // the prompt's LOGS section sees info and above
  if (recent.size() < kRecentLines) {
    recent.push_back(std::move(line));
  } else {
    recent[recent_next] = std::move(line);
  }
  recent_next = (recent_next + 1) % kRecentLines;
}

void set_log_batching(bool on) noexcept {
  if (!on) write_held();
  held_lines.batching = on;
}

void flush_log_batch() noexcept { write_held(); }

std::vector<std::string> recent_log_lines(std::size_t count) {
  std::lock_guard lock(captures_mutex);
  count = std::min(count, recent.size());
  std::vector<std::string> lines;
  lines.reserve(count);
  // Oldest first among the newest `count`.
  for (std::size_t i = count; i > 0; --i) {
    lines.push_back(recent[(recent_next + kRecentLines - i) % kRecentLines]);
  }
  return lines;
}

LogCapture::LogCapture() {
  std::lock_guard lock(captures_mutex);
  captures.push_back(this);
}

LogCapture::~LogCapture() {
  std::lock_guard lock(captures_mutex);
  captures.erase(std::remove(captures.begin(), captures.end(), this), captures.end());
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
