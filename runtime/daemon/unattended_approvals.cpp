#include "daemon/unattended_approvals.hpp"

#include <string>
#include <utility>

#include "base/digest.hpp"
#include "base/duration_text.hpp"
#include "base/interval_clock.hpp"
#include "base/log_fields.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/pipeline.hpp"

namespace passepartout {

void deny_unattended(ApprovalStore& approvals, Pipeline& pipeline, DecisionLog* decisions,
                     std::chrono::milliseconds after) {
  auto expired = approvals.expire_unattended("unattended");
  if (!expired) {
    log_message(LogLevel::error, "daemon", "unattended approvals not expired: {}", expired.error().message);
    return;
  }
  const std::string within = span_text(after);
  for (const Approval& approval : *expired) {
    log_fields(LogLevel::warn, "daemon", {{"session", approval.session_id}},
               "approval {} expired: denied unattended (nobody decided within {})", approval.token, within);
    pipeline.expired(approval, "Denied unattended: nobody decided within " + within + "; the action was not run.");
    if (decisions == nullptr) continue;
    DecisionRecord record;
    record.stage = DecisionStage::approval;
    record.outcome = VerifyOutcome::blocked;
    record.expired = true;
    record.action = approval.action;
    record.signal = Value::plist({{"META", approval.meta}});
    record.reason = Value::string("expired: denied unattended (nobody decided within " + within + ")");
    record.approval_token_sha256 = sha256_hex(approval.token);
    record.started = record.finished = IntervalClock::now();
    decisions->push(std::move(record));
  }
}

}  // namespace passepartout
