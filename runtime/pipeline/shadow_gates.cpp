// Shadow gates: the candidate calls, the comparison, the statistics.
#include "pipeline/shadow_gates.hpp"

#include <chrono>
#include <string>

#include "base/duration_text.hpp"
#include "base/log.hpp"
#include "base/log_fields.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/gate_watchdog.hpp"
#include "skills/host_api.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

int strictness(GateResult result) noexcept {
  switch (result) {
    case GateResult::passed:
    case GateResult::rewritten:
      return 0;
    case GateResult::approval:
      return 1;
    case GateResult::blocked:
    case GateResult::failed:
      return 2;
  }
  return 2;
}

// A candidate's answer, read the way the verifier reads a live gate's.
struct CandidateVerdict {
  GateResult result = GateResult::failed;
  Value output;  // passed or rewritten: the action it lets through
  std::string reason;
};

CandidateVerdict ask(const Snapshot::Shadow& shadow, const Value& input, const Value& signal) {
  CandidateVerdict answer;
  pp_call call;
  pp_verdict verdict{};
  GateWatch& watch = GateWatchdog::this_thread();
  const std::uint64_t ticket = watch.start(shadow.gate.budget_ms);
  const pp_status status = shadow.gate.fn(shadow.gate.instance, &call, to_handle(input), to_handle(signal), &verdict);
  const bool late = watch.finish(ticket);
  if (shadow.gate.failed_as_late(late, status)) {
    answer.reason =
        "exceeded its time budget of " + std::to_string(GateWatchdog::budget_of(shadow.gate.budget_ms).count()) + " ms";
    return answer;
  }
  if (status != PP_OK) {
    answer.reason = call.error.empty() ? std::string("reported an error without a reason") : call.error;
    return answer;
  }
  const Value& reason = verdict_reason(verdict);
  switch (verdict_kind(verdict)) {
    case VerdictKind::pass:
      answer.result = GateResult::passed;
      answer.output = input;
      return answer;
    case VerdictKind::rewrite:
      if (const Value* rewritten = verdict_action(verdict)) {
        answer.result = GateResult::rewritten;
        answer.output = *rewritten;  // copied out of `call`
      } else {
        answer.reason = "answered a rewrite without an action";
      }
      return answer;
    case VerdictKind::block:
      answer.result = GateResult::blocked;
      if (reason.is_string()) answer.reason = std::string(reason.text());
      return answer;
    case VerdictKind::approval:
      answer.result = GateResult::approval;
      if (reason.is_string()) answer.reason = std::string(reason.text());
      return answer;
    case VerdictKind::unknown:
      break;
  }
  answer.reason = "answered an unknown verdict (" + std::to_string(verdict.kind) + ")";
  return answer;
}

}  // namespace

ShadowKind compare_verdicts(GateResult live, const Value& live_output, GateResult candidate,
                            const Value& candidate_output) {
  if (candidate == GateResult::failed) return ShadowKind::candidate_failed;
  const int l = strictness(live);
  const int c = strictness(candidate);
  if (c > l) return ShadowKind::candidate_blocks;
  if (c < l) return ShadowKind::candidate_passes;
  if (l == 0 && !(live_output == candidate_output)) return ShadowKind::rewrites_differently;
  return ShadowKind::agreement;
}

void run_shadow_gates(DecisionStage stage, const Snapshot& snapshot, const Value& signal, const ShadowCapture& capture,
                      const Verification& live, std::vector<ShadowDisagreement>& disagreements) {
  const auto shadows = snapshot.shadows();
  for (std::size_t s = 0; s < shadows.size() && s < capture.entries.size(); ++s) {
    const ShadowCapture::Entry& entry = capture.entries[s];
    if (!entry.reached || entry.trace_index >= live.trace.size()) continue;  // the live gate was not asked
    const Snapshot::Shadow& shadow = shadows[s];
    const GateTraceView live_entry = live.trace[entry.trace_index];
    const CandidateVerdict answer = ask(shadow, entry.input, signal);
    const ShadowKind kind = compare_verdicts(live_entry.result, entry.output, answer.result, answer.output);
    ShadowStats& stats = *shadow.candidate.stats;
    stats.count(kind);
    if (kind == ShadowKind::agreement) continue;

    const Slot& candidate = *shadow.gate.slot;
    const std::string digest = action_digest(entry.input);
    ShadowSample sample;
    sample.at_unix_ms = unix_ms_now();
    sample.stage = to_string(stage);
    sample.kind = kind;
    sample.live = to_string(live_entry.result);
    sample.candidate = to_string(answer.result);
    if (live_entry.reason.is_string()) sample.live_reason = mask_secrets(live_entry.reason.text());
    sample.candidate_reason = mask_secrets(answer.reason);
    sample.action_digest = digest;
    stats.remember(sample);

    disagreements.push_back(ShadowDisagreement{candidate.name(), candidate.version_text(), candidate.library_sha256(),
                                               sample.live, sample.candidate, answer.reason,
                                               std::string(to_string(kind))});
    log_fields(kind == ShadowKind::candidate_failed ? LogLevel::warn : LogLevel::info, "shadow",
               {{"skill", candidate.name()},
                {"version", candidate.version_text()},
                {"kind", to_string(kind)},
                {"stage", to_string(stage)},
                {"action_digest", digest}},
               "shadow candidate {}@{} disagrees ({}): live {}, candidate {}{}{} (action {})", candidate.name(),
               candidate.version_text(), to_string(kind), sample.live, sample.candidate,
               sample.candidate_reason.empty() ? "" : ": ", sample.candidate_reason, digest);
  }
}

}  // namespace passepartout
