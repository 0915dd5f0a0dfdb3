// ApprovalStore: actions waiting for a human (Decisions 4). Each pending
// approval has a random token bound to the action's SHA-256 and to the
// versions of the gates that asked; it is decided once, by token, through the
// runtime API (never by anything inside an action), expires, and survives
// restarts (SQLite, synchronous=FULL). Decided and expired ones are kept for
// a retention period, then deleted, so the file does not grow for ever.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
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

class ApprovalStore {
 public:
  using Clock = ApprovalClock;
  static std::int64_t system_now_ms();

  // Opens (creating, mode 0600) the store in `file`, migrating a file of an
  // older version. Expired approvals are marked expired as they are met.
  // Approvals past their retention are deleted when the store opens and,
  // while approvals are being created, at most once an hour. Runs still
  // recorded as running (the process died during them) become interrupted,
  // logged once here.
  static Result<std::unique_ptr<ApprovalStore>> open(const std::filesystem::path& file, ApprovalOptions options = {});
  ~ApprovalStore();
  ApprovalStore(const ApprovalStore&) = delete;
  ApprovalStore& operator=(const ApprovalStore&) = delete;

  // Records a pending approval of `action`; returns it with its token.
  // Refused (limit_exceeded, with a message that says which bound and what
  // to do; counted in refused_count()) when the session of `meta` or the
  // store already has as many pending as its bound allows. Any thread.
  Result<Approval> create(const Value& action, const Value& meta, std::vector<std::string> gates, std::string reason);
  // Pending approvals that have not expired, oldest first. Any thread.
  Result<std::vector<Approval>> pending() const;
  // At most `limit` pending approvals, newest first, after skipping `offset`
  // of them; with the number pending in all, read at the same moment. Any thread.
  Result<ApprovalPage> pending_page(std::size_t limit, std::size_t offset) const;
  // Approvals create() refused for a bound since the store was opened.
  std::uint64_t refused_count() const noexcept;
  // How many are pending (a reply's :RULE-COUNT, seed A16; the prompt's
  // "Rules learned" counts standing approvals, pipeline/rule_book.hpp).
  std::size_t pending_count() const;
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
  Result<Approval> find(std::string_view token) const;

  // Records the run of an approved action, durably: `to` is running (from
  // none, before the run), then done (from running) or failed (from running,
  // or from none for a run that could not start; `error` says why). Refused
  // (refused) for an approval that is not approved or whose run is not where
  // `to` follows. Any thread.
  Result<void> record_run(std::string_view token, Approval::Run to, std::string_view error = {});

  const std::filesystem::path& file() const noexcept;

 private:
  struct State;
  explicit ApprovalStore(std::unique_ptr<State> state);
  Result<Approval> decide(std::string_view token, std::string_view who, Approval::State to);
  std::unique_ptr<State> state_;
};

// Where the daemon keeps approvals: <state dir>/approvals.sqlite3.
std::filesystem::path approvals_file(const std::filesystem::path& state_dir);

}  // namespace passepartout
