// ApprovalStore: what every store shares, and the SQLite store over SqliteDb:
// one row per approval; a decision is one conditional UPDATE, so two
// approvers racing for a token cannot both win; the bounds are counted and
// the row inserted under one lock.
#include "pipeline/approvals.hpp"
#include "pipeline/signal.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <mutex>
#include <utility>

#include "base/digest.hpp"
#include "base/duration_text.hpp"
#include "base/log.hpp"
#include "base/sqlite_db.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout {
namespace fs = std::filesystem;

namespace {

// "PPAP" in PRAGMA application_id.
constexpr std::int32_t kApplicationId = 0x50504150;
constexpr std::array<const char*, 2> kMigrations = {
    R"sql(
CREATE TABLE approvals (
  token TEXT PRIMARY KEY NOT NULL,
  action TEXT NOT NULL,
  action_sha256 TEXT NOT NULL,
  gates TEXT NOT NULL,
  reason TEXT NOT NULL,
  meta TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL,
  expires_unix_ms INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired')),
  decided_unix_ms INTEGER NOT NULL DEFAULT 0,
  decided_by TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX approvals_by_state ON approvals (state, created_unix_ms);
PRAGMA application_id = 1347436880;
PRAGMA user_version = 1;
)sql",
    // Version 2: the session of each approval (NULL in rows written by
    // version 1, filled in from their :META when the store opens), and what
    // came of an approved action's run.
    R"sql(
ALTER TABLE approvals ADD COLUMN session_id TEXT;
ALTER TABLE approvals ADD COLUMN run_state TEXT NOT NULL DEFAULT 'none'
  CHECK (run_state IN ('none', 'running', 'done', 'failed', 'interrupted'));
ALTER TABLE approvals ADD COLUMN run_error TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN run_unix_ms INTEGER NOT NULL DEFAULT 0;
CREATE INDEX approvals_by_session ON approvals (session_id, state);
PRAGMA user_version = 2;
)sql",
};
static_assert(kApplicationId == 1347436880, "the migration writes the application id literally");
constexpr SqliteSchema kSchema{"approvals store", kApplicationId, kMigrations};

constexpr const char* kColumns =
    "SELECT token, action, action_sha256, gates, reason, meta, created_unix_ms, expires_unix_ms, state, "
    "decided_unix_ms, decided_by, session_id, run_state, run_error, run_unix_ms FROM approvals ";

std::string join_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) {
    if (!text.empty()) text += '\n';
    text += line;
  }
  return text;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    lines.emplace_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

Approval::State state_from(std::string_view text) {
  if (text == "approved") return Approval::State::approved;
  if (text == "denied") return Approval::State::denied;
  if (text == "expired") return Approval::State::expired;
  return Approval::State::pending;
}

Approval::Run run_from(std::string_view text) {
  if (text == "claimed") return Approval::Run::claimed;
  if (text == "running") return Approval::Run::running;
  if (text == "done") return Approval::Run::done;
  if (text == "failed") return Approval::Run::failed;
  if (text == "interrupted") return Approval::Run::interrupted;
  return Approval::Run::none;
}

// `word` as one word for a POSIX shell: as it is when it is plain, else in single quotes.
std::string shell_word(std::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.' || c == '/' || c == ':' || c == '@';
  });
  if (plain) return std::string(word);
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// kColumns without its SELECT: what RETURNING gives back.
constexpr const char* kColumnList =
    "token, action, action_sha256, gates, reason, meta, created_unix_ms, expires_unix_ms, state, decided_unix_ms, "
    "decided_by, session_id, run_state, run_error, run_unix_ms";

