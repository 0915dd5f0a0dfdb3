// PgApprovalStore: ApprovalStore over the state database. Each call is one
// batch (one transaction) on the PgClient's loop, waited for here; the
// statements are literal SQL with every value a parameter.
#include "daemon/pg_approvals.hpp"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "base/log.hpp"
#include "store/pg_client.hpp"

namespace passepartout {
namespace {

constexpr std::string_view kColumns =
    "token, action, action_sha256, gates, reason, meta, created_unix_ms, expires_unix_ms, state, decided_unix_ms, "
    "decided_by, session_id, node, run_state, run_error, run_unix_ms";
// The advisory lock an insert counts and writes under, fleet-wide (any
// constant the nodes agree on; released when the transaction ends).
constexpr std::string_view kInsertLock = "SELECT pg_advisory_xact_lock(7061737365706173)";
// The database's clock in Unix milliseconds: leases are read by one clock, whichever node asks.
constexpr std::string_view kDbNowMs = "(extract(epoch from clock_timestamp()) * 1000)::bigint";
// The rows of passepartout_approvals (as `a`) this node (the parameter
// `node`) may claim now: approved, not started, and the node that asked is
// this one or has not been seen within a lease (the parameter `lease`, in
// milliseconds).
std::string claimable_where(std::string_view node, std::string_view lease) {
  const std::string now(kDbNowMs);
  return "a.state = 'approved' AND (a.run_state = 'none' OR (a.run_state = 'claimed' AND a.run_lease_until_ms < " +
         now + ")) AND (a.node = " + std::string(node) +
         " OR NOT EXISTS (SELECT 1 FROM passepartout_nodes n WHERE n.node = a.node AND n.seen_at > "
         "clock_timestamp() - " +
         std::string(lease) + "::bigint * interval '1 millisecond'))";
}
// How long the pending count is trusted: other nodes change it too.
constexpr std::int64_t kCountFreshMs = 1000;

std::string number(std::int64_t value) { return std::to_string(value); }

std::string text_at(const PgRows& rows, std::size_t row, std::string_view column) {
  const auto text = rows.at(row, column);
  return text ? std::string(*text) : std::string();
}

ApprovalRow row_at(const PgRows& rows, std::size_t i) {
  ApprovalRow row;
  row.token = text_at(rows, i, "token");
  row.action = text_at(rows, i, "action");
  row.action_sha256 = text_at(rows, i, "action_sha256");
  row.gates = text_at(rows, i, "gates");
  row.reason = text_at(rows, i, "reason");
  row.meta = text_at(rows, i, "meta");
  row.created_unix_ms = rows.integer(i, "created_unix_ms");
  row.expires_unix_ms = rows.integer(i, "expires_unix_ms");
  row.state = text_at(rows, i, "state");
  row.decided_unix_ms = rows.integer(i, "decided_unix_ms");
  row.decided_by = text_at(rows, i, "decided_by");
  row.session_id = text_at(rows, i, "session_id");
  row.node = text_at(rows, i, "node");
  row.run = text_at(rows, i, "run_state");
  row.run_error = text_at(rows, i, "run_error");
  row.run_unix_ms = rows.integer(i, "run_unix_ms");
  return row;
}

class PgApprovalStore final : public ApprovalStore {
 public:
  PgApprovalStore(PgClient& client, const PgApprovalSettings& settings, const ApprovalOptions& options)
      : ApprovalStore(options, settings.node), client_(client), lease_(settings.lease), timeout_(settings.timeout) {}

  // Prunes and interrupts this node's runs; false when the database did not answer.
  bool recover();

  Result<std::vector<Approval>> pending() const override;
  Result<ApprovalPage> pending_page(std::size_t limit, std::size_t offset) const override;
  std::size_t pending_count() const override;
  Result<Approval> find(std::string_view token) const override;
  Result<std::optional<std::int64_t>> claim_run(std::string_view token) override;
  Result<std::vector<std::string>> claimable() const override;
  std::string where() const override { return "the state database (node " + node() + ")"; }

