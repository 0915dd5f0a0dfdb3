// Verifier: cognitive-verify — every gate of a snapshot, in priority order,
// judges a proposed action; the outcome and a gate trace come back.
//
// Part of the C ABI boundary: the gate loop calls each gate's hook itself,
// through Snapshot::Gate's function pointer, with one pp_call for the whole
// verification (a rewritten action lives in it until the next gate has read
// it). It is the hot path: going through a Slot member would cost a call and
// a pp_call per gate. What a gate answered is read with Slot's inline
// verdict readers (skills/slot.hpp), so decoding a pp_verdict stays there.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/interval_clock.hpp"
#include "skills/registry.hpp"
#include "value/value.hpp"

namespace passepartout {

// What one gate did, as the trace shows it.
enum class GateResult : std::uint8_t { passed, rewritten, blocked, approval, failed };

const char* to_string(GateResult result) noexcept;

// Which of the host's own rules an entry without a slot is: the guard rule,
// which *fails* an action whose actuator or tool is missing its guards; the
// credential rule, which *blocks* an action carrying a configured key
// (pipeline/credential_rule.hpp); the operator's rules, which *block* (deny)
// or *ask* (pipeline/rules.hpp). `none`: read from the result (a block is
// the credential rule's, anything else the guard rule's).
// A consensus round whose models did not agree (pipeline/consensus.hpp)
// *blocks* as `consensus`.
enum class HostRule : std::uint8_t { none, guard, credential, operator_rules, consensus };

// One gate's decision as the trace stores it: two words, trivially
// destructible, so recording a pass is two stores and clearing is free.
struct GateTraceEntry {
  const Slot* slot;  // valid while the snapshot that was verified against lives
  GateResult result;
  HostRule host;         // slot null: which host rule
  std::uint32_t reason;  // index into the trace's reasons + 1; 0: none
};

// The names and version a trace shows for the host's own rules.
inline constexpr std::string_view kGuardRuleName = "guard-rule";
inline constexpr std::string_view kCredentialRuleName = "credential-rule";
inline constexpr std::string_view kOperatorRulesName = "rules";
inline constexpr std::string_view kConsensusName = "consensus";
inline constexpr std::string_view kGuardRuleVersion = "host";

// What a reader of the trace sees of one entry.
struct GateTraceView {
  const Slot* slot;  // nullptr: a host rule (`host` says which)
  GateResult result;
  const Value& reason;  // blocked, approval, failed: why (a string); NIL otherwise
  HostRule host = HostRule::none;

  std::string_view name() const noexcept {
    if (slot != nullptr) return slot->name();
    switch (host) {
      case HostRule::guard:
        return kGuardRuleName;
      case HostRule::credential:
        return kCredentialRuleName;
      case HostRule::operator_rules:
        return kOperatorRulesName;
      case HostRule::consensus:
        return kConsensusName;
      case HostRule::none:
        break;
    }
    return result == GateResult::blocked ? kCredentialRuleName : kGuardRuleName;
  }
  std::string_view version() const noexcept {
    return slot != nullptr ? std::string_view(slot->version_text()) : kGuardRuleVersion;
  }
};

// The gates' decisions in execution order. Up to kInline entries live inline
// and are never zero-filled, so a verification does not allocate for its
// trace; reasons (only gates that did not pass give one) are kept apart.
class GateTrace {
 public:
  static constexpr std::size_t kInline = 16;

  GateTrace() = default;
  GateTrace(const GateTrace& other) : prebuilt_(other.prebuilt_) { append_all(other); }
  GateTrace& operator=(const GateTrace& other) {
    if (this != &other) {
      clear();
      append_all(other);
      prebuilt_ = other.prebuilt_;
    }
    return *this;
  }
  ~GateTrace() = default;