bool plausible_token(std::string_view token) {
  if (token.size() != 32) return false;
  for (const char c : token) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::int64_t ApprovalStore::system_now_ms() { return unix_ms_now(); }

// --- what every store shares ------------------------------------------------

ApprovalStore::ApprovalStore(const ApprovalOptions& options, std::string node)
    : now_ms_(options.clock ? options.clock : Clock(system_now_ms)),
      node_(std::move(node)),
      lifetime_(options.lifetime),
      retention_(options.retention),
      max_pending_(options.max_pending),
      max_pending_per_session_(options.max_pending_per_session) {}

ApprovalStore::~ApprovalStore() = default;

Result<void> ApprovalStore::check_options(const ApprovalOptions& options) {
  if (options.lifetime.count() <= 0) return fail(ErrorCode::invalid_input, "the approval lifetime must be positive");
  if (options.retention.count() < 0) {
    return fail(ErrorCode::invalid_input, "the approval retention cannot be negative (0 keeps approvals for ever)");
  }
  if (options.max_pending == 0 || options.max_pending_per_session == 0) {
    return fail(ErrorCode::invalid_input, "the bounds on pending approvals must be more than zero");
  }
  return {};
}

Result<void> ApprovalStore::check_room(std::int64_t of_session, std::int64_t in_all, const std::string& session) {
  if (static_cast<std::uint64_t>(of_session) >= max_pending_per_session_) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return fail(ErrorCode::limit_exceeded,
                "approval refused: session '" + session + "' already has " + std::to_string(of_session) +
                    " pending approvals (--max-pending-approvals-per-session); decide or deny them first: "
                    "passepartout approvals deny --all-from " +
                    shell_word(session));
  }
  if (static_cast<std::uint64_t>(in_all) >= max_pending_) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return fail(ErrorCode::limit_exceeded,
                "approval refused: " + std::to_string(in_all) +
                    " approvals are pending, the most the daemon keeps (--max-pending-approvals); decide or deny "
                    "them first: passepartout approvals list");
  }
  return {};
}

Result<Approval> ApprovalStore::approval_from_row(ApprovalRow row) const {
  Approval approval;
  approval.token = std::move(row.token);
  approval.action_sha256 = std::move(row.action_sha256);
  approval.gates = split_lines(row.gates);
  approval.reason = std::move(row.reason);
  approval.created_unix_ms = row.created_unix_ms;
  approval.expires_unix_ms = row.expires_unix_ms;
  approval.state = state_from(row.state);
  approval.decided_unix_ms = row.decided_unix_ms;
  approval.decided_by = std::move(row.decided_by);
  approval.session_id = std::move(row.session_id);
  approval.node = std::move(row.node);
  approval.run = run_from(row.run);
  approval.run_error = std::move(row.run_error);
  approval.run_unix_ms = row.run_unix_ms;
  if (sha256_hex(row.action) != approval.action_sha256) {
    return fail(ErrorCode::invalid_input, where() + ": approval " + approval.token +
                                              ": the stored action does not match its hash; it will not run");
  }
  auto action = read_sexp(row.action);
  if (!action) {
    return fail(ErrorCode::invalid_input, where() + ": approval " + approval.token + ": " + action.error().message);
  }
  approval.action = std::move(*action);
  auto meta = read_sexp(row.meta);
  if (meta) approval.meta = std::move(*meta);
  return approval;
}

Result<Approval> ApprovalStore::create(const Value& action, const Value& meta, std::vector<std::string> gates,
                                       std::string reason) {
  Approval approval;
  approval.token = random_hex(16);
  approval.action = action;
  approval.gates = std::move(gates);
  approval.reason = std::move(reason);
  approval.meta = meta;
  approval.session_id = approval_session(meta);
  approval.node = node_;
  approval.created_unix_ms = now_ms();
  approval.expires_unix_ms = approval.created_unix_ms + lifetime_.count();
  ApprovalRow row;
  row.token = approval.token;
  row.action = to_sexp(action);
  approval.action_sha256 = sha256_hex(row.action);
  row.action_sha256 = approval.action_sha256;
  row.gates = join_lines(approval.gates);
  row.reason = approval.reason;
  row.meta = to_sexp(meta);
  row.created_unix_ms = approval.created_unix_ms;
  row.expires_unix_ms = approval.expires_unix_ms;
  row.state = to_string(Approval::State::pending);
  row.session_id = approval.session_id;
  row.node = node_;
  row.run = to_string(Approval::Run::none);
  if (auto inserted = insert(row); !inserted) return fail(inserted.error().code, inserted.error().message);
  return approval;
}

std::uint64_t ApprovalStore::refused_count() const noexcept { return refused_.load(std::memory_order_relaxed); }
std::uint64_t ApprovalStore::approved_count() const noexcept { return approved_.load(std::memory_order_relaxed); }
std::uint64_t ApprovalStore::denied_count() const noexcept { return denied_.load(std::memory_order_relaxed); }

