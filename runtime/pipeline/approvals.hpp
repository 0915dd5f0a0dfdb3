// ApprovalStore: actions waiting for a human (Decisions 4). Each pending
// approval has a random token bound to the action's SHA-256 and to the
// versions of the gates that asked; it is decided once, by token, through the
// runtime API (never by anything inside an action), expires, and survives
// restarts (SQLite with synchronous=FULL, or the fleet's state database).
// Decided and expired ones are kept for a retention period, then deleted, so
// the store does not grow for ever.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "value/value.hpp"

namespace passepartout {

struct Approval {
  enum class State { pending, approved, denied, expired };
  // What came of an approved action's run. The decision is durable before
  // the run starts; this records what happened after it.
  enum class Run {
    none,         // not started: pending, denied, expired, or approved and not yet run
    claimed,      // in a fleet: a node holds its run, and is checking it (a lease; not started)
    running,      // recorded just before the actuator or tool was called
    done,         // it answered
    failed,       // it reported an error (run_error), or could not be started
    interrupted,  // still running when the process stopped: found when the store opened
  };

  std::string token;               // 32 lower-case hex digits: 128 random bits
  Value action;                    // what runs once approved
  std::string action_sha256;       // of the action's printed form; checked when read back
  std::vector<std::string> gates;  // "name@version" of each gate that asked
  std::string reason;              // why the gates asked
  Value meta;                      // the signal's :META (source, session), to route the outcome
  std::string session_id;          // its :SESSION-ID, or "internal" when it names none (as the pipeline does)
  std::string node;                // the daemon of the fleet that asked; "" in a store of one daemon
  std::int64_t created_unix_ms = 0;
  std::int64_t expires_unix_ms = 0;
  State state = State::pending;
  std::int64_t decided_unix_ms = 0;  // 0 while pending
  std::string decided_by;            // who approved or denied ("cli", "wire", ...)
  Run run = Run::none;
  std::string run_error;         // failed: why; interrupted: what is known
  std::int64_t run_unix_ms = 0;  // when `run` last changed; 0 while none
};

const char* to_string(Approval::State state) noexcept;
const char* to_string(Approval::Run run) noexcept;

// The session an approval belongs to, from the signal's :META: its
// :SESSION-ID (a string, or a keyword's name), else "internal".
std::string approval_session(const Value& meta);

// One page of the pending approvals, newest first, and how many are pending in all.
struct ApprovalPage {
  std::vector<Approval> approvals;
  std::size_t total = 0;
};

// The wall clock in Unix milliseconds; replaceable for tests of expiry.
using ApprovalClock = std::function<std::int64_t()>;

// How long approvals live and are kept, and how many may wait.
struct ApprovalOptions {
  static constexpr std::chrono::milliseconds kDefaultLifetime{std::chrono::hours(24)};
  static constexpr std::chrono::milliseconds kDefaultRetention{std::chrono::hours(24 * 30)};
  static constexpr std::size_t kDefaultMaxPending = 1000;
  static constexpr std::size_t kDefaultMaxPendingPerSession = 20;

  // From its creation until a pending approval expires; more than zero.
  std::chrono::milliseconds lifetime = kDefaultLifetime;
  // How long an approval is kept once decided (approved or denied) or
  // expired; after that it is deleted (a replayed token is then unknown,
  // still refused). Zero keeps every approval for ever.
  std::chrono::milliseconds retention = kDefaultRetention;
  ApprovalClock clock;  // empty: ApprovalStore::system_now_ms
  // Past either bound create() refuses (limit_exceeded): pending approvals
  // in all, and of one session. Both more than zero.
  std::size_t max_pending = kDefaultMaxPending;
  std::size_t max_pending_per_session = kDefaultMaxPendingPerSession;
};

// An approval as a store keeps it: every field as text or a number, the
// action and :META printed. approval_from_row() reads one back.
struct ApprovalRow {
  std::string token, action, action_sha256, gates, reason, meta;
  std::int64_t created_unix_ms = 0, expires_unix_ms = 0;
  std::string state;
  std::int64_t decided_unix_ms = 0;
  std::string decided_by, session_id, node, run;
  std::string run_error;
  std::int64_t run_unix_ms = 0;
};

// The store behind approvals: SQLite in the state folder for one daemon
// (ApprovalStore::open), or the state database a fleet shares
// (fleet/pg_approvals.hpp). What is the same for both — tokens, bounds and
// their messages, which run record may follow which, why a decision changed
// nothing — is here; a store supplies the conditional writes.
class ApprovalStore {
 public:
  using Clock = ApprovalClock;
  static std::int64_t system_now_ms();