  // The hot path: a gate that passed or rewrote.
  void push_back(const Slot* slot, GateResult result) {
    if (result == GateResult::passed) ++plain_passes_;
    if (size_ < kInline) [[likely]] {
      entries_[size_] = GateTraceEntry{slot, result, HostRule::none, 0};
    } else {
      overflow_.push_back(GateTraceEntry{slot, result, HostRule::none, 0});
    }
    ++size_;
  }
  void push_back(const Slot* slot, GateResult result, Value reason, HostRule host = HostRule::none) {
    if (reason.is_nil() && host == HostRule::none) {
      push_back(slot, result);
      return;
    }
    std::uint32_t index = 0;
    if (!reason.is_nil()) {
      reasons_.push_back(std::move(reason));
      index = static_cast<std::uint32_t>(reasons_.size());
    }
    if (size_ < kInline) {
      entries_[size_] = GateTraceEntry{slot, result, host, index};
    } else {
      overflow_.push_back(GateTraceEntry{slot, result, host, index});
    }
    ++size_;
  }
  // A host rule's decision (no slot).
  void push_host(HostRule host, GateResult result, Value reason) {
    push_back(nullptr, result, std::move(reason), host);
  }
  void clear() noexcept {
    if (size_ > kInline) overflow_.clear();
    if (!reasons_.empty()) reasons_.clear();
    prebuilt_ = nullptr;
    size_ = 0;
    plain_passes_ = 0;
  }
  // The trace of a verification in which every gate passed, prebuilt by the
  // snapshot (Snapshot::passed_trace()): to_value() returns it when the
  // entries are exactly that. Not copied: like the entries' slots, valid
  // while the snapshot lives. Until the next clear().
  void set_prebuilt(const Value& trace) noexcept { prebuilt_ = &trace; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // True when every gate passed without a word (no rewrite, no reason).
  bool all_plain_passes() const noexcept { return plain_passes_ == size_; }
  GateTraceView operator[](std::size_t i) const noexcept {
    const GateTraceEntry& e = i < kInline ? entries_[i] : overflow_[i - kInline];
    return GateTraceView{e.slot, e.result, e.reason == 0 ? kNoReason : reasons_[e.reason - 1], e.host};
  }

  // The seed's :GATE-TRACE list: ((:GATE "name" :VERSION "1.0.0" :RESULT :PASSED) ...),
  // with :REWRITTEN T on rewrites and :REASON "..." where there is one.
  Value to_value() const;

 private:
  static inline const Value kNoReason{};

  void append_all(const GateTrace& other) {
    for (std::size_t i = 0; i < other.size(); ++i) {
      push_back(other[i].slot, other[i].result, other[i].reason, other[i].host);
    }
  }

  GateTraceEntry entries_[kInline];  // [0, min(size_, kInline)) are set
  std::vector<GateTraceEntry> overflow_;
  std::vector<Value> reasons_;
  const Value* prebuilt_ = nullptr;
  std::size_t size_ = 0;
  std::size_t plain_passes_ = 0;  // entries that passed without a reason
};

enum class VerifyOutcome : std::uint8_t { passed, blocked, approval_required };

// A blocked verification's action, the rejection shown to the user:
// (:TYPE :LOG :PAYLOAD (:LEVEL :<level> :TEXT "<text>")).
Value rejection(std::string_view level, const std::string& text);

const char* to_string(VerifyOutcome outcome) noexcept;

struct Verification {
  VerifyOutcome outcome = VerifyOutcome::passed;
  // passed: the final action (rewritten where a gate rewrote it);
  // approval_required: the action a human must approve;
  // blocked: the rejection shown to the user, (:TYPE :LOG :PAYLOAD (:LEVEL :ERROR :TEXT "...")).
  Value action;
  // blocked and approval_required: why (the deciding gate's reason).
  Value reason;
  GateTrace trace;
  // The gate that ran past its time budget in this verification (it failed
  // it), or null: a caller that asks again for the same signal passes its
  // name in Verifier::verify's `timed_out`, so it is not called again.
  const Slot* timed_out = nullptr;

  // The seed-shaped result: the action or rejection with :GATE-TRACE, or
  // (:TYPE :EVENT :LEVEL :APPROVAL-REQUIRED :GATE-TRACE .. :PAYLOAD (:SENSOR :APPROVAL-REQUIRED :ACTION a :REASON r)).
  Value to_value() const;
};

// When each gate of one verification ended, for the decision log: at[0] is
// read before the first gate, at[i + 1] after gate i; gates past kMax are
// not timed. Never zero-filled.
struct GateTimes {
  static constexpr std::size_t kMax = 32;
  IntervalClock::Ticks at[kMax + 1];
  std::size_t count = 0;

  void mark() noexcept {
    if (count <= kMax) at[count++] = IntervalClock::now();
  }
  // Whether gate `i` (its trace entry's index) was timed.
  bool timed(std::size_t i) const noexcept { return i + 1 < count; }
};

// What a verification captures for the snapshot's shadow candidates
// (Snapshot::shadows()), indexed like them: whether the live gate was asked,
// the action it was given, the action it let through (pass or rewrite), and
// its entry in the trace. Filled only while the snapshot carries candidates.
struct ShadowCapture {
  struct Entry {
    bool reached = false;
    Value input;
    Value output;  // NIL unless the live gate passed or rewrote
    std::size_t trace_index = 0;
  };
  std::vector<Entry> entries;
};

// Runs the gates. Stateless; any thread, concurrently.
//
// First the guard rule: an action whose actuator or tool is served by a
// skill missing one of its guards (Snapshot::unguarded) *fails* before any
// gate runs, with a trace entry of the host's (kGuardRuleName) saying which
// guard is missing: no loaded set of skills lets an actuator act without the
// gates its manifest trusts. Then the credential rule: an action carrying a
// configured provider key (KnownCredentials) is *blocked*, with a trace
// entry of the host's (kCredentialRuleName) naming where the key came from.
//
// Contract (seed D15, Decisions 2): gates run highest priority first, ties by
// name; pass continues with the same action; rewrite continues with the new
// one; approval is remembered and later gates still run (the last approval's
// action is the one to approve); block stops at once. A gate that reports an
// error, throws (the SDK turns that into an error), answers a verdict kind
// this host does not know, rewrites without an action, or exceeds its time
// budget (GateWatchdog) *fails*: the action is blocked and the trace says
// :FAILED, distinct from :BLOCKED. A gate named in `timed_out` (it ran past
// its budget earlier for the same signal) is not called: it fails at once
// ("timed out earlier for this signal, not called again"), so the retries of
// a signal never wait on a slow gate twice.
class Verifier {
 public:
  // `times`, when given, gets a clock reading before the first gate and after each.
  // `capture`, when given, is filled for the snapshot's shadow candidates
  // (the gate loop then runs its capturing variant; without it, nothing is captured).
  // `timed_out`: names of gates that timed out earlier for this signal
  // (Verification::timed_out); usually empty, and then free.
  static void verify(const Snapshot& snapshot, const Value& action, const Value& signal, Verification& out,
                     GateTimes* times = nullptr, ShadowCapture* capture = nullptr,
                     std::span<const std::string> timed_out = {});
  static Verification verify(const Snapshot& snapshot, const Value& action, const Value& signal) {
    Verification out;
    verify(snapshot, action, signal, out);
    return out;
  }
};

}  // namespace passepartout