Result<Approval> ApprovalStore::approve(std::string_view token, std::string_view who) {
  return decide(token, who, Approval::State::approved);
}

Result<Approval> ApprovalStore::deny(std::string_view token, std::string_view who) {
  return decide(token, who, Approval::State::denied);
}

Result<std::size_t> ApprovalStore::deny_session(std::string_view session_id, std::string_view who) {
  auto denied = deny_pending_of(session_id, who, now_ms());
  if (denied) denied_.fetch_add(*denied, std::memory_order_relaxed);
  return denied;
}

Result<std::vector<Approval>> ApprovalStore::expire_unattended(std::string_view who) {
  auto expired = expire_due_unattended(who, now_ms());
  if (expired) denied_.fetch_add(expired->size(), std::memory_order_relaxed);
  return expired;
}

Result<void> ApprovalStore::record_run(std::string_view token, Approval::Run to, std::int64_t fence,
                                       std::string_view error) {
  if (to != Approval::Run::running && to != Approval::Run::done && to != Approval::Run::failed) {
    return fail(ErrorCode::invalid_input, std::string("a run is not recorded as ") + to_string(to));
  }
  auto updated = update_run(token, to, fence, error, now_ms());
  if (!updated) return fail(updated.error().code, updated.error().message);
  if (*updated) return {};
  auto approval = find(token);
  if (!approval) return fail(approval.error().code, approval.error().message);
  return fail(ErrorCode::refused, "approval " + std::string(token) + " is " + to_string(approval->state) +
                                      " and its run " + to_string(approval->run) + "; it cannot be recorded as " +
                                      to_string(to) + " under claim " + std::to_string(fence));
}

Result<Approval> ApprovalStore::decide(std::string_view token, std::string_view who, Approval::State to) {
  if (!plausible_token(token)) {
    return fail(ErrorCode::invalid_input, "'" + std::string(token) + "' is not an approval token (32 hex digits)");
  }
  auto decided = decide_pending(token, who, to, now_ms());
  if (!decided) return fail(decided.error().code, decided.error().message);
  if (*decided) {
    (to == Approval::State::approved ? approved_ : denied_).fetch_add(1, std::memory_order_relaxed);
    return std::move(**decided);
  }
  auto approval = find(token);
  if (!approval) return approval;
  // Say why nothing changed.
  switch (approval->state) {
    case Approval::State::approved:
    case Approval::State::denied: {
      std::string run;
      if (approval->run != Approval::Run::none) {
        run = " (its run: " + std::string(to_string(approval->run)) +
              (approval->run_error.empty() ? "" : ", " + approval->run_error) + ")";
      }
      return fail(ErrorCode::refused, "approval " + std::string(token) + " was already " + to_string(approval->state) +
                                          " by " + approval->decided_by + run + "; an approval is decided only once");
    }
    case Approval::State::expired:
    case Approval::State::pending:
      return fail(ErrorCode::refused,
                  "approval " + std::string(token) + " has expired; ask again so that a new approval is created");
  }
  return approval;
}

const char* to_string(Approval::Run run) noexcept {
  switch (run) {
    case Approval::Run::none:
      return "none";
    case Approval::Run::claimed:
      return "claimed";
    case Approval::Run::running:
      return "running";
    case Approval::Run::done:
      return "done";
    case Approval::Run::failed:
      return "failed";
    case Approval::Run::interrupted:
      return "interrupted";
  }
  return "none";
}

std::string approval_session(const Value& meta) {
  const Value& session = meta.at("SESSION-ID");
  if ((session.is_string() || session.is_keyword()) && !session.text().empty()) return std::string(session.text());
  return std::string(kInternalSession);
}

std::string unknown_approval(std::string_view token) {
  return "no approval with token '" + std::string(token) +
         "' (list the pending ones with `passepartout approvals list`)";
}

void log_interrupted_runs(const std::vector<std::string>& tokens) {
  if (tokens.empty()) return;
  std::string list;
  for (const std::string& token : tokens) list += (list.empty() ? "" : ", ") + token;
  const bool one = tokens.size() == 1;
  log_message(LogLevel::warn, "approvals",
              "{} approved action{} still running when the daemon stopped; recorded as interrupted (whether {} "
              "completed is not known): {}",
              tokens.size(), one ? " was" : "s were", one ? "it" : "they", list);
}

