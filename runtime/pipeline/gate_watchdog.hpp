// GateWatchdog: notices a gate call that runs past its time budget, so the
// verifier can fail the verdict closed, without a clock read per gate call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace passepartout {

// A gate cannot be interrupted (it runs in-process, in the skill's code), but
// its verdict can be refused. Each verifying thread owns a GateWatch; around
// each gate call the thread bumps a sequence number (two relaxed stores). A
// background thread samples the sequences every budget/4: a call whose
// sequence has not moved for a whole budget is marked late, and the verifier
// turns its verdict into a failure ("exceeded its time budget"). Precision is
// a quarter budget, which is what a deadline of this kind needs; the cost on
// the hot path is about a nanosecond per gate.
class GateWatch {
 public:
  // Enters a gate call; returns the ticket to pass to finish().
  std::uint64_t start() noexcept {
    std::uint64_t ticket = sequence_.load(std::memory_order_relaxed) + 1;  // odd: in a gate
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

  // One watchdog scan (watchdog thread only): a call whose sequence has not
  // moved for `scans_per_budget` scans has used its whole budget.
  void scan(std::uint32_t scans_per_budget) noexcept {
    std::uint64_t seen = sequence_.load(std::memory_order_relaxed);
    bool in_gate = (seen & 1U) != 0;
    if (!in_gate || seen != last_seen_) {
      last_seen_ = seen;
      unchanged_scans_ = 0;
      return;
    }
    if (++unchanged_scans_ >= scans_per_budget) late_ticket_.store(seen, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> sequence_{0};
  std::atomic<std::uint64_t> late_ticket_{0};
  std::uint64_t verifications_ = 0;  // owner thread only
  // Watchdog thread only:
  std::uint64_t last_seen_ = 0;
  std::uint32_t unchanged_scans_ = 0;
};

class GateWatchdog {
 public:
  // The calling thread's watch, registered with the watchdog on first use and
  // unregistered when the thread exits. Starts the watchdog thread lazily.
  static GateWatch& this_thread();

  // The budget every gate call gets (default 1000 ms). Any thread; applies to
  // calls from the next scan on.
  static void set_budget(std::chrono::milliseconds budget);
  static std::chrono::milliseconds budget();
};

}  // namespace passepartout
