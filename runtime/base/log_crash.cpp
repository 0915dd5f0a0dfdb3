// The crash writer: on a fatal signal, what the batching threads hold and a
// line naming the signal, then the signal's previous disposition.
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <string_view>

#include "base/log.hpp"
#include "base/log_detail.hpp"

namespace passepartout {
namespace {

using log_detail::held_lines_slots;
using log_detail::HeldLines;
using log_detail::kRegisteredThreads;
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
  line.number(static_cast<std::uint64_t>(offset_minutes / 60), 2)
      .number(static_cast<std::uint64_t>(offset_minutes % 60), 2);
}

extern "C" void on_fatal_signal(int number, siginfo_t* info, void* /*context*/) {
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
  CrashLine line;
  const std::string_view message = "fatal signal; the process stops";
  if (writes_json_lines()) {
    line.text(R"({"time":")");
    put_time(line, true);
    line.text(R"(","level":"error","component":"crash","message":")").text(signal_name(number));
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

}  // namespace passepartout