const char* to_string(Approval::State state) noexcept {
  switch (state) {
    case Approval::State::pending:
      return "pending";
    case Approval::State::approved:
      return "approved";
    case Approval::State::denied:
      return "denied";
    case Approval::State::expired:
      return "expired";
  }
  return "pending";
}

// --- the SQLite store ---------------------------------------------------------

namespace {

class SqliteApprovalStore final : public ApprovalStore {
 public:
  SqliteApprovalStore(SqliteDb database, const ApprovalOptions& options)
      : ApprovalStore(options), db_(std::move(database)) {}

  Result<void> prepare();
  Result<void> recover();  // prunes, fills in sessions, interrupts runs: when the store opens

  Result<std::vector<Approval>> pending() const override;
  Result<ApprovalPage> pending_page(std::size_t limit, std::size_t offset) const override;
  std::size_t pending_count() const override;
  Result<Approval> find(std::string_view token) const override;
  std::string where() const override { return db_.file().string(); }

 protected:
  Result<void> insert(const ApprovalRow& row) override;
  Result<std::optional<Approval>> decide_pending(std::string_view token, std::string_view who, Approval::State to,
                                                 std::int64_t now) override;
  Result<std::size_t> deny_pending_of(std::string_view session_id, std::string_view who, std::int64_t now) override;
  Result<std::vector<Approval>> expire_due_unattended(std::string_view who, std::int64_t now) override;
  Result<std::optional<std::int64_t>> claim_run(std::string_view token) override;
  Result<bool> update_run(std::string_view token, Approval::Run to, std::int64_t fence, std::string_view error,
                          std::int64_t now) override;

 private:
  // The row the statement stands on.
  Result<Approval> row(sqlite3_stmt* statement) const;
  Result<void> expire_due() const;
  std::int64_t live_count(std::int64_t now, const std::string* session) const;
  Result<void> fill_in_sessions();
  Result<std::vector<std::string>> interrupt_runs();
  Result<void> prune_due();
  void forget_count() const noexcept { known_count_.store(-1, std::memory_order_release); }

