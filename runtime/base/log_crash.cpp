// The crash writer: on a fatal signal, what the batching threads hold, a note
// (set_crash_note) and a line naming the signal and the skill hook that was
// running on the crashing thread, recorded durably (record_crashes_in), then
// the signal's previous disposition. And the same line for exit() in a hook.
#include <dlfcn.h>
#include <fcntl.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "base/crash_context.hpp"
#include "base/errno_text.hpp"
#include "base/log.hpp"
#include "base/log_detail.hpp"

namespace passepartout {

constinit thread_local RunningHookCell t_running_hook{};

namespace {

// The threads published with publish_running_hook(), each until it exits.
struct PublishedHooks {
  std::mutex mutex;
  std::vector<std::pair<const char*, const RunningHookCell*>> cells;

  static PublishedHooks& instance() {
    static auto* hooks = new PublishedHooks;  // never destroyed: threads may outlive statics
    return *hooks;
  }
};

// Removes the thread's cell when the thread exits.
struct PublishedHookLease {
  bool published = false;
  PublishedHookLease() = default;
  PublishedHookLease(const PublishedHookLease&) = delete;
  PublishedHookLease& operator=(const PublishedHookLease&) = delete;
  ~PublishedHookLease() {
    if (!published) return;
    PublishedHooks& hooks = PublishedHooks::instance();
    std::lock_guard lock(hooks.mutex);
    const RunningHookCell* mine = &t_running_hook;
    std::erase_if(hooks.cells, [mine](const auto& cell) { return cell.second == mine; });
  }
};
thread_local PublishedHookLease t_published_hook;

}  // namespace

void publish_running_hook(const char* role) {
  if (t_published_hook.published) return;
  t_published_hook.published = true;
  PublishedHooks& hooks = PublishedHooks::instance();
  std::lock_guard lock(hooks.mutex);
  hooks.cells.emplace_back(role, &t_running_hook);
}

std::vector<RunningHookOf> running_hooks() {
  std::vector<RunningHookOf> running;
  PublishedHooks& hooks = PublishedHooks::instance();
  std::lock_guard lock(hooks.mutex);
  for (const auto& [role, cell] : hooks.cells) {
    const RunningHook hook = cell->get();
    if (hook.skill != nullptr) running.push_back(RunningHookOf{role, hook});
  }
  return running;
}

namespace {

using log_detail::held_lines_slots;
using log_detail::HeldLines;
using log_detail::is_thread_batching;
using log_detail::kRegisteredThreads;
using log_detail::thread_held_lines;
using log_detail::write_held;
using log_detail::write_stderr;
using log_detail::writes_json_lines;

// The fatal-signal handler and its async-signal-safe helpers (no locks, no
// allocation, no stdio: write(2), clock_gettime and plain arithmetic).
constexpr std::array<int, 5> kFatalSignals{SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
std::array<struct sigaction, kFatalSignals.size()> previous_actions{};

const char* signal_name(int number) noexcept {
  switch (number) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGILL:
      return "SIGILL";
    case SIGFPE:
      return "SIGFPE";
    case SIGABRT:
      return "SIGABRT";
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
  char buffer_[512];
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
  line.number(static_cast<std::uint64_t>(offset_minutes / 60), 2)
      .number(static_cast<std::uint64_t>(offset_minutes % 60), 2);
}

// The crash record's file (record_crashes_in), -1 when none; and the note.
std::atomic<int> crash_record_fd{-1};
constexpr std::size_t kNoteCapacity = 4096;
char crash_note[kNoteCapacity];
std::atomic<std::size_t> crash_note_size{0};

// Appends `text` as the inside of a JSON string: what cannot be written
// plainly (quotes, backslashes, control bytes) becomes '?'.
void json_text(CrashLine& line, std::string_view text) noexcept {
  for (const char c : text) {
    const bool plain = c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20;
    line.text(plain ? std::string_view(&c, 1) : std::string_view("?"));
  }
}

// The code address the thread was at (x86-64 and AArch64; 0 elsewhere).
std::uintptr_t code_address(const void* context) noexcept {
  if (context == nullptr) return 0;
  const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.pc);
#else
  static_cast<void>(uc);
  return 0;
#endif
}

// The crash line: "<time> error crash: <cause>: <what>[ in hook H of skill
// 'x' 1.0.0][ (code in <library>)]; the process stops", or its JSON line.
void write_crash_line(std::string_view cause, std::string_view what, const RunningHook& running,
                      const char* library) noexcept {
  CrashLine line;
  const std::string_view stops = "; the process stops";
  if (writes_json_lines()) {
    line.text(R"({"time":")");
    put_time(line, true);
    line.text(R"(","level":"error","component":"crash",)");
    if (running.skill != nullptr) {
      line.text(R"("skill":")");
      json_text(line, running.skill->name);
      line.text(R"(","version":")");
      json_text(line, running.skill->version);
      line.text(R"(","hook":")");
      json_text(line, running.hook);
      line.text(R"(",)");
    }
    line.text(R"("message":")").text(cause).text(": ").text(what);
    if (running.skill != nullptr) {
      line.text(" in hook ");
      json_text(line, running.hook);
      line.text(" of skill '");
      json_text(line, running.skill->name);
      line.text("' ");
      json_text(line, running.skill->version);
    }
    if (library != nullptr) {
      line.text(" (code in ");
      json_text(line, library);
      line.text(")");
    }
    line.text(stops).text("\"}\n");
  } else {
    put_time(line, false);
    line.text(" error crash: ").text(cause).text(": ").text(what);
    if (running.skill != nullptr) {
      line.text(" in hook ").text(running.hook).text(" of skill '").text(running.skill->name).text("' ");
      line.text(running.skill->version);
    }
    if (library != nullptr) line.text(" (code in ").text(library).text(")");
    line.text(stops).text("\n");
  }
  write_stderr(line.view());
}

// One line in the crash record (crash_record.hpp parses it), then fsync:
// "passepartout-crash 1\tcause=SIGSEGV\tat_ms=...\tskill=...\tversion=...\thook=...\tsha256=...\n".
// The first fatal signal is the cause: one that follows while the process
// goes down (a sanitizer's abort after the fault it reported) must not
// overwrite its record.
std::atomic<bool> crash_recorded{false};

void write_crash_record(std::string_view cause, const RunningHook& running) noexcept {
  const int fd = crash_record_fd.load(std::memory_order_acquire);
  if (fd < 0 || running.skill == nullptr) return;
  if (crash_recorded.exchange(true, std::memory_order_acq_rel)) return;
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  CrashLine line;
  line.text("passepartout-crash 1\tcause=").text(cause).text("\tat_ms=");
  line.number(static_cast<std::uint64_t>(now.tv_sec) * 1000 + static_cast<std::uint64_t>(now.tv_nsec / 1'000'000));
  line.text("\tskill=").text(running.skill->name).text("\tversion=").text(running.skill->version);
  line.text("\thook=").text(running.hook).text("\tsha256=").text(running.skill->sha256).text("\n");
  const std::string_view bytes = line.view();
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
  ::fsync(fd);
}

extern "C" void on_fatal_signal(int number, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  // What every batching thread holds, but a text its thread is changing right now.
  HeldLines* const slots = held_lines_slots();
  for (std::size_t i = 0; i < kRegisteredThreads; ++i) {
    if (!slots[i].taken.load(std::memory_order_acquire)) continue;
    int expected = HeldLines::idle;
    if (slots[i].state.compare_exchange_strong(expected, HeldLines::claimed, std::memory_order_acquire)) {
      write_stderr(slots[i].text);
    }
  }
  if (const std::size_t note = crash_note_size.load(std::memory_order_acquire); note > 0) {
    write_stderr(std::string_view(crash_note, note));
  }
  // The hook the host called on this thread, and the library the faulting
  // code is in (dladdr: not on POSIX's list of async-signal-safe calls, but
  // it only reads the loader's list of objects, as backtrace writers do).
  // A signal another process sent (kill, systemd's watchdog) lands on any
  // thread: the hook that thread runs did not cause it, and is not named.
  const bool caused_here = info == nullptr || info->si_code > 0 || info->si_pid == ::getpid();
  const RunningHook running = caused_here ? t_running_hook.get() : RunningHook{};
  const char* library = nullptr;
  if (const std::uintptr_t pc = code_address(context); pc != 0) {
    Dl_info where{};
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the saved instruction pointer is an integer register
    if (::dladdr(reinterpret_cast<void*>(pc), &where) != 0 && where.dli_fname != nullptr && *where.dli_fname != 0) {
      library = where.dli_fname;
    }
  }
  write_crash_line(signal_name(number), "fatal signal", running, library);
  write_crash_record(signal_name(number), running);

  // The previous disposition handles the signal again: a fault recurs when
  // this handler returns; a signal that was sent is sent again.
  for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
    if (kFatalSignals[i] == number) ::sigaction(number, &previous_actions[i], nullptr);
  }
  if (info == nullptr || info->si_code <= 0) ::raise(number);
  errno = saved_errno;
}

// exit() or quick_exit() called while a hook runs on this thread.
extern "C" void on_exit_in_hook() {
  const RunningHook running = t_running_hook.get();
  if (running.skill == nullptr) return;
  if (is_thread_batching()) write_held(thread_held_lines());  // this thread's own lines only
  write_crash_line("exit", "the skill called exit()", running, nullptr);
  write_crash_record("exit", running);
}

}  // namespace

void write_held_logs_on_fatal_signals() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    log_detail::held_lines_slots();  // allocated now, not in the handler
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    if (::localtime_r(&now, &local) != nullptr) utc_offset_seconds = local.tm_gmtoff;
    struct sigaction action {};
    action.sa_sigaction = on_fatal_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;  // a batching thread's own stack, when it has one
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
      ::sigaction(kFatalSignals[i], &action, &previous_actions[i]);
    }
  });
}

Result<void> record_crashes_in(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return fail(ErrorCode::io_error, "cannot open the crash record " + file.string() + ": " + errno_text(errno));
  }
  const int previous = crash_record_fd.exchange(fd, std::memory_order_acq_rel);
  if (previous >= 0) ::close(previous);
  return {};
}

void set_crash_note(std::string_view text) {
  const std::size_t size = std::min(text.size(), kNoteCapacity);
  crash_note_size.store(0, std::memory_order_release);
  std::copy_n(text.data(), size, crash_note);
  crash_note_size.store(size, std::memory_order_release);
}

void log_exit_in_skill_hooks() {
  static std::once_flag registered;
  std::call_once(registered, [] {
    std::atexit(on_exit_in_hook);
    std::at_quick_exit(on_exit_in_hook);
  });
}

}  // namespace passepartout
