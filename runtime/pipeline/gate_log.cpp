// Gate decision records, with secrets masked (RE2: linear time, compiled once).
#include "pipeline/gate_log.hpp"

#include <re2/re2.h>

#include <array>

#include "base/digest.hpp"
#include "base/interval_clock.hpp"
#include "base/log.hpp"
#include "base/thread_shards.hpp"
#include "pipeline/credential_rule.hpp"
#include "pipeline/verifier.hpp"
#include "skills/slot.hpp"
#include "value/sexp_printer.hpp"
#include "value/value.hpp"

namespace passepartout {

namespace {

constexpr std::array<std::string_view, 4> kStages{"reason", "last-mile", "approval", "other"};
constexpr std::array<std::string_view, 3> kVerifyOutcomes{"passed", "blocked", "approval-required"};

ShardedCounters<kStages.size() * kVerifyOutcomes.size()>& verification_counts() {
  static ShardedCounters<kStages.size() * kVerifyOutcomes.size()> counts;
  return counts;
}

std::size_t stage_index(std::string_view stage) noexcept {
  for (std::size_t i = 0; i + 1 < kStages.size(); ++i) {
    if (kStages[i] == stage) return i;
  }
  return kStages.size() - 1;
}

std::size_t verify_outcome_index(VerifyOutcome outcome) noexcept {
  switch (outcome) {
    case VerifyOutcome::passed:
      return 0;
    case VerifyOutcome::blocked:
      return 1;
    case VerifyOutcome::approval_required:
      return 2;
  }
  return 1;
}

}  // namespace

std::vector<VerificationTally> verifications_counted() {
  std::vector<VerificationTally> tallies;
  tallies.reserve(kStages.size() * kVerifyOutcomes.size());
  for (std::size_t s = 0; s < kStages.size(); ++s) {
    for (std::size_t o = 0; o < kVerifyOutcomes.size(); ++o) {
      tallies.push_back({kStages[s], kVerifyOutcomes[o], verification_counts().sum(s * kVerifyOutcomes.size() + o)});
    }
  }
  return tallies;
}

void verify_and_record(std::string_view stage, const Snapshot& snapshot, const Value& action, const Value& signal,
                       Verification& out) {
  const IntervalClock::Ticks start = IntervalClock::now();
  Verifier::verify(snapshot, action, signal, out);
  verification_counts().add(stage_index(stage) * kVerifyOutcomes.size() + verify_outcome_index(out.outcome));
  if (out.trace.all_plain_passes()) return;
  log_gate_decisions(stage, out, action, IntervalClock::elapsed(start, IntervalClock::now()));
}

namespace {

const RE2& secret_pattern() {
  static const RE2 kPattern(
      "(?i)("
      "-----BEGIN [A-Z ]*PRIVATE KEY-----[\\s\\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
      "|\\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"
      "|\\bgh[pousr]_[A-Za-z0-9]{20,}"
      "|\\bxox[abprs]-[A-Za-z0-9-]{10,}"
      "|\\bAKIA[0-9A-Z]{16}\\b"
      "|\\bbearer\\s+[A-Za-z0-9._~+/=-]{8,}"
      "|\\b(?:password|passwd|secret|token|api[_-]?key)\\s*[:=]\\s*\\S+"
      "|\\b[A-Fa-f0-9]{32,}\\b"
      ")");
  return kPattern;
}

}  // namespace

std::string mask_secrets(std::string_view text) {
  std::string out(text);
  KnownCredentials::mask(out);  // the exact keys first: some match no pattern
  RE2::GlobalReplace(&out, secret_pattern(), "[MASKED]");
  return out;
}

std::string action_digest(const Value& action) { return sha256_hex(to_sexp(action)).substr(0, 16); }

void log_gate_decisions(std::string_view stage, const Verification& verification, const Value& action,
                        std::chrono::nanoseconds took) {
  bool all_passed = true;
  for (std::size_t i = 0; i < verification.trace.size() && all_passed; ++i) {
    all_passed = verification.trace[i].result == GateResult::passed;
  }
  if (all_passed) return;
  const std::string digest = action_digest(action);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
  for (std::size_t i = 0; i < verification.trace.size(); ++i) {
    const GateTraceView entry = verification.trace[i];
    const bool has_reason = entry.reason.is_string();
    log_message(entry.result == GateResult::passed ? LogLevel::debug : LogLevel::info, "gates",
                "GATE DECISION [{}]: {}@{} {}{}{} (action {}, {} in {} us)", stage, entry.name(), entry.version(),
                to_string(entry.result), has_reason ? ": " : "",
                has_reason ? mask_secrets(entry.reason.text()) : std::string(), digest, to_string(verification.outcome),
                micros);
  }
}

}  // namespace passepartout