  mutable std::mutex mutex_;  // guards the connection and the statements
  SqliteDb db_;
  std::int64_t next_prune_ms_ = 0;  // insert() prunes again from then on
  SqliteDb::Statement insert_, by_token_, list_pending_, count_pending_, decide_, expire_, prune_;
  SqliteDb::Statement page_, count_live_, count_session_, deny_session_, record_run_;
  // pending_count() is asked for every reply and every prompt, on every
  // thread: the count is kept here, read without the mutex, and recounted
  // only when it may have changed (a decision, or the earliest pending expiry
  // has passed). Written under the mutex: known_until_ms_ before known_count_.
  mutable std::atomic<std::int64_t> known_count_{-1};    // -1: recount
  mutable std::atomic<std::int64_t> known_until_ms_{0};  // when the pending approval that expires first does
};

Result<Approval> SqliteApprovalStore::row(sqlite3_stmt* statement) const {
  ApprovalRow stored;
  stored.token = column_text(statement, 0);
  stored.action = column_text(statement, 1);
  stored.action_sha256 = column_text(statement, 2);
  stored.gates = column_text(statement, 3);
  stored.reason = column_text(statement, 4);
  stored.meta = column_text(statement, 5);
  stored.created_unix_ms = sqlite3_column_int64(statement, 6);
  stored.expires_unix_ms = sqlite3_column_int64(statement, 7);
  stored.state = column_text(statement, 8);
  stored.decided_unix_ms = sqlite3_column_int64(statement, 9);
  stored.decided_by = column_text(statement, 10);
  stored.session_id = column_text(statement, 11);
  stored.run = column_text(statement, 12);
  stored.run_error = column_text(statement, 13);
  stored.run_unix_ms = sqlite3_column_int64(statement, 14);
  return approval_from_row(std::move(stored));
}

// Marks every pending approval past its expiry as expired.
Result<void> SqliteApprovalStore::expire_due() const {
  StatementReset reset(expire_.get());
  if (sqlite3_bind_int64(expire_.get(), 1, now_ms()) != SQLITE_OK || sqlite3_step(expire_.get()) != SQLITE_DONE) {
    return db_.error("cannot expire old approvals");
  }
  return {};
}

// How many approvals are pending and unexpired at `now`: of `session` when
// given, else in all. -1 when SQLite fails.
std::int64_t SqliteApprovalStore::live_count(std::int64_t now, const std::string* session) const {
  sqlite3_stmt* query = session != nullptr ? count_session_.get() : count_live_.get();
  StatementReset reset(query);
  const bool bound = session != nullptr
                         ? bind_text(query, 1, *session) && sqlite3_bind_int64(query, 2, now) == SQLITE_OK
                         : sqlite3_bind_int64(query, 1, now) == SQLITE_OK;
  if (!bound || sqlite3_step(query) != SQLITE_ROW) return -1;
  return sqlite3_column_int64(query, 0);
}

// Rows written by version 1 of the schema get their session from their :META.
Result<void> SqliteApprovalStore::fill_in_sessions() {
  auto select = db_.prepare("SELECT token, meta FROM approvals WHERE session_id IS NULL");
  if (!select) return fail(select.error().code, select.error().message);
  std::vector<std::pair<std::string, std::string>> sessions;  // token, session
  int rc = SQLITE_OK;
  while ((rc = sqlite3_step(select->get())) == SQLITE_ROW) {
    auto meta = read_sexp(column_text(select->get(), 1));
    sessions.emplace_back(column_text(select->get(), 0), approval_session(meta ? *meta : Value()));
  }
  if (rc != SQLITE_DONE) return db_.error("cannot read older approvals");
  if (sessions.empty()) return {};
  auto update = db_.prepare("UPDATE approvals SET session_id = ?2 WHERE token = ?1");
  if (!update) return fail(update.error().code, update.error().message);
  return db_.in_transaction("cannot record the sessions of older approvals", [&]() -> Result<void> {
    for (const auto& [token, session] : sessions) {
      StatementReset reset(update->get());
      if (!bind_text(update->get(), 1, token) || !bind_text(update->get(), 2, session) ||
          sqlite3_step(update->get()) != SQLITE_DONE) {
        return db_.error("cannot record the session of an older approval");
      }
    }
    return {};
  });
}

// Runs still recorded as running were cut short by the process's end:
// they become interrupted. Returns their tokens.
Result<std::vector<std::string>> SqliteApprovalStore::interrupt_runs() {
  auto update = db_.prepare(
      "UPDATE approvals SET run_state = 'interrupted', run_error = ?1, run_unix_ms = ?2 "
      "WHERE run_state = 'running' RETURNING token");
  if (!update) return fail(update.error().code, update.error().message);
  std::vector<std::string> tokens;
  if (!bind_text(update->get(), 1, kInterruptedRun) || sqlite3_bind_int64(update->get(), 2, now_ms()) != SQLITE_OK) {
    return db_.error("cannot record interrupted runs");
  }
  int rc = SQLITE_OK;
  while ((rc = sqlite3_step(update->get())) == SQLITE_ROW) tokens.push_back(column_text(update->get(), 0));
  if (rc != SQLITE_DONE) return db_.error("cannot record interrupted runs");
  return tokens;
}

// Deletes the approvals decided or expired more than the retention ago
// (none when it is zero), and schedules the next pruning an hour from now.
Result<void> SqliteApprovalStore::prune_due() {
  const std::int64_t now = now_ms();
  next_prune_ms_ = now + std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(1)).count();
  if (retention().count() == 0) return {};
  if (auto expired = expire_due(); !expired) return expired;
  StatementReset reset(prune_.get());
  if (sqlite3_bind_int64(prune_.get(), 1, now - retention().count()) != SQLITE_OK ||
      sqlite3_step(prune_.get()) != SQLITE_DONE) {
    return db_.error("cannot delete old approvals");
  }
  return {};
}

