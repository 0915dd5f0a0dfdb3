// The test capture: LogCapture collects every line logged while it is alive.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "base/log_detail.hpp"

namespace passepartout {
namespace {

std::mutex captures_mutex;  // guards captures
std::vector<LogCapture*> captures;
std::atomic<std::size_t> capture_count{0};  // captures.size(): no lock taken while it is 0

}  // namespace

namespace log_detail {

bool any_log_capture() noexcept { return capture_count.load(std::memory_order_acquire) != 0; }

void feed_log_captures(std::string_view component, std::string_view message) {
  if (capture_count.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(captures_mutex);
  std::string line;
  write_line(line, component, message);
  for (LogCapture* capture : captures) capture->append(line);
}

}  // namespace log_detail

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
