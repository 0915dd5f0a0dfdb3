// Per-thread batching: the lines a thread holds until it flushes them, in
// slots the fatal-signal handler can find.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <memory>
#include <new>

#include "base/log.hpp"
#include "base/log_detail.hpp"

namespace passepartout {
namespace log_detail {

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

// Never destroyed: a thread may log during static destruction.
HeldLines* held_lines_slots() {
  static auto* const kSlots = new HeldLines[kRegisteredThreads];
  return kSlots;
}

void write_held(HeldLines& held) noexcept {
  // Only the owner changes its text, and this is the owner: nothing held,
  // nothing to claim (the usual case, after every round of an event loop).
  if (held.text.empty()) return;
  Editing editing(held);
  if (held.text.empty()) return;
  write_stderr(held.text);
  held.text.clear();
}

}  // namespace log_detail

namespace {

using log_detail::Editing;
using log_detail::held_lines_slots;
using log_detail::HeldLines;
using log_detail::kRegisteredThreads;
using log_detail::write_held;

// A thread that finds no free slot still batches, unregistered.
HeldLines* take_slot() noexcept {
  HeldLines* const slots = held_lines_slots();
  for (std::size_t i = 0; i < kRegisteredThreads; ++i) {
    bool expected = false;
    if (slots[i].taken.compare_exchange_strong(expected, true, std::memory_order_acquire)) return &slots[i];
  }
  return nullptr;
}

// A signal stack of its own for a batching thread, so that the fatal-signal
// handler also runs when the thread overflowed its stack (a skill's runaway
// recursion). Left alone when the thread already has one.
class AltStack {
 public:
  void install() noexcept {
    stack_t current{};
    if (::sigaltstack(nullptr, &current) != 0 || (current.ss_flags & SS_DISABLE) == 0) return;
    const std::size_t size = std::max<std::size_t>(std::size_t{64} * 1024, static_cast<std::size_t>(SIGSTKSZ));
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

}  // namespace

namespace log_detail {

HeldLines& thread_held_lines() noexcept { return thread_log.held(); }
bool is_thread_batching() noexcept { return thread_log.batching; }

}  // namespace log_detail

void set_log_batching(bool on) noexcept {
  ThreadLog& log = thread_log;
  if (on == log.batching) return;
  if (on) {
    log_detail::write_held(log.own);
    log.slot = take_slot();
    log.alt_stack.install();
  } else {
    log.release_slot();
    log.alt_stack.remove();
  }
  log.batching = on;
}

void flush_log_batch() noexcept { log_detail::write_held(thread_log.held()); }

}  // namespace passepartout