Result<void> SqliteApprovalStore::prepare() {
  const std::pair<SqliteDb::Statement*, std::string> statements[] = {
      {&insert_,
       "INSERT INTO approvals (token, action, action_sha256, gates, reason, meta, created_unix_ms, expires_unix_ms, "
       "state, session_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9)"},
      {&by_token_, std::string(kColumns) + "WHERE token = ?1"},
      {&list_pending_, std::string(kColumns) + "WHERE state = 'pending' ORDER BY created_unix_ms, rowid"},
      {&count_pending_, "SELECT count(*), min(expires_unix_ms) FROM approvals WHERE state = 'pending'"},
      {&decide_, std::string("UPDATE approvals SET state = ?2, decided_unix_ms = ?3, decided_by = ?4 WHERE token = ?1 "
                             "AND state = 'pending' AND expires_unix_ms > ?3 RETURNING ") +
                     kColumnList},
      {&expire_, "UPDATE approvals SET state = 'expired' WHERE state = 'pending' AND expires_unix_ms <= ?1"},
      // Pending and unexpired, whether or not expire_due() has marked them yet.
      {&page_, std::string(kColumns) + "WHERE state = 'pending' AND expires_unix_ms > ?1 "
                                       "ORDER BY created_unix_ms DESC, rowid DESC LIMIT ?2 OFFSET ?3"},
      {&count_live_, "SELECT count(*) FROM approvals WHERE state = 'pending' AND expires_unix_ms > ?1"},
      {&count_session_,
       "SELECT count(*) FROM approvals WHERE session_id = ?1 AND state = 'pending' AND expires_unix_ms > ?2"},
      {&deny_session_,
       "UPDATE approvals SET state = 'denied', decided_unix_ms = ?2, decided_by = ?3 "
       "WHERE session_id = ?1 AND state = 'pending' AND expires_unix_ms > ?2"},
      {&record_run_,
       "UPDATE approvals SET run_state = ?2, run_error = ?3, run_unix_ms = ?4 "
       "WHERE token = ?1 AND state = 'approved' AND run_state IN (?5, ?6)"},
      // An approval ends when it is decided, or when it expires undecided.
      {&prune_,
       "DELETE FROM approvals WHERE state <> 'pending' AND "
       "(CASE WHEN state = 'expired' THEN expires_unix_ms ELSE decided_unix_ms END) <= ?1"},
  };
  for (const auto& [slot, sql] : statements) {
    auto prepared = db_.prepare(sql);
    if (!prepared) return fail(prepared.error().code, prepared.error().message);
    *slot = std::move(*prepared);
  }
  return {};
}

Result<void> SqliteApprovalStore::recover() {
  if (auto pruned = prune_due(); !pruned) return pruned;
  if (auto filled = fill_in_sessions(); !filled) return filled;
  auto interrupted = interrupt_runs();
  if (!interrupted) return fail(interrupted.error().code, interrupted.error().message);
  log_interrupted_runs(*interrupted);
  return {};
}

Result<void> SqliteApprovalStore::insert(const ApprovalRow& row) {
  std::lock_guard lock(mutex_);
  if (row.created_unix_ms >= next_prune_ms_) {
    if (auto pruned = prune_due(); !pruned) {  // the file keeps growing, but nothing is lost
      log_message(LogLevel::warn, "approvals", pruned.error().message);
    }
  }
  // Counted under the lock the insert is made under: concurrent requests
  // cannot all see room for one more.
  const std::int64_t of_session = live_count(row.created_unix_ms, &row.session_id);
  const std::int64_t in_all = of_session < 0 ? -1 : live_count(row.created_unix_ms, nullptr);
  if (in_all < 0) return db_.error("cannot count the pending approvals");
  if (auto room = check_room(of_session, in_all, row.session_id); !room) return room;
  sqlite3_stmt* insert = insert_.get();
  StatementReset reset(insert);
  const bool bound =
      bind_text(insert, 1, row.token) && bind_text(insert, 2, row.action) && bind_text(insert, 3, row.action_sha256) &&
      bind_text(insert, 4, row.gates) && bind_text(insert, 5, row.reason) && bind_text(insert, 6, row.meta) &&
      sqlite3_bind_int64(insert, 7, row.created_unix_ms) == SQLITE_OK &&
      sqlite3_bind_int64(insert, 8, row.expires_unix_ms) == SQLITE_OK && bind_text(insert, 9, row.session_id);
  if (!bound || sqlite3_step(insert) != SQLITE_DONE) return db_.error("cannot record an approval");
  forget_count();
  return {};
}

Result<std::vector<Approval>> SqliteApprovalStore::pending() const {
  std::lock_guard lock(mutex_);
  if (auto expired = expire_due(); !expired) return fail(expired.error().code, expired.error().message);
  sqlite3_stmt* query = list_pending_.get();
  StatementReset reset(query);
  std::vector<Approval> list;
  int rc = SQLITE_OK;
  while ((rc = sqlite3_step(query)) == SQLITE_ROW) {
    auto approval = row(query);
    if (!approval) return fail(approval.error().code, approval.error().message);
    list.push_back(std::move(*approval));
  }
  if (rc != SQLITE_DONE) return db_.error("cannot list the approvals");
  return list;
}

