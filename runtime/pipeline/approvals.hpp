// ApprovalStore: actions waiting for a human (Decisions 4). Each pending
// approval has a random token bound to the action's SHA-256 and to the
// versions of the gates that asked; it is decided once, by token, through the
// runtime API (never by anything inside an action), expires, and survives
// restarts (SQLite, synchronous=FULL). Decided and expired ones are kept for
// a retention period, then deleted, so the file does not grow for ever.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "result.hpp"
#include "value/value.hpp"

namespace passepartout {

struct Approval {
  enum class State { pending, approved, denied, expired };

  std::string token;          // 32 lower-case hex digits: 128 random bits
  Value action;               // what runs once approved
  std::string action_sha256;  // of the action's printed form; checked when read back
  std::vector<std::string> gates;  // "name@version" of each gate that asked
  std::string reason;              // why the gates asked
  Value meta;                      // the signal's :META (source, session), to route the outcome
  std::int64_t created_unix_ms = 0;
  std::int64_t expires_unix_ms = 0;
  State state = State::pending;
  std::int64_t decided_unix_ms = 0;  // 0 while pending
  std::string decided_by;            // who approved or denied ("cli", "wire", ...)
};

const char* to_string(Approval::State state) noexcept;

// The wall clock in Unix milliseconds; replaceable for tests of expiry.
using ApprovalClock = std::function<std::int64_t()>;

// How long approvals live and are kept.
struct ApprovalOptions {
  static constexpr std::chrono::milliseconds kDefaultLifetime{std::chrono::hours(24)};
  static constexpr std::chrono::milliseconds kDefaultRetention{std::chrono::hours(24 * 30)};

  // From its creation until a pending approval expires; more than zero.
  std::chrono::milliseconds lifetime = kDefaultLifetime;
  // How long an approval is kept once decided (approved or denied) or
  // expired; after that it is deleted (a replayed token is then unknown,
  // still refused). Zero keeps every approval for ever.
  std::chrono::milliseconds retention = kDefaultRetention;
  ApprovalClock clock;  // empty: ApprovalStore::system_now_ms
};

class ApprovalStore {
 public:
  using Clock = ApprovalClock;
  static std::int64_t system_now_ms();

  // Opens (creating, mode 0600) the store in `file`. Expired approvals are
  // marked expired as they are met. Approvals past their retention are
  // deleted when the store opens and, while approvals are being created, at
  // most once an hour.
  static Result<std::unique_ptr<ApprovalStore>> open(const std::filesystem::path& file, ApprovalOptions options = {});
  ~ApprovalStore();
  ApprovalStore(const ApprovalStore&) = delete;
  ApprovalStore& operator=(const ApprovalStore&) = delete;

  // Records a pending approval of `action`; returns it with its token. Any thread.
  Result<Approval> create(const Value& action, const Value& meta, std::vector<std::string> gates, std::string reason);
  // Pending approvals that have not expired, oldest first. Any thread.
  Result<std::vector<Approval>> pending() const;
  // How many are pending (the prompt's "Rules learned", a reply's :RULE-COUNT).
  std::size_t pending_count() const;
  // Decides `token` once: the approval changes from pending to approved
  // (durably, before this returns) and comes back for its single run. Refused
  // with a reason for an unknown token, one already decided, one expired, or
  // an action whose stored hash no longer matches. Any thread.
  Result<Approval> approve(std::string_view token, std::string_view who);
  Result<Approval> deny(std::string_view token, std::string_view who);
  // One approval in whatever state, for status and tests.
  Result<Approval> find(std::string_view token) const;

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
