// Shadow statistics: sharded counts, and the latest disagreements in a small ring.
#include "skills/shadow.hpp"

#include <utility>

namespace passepartout {

const char* to_string(ShadowKind kind) noexcept {
  switch (kind) {
    case ShadowKind::agreement:
      return "agreement";
    case ShadowKind::candidate_blocks:
      return "candidate-blocks";
    case ShadowKind::candidate_passes:
      return "candidate-passes";
    case ShadowKind::rewrites_differently:
      return "rewrites-differently";
    case ShadowKind::candidate_failed:
      return "candidate-failed";
  }
  return "candidate-failed";
}

void ShadowStats::remember(ShadowSample sample) {
  const std::lock_guard lock(latest_mutex_);
  latest_.push_front(std::move(sample));
  if (latest_.size() > kLatest) latest_.pop_back();
}

ShadowCounts ShadowStats::read() const noexcept {
  ShadowCounts counts;
  for (std::size_t i = 0; i < kShadowKinds; ++i) {
    counts.by_kind[i] = counts_.sum(i);
    counts.seen += counts.by_kind[i];
  }
  return counts;
}

std::vector<ShadowSample> ShadowStats::latest() const {
  const std::lock_guard lock(latest_mutex_);
  return {latest_.begin(), latest_.end()};
}

std::string shadow_counts_json(const ShadowCounts& counts) {
  std::string out =
      "{\"seen\":" + std::to_string(counts.seen) + ",\"agreements\":" + std::to_string(counts.agreements());
  for (std::size_t i = 1; i < kShadowKinds; ++i) {
    out += ",\"";
    out += to_string(static_cast<ShadowKind>(i));
    out += "\":" + std::to_string(counts.by_kind[i]);
  }
  out += '}';
  return out;
}

}  // namespace passepartout