Result<ApprovalPage> SqliteApprovalStore::pending_page(std::size_t limit, std::size_t offset) const {
  constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  const std::int64_t now = now_ms();
  ApprovalPage page;
  std::lock_guard lock(mutex_);
  const std::int64_t total = live_count(now, nullptr);
  if (total < 0) return db_.error("cannot count the pending approvals");
  page.total = static_cast<std::size_t>(total);
  sqlite3_stmt* query = page_.get();
  StatementReset reset(query);
  if (sqlite3_bind_int64(query, 1, now) != SQLITE_OK ||
      sqlite3_bind_int64(query, 2, static_cast<std::int64_t>(std::min(limit, kMax))) != SQLITE_OK ||
      sqlite3_bind_int64(query, 3, static_cast<std::int64_t>(std::min(offset, kMax))) != SQLITE_OK) {
    return db_.error("cannot list the approvals");
  }
  int rc = SQLITE_OK;
  while ((rc = sqlite3_step(query)) == SQLITE_ROW) {
    auto approval = row(query);
    if (!approval) return fail(approval.error().code, approval.error().message);
    page.approvals.push_back(std::move(*approval));
  }
  if (rc != SQLITE_DONE) return db_.error("cannot list the approvals");
  return page;
}

std::size_t SqliteApprovalStore::pending_count() const {
  const std::int64_t known = known_count_.load(std::memory_order_acquire);
  if (known >= 0 && now_ms() < known_until_ms_.load(std::memory_order_relaxed)) {
    return static_cast<std::size_t>(known);
  }
  std::lock_guard lock(mutex_);
  static_cast<void>(expire_due());
  sqlite3_stmt* query = count_pending_.get();
  StatementReset reset(query);
  if (sqlite3_step(query) != SQLITE_ROW) return 0;
  const std::int64_t count = sqlite3_column_int64(query, 0);
  known_until_ms_.store(sqlite3_column_type(query, 1) == SQLITE_NULL ? std::numeric_limits<std::int64_t>::max()
                                                                     : sqlite3_column_int64(query, 1),
                        std::memory_order_relaxed);
  known_count_.store(count, std::memory_order_release);
  return static_cast<std::size_t>(count);
}

Result<Approval> SqliteApprovalStore::find(std::string_view token) const {
  std::lock_guard lock(mutex_);
  sqlite3_stmt* query = by_token_.get();
  StatementReset reset(query);
  if (!bind_text(query, 1, token)) return db_.error("cannot look up an approval");
  const int rc = sqlite3_step(query);
  if (rc == SQLITE_DONE) return fail(ErrorCode::not_found, unknown_approval(token));
  if (rc != SQLITE_ROW) return db_.error("cannot look up an approval");
  return row(query);
}

Result<std::optional<Approval>> SqliteApprovalStore::decide_pending(std::string_view token, std::string_view who,
                                                                    Approval::State to, std::int64_t now) {
  std::lock_guard lock(mutex_);
  sqlite3_stmt* update = decide_.get();
  StatementReset reset(update);
  const bool bound = bind_text(update, 1, token) && bind_text(update, 2, to_string(to)) &&
                     sqlite3_bind_int64(update, 3, now) == SQLITE_OK && bind_text(update, 4, who);
  if (!bound) return db_.error("cannot record the decision");
  const int rc = sqlite3_step(update);
  if (rc == SQLITE_DONE) return std::optional<Approval>();
  if (rc != SQLITE_ROW) return db_.error("cannot record the decision");
  auto decided = row(update);
  const bool finished = sqlite3_step(update) == SQLITE_DONE;  // the change is made when the statement ends
  forget_count();
  if (!finished) return db_.error("cannot record the decision");
  if (!decided) return fail(decided.error().code, decided.error().message);
  return std::optional<Approval>(std::move(*decided));
}

