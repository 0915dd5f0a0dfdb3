// The record an operator reads to answer "why was this blocked?": when a
// verification did not simply pass, every gate decision in its trace is
// logged (skill, version, verdict, reason, how long the verification took,
// a digest of the action), with anything that looks like a secret masked.
// A verification where every gate passed is only counted (gate counters):
// logging it would cost more than the verification itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace passepartout {

class Value;
class Snapshot;
struct Verification;

// Runs the gates of `snapshot` on `action` (Verifier::verify) and logs their
// decisions when any gate did not simply pass; the usual verification, all
// plain passes, reads the clock once. Any thread.
void verify_and_record(std::string_view stage, const Snapshot& snapshot, const Value& action, const Value& signal,
                       Verification& out);

// Verifications verify_and_record() ran in this process, by stage ("reason",
// "last-mile", "approval", "other") and outcome ("passed", "blocked",
// "approval-required"), every pair, zeros included, for metrics. Sharded
// counts, read without a lock; any thread.
struct VerificationTally {
  std::string_view stage;
  std::string_view outcome;
  std::uint64_t count = 0;
};
std::vector<VerificationTally> verifications_counted();

// `stage` names where the verification ran: "reason", "last-mile", "approval".
// Logs nothing when every gate passed. Any thread.
void log_gate_decisions(std::string_view stage, const Verification& verification, const Value& action,
                        std::chrono::nanoseconds took);

// `text` with credentials replaced by "[MASKED]": API keys and tokens of the
// usual shapes (sk-..., ghp_..., xoxb-..., AKIA..., Bearer ...), values of
// password/secret/token/api_key assignments, private key blocks, and runs
// of 32 hex digits or more.
std::string mask_secrets(std::string_view text);

// The first 16 hex digits of the SHA-256 of the action's printed form (the
// same printing the approval store hashes), to tie log lines to one action.
std::string action_digest(const Value& action);

}  // namespace passepartout
