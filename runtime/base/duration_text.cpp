#include "base/duration_text.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <utility>

namespace passepartout {

using std::chrono::milliseconds;

namespace {

constexpr std::int64_t kSecond = 1000;
constexpr std::int64_t kMinute = 60 * kSecond;
constexpr std::int64_t kHour = 60 * kMinute;
constexpr std::int64_t kDay = 24 * kHour;
constexpr std::int64_t kWeek = 7 * kDay;
constexpr std::int64_t kMaxSpan = 3653 * kDay;  // ten years

}  // namespace

Result<milliseconds> parse_span(std::string_view text) {
  auto bad = [text] {
    return fail(ErrorCode::invalid_input, "'" + std::string(text) +
                                              "' is not a span of time: write a whole number and a unit, "
                                              "s, m, h, d or w (\"90s\", \"10m\", \"12h\", \"7d\"), up to ten years");
  };
  std::int64_t unit = kSecond;
  std::string_view digits = text;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 's':
        unit = kSecond;
        digits.remove_suffix(1);
        break;
      case 'm':
        unit = kMinute;
        digits.remove_suffix(1);
        break;
      case 'h':
        unit = kHour;
        digits.remove_suffix(1);
        break;
      case 'd':
        unit = kDay;
        digits.remove_suffix(1);
        break;
      case 'w':
        unit = kWeek;
        digits.remove_suffix(1);
        break;
      default:
        break;
    }
  }
  std::int64_t n = 0;
  const char* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, n);
  if (digits.empty() || ec != std::errc() || ptr != end || n <= 0 || n > kMaxSpan / unit) return bad();
  return milliseconds(n * unit);
}

std::string span_text(milliseconds span) {
  constexpr std::array<std::pair<std::int64_t, const char*>, 4> kUnits{
      {{kDay, "d"}, {kHour, "h"}, {kMinute, "min"}, {kSecond, "s"}}};
  std::int64_t left = span.count();
  if (left < kSecond) return std::to_string(left) + " ms";
  std::string out;
  int shown = 0;
  for (const auto& [size, name] : kUnits) {
    if (left < size && out.empty()) continue;
    const std::int64_t n = left / size;
    left %= size;
    if (n != 0) {
      if (!out.empty()) out += ' ';
      out += std::to_string(n) + ' ' + name;
    }
    if (!out.empty() && ++shown == 2) break;
  }
  return out;
}

std::int64_t unix_ms_now() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string utc_timestamp(std::int64_t unix_ms) {
  const auto seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  std::array<char, 32> buffer{};
  const std::size_t n = std::strftime(buffer.data(), buffer.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buffer.data(), n);
}

std::optional<std::int64_t> parse_utc_timestamp(std::string_view text) {
  std::tm tm{};
  int year = 0;
  int month = 0;
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  char zone = 0;
  const std::string copy(text);
  if (std::sscanf(copy.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &year, &month, &day, &hour, &minute, &second, &zone) !=
          7 ||
      zone != 'Z' || copy.size() != 20 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 ||
      second > 60) {
    return std::nullopt;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

}  // namespace passepartout
