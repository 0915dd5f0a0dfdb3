// The recent lines: the process-wide ring and a session's own (RecentLines,
// LogScope), and the merge of both a prompt's LOGS section reads.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/log.hpp"
#include "base/log_detail.hpp"

namespace passepartout {
namespace {

// The newest kRecentLogLines lines logged outside any LogScope (seed B14);
// guarded by ring_mutex. ring_total counts every line it ever took: readers
// compare it with what they copied last, and scoped lines record it to be
// ordered among these.
std::mutex ring_mutex;
RecentLines& process_ring() {
  static auto* const kRing = new RecentLines(kRecentLogLines);  // never destroyed: logging outlives statics
  return *kRing;
}
std::atomic<std::uint64_t> ring_total{0};

thread_local RecentLines* current_scope = nullptr;

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

}  // namespace

namespace log_detail {

void keep_recent_line(std::string_view component, std::string_view message) {
  if (RecentLines* scope = current_scope) {
    scope->add(component, message);
    return;
  }
  std::lock_guard lock(ring_mutex);
  process_ring().add(component, message);
  ring_total.fetch_add(1, std::memory_order_release);
}

}  // namespace log_detail

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
  constexpr std::size_t kKeptBytes = std::size_t{16} * 1024;
  if (text_.capacity() > kKeptBytes && text_.capacity() > 4 * text_.size()) text_.shrink_to_fit();
}

std::string_view RecentLines::newest_text(std::size_t count) const noexcept {
  if (count == 0) return {};
  const Entry& oldest = entries_[entries_.size() - count];
  const Entry& newest = entries_.back();
  return std::string_view(text_).substr(oldest.offset, newest.offset + newest.size - oldest.offset);
}

LogScope::LogScope(RecentLines* lines) noexcept : previous_(std::exchange(current_scope, lines)) {}
LogScope::~LogScope() { current_scope = previous_; }

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
std::optional<std::string_view> merge_recent_log_lines(std::string& out, std::size_t count, const RecentLines* scope) {
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

}  // namespace passepartout