  // The SQLite store: opens (creating, mode 0600) `file`, migrating a file
  // of an older version. Expired approvals are marked expired as they are
  // met. Approvals past their retention are deleted when the store opens
  // and, while approvals are being created, at most once an hour. Runs
  // still recorded as running (the process died during them) become
  // interrupted, logged once here.
  static Result<std::unique_ptr<ApprovalStore>> open(const std::filesystem::path& file,
                                                     const ApprovalOptions& options = {});
  // Refused (invalid_input, saying which) for options no store accepts.
  static Result<void> check_options(const ApprovalOptions& options);
  virtual ~ApprovalStore();
  ApprovalStore(const ApprovalStore&) = delete;
  ApprovalStore& operator=(const ApprovalStore&) = delete;

  // Records a pending approval of `action`; returns it with its token.
  // Refused (limit_exceeded, with a message that says which bound and what
  // to do; counted in refused_count()) when the session of `meta` or the
  // store already has as many pending as its bound allows. Any thread.
  Result<Approval> create(const Value& action, const Value& meta, std::vector<std::string> gates, std::string reason);
  // Pending approvals that have not expired, oldest first. Any thread.
  virtual Result<std::vector<Approval>> pending() const = 0;
  // At most `limit` pending approvals, newest first, after skipping `offset`
  // of them; with the number pending in all, read at the same moment. Any thread.
  virtual Result<ApprovalPage> pending_page(std::size_t limit, std::size_t offset) const = 0;
  // Approvals create() refused for a bound since the store was opened.
  std::uint64_t refused_count() const noexcept;
  // How many are pending (a reply's :RULE-COUNT, seed A16; the prompt's
  // "Rules learned" counts standing approvals, pipeline/rule_book.hpp).
  virtual std::size_t pending_count() const = 0;
  // Approvals decided since the store was opened (deny_session() counts
  // each it denied), for metrics. Any thread, without a lock.
  std::uint64_t approved_count() const noexcept;
  std::uint64_t denied_count() const noexcept;
  // Decides `token` once: the approval changes from pending to approved
  // (durably, before this returns) and comes back for its single run. Refused
  // with a reason for an unknown token, one already decided, one expired, or
  // an action whose stored hash no longer matches. Any thread.
  Result<Approval> approve(std::string_view token, std::string_view who);
  Result<Approval> deny(std::string_view token, std::string_view who);
  // Denies every pending approval of `session_id` in one transaction;
  // returns how many (0 when none was pending). Any thread.
  Result<std::size_t> deny_session(std::string_view session_id, std::string_view who);
  // --unattended-approvals deny-after: every approval whose time has come
  // undecided becomes expired, decided by `who` ("unattended"), and comes
  // back, each once: one that expired quietly before (met by another call)
  // is returned by the first call after it, never again. Any thread.
  Result<std::vector<Approval>> expire_unattended(std::string_view who);
  // One approval in whatever state, for status and tests.
  virtual Result<Approval> find(std::string_view token) const = 0;

