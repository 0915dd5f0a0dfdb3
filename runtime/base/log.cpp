// Logging: each line is routed to spdlog's sink (log_sink.cpp), the test
// captures (log_capture.cpp) and the recent lines (log_recent.cpp).
#include "base/log.hpp"

#include <fmt/format.h>
#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "base/json_string.hpp"
#include "base/log_detail.hpp"
#include "base/log_fields.hpp"

namespace passepartout {
namespace {

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::debug:
      return spdlog::level::debug;
    case LogLevel::info:
      return spdlog::level::info;
    case LogLevel::warn:
      return spdlog::level::warn;
    case LogLevel::error:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

std::atomic<bool> json_lines{false};  // set by configure_logging()

}  // namespace

namespace log_detail {

bool writes_json_lines() noexcept { return json_lines.load(std::memory_order_relaxed); }

void write_line(std::string& line, std::string_view component, std::string_view message) {
  constexpr std::size_t kKeptCapacity = 1024;
  const std::size_t size = component.size() + 2 + message.size();
  if (line.capacity() > kKeptCapacity && size <= kKeptCapacity) std::string().swap(line);
  line.clear();
  line.reserve(size);
  line.append(component).append(": ", 2).append(message);
}

}  // namespace log_detail

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warn";
    case LogLevel::error:
      return "error";
  }
  return "info";
}

void configure_logging(LogLevel min_level, LogFormat format) {
  auto logger = spdlog::get("passepartout");
  if (!logger) {
    logger = std::make_shared<spdlog::logger>("passepartout", log_detail::make_stderr_sink());
    spdlog::register_logger(logger);
  }
  if (format == LogFormat::json) {
    // log_message() supplies the escaped "component" and "message" members.
    logger->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l",%v})");
  } else {
    logger->set_formatter(log_detail::make_text_line_formatter());
  }
  logger->set_level(to_spdlog(min_level));
  json_lines.store(format == LogFormat::json, std::memory_order_relaxed);
  spdlog::set_default_logger(std::move(logger));
}

namespace {

// Whether a text-format value must be quoted: empty, or holding a space, a
// quote, '=' or a control character.
bool needs_quotes(std::string_view value) {
  if (value.empty()) return true;
  return std::any_of(value.begin(), value.end(), [](char c) {
    return c == ' ' || c == '"' || c == '=' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

// " key=value ..." after a text line's message.
void append_text_fields(std::string& out, std::span<const LogField> fields) {
  for (const LogField& field : fields) {
    out.append(1, ' ').append(field.key).append(1, '=');
    if (field.is_number) {
      fmt::format_to(std::back_inserter(out), "{}", field.number);
    } else if (needs_quotes(field.text)) {
      append_json_string(out, field.text);  // escaped and quoted
    } else {
      out.append(field.text);
    }
  }
}

void emit(LogLevel level, std::string_view component, std::span<const LogField> fields, std::string_view message) {
  const bool json = json_lines.load(std::memory_order_relaxed);
  if (json) {
    std::string members = "\"component\":";
    append_json_string(members, component);
    members += ",\"message\":";
    append_json_string(members, message);
    for (const LogField& field : fields) {
      members += ',';
      append_json_string(members, field.key);
      members += ':';
      if (field.is_number) {
        fmt::format_to(std::back_inserter(members), "{}", field.number);
      } else {
        append_json_string(members, field.text);
      }
    }
    spdlog::log(to_spdlog(level), "{}", members);
  }
  // Text, captures and the recent lines see the fields after the message.
  std::string with_fields;
  if (!fields.empty()) {
    with_fields.reserve(message.size() + 16 * fields.size());
    with_fields.append(message);
    append_text_fields(with_fields, fields);
    message = with_fields;
  }
  if (spdlog::logger* logger = spdlog::default_logger_raw(); !json && logger->should_log(to_spdlog(level))) {
    // "<component>: <message>" built here: spdlog's "{}: {}" costs a format
    // string's parse on every line.
    thread_local std::string text;
    log_detail::write_line(text, component, message);
    logger->log(to_spdlog(level), spdlog::string_view_t(text.data(), text.size()));
  }
  log_detail::feed_log_captures(component, message);
  // The prompt's LOGS section sees info and above.
  if (level != LogLevel::debug) log_detail::keep_recent_line(component, message);
}

}  // namespace

void log_message(LogLevel level, std::string_view component, std::string_view message) {
  emit(level, component, {}, message);
}

void log_message(LogLevel level, std::string_view component, std::span<const LogField> fields,
                 std::string_view message) {
  emit(level, component, fields, message);
}

bool is_logged(LogLevel level) noexcept {
  return level != LogLevel::debug || spdlog::default_logger_raw()->should_log(to_spdlog(level)) ||
         log_detail::any_log_capture();
}

void log_formatted(LogLevel level, std::string_view component, fmt::string_view format, fmt::format_args args) {
  fmt::memory_buffer message;  // on the stack up to 500 bytes
  fmt::vformat_to(std::back_inserter(message), format, args);
  log_message(level, component, std::string_view(message.data(), message.size()));
}

void log_formatted(LogLevel level, std::string_view component, std::span<const LogField> fields,
                   fmt::string_view format, fmt::format_args args) {
  fmt::memory_buffer message;
  fmt::vformat_to(std::back_inserter(message), format, args);
  emit(level, component, fields, std::string_view(message.data(), message.size()));
}

std::string& log_line_buffer() noexcept {
  thread_local std::string buffer;
  buffer.clear();
  return buffer;
}

}  // namespace passepartout
