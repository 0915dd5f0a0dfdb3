// Logging through spdlog, plus the capture observers tests attach.
#include "log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>

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
  if (!logger) logger = spdlog::stderr_color_mt("passepartout");
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