  // Claims the run of an approved action for this daemon, before it is
  // checked and run: its fencing number, which every record of the run
  // names; nullopt when this daemon may not run it (it was not approved, its
  // run is another's or over, or in a fleet it is another node's to run).
  // In a fleet the claim is the node's for a lease: one that has not
  // started its run by then may be taken over by another node, and then
  // records nothing more. Any thread.
  virtual Result<std::optional<std::int64_t>> claim_run(std::string_view token) = 0;
  // Records the run of an approved action, durably, under the claim `fence`:
  // `to` is running (just before the actuator or tool is called), then done
  // or failed (`error` says why; also for a run that could not start).
  // Refused (refused) for an approval that is not approved, a run that is
  // not where `to` follows, or a claim that is no longer this daemon's.
  // Any thread.
  Result<void> record_run(std::string_view token, Approval::Run to, std::int64_t fence, std::string_view error = {});
  // In a fleet: approved actions whose run this node may claim now (its
  // own, those of nodes gone silent, claims whose lease ran out); for one
  // daemon none (its runs start with their decision). Any thread.
  virtual Result<std::vector<std::string>> claimable() const { return std::vector<std::string>{}; }

  // Where the approvals are kept, for messages: the file, or the state database.
  virtual std::string where() const = 0;

 protected:
  // `node`: the daemon of the fleet this store writes for ("" for one daemon).
  explicit ApprovalStore(const ApprovalOptions& options, std::string node = {});

  std::int64_t now_ms() const { return now_ms_(); }
  std::chrono::milliseconds lifetime() const noexcept { return lifetime_; }
  std::chrono::milliseconds retention() const noexcept { return retention_; }
  std::size_t max_pending() const noexcept { return max_pending_; }
  std::size_t max_pending_per_session() const noexcept { return max_pending_per_session_; }
  const std::string& node() const noexcept { return node_; }
  // Refused (limit_exceeded, counted) when `of_session` or `in_all` pending
  // approvals leave no room for one more in `session`.
  Result<void> check_room(std::int64_t of_session, std::int64_t in_all, const std::string& session);
  // The approval a row holds; one whose action does not read back or no
  // longer matches its hash is reported, never run.
  Result<Approval> approval_from_row(ApprovalRow row) const;

  // The store's writes. insert: `row` as a new pending approval, calling
  // check_room() with the counts it made under the same lock or
  // transaction. decide_pending: `token` from pending and unexpired at
  // `now` to `to`; nullopt when it was not. The others as the public calls
  // they serve; update_run: false when the run was not where `to` follows
  // or the claim `fence` is not this daemon's.
  virtual Result<void> insert(const ApprovalRow& row) = 0;
  virtual Result<std::optional<Approval>> decide_pending(std::string_view token, std::string_view who,
                                                         Approval::State to, std::int64_t now) = 0;
  virtual Result<std::size_t> deny_pending_of(std::string_view session_id, std::string_view who, std::int64_t now) = 0;
  virtual Result<std::vector<Approval>> expire_due_unattended(std::string_view who, std::int64_t now) = 0;
  virtual Result<bool> update_run(std::string_view token, Approval::Run to, std::int64_t fence, std::string_view error,
                                  std::int64_t now) = 0;

 private:
  Clock now_ms_;
  std::string node_;
  std::chrono::milliseconds lifetime_;
  std::chrono::milliseconds retention_;
  std::size_t max_pending_;
  std::size_t max_pending_per_session_;
  std::atomic<std::uint64_t> refused_{0};   // create() refusals for a bound
  std::atomic<std::uint64_t> approved_{0};  // decisions since open
  std::atomic<std::uint64_t> denied_{0};
  Result<Approval> decide(std::string_view token, std::string_view who, Approval::State to);
};

// For stores: what a token no store holds is refused with; the error a run
// cut short by the process's end is recorded with; the warning that names
// such runs (none: nothing is logged).
std::string unknown_approval(std::string_view token);
inline constexpr std::string_view kInterruptedRun =
    "the daemon stopped while the action ran; whether it completed is not known";
void log_interrupted_runs(const std::vector<std::string>& tokens);

// Where the daemon keeps approvals: <state dir>/approvals.sqlite3.
std::filesystem::path approvals_file(const std::filesystem::path& state_dir);

}  // namespace passepartout
