// Structured log lines: fields (skill, version, verdict, session, ...) that
// the JSON format writes as members of their own and the text format as key=value.
#pragma once

#include <fmt/core.h>

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "base/log.hpp"

namespace passepartout {

// One structured field of a line: "skill", "version", "verdict", "session",
// "tool", ... (never "time", "level", "component" or "message"). A view: the
// key and the text must outlive the call that logs it. A number is written
// unquoted in JSON.
struct LogField {
  constexpr LogField(std::string_view k, std::string_view v) noexcept : key(k), text(v) {}
  constexpr LogField(std::string_view k, const char* v) noexcept : key(k), text(v) {}
  constexpr LogField(std::string_view k, std::int64_t n) noexcept : key(k), number(n), is_number(true) {}

  std::string_view key;
  std::string_view text;
  std::int64_t number = 0;
  bool is_number = false;
};

// Logs `message` with `fields`: members of their own in a JSON line
// ({"time":...,"component":...,"message":...,"skill":"x",...}), and
// " key=value" after the message in text (a value that is empty or holds a
// space, a quote, '=' or a control character is written as a JSON string).
// Captures and the recent lines see the text form. Any thread.
void log_message(LogLevel level, std::string_view component, std::span<const LogField> fields,
                 std::string_view message);

void log_formatted(LogLevel level, std::string_view component, std::span<const LogField> fields,
                   fmt::string_view format, fmt::format_args args);

// Formats and logs only when is_logged(level); until then the fields are a
// few views on the stack:
//   log_fields(LogLevel::info, "verifier", {{"skill", name}, {"verdict", "block"}}, "{} blocked", label);
template <typename... Args>
void log_fields(LogLevel level, std::string_view component, std::initializer_list<LogField> fields,
                fmt::format_string<Args...> format, Args&&... args) {
  if (is_logged(level)) {
    log_formatted(level, component, std::span<const LogField>(fields.begin(), fields.size()), format,
                  fmt::make_format_args(args...));
  }
}

}  // namespace passepartout