Result<std::size_t> SqliteApprovalStore::deny_pending_of(std::string_view session_id, std::string_view who,
                                                         std::int64_t now) {
  std::lock_guard lock(mutex_);
  sqlite3_stmt* update = deny_session_.get();
  StatementReset reset(update);
  // One statement: every row changes in one transaction, or none does.
  const bool bound =
      bind_text(update, 1, session_id) && sqlite3_bind_int64(update, 2, now) == SQLITE_OK && bind_text(update, 3, who);
  if (!bound || sqlite3_step(update) != SQLITE_DONE) return db_.error("cannot record the denials");
  forget_count();
  return static_cast<std::size_t>(sqlite3_changes(db_.handle()));
}

Result<std::vector<Approval>> SqliteApprovalStore::expire_due_unattended(std::string_view who, std::int64_t now) {
  std::lock_guard lock(mutex_);
  // One statement: each row is told once, however it came to expire.
  auto update = db_.prepare(std::string("UPDATE approvals SET state = 'expired', decided_unix_ms = ?1, decided_by = ?2 "
                                        "WHERE expires_unix_ms <= ?1 AND (state = 'pending' OR (state = 'expired' AND "
                                        "COALESCE(decided_by, '') = '')) RETURNING ") +
                            kColumnList);
  if (!update) return fail(update.error().code, update.error().message);
  if (sqlite3_bind_int64(update->get(), 1, now) != SQLITE_OK || !bind_text(update->get(), 2, who)) {
    return db_.error("cannot expire unattended approvals");
  }
  std::vector<Approval> expired;
  int rc = SQLITE_OK;
  while ((rc = sqlite3_step(update->get())) == SQLITE_ROW) {
    auto approval = row(update->get());
    if (approval) {
      expired.push_back(std::move(*approval));
    } else {
      log_message(LogLevel::warn, "approvals", "{}", approval.error().message);
    }
  }
  if (rc != SQLITE_DONE) return db_.error("cannot expire unattended approvals");
  forget_count();
  return expired;
}

// One daemon runs its approvals as they are decided: a claim is that the
// run has not started (the record of its start is the conditional write).
Result<std::optional<std::int64_t>> SqliteApprovalStore::claim_run(std::string_view token) {
  auto approval = find(token);
  if (!approval) return fail(approval.error().code, approval.error().message);
  if (approval->state != Approval::State::approved || approval->run != Approval::Run::none) {
    return std::optional<std::int64_t>();
  }
  return std::optional<std::int64_t>(1);
}

Result<bool> SqliteApprovalStore::update_run(std::string_view token, Approval::Run to, std::int64_t /*fence*/,
                                             std::string_view error, std::int64_t now) {
  // Where `to` may follow from: running from none; done from running; failed from either (a run that could not start).
  Approval::Run from = Approval::Run::running, or_from = Approval::Run::running;
  if (to == Approval::Run::running) {
    from = or_from = Approval::Run::none;
  } else if (to == Approval::Run::failed) {
    from = Approval::Run::none;
  }
  std::lock_guard lock(mutex_);
  sqlite3_stmt* update = record_run_.get();
  StatementReset reset(update);
  const bool bound = bind_text(update, 1, token) && bind_text(update, 2, to_string(to)) &&
                     bind_text(update, 3, error) && sqlite3_bind_int64(update, 4, now) == SQLITE_OK &&
                     bind_text(update, 5, to_string(from)) && bind_text(update, 6, to_string(or_from));
  if (!bound || sqlite3_step(update) != SQLITE_DONE) return db_.error("cannot record the run");
  return sqlite3_changes(db_.handle()) == 1;
}

}  // namespace

Result<std::unique_ptr<ApprovalStore>> ApprovalStore::open(const fs::path& file, const ApprovalOptions& options) {
  if (auto checked = check_options(options); !checked) return fail(checked.error().code, checked.error().message);
  auto db = SqliteDb::open(file, kSchema);
  if (!db) return fail(db.error().code, db.error().message);
  auto store = std::make_unique<SqliteApprovalStore>(std::move(*db), options);
  if (auto prepared = store->prepare(); !prepared) return fail(prepared.error().code, prepared.error().message);
  if (auto recovered = store->recover(); !recovered) return fail(recovered.error().code, recovered.error().message);
  return std::unique_ptr<ApprovalStore>(std::move(store));
}

fs::path approvals_file(const fs::path& state_dir) { return state_dir / "approvals.sqlite3"; }

}  // namespace passepartout
