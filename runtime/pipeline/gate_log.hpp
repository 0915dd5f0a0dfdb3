// The record an operator reads to answer "why was this blocked?": when a
// verification did not simply pass, every gate decision in its trace is
// logged (skill, version, verdict, reason, how long the verification took,
// a digest of the action), with anything that looks like a secret masked.
// A verification where every gate passed is only counted (gate counters):
// logging it would cost more than the verification itself. Every verification
// also goes to the decision log, when there is one (pipeline/decision_log.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace passepartout {

class Value;
class Snapshot;
struct Verification;
class DecisionLog;
class PendingDecision;
class RuleBook;
struct ShadowDisagreement;

// Where a verification ran: the Reason stage, the last-mile check before an
// actuator, or an approved action checked again before it runs.
enum class DecisionStage : std::uint8_t { reason, last_mile, approval };

// "reason", "last-mile", "approval".
const char* to_string(DecisionStage stage) noexcept;

// What a verification takes besides the gates: the operator's rules it runs
// within, and what the decision log records besides what the gates saw (who
// proposed the action, the approval it belongs to). The session, sensor and
// source are read from the signal. Views: valid for the call.
struct DecisionContext {
  DecisionLog* log = nullptr;  // null: nothing is recorded
  // The operator's rules (pipeline/rule_book.hpp): deny before the gates, ask
  // after them. Null, or a book without rules: the gates alone.
  const RuleBook* rules = nullptr;
  std::string_view provider;  // the provider whose answer the action came from; empty: none
  std::string_view model;
  // An outcome "approval" whose token is not minted yet: its record waits
  // here for PendingDecision::submit(token). Null: recorded at once.
  PendingDecision* pending = nullptr;
  // The approval an approved action belongs to (stage approval): its token,
  // of which only the SHA-256 is recorded.
  std::string_view approval_token;
  // The standing approval (a rule's id) the approval was granted by, when
  // one was: the record says so.
  std::string_view granted_by;
  // Shadow candidates that disagreed with the live gates on this action,
  // copied into the record's "shadow" array when not empty. Null: none.
  const std::vector<ShadowDisagreement>* shadow = nullptr;
};

// Runs the gates of `snapshot` on `action` (Verifier::verify) and logs their
// decisions when any gate did not simply pass; the usual verification, all
// plain passes, reads the clock once (and once per gate while the decision
// log records). Records the decision in `context.log`. Any thread.
// `timed_out`: gates that timed out earlier for this signal (Verifier::verify).
void verify_and_record(DecisionStage stage, const std::shared_ptr<const Snapshot>& snapshot, const Value& action,
                       const Value& signal, Verification& out, const DecisionContext& context = {},
                       std::span<const std::string> timed_out = {});

// Verifications verify_and_record() ran in this process, by stage ("reason",
// "last-mile", "approval") and outcome ("passed", "blocked",
// "approval-required"), every pair, zeros included, for metrics. Sharded
// counts, read without a lock; any thread.
struct VerificationTally {
  std::string_view stage;
  std::string_view outcome;
  std::uint64_t count = 0;
};
std::vector<VerificationTally> verifications_counted();

// Logs nothing when every gate passed. Each line carries the session (read
// from `signal`) and, when the decision log numbered it, `decision_id`, as
// fields of their own. Any thread.
void log_gate_decisions(DecisionStage stage, const Verification& verification, const Value& action, const Value& signal,
                        std::chrono::nanoseconds took, std::string_view decision_id = {});

// `text` with credentials replaced by "[MASKED]": API keys and tokens of the
// usual shapes (sk-..., ghp_..., xoxb-..., AKIA..., Bearer ...), values of
// password/secret/token/api_key assignments, private key blocks, and runs
// of 32 hex digits or more.
std::string mask_secrets(std::string_view text);

// The first 16 hex digits of the SHA-256 of the action's printed form (the
// same printing the approval store hashes), to tie log lines to one action.
std::string action_digest(const Value& action);

}  // namespace passepartout
