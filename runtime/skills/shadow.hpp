// Shadow candidates: a second version of a loaded gate, published with the
// snapshot beside the live one, asked the same question after the live gates
// have decided, and never obeyed. What it would have done differently is
// counted here (docs/operating.md, "Trying a new gate: shadow").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/thread_shards.hpp"

namespace passepartout {

class Slot;

// How a candidate's verdict compared with the live gate's on one action.
// Strictness orders verdicts: pass and rewrite < approval < block (a live
// gate that failed counts as a block: it blocked the action).
enum class ShadowKind : std::uint8_t {
  agreement,             // the same strictness, and for passes the same action
  candidate_blocks,      // the candidate is stricter (blocks, or asks where the live gate let it through)
  candidate_passes,      // the candidate is laxer
  rewrites_differently,  // both let it through, with different actions
  candidate_failed,      // the candidate threw, reported an error, answered garbage or ran out of time
};
inline constexpr std::size_t kShadowKinds = 5;

// "agreement", "candidate-blocks", "candidate-passes", "rewrites-differently", "candidate-failed".
const char* to_string(ShadowKind kind) noexcept;

// One disagreement as `skills shadow status` shows it.
struct ShadowSample {
  std::int64_t at_unix_ms = 0;
  std::string stage;  // "reason", "last-mile", "approval"
  ShadowKind kind = ShadowKind::agreement;
  std::string live;              // the live gate's verdict: "passed", "rewritten", "approval", "blocked", "failed"
  std::string candidate;         // the candidate's, likewise
  std::string live_reason;       // the live gate's reason; empty when it gave none
  std::string candidate_reason;  // the candidate's; empty when it gave none
  std::string action_digest;     // action_digest() of the action both judged
};

struct ShadowCounts {
  std::uint64_t seen = 0;  // verifications that reached the live gate, each asked of the candidate once
  std::array<std::uint64_t, kShadowKinds> by_kind{};  // indexed by ShadowKind
  std::uint64_t agreements() const noexcept { return by_kind[0]; }
  std::uint64_t disagreements() const noexcept { return seen - agreements(); }
  std::uint64_t of(ShadowKind kind) const noexcept { return by_kind[static_cast<std::size_t>(kind)]; }
};

// One candidate's statistics, shared by every snapshot that carries it.
// count() is sharded and lock-free (any thread); only a disagreement takes
// the mutex, to remember it among the latest kLatest.
class ShadowStats {
 public:
  static constexpr std::size_t kLatest = 10;

  void count(ShadowKind kind) noexcept { counts_.add(static_cast<std::size_t>(kind)); }
  void remember(ShadowSample sample);
  ShadowCounts read() const noexcept;
  // Newest first.
  std::vector<ShadowSample> latest() const;

 private:
  ShardedCounters<kShadowKinds> counts_;
  mutable std::mutex latest_mutex_;
  std::deque<ShadowSample> latest_;  // newest first; guarded by latest_mutex_
};

// A candidate as a snapshot carries it. `live` is the slot it shadows, kept
// only to be compared: a snapshot that no longer holds that slot (the live
// skill was swapped or removed) no longer carries the candidate.
struct ShadowCandidate {
  std::shared_ptr<const Slot> slot;
  const Slot* live = nullptr;
  std::shared_ptr<ShadowStats> stats;
  std::int64_t since_unix_ms = 0;  // when it started
  std::string requester;           // who started it
};

// The statistics as one line of JSON-ish text for the audit log's `detail`:
// {"seen":10,"agreements":8,"candidate-blocks":2,...}.
std::string shadow_counts_json(const ShadowCounts& counts);

}  // namespace passepartout
