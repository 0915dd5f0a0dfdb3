// Gate decision records, with secrets masked (RE2: linear time, compiled once).
#include "pipeline/gate_log.hpp"

#include <re2/re2.h>

#include <array>

#include "base/digest.hpp"
#include "base/interval_clock.hpp"
#include "base/log.hpp"
#include "base/log_fields.hpp"
#include "base/thread_shards.hpp"
#include "pipeline/credential_rule.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/rule_book.hpp"
#include "pipeline/shadow_gates.hpp"
#include "pipeline/signal.hpp"
#include "pipeline/verifier.hpp"
#include "skills/slot.hpp"
#include "value/sexp_printer.hpp"
#include "value/value.hpp"

namespace passepartout {

namespace {

constexpr std::array<std::string_view, 3> kStages{"reason", "last-mile", "approval"};
constexpr std::array<std::string_view, 3> kVerifyOutcomes{"passed", "blocked", "approval-required"};

ShardedCounters<kStages.size() * kVerifyOutcomes.size()>& verification_counts() {
  static ShardedCounters<kStages.size() * kVerifyOutcomes.size()> counts;
  return counts;
}

std::size_t stage_index(DecisionStage stage) noexcept { return static_cast<std::size_t>(stage); }

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

void count_verification(DecisionStage stage, VerifyOutcome outcome) noexcept {
  verification_counts().add(stage_index(stage) * kVerifyOutcomes.size() + verify_outcome_index(outcome));
}

// An operator's deny rule decided: blocked, traced as rules@host.
void deny_by_rule(const Rule& rule, Verification& out) {
  Value reason = Value::string("rule " + rule.id + ": " + rule.reason);
  out.trace.push_host(HostRule::operator_rules, GateResult::blocked, reason);
  out.outcome = VerifyOutcome::blocked;
  out.action = rejection("ERROR", "Action blocked by the operator's rule " + rule.id + ": " + rule.reason);
  out.reason = std::move(reason);
  log_fields(LogLevel::info, "verifier", {{"rule", rule.id}, {"verdict", "blocked"}}, "rule {} denied the action: {}",
             rule.id, rule.reason);
}

// The gates, within the operator's rules (pipeline/rule_book.hpp): a deny
// rule blocks before any gate runs, and after them should a gate have
// rewritten the action into one a deny covers; an ask rule asks a human for
// what the gates let through. Off the usual path: only while rules exist.
[[gnu::noinline]] void verify_within_rules(const RuleBook& rules, const Snapshot& snapshot, const Value& action,
                                           const Value& signal, Verification& out, GateTimes* times,
                                           ShadowCapture* capture, std::span<const std::string> timed_out) {
  const std::string_view session = session_id_of(signal);
  if (auto deny = rules.deciding(RuleDecision::deny, action, session)) {
    out.trace.clear();
    out.reason = Value();
    out.timed_out = nullptr;
    if (capture != nullptr) capture->entries.clear();
    deny_by_rule(deny->rule, out);
    return;
  }
  Verifier::verify(snapshot, action, signal, out, times, capture, timed_out);
  if (out.outcome == VerifyOutcome::blocked) return;
  if (auto deny = rules.deciding(RuleDecision::deny, out.action, session)) {
    deny_by_rule(deny->rule, out);
    return;
  }
  if (auto ask = rules.deciding(RuleDecision::ask, out.action, session)) {
    Value reason = Value::string("rule " + ask->rule.id + " asks: " + ask->rule.reason);
    out.trace.push_host(HostRule::operator_rules, GateResult::approval, reason);
    out.outcome = VerifyOutcome::approval_required;
    out.reason = std::move(reason);
  }
}

void verify(const DecisionContext& context, const Snapshot& snapshot, const Value& action, const Value& signal,
            Verification& out, GateTimes* times, ShadowCapture* capture, std::span<const std::string> timed_out) {
  if (context.rules == nullptr || context.rules->empty()) [[likely]] {
    Verifier::verify(snapshot, action, signal, out, times, capture, timed_out);
    return;
  }
  verify_within_rules(*context.rules, snapshot, action, signal, out, times, capture, timed_out);
}

// A verification whose snapshot carries shadow candidates: the live chain
// (capturing what the shadowed gates were given), then the candidates, whose
// disagreements join the decision's record. Off the usual path.
[[gnu::noinline]] void verify_and_record_shadowed(DecisionStage stage, const std::shared_ptr<const Snapshot>& snapshot,
                                                  const Value& action, const Value& signal, Verification& out,
                                                  const DecisionContext& context,
                                                  std::span<const std::string> timed_out) {
  const IntervalClock::Ticks start = IntervalClock::now();
  GateTimes times;  // NOLINT(cppcoreguidelines-pro-type-member-init): read up to `count`
  times.count = 0;
  ShadowCapture capture;
  const bool timed = context.log != nullptr && context.log->time_next_gates();
  verify(context, *snapshot, action, signal, out, timed ? &times : nullptr, &capture, timed_out);
  const IntervalClock::Ticks end = IntervalClock::now();
  count_verification(stage, out.outcome);
  std::vector<ShadowDisagreement> disagreements;
  run_shadow_gates(stage, *snapshot, signal, capture, out, disagreements);
  std::string decision_id;
  if (context.log != nullptr) {
    DecisionContext with_shadow = context;
    if (!disagreements.empty()) with_shadow.shadow = &disagreements;
    decision_id = context.log->record(stage, snapshot, action, signal, out, times, start, end, with_shadow);
  }
  if (out.trace.all_plain_passes()) return;
  log_gate_decisions(stage, out, action, signal, IntervalClock::elapsed(start, end), decision_id);
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

void verify_and_record(DecisionStage stage, const std::shared_ptr<const Snapshot>& snapshot, const Value& action,
                       const Value& signal, Verification& out, const DecisionContext& context,
                       std::span<const std::string> timed_out) {
  if (!snapshot->shadows().empty()) [[unlikely]] {
    verify_and_record_shadowed(stage, snapshot, action, signal, out, context, timed_out);
    return;
  }
  const IntervalClock::Ticks start = IntervalClock::now();
  if (context.log == nullptr) {
    verify(context, *snapshot, action, signal, out, nullptr, nullptr, timed_out);
    count_verification(stage, out.outcome);
    if (out.trace.all_plain_passes()) return;
    log_gate_decisions(stage, out, action, signal, IntervalClock::elapsed(start, IntervalClock::now()));
    return;
  }
  GateTimes times;  // NOLINT(cppcoreguidelines-pro-type-member-init): read up to `count`
  times.count = 0;
  verify(context, *snapshot, action, signal, out, context.log->time_next_gates() ? &times : nullptr, nullptr,
         timed_out);
  const IntervalClock::Ticks end = IntervalClock::now();
  count_verification(stage, out.outcome);
  const std::string decision_id = context.log->record(stage, snapshot, action, signal, out, times, start, end, context);
  if (out.trace.all_plain_passes()) return;
  log_gate_decisions(stage, out, action, signal, IntervalClock::elapsed(start, end), decision_id);
}

namespace {

// No capturing group: RE2 then finds a match's bounds with its DFA alone.
const RE2& secret_pattern() {
  static const RE2 kPattern(
      "(?i)(?:"
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
  // Most texts hold none: one DFA pass says so, and nothing is rewritten.
  if (RE2::PartialMatch(out, secret_pattern())) RE2::GlobalReplace(&out, secret_pattern(), "[MASKED]");
  return out;
}

std::string action_digest(const Value& action) { return sha256_hex(to_sexp(action)).substr(0, 16); }

void log_gate_decisions(DecisionStage stage, const Verification& verification, const Value& action, const Value& signal,
                        std::chrono::nanoseconds took, std::string_view decision_id) {
  bool all_passed = true;
  for (std::size_t i = 0; i < verification.trace.size() && all_passed; ++i) {
    all_passed = verification.trace[i].result == GateResult::passed;
  }
  if (all_passed) return;
  const std::string digest = action_digest(action);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
  const std::string_view session = session_id_of(signal);
  for (std::size_t i = 0; i < verification.trace.size(); ++i) {
    const GateTraceView entry = verification.trace[i];
    const LogLevel level = entry.result == GateResult::passed ? LogLevel::debug : LogLevel::info;
    if (!is_logged(level)) continue;
    const bool has_reason = entry.reason.is_string();
    const std::array<LogField, 7> fields{LogField{"skill", entry.name()},
                                         LogField{"version", entry.version()},
                                         LogField{"verdict", to_string(entry.result)},
                                         LogField{"stage", to_string(stage)},
                                         LogField{"session", session},
                                         LogField{"action_digest", digest},
                                         LogField{"decision", decision_id}};
    // The decision id only when the decision log numbered this decision.
    const std::size_t count = decision_id.empty() ? fields.size() - 1 : fields.size();
    const std::string_view name = entry.name();
    const std::string_view version = entry.version();
    const std::string_view stage_text = to_string(stage);
    const std::string_view verdict = to_string(entry.result);
    const std::string_view separator = has_reason ? ": " : "";
    const std::string reason = has_reason ? mask_secrets(entry.reason.text()) : std::string();
    const std::string_view outcome = to_string(verification.outcome);
    log_formatted(
        level, "gates", std::span<const LogField>(fields.data(), count),
        "GATE DECISION [{}]: {}@{} {}{}{} (action {}, {} in {} us)",
        fmt::make_format_args(stage_text, name, version, verdict, separator, reason, digest, outcome, micros));
  }
}

}  // namespace passepartout
