// --unattended-approvals deny-after: approvals nobody decided in time are
// denied, each once, and whoever needs to know is told.
#pragma once

#include <chrono>

namespace passepartout {

class ApprovalStore;
class Pipeline;
class DecisionLog;

// Expires every approval whose time has come undecided (decided by
// "unattended"), then tells each one's session (the model's call that
// proposed it is answered in the transcript), the log (a warning with the
// session) and the decision log (a record with outcome "expired"), once.
// `after` is the policy's duration, for the messages. Any thread but a
// pipeline loop's: it writes SQLite.
void deny_unattended(ApprovalStore& approvals, Pipeline& pipeline, DecisionLog* decisions,
                     std::chrono::milliseconds after);

}  // namespace passepartout