 protected:
  Result<void> insert(const ApprovalRow& row) override;
  Result<std::optional<Approval>> decide_pending(std::string_view token, std::string_view who, Approval::State to,
                                                 std::int64_t now) override;
  Result<std::size_t> deny_pending_of(std::string_view session_id, std::string_view who, std::int64_t now) override;
  Result<std::vector<Approval>> expire_due_unattended(std::string_view who, std::int64_t now) override;
  Result<bool> update_run(std::string_view token, Approval::Run to, std::int64_t fence, std::string_view error,
                          std::int64_t now) override;

 private:
  // Runs `statements` as one transaction and waits for the outcome.
  PgOutcome call(std::vector<PgStatement> statements) const;
  // The failure `doing` met, for the caller: the server's message, or that
  // the database is away (then nothing was decided here: fail closed).
  Unexpected<Error> failure(const PgOutcome& outcome, std::string_view doing) const;
  Result<std::vector<Approval>> approvals_of(const PgRows& rows) const;
  // The statement marking pending approvals past their expiry as expired.
  static PgStatement expire_due(std::int64_t now);
  void forget_count() const noexcept { known_count_.store(-1, std::memory_order_release); }

  PgClient& client_;
  std::chrono::milliseconds lease_;
  std::chrono::milliseconds timeout_;
  std::mutex upkeep_mutex_;
  std::int64_t next_prune_ms_ = 0;                     // insert() prunes again from then on
  bool recovered_ = false;                             // this node's interrupted runs recorded
  mutable std::atomic<std::int64_t> known_count_{-1};  // -1: count again
  mutable std::atomic<std::int64_t> known_until_ms_{0};
};

PgOutcome PgApprovalStore::call(std::vector<PgStatement> statements) const {
  return pg_wait(client_, std::move(statements), timeout_);
}

Unexpected<Error> PgApprovalStore::failure(const PgOutcome& outcome, std::string_view doing) const {
  if (outcome.error->connection) {
    return fail(ErrorCode::io_error, std::string(doing) + ": the state database is unreachable (" +
                                         outcome.error->message + "); nothing was recorded or decided");
  }
  return fail(ErrorCode::io_error, std::string(doing) + ": the state database: " + outcome.error->message);
}

Result<std::vector<Approval>> PgApprovalStore::approvals_of(const PgRows& rows) const {
  std::vector<Approval> list;
  list.reserve(rows.rows.size());
  for (std::size_t i = 0; i < rows.rows.size(); ++i) {
    auto approval = approval_from_row(row_at(rows, i));
    if (!approval) return fail(approval.error().code, approval.error().message);
    list.push_back(std::move(*approval));
  }
  return list;
}

PgStatement PgApprovalStore::expire_due(std::int64_t now) {
  return {"UPDATE passepartout_approvals SET state = 'expired' WHERE state = 'pending' AND expires_unix_ms <= $1",
          {number(now)}};
}

bool PgApprovalStore::recover() {
  const std::int64_t now = now_ms();
  std::vector<PgStatement> statements;
  if (retention().count() > 0) {
    statements.push_back(expire_due(now));
    // An approval ends when it is decided, or when it expires undecided.
    statements.push_back(
        {"DELETE FROM passepartout_approvals WHERE state <> 'pending' AND "
         "(CASE WHEN state = 'expired' THEN expires_unix_ms ELSE decided_unix_ms END) <= $1",
         {number(now - retention().count())}});
  }
  const bool recovering = !recovered_;
  if (recovering) {
    // This node's runs only: another node's may be going on now.
    // A claim it held and had not started is let go: any node may claim it again.
    statements.push_back(
        {"UPDATE passepartout_approvals SET run_state = 'none', run_lease_until_ms = 0 "
         "WHERE run_state = 'claimed' AND run_node = $1",
         {node()}});
    statements.push_back(
        {"UPDATE passepartout_approvals SET run_state = 'interrupted', run_error = $1, "
         "run_unix_ms = $2 WHERE run_state = 'running' AND run_node = $3 RETURNING token",
         {std::string(kInterruptedRun), number(now), node()}});
  }
  if (statements.empty()) return true;
  const PgOutcome outcome = call(std::move(statements));
  if (!outcome.ok()) {
    log_message(LogLevel::warn, "approvals", "{}", failure(outcome, "upkeep of the approvals").error().message);
    return false;
  }
  next_prune_ms_ = now + std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(1)).count();
  if (recovering) {
    recovered_ = true;
    std::vector<std::string> tokens;
    for (const auto& row : outcome.results.back().rows) tokens.push_back(row[0].value_or(""));
    log_interrupted_runs(tokens);
  }
  return true;
}

Result<void> PgApprovalStore::insert(const ApprovalRow& row) {
  {
    std::lock_guard lock(upkeep_mutex_);
    if (!recovered_ || row.created_unix_ms >= next_prune_ms_) recover();  // the table grows meanwhile; nothing is lost
  }
  const std::string now = number(row.created_unix_ms);
  // Counted and written under one fleet-wide lock: concurrent requests on
  // any nodes cannot all see room for one more.
  PgOutcome outcome = call({
      {std::string(kInsertLock), {}},
      {"SELECT (SELECT count(*) FROM passepartout_approvals WHERE session_id = $1 AND state = 'pending' AND "
       "expires_unix_ms > $2::bigint) AS of_session, (SELECT count(*) FROM passepartout_approvals WHERE state = "
       "'pending' AND expires_unix_ms > $2::bigint) AS in_all",
       {row.session_id, now}},
      {"INSERT INTO passepartout_approvals (token, action, action_sha256, gates, reason, meta, session_id, node, "
       "created_unix_ms, expires_unix_ms, state) "
       "SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9::bigint, $10::bigint, 'pending' WHERE "
       "(SELECT count(*) FROM passepartout_approvals WHERE session_id = $7 AND state = 'pending' AND "
       "expires_unix_ms > $9::bigint) < $11::bigint AND (SELECT count(*) FROM passepartout_approvals WHERE state = "
       "'pending' AND expires_unix_ms > $9::bigint) < $12::bigint",
       {row.token, row.action, row.action_sha256, row.gates, row.reason, row.meta, row.session_id, row.node, now,
        number(row.expires_unix_ms), number(static_cast<std::int64_t>(max_pending_per_session())),
        number(static_cast<std::int64_t>(max_pending()))}},
  });
  if (!outcome.ok()) return failure(outcome, "cannot record an approval");
  forget_count();
  if (outcome.results[2].affected == 1) return {};
  if (auto room = check_room(outcome.results[1].integer(0, "of_session"), outcome.results[1].integer(0, "in_all"),
                             row.session_id);
      !room) {
    return room;
  }
  return fail(ErrorCode::io_error, "cannot record an approval: the state database recorded none");
}

Result<std::vector<Approval>> PgApprovalStore::pending() const {
  PgOutcome outcome = call({expire_due(now_ms()),
                            {"SELECT " + std::string(kColumns) +
                                 " FROM passepartout_approvals WHERE state = 'pending' ORDER BY created_unix_ms, seq",
                             {}}});
  if (!outcome.ok()) return failure(outcome, "cannot list the approvals");
  return approvals_of(outcome.results[1]);
}

Result<ApprovalPage> PgApprovalStore::pending_page(std::size_t limit, std::size_t offset) const {
  constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  const std::string now = number(now_ms());
  // Pending and unexpired, whether or not they have been marked yet.
  PgOutcome outcome = call({
      {"SELECT count(*) AS total FROM passepartout_approvals WHERE state = 'pending' AND expires_unix_ms > $1::bigint",
       {now}},
      {"SELECT " + std::string(kColumns) +
           " FROM passepartout_approvals WHERE state = 'pending' AND expires_unix_ms > $1::bigint "
           "ORDER BY created_unix_ms DESC, seq DESC LIMIT $2::bigint OFFSET $3::bigint",
       {now, number(static_cast<std::int64_t>(std::min(limit, kMax))),
        number(static_cast<std::int64_t>(std::min(offset, kMax)))}},
  });
  if (!outcome.ok()) return failure(outcome, "cannot list the approvals");
  auto approvals = approvals_of(outcome.results[1]);
  if (!approvals) return fail(approvals.error().code, approvals.error().message);
  ApprovalPage page;
  page.total = static_cast<std::size_t>(outcome.results[0].integer(0, "total"));
  page.approvals = std::move(*approvals);
  return page;
}

std::size_t PgApprovalStore::pending_count() const {
  const std::int64_t now = now_ms();
  const std::int64_t known = known_count_.load(std::memory_order_acquire);
  if (known >= 0 && now < known_until_ms_.load(std::memory_order_relaxed)) return static_cast<std::size_t>(known);
  // A figure for replies and prompts, not a guard: asked at most once a
  // second, waited for a second at most, the last one kept meanwhile.
  PgOutcome outcome = pg_wait(client_,
                              {{"SELECT count(*) AS n, min(expires_unix_ms) AS first FROM passepartout_approvals "
                                "WHERE state = 'pending' AND expires_unix_ms > $1::bigint",
                                {number(now)}}},
                              std::min<std::chrono::milliseconds>(timeout_, std::chrono::milliseconds(kCountFreshMs)));
  if (!outcome.ok()) {
    const std::int64_t kept = known >= 0 ? known : 0;
    known_until_ms_.store(now + kCountFreshMs, std::memory_order_relaxed);
    known_count_.store(kept, std::memory_order_release);
    return static_cast<std::size_t>(kept);
  }
  const std::int64_t count = outcome.results[0].integer(0, "n");
  const auto first = outcome.results[0].at(0, "first");
  const std::int64_t until =
      first ? std::min(outcome.results[0].integer(0, "first"), now + kCountFreshMs) : now + kCountFreshMs;
  known_until_ms_.store(until, std::memory_order_relaxed);
  known_count_.store(count, std::memory_order_release);
  return static_cast<std::size_t>(count);
}

Result<Approval> PgApprovalStore::find(std::string_view token) const {
  PgOutcome outcome = call(
      {{"SELECT " + std::string(kColumns) + " FROM passepartout_approvals WHERE token = $1", {std::string(token)}}});
  if (!outcome.ok()) return failure(outcome, "cannot look up an approval");
  if (outcome.results[0].rows.empty()) return fail(ErrorCode::not_found, unknown_approval(token));
  return approval_from_row(row_at(outcome.results[0], 0));
}

Result<std::optional<Approval>> PgApprovalStore::decide_pending(std::string_view token, std::string_view who,
                                                                Approval::State to, std::int64_t now) {
  // The token goes to every node when the decision commits (and only then).
  PgOutcome outcome =
      call({{"WITH decided AS (UPDATE passepartout_approvals SET state = $2, decided_unix_ms = "
             "$3::bigint, decided_by = $4 WHERE token = $1 AND state = 'pending' AND expires_unix_ms > "
             "$3::bigint RETURNING " +
                 std::string(kColumns) + ") SELECT " + std::string(kColumns) +
                 ", pg_notify($5, token) AS notified FROM decided",
             {std::string(token), to_string(to), number(now), std::string(who), std::string(kApprovalsChannel)}}});
  if (!outcome.ok()) return failure(outcome, "cannot record the decision");
  forget_count();
  if (outcome.results[0].rows.empty()) return std::optional<Approval>();
  auto approval = approval_from_row(row_at(outcome.results[0], 0));
  if (!approval) return fail(approval.error().code, approval.error().message);
  return std::optional<Approval>(std::move(*approval));
}

Result<std::size_t> PgApprovalStore::deny_pending_of(std::string_view session_id, std::string_view who,
                                                     std::int64_t now) {
  PgOutcome outcome =
      call({{"UPDATE passepartout_approvals SET state = 'denied', decided_unix_ms = $2::bigint, "
             "decided_by = $3 WHERE session_id = $1 AND state = 'pending' AND "
             "expires_unix_ms > $2::bigint",
             {std::string(session_id), number(now), std::string(who)}}});
  if (!outcome.ok()) return failure(outcome, "cannot record the denials");
  forget_count();
  return static_cast<std::size_t>(outcome.results[0].affected);
}

Result<std::vector<Approval>> PgApprovalStore::expire_due_unattended(std::string_view who, std::int64_t now) {
  // One statement: each row is told once, on one node, however it came to expire.
  PgOutcome outcome =
      call({{"UPDATE passepartout_approvals SET state = 'expired', decided_unix_ms = $1::bigint, "
             "decided_by = $2 WHERE expires_unix_ms <= $1::bigint AND (state = 'pending' OR "
             "(state = 'expired' AND decided_by = '')) RETURNING " +
                 std::string(kColumns),
             {number(now), std::string(who)}}});
  if (!outcome.ok()) return failure(outcome, "cannot expire unattended approvals");
  forget_count();
  std::vector<Approval> expired;
  const PgRows& rows = outcome.results[0];
  for (std::size_t i = 0; i < rows.rows.size(); ++i) {
    auto approval = approval_from_row(row_at(rows, i));
    if (approval) {
      expired.push_back(std::move(*approval));
    } else {
      log_message(LogLevel::warn, "approvals", "{}", approval.error().message);
    }
  }
  return expired;
}

Result<std::optional<std::int64_t>> PgApprovalStore::claim_run(std::string_view token) {
  PgOutcome outcome =
      call({{"UPDATE passepartout_approvals a SET run_state = 'claimed', run_node = $2, "
             "run_fence = a.run_fence + 1, run_lease_until_ms = " +
                 std::string(kDbNowMs) +
                 " + $3::bigint, run_unix_ms = $4::bigint WHERE a.token = $1 "
                 "AND " +
                 claimable_where("$2", "$3") + " RETURNING a.run_fence",
             {std::string(token), node(), number(lease_.count()), number(now_ms())}}});
  if (!outcome.ok()) return failure(outcome, "cannot claim the run");
  if (outcome.results[0].rows.empty()) return std::optional<std::int64_t>();
  return std::optional<std::int64_t>(outcome.results[0].integer(0, "run_fence"));
}

Result<std::vector<std::string>> PgApprovalStore::claimable() const {
  PgOutcome outcome = call({{"SELECT a.token FROM passepartout_approvals a WHERE " + claimable_where("$1", "$2") +
                                 " ORDER BY a.decided_unix_ms LIMIT 100",
                             {node(), number(lease_.count())}}});
  if (!outcome.ok()) return failure(outcome, "cannot look for approved runs");
  std::vector<std::string> tokens;
  for (const auto& row : outcome.results[0].rows) tokens.push_back(row[0].value_or(""));
  return tokens;
}

Result<bool> PgApprovalStore::update_run(std::string_view token, Approval::Run to, std::int64_t fence,
                                         std::string_view error, std::int64_t now) {
  // Only the holder of the current claim records: a run starts from its
  // claim within the lease, and ends from its start (or fails from either).
  std::string from = "run_state = 'running'";
  if (to == Approval::Run::running) {
    from = "run_state = 'claimed' AND run_lease_until_ms > " + std::string(kDbNowMs);
  } else if (to == Approval::Run::failed) {
    from = "run_state IN ('claimed', 'running')";
  }
  PgOutcome outcome =
      call({{"UPDATE passepartout_approvals SET run_state = $2, run_error = $3, run_unix_ms = $4::bigint "
             "WHERE token = $1 AND state = 'approved' AND run_fence = $5::bigint AND run_node = $6 AND " +
                 from,
             {std::string(token), to_string(to), std::string(error), number(now), number(fence), node()}}});
  if (!outcome.ok()) return failure(outcome, "cannot record the run");
  return outcome.results[0].affected == 1;
}

}  // namespace

Result<std::unique_ptr<ApprovalStore>> open_pg_approvals(PgClient& client, const PgApprovalSettings& settings,
                                                         const ApprovalOptions& options) {
  if (auto checked = ApprovalStore::check_options(options); !checked) {
    return fail(checked.error().code, checked.error().message);
  }
  if (settings.node.empty()) return fail(ErrorCode::invalid_input, "the fleet's approvals need this node's id");
  auto store = std::make_unique<PgApprovalStore>(client, settings, options);
  store->recover();  // or with the first approval created once the database answers
  return std::unique_ptr<ApprovalStore>(std::move(store));
}

}  // namespace passepartout
