// GateWatchdog: notices a gate call that runs past its time budget, so the
// verifier can fail the verdict closed, without a clock read per gate call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace passepartout {

// A gate cannot be interrupted (it runs in-process, in the skill's code), but
// its verdict can be refused. Each verifying thread owns a GateWatch; around
// each gate call the thread writes a ticket (two relaxed stores) that carries
// a call number and the gate's own budget in ms (0: the host's default). A
// background thread samples the tickets every quarter of the finest budget in
// use: a call whose ticket has not moved for its whole budget is marked late,
// and the verifier turns its verdict into a failure ("exceeded its time
// budget of N ms"). A call is never marked late before its budget has passed;
// it is noticed within about half the finest budget after, provided the
// watchdog thread gets a CPU: on a machine so busy that it waits longer than
// the call lasts, a late call can go unnoticed (sampling is what keeps the
// clock off the hot path). The cost on the hot path is about a nanosecond
// per gate.
class GateWatch {
 public:
  // Ticket layout: bit 0 set while in a gate; bits 1-23 the budget in ms;
  // bits 24-63 the call number.
  static constexpr std::uint32_t kMaxBudgetMs = (1U << 23) - 1;

  // Enters a gate call with `budget_ms` (0: the host's default; at most
  // kMaxBudgetMs); returns the ticket to pass to finish().
  std::uint64_t start(std::uint32_t budget_ms = 0) noexcept {
    const std::uint64_t call = (sequence_.load(std::memory_order_relaxed) >> kCallShift) + 1;
    const std::uint64_t ticket = (call << kCallShift) | (std::uint64_t{budget_ms} << 1U) | 1U;  // odd: in a gate
    sequence_.store(ticket, std::memory_order_relaxed);
    return ticket;
  }
  // Leaves the gate call; true when the watchdog found it late.
  bool finish(std::uint64_t ticket) noexcept {
    sequence_.store(ticket + 1, std::memory_order_relaxed);  // even: idle
    return late_ticket_.load(std::memory_order_relaxed) == ticket;
  }

  // Verifications this thread has run; drives latency sampling.
  std::uint64_t next_verification() noexcept { return ++verifications_; }

  // One watchdog scan (watchdog thread only), at `now`: a call whose ticket
  // has not moved since a scan at least its budget ago (`default_budget`
  // for a ticket that carries none) is marked late. True when this scan
  // marked it (once per call).
  bool scan(std::chrono::steady_clock::time_point now, std::chrono::milliseconds default_budget) noexcept {
    const std::uint64_t seen = sequence_.load(std::memory_order_relaxed);
    const bool in_gate = (seen & 1U) != 0;
    if (!in_gate || seen != last_seen_) {
      last_seen_ = seen;
      first_seen_ = now;
      return false;
    }
    const auto carried = static_cast<std::uint32_t>((seen >> 1U) & kMaxBudgetMs);
    const std::chrono::milliseconds budget = carried != 0 ? std::chrono::milliseconds(carried) : default_budget;
    if (now - first_seen_ < budget || late_ticket_.load(std::memory_order_relaxed) == seen) return false;
    late_ticket_.store(seen, std::memory_order_relaxed);
    return true;
  }

 private:
  static constexpr unsigned kCallShift = 24;

  std::atomic<std::uint64_t> sequence_{0};
  std::atomic<std::uint64_t> late_ticket_{0};
  std::uint64_t verifications_ = 0;  // owner thread only
  // Watchdog thread only:
  std::uint64_t last_seen_ = 0;
  std::chrono::steady_clock::time_point first_seen_{};
};

class GateWatchdog {
 public:
  // The calling thread's watch, registered with the watchdog on first use and
  // unregistered when the thread exits. Starts the watchdog thread lazily.
  static GateWatch& this_thread();

  // The budget of a gate whose manifest sets no `gate_timeout` (default
  // 1000 ms; the daemon's --gate-timeout). Any thread; applies to calls from
  // the next scan on.
  static void set_budget(std::chrono::milliseconds budget);
  static std::chrono::milliseconds budget();
  // Gate calls the watchdog has marked late since the process started (any
  // thread): a test holds a gate until this count moves, so that the call is
  // judged late however long the watchdog thread waited for a CPU.
  static std::uint64_t late_calls() noexcept;
  // The budget a gate call with `budget_ms` (a ticket's; 0: the default) gets.
  static std::chrono::milliseconds budget_of(std::uint32_t budget_ms) {
    return budget_ms != 0 ? std::chrono::milliseconds(budget_ms) : budget();
  }
};

}  // namespace passepartout
