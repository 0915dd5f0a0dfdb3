// The approvals of a fleet, in the state database (--state-db): every node
// sees, lists and decides the same approvals; `node` names the one that
// asked. The bounds hold for the fleet as a whole (each insert counts and
// writes under one transaction-scoped advisory lock); a decision is one
// conditional UPDATE that notifies the channel `passepartout_approvals`
// with the token when it commits. An approved action runs on the node that
// asked while that node is alive, else on the first that claims it: a claim
// raises the run's fencing number and holds a lease (the database's clock);
// its start and its end are recorded only under the current fence, and the
// start only within the lease. Each call waits for its batch on the
// calling thread, never on the state database's loop, at most `timeout`;
// while the database is away every call fails closed, saying so.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/result.hpp"
#include "pipeline/approvals.hpp"

namespace passepartout {

class PgClient;

// The channel a decision's token is sent on when it commits.
inline constexpr std::string_view kApprovalsChannel = "passepartout_approvals";

struct PgApprovalSettings {
  std::string node;  // --node-id
  // A claim's lease, and how long a node that has not been seen (its row in
  // passepartout_nodes, which StateDb renews) is taken for alive.
  std::chrono::milliseconds lease{10000};
  std::chrono::milliseconds timeout{10000};  // for one call's answer
};

// A store over `client` (which must outlive it and run on a loop of its
// own). Runs this node left recorded as running become interrupted now, or
// once the database answers.
Result<std::unique_ptr<ApprovalStore>> open_pg_approvals(PgClient& client, const PgApprovalSettings& settings,
                                                         const ApprovalOptions& options = {});

}  // namespace passepartout
