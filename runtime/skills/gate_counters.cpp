// The summing read of GateCounters.
#include "skills/gate_counters.hpp"

namespace passepartout {

GateCounts GateCounters::read() const noexcept {
  std::array<std::uint64_t, kFields> sum{};
  for (std::size_t s = 0; s < kThreadShards; ++s) {
    for (std::size_t f = 0; f < kFields; ++f) sum[f] += shards_[s].cells[f].load(std::memory_order_relaxed);
  }
  return GateCounts{sum[passes],   sum[rewrites],    sum[blocks],  sum[approvals],
                    sum[failures], sum[timed_calls], sum[timed_ns]};
}

}  // namespace passepartout
