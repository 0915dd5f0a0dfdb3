// Verifier: cognitive-verify — every gate of a snapshot, in priority order,
// judges a proposed action; the outcome and a gate trace come back.
#pragma once

#include <cstdint>
#include <new>
#include <span>
#include <vector>

#include "skills/registry.hpp"
#include "value/value.hpp"

namespace passepartout {

// What one gate did, as the trace shows it.
enum class GateResult : std::uint8_t { passed, rewritten, blocked, approval, failed };

const char* to_string(GateResult result) noexcept;

struct GateTraceEntry {
  const Slot* slot;  // valid while the snapshot that was verified against lives
  GateResult result;
  Value reason;      // blocked, approval, failed: why (a string); NIL otherwise
};

// The gates' decisions in execution order. Up to kInline entries live inline
// and are never zero-filled, so a verification does not allocate for its trace.
class GateTrace {
 public:
  static constexpr std::size_t kInline = 16;

  GateTrace() = default;
  GateTrace(const GateTrace& other) { append_all(other); }
  GateTrace& operator=(const GateTrace& other) {
    if (this != &other) { clear(); append_all(other); }
    return *this;
  }
  ~GateTrace() { clear(); }

  void push_back(const Slot* slot, GateResult result, Value reason = Value()) {
    if (size_ < kInline) {
      new (inline_data() + size_) GateTraceEntry{slot, result, std::move(reason)};
    } else {
      overflow_.push_back(GateTraceEntry{slot, result, std::move(reason)});
    }
    ++size_;
  }
  void clear() noexcept {
    std::size_t n = size_ < kInline ? size_ : kInline;
    for (std::size_t i = 0; i < n; ++i) inline_data()[i].~GateTraceEntry();
    overflow_.clear();
    size_ = 0;
  }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const GateTraceEntry& operator[](std::size_t i) const noexcept {
    return i < kInline ? inline_data()[i] : overflow_[i - kInline];
  }

  // The seed's :GATE-TRACE list: ((:GATE "name" :VERSION "1.0.0" :RESULT :PASSED) ...),
  // with :REWRITTEN T on rewrites and :REASON "..." where there is one.
  Value to_value() const;

 private:
  GateTraceEntry* inline_data() noexcept { return std::launder(reinterpret_cast<GateTraceEntry*>(storage_)); }
  const GateTraceEntry* inline_data() const noexcept {
    return std::launder(reinterpret_cast<const GateTraceEntry*>(storage_));
  }
  void append_all(const GateTrace& other) {
    for (std::size_t i = 0; i < other.size(); ++i) push_back(other[i].slot, other[i].result, other[i].reason);
  }

  alignas(GateTraceEntry) unsigned char storage_[kInline * sizeof(GateTraceEntry)];
  std::vector<GateTraceEntry> overflow_;
  std::size_t size_ = 0;
};

enum class VerifyOutcome : std::uint8_t { passed, blocked, approval_required };

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

  // The seed-shaped result: the action or rejection with :GATE-TRACE, or
  // (:TYPE :EVENT :LEVEL :APPROVAL-REQUIRED :GATE-TRACE .. :PAYLOAD (:SENSOR :APPROVAL-REQUIRED :ACTION a :REASON r)).
  Value to_value() const;
};

// Runs the gates. Stateless; any thread, concurrently.
//
// Contract (seed D15, Decisions 2): gates run highest priority first, ties by
// name; pass continues with the same action; rewrite continues with the new
// one; approval is remembered and later gates still run (the last approval's
// action is the one to approve); block stops at once. A gate that reports an
// error, throws (the SDK turns that into an error), answers a verdict kind
// this host does not know, rewrites without an action, or exceeds its time
// budget (GateWatchdog) *fails*: the action is blocked and the trace says
// :FAILED, distinct from :BLOCKED.
class Verifier {
 public:
  static void verify(const Snapshot& snapshot, const Value& action, const Value& signal, Verification& out);
  static Verification verify(const Snapshot& snapshot, const Value& action, const Value& signal) {
    Verification out;
    verify(snapshot, action, signal, out);
    return out;
  }
};

}  // namespace passepartout
