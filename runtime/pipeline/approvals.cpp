// ApprovalStore over SqliteDb: one row per approval; a decision is one
// conditional UPDATE, so two approvers racing for a token cannot both win;
// the bounds are counted and the row inserted under one lock.
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

// What a run that was going on when the process stopped is recorded with.
constexpr std::string_view kInterrupted = "the daemon stopped while the action ran; whether it completed is not known";

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

bool plausible_token(std::string_view token) {
  if (token.size() != 32) return false;
  for (const char c : token) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::int64_t ApprovalStore::system_now_ms() { return unix_ms_now(); }

const char* to_string(Approval::Run run) noexcept {
  switch (run) {
    case Approval::Run::none:
      return "none";
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

struct ApprovalStore::State {
  explicit State(SqliteDb database) : db(std::move(database)) {}
  mutable std::mutex mutex;  // guards the connection and the statements
  SqliteDb db;
  std::chrono::milliseconds lifetime = ApprovalOptions::kDefaultLifetime;
  std::chrono::milliseconds retention = ApprovalOptions::kDefaultRetention;
  Clock now_ms = system_now_ms;
  std::int64_t next_prune_ms = 0;  // create() prunes again from then on
  std::size_t max_pending = ApprovalOptions::kDefaultMaxPending;
  std::size_t max_pending_per_session = ApprovalOptions::kDefaultMaxPendingPerSession;
  std::atomic<std::uint64_t> refused{0};   // create() refusals for a bound
  std::atomic<std::uint64_t> approved{0};  // decisions since open
  std::atomic<std::uint64_t> denied{0};
  SqliteDb::Statement insert, by_token, list_pending, count_pending, decide, expire, prune;
  SqliteDb::Statement page, count_live, count_session, deny_session, record_run;
  // pending_count() is asked for every reply and every prompt, on every
  // thread: the count is kept here, read without the mutex, and recounted
  // only when it may have changed (a decision, or the earliest pending expiry
  // has passed). Written under the mutex: known_until_ms before known_count.
  std::atomic<std::int64_t> known_count{-1};    // -1: recount
  std::atomic<std::int64_t> known_until_ms{0};  // when the pending approval that expires first does
  void forget_count() noexcept { known_count.store(-1, std::memory_order_release); }

  // The row the statement stands on; a stored action that does not read back
  // or no longer matches its hash is reported, never run.
  Result<Approval> row(sqlite3_stmt* statement) const {
    Approval approval;
    approval.token = column_text(statement, 0);
    const std::string printed = column_text(statement, 1);
    approval.action_sha256 = column_text(statement, 2);
    approval.gates = split_lines(column_text(statement, 3));
    approval.reason = column_text(statement, 4);
    const std::string meta = column_text(statement, 5);
    approval.created_unix_ms = sqlite3_column_int64(statement, 6);
    approval.expires_unix_ms = sqlite3_column_int64(statement, 7);
    approval.state = state_from(column_text(statement, 8));
    approval.decided_unix_ms = sqlite3_column_int64(statement, 9);
    approval.decided_by = column_text(statement, 10);
    approval.session_id = column_text(statement, 11);
    approval.run = run_from(column_text(statement, 12));
    approval.run_error = column_text(statement, 13);
    approval.run_unix_ms = sqlite3_column_int64(statement, 14);
    if (sha256_hex(printed) != approval.action_sha256) {
      return fail(ErrorCode::invalid_input, db.file().string() + ": approval " + approval.token +
                                                ": the stored action does not match its hash; it will not run");
    }
    auto action = read_sexp(printed);
    if (!action) {
      return fail(ErrorCode::invalid_input,
                  db.file().string() + ": approval " + approval.token + ": " + action.error().message);
    }
    approval.action = std::move(*action);
    auto read_meta = read_sexp(meta);
    if (read_meta) approval.meta = std::move(*read_meta);
    return approval;
  }

  // Marks every pending approval past its expiry as expired.
  Result<void> expire_due() {
    StatementReset reset(expire.get());
    if (sqlite3_bind_int64(expire.get(), 1, now_ms()) != SQLITE_OK || sqlite3_step(expire.get()) != SQLITE_DONE) {
      return db.error("cannot expire old approvals");
    }
    return {};
  }

  // How many approvals are pending and unexpired at `now`: of `session` when
  // given, else in all. -1 when SQLite fails.
  std::int64_t live_count(std::int64_t now, const std::string* session) {
    sqlite3_stmt* query = session != nullptr ? count_session.get() : count_live.get();
    StatementReset reset(query);
    const bool bound = session != nullptr
                           ? bind_text(query, 1, *session) && sqlite3_bind_int64(query, 2, now) == SQLITE_OK
                           : sqlite3_bind_int64(query, 1, now) == SQLITE_OK;
    if (!bound || sqlite3_step(query) != SQLITE_ROW) return -1;
    return sqlite3_column_int64(query, 0);
  }

  // Rows written by version 1 of the schema get their session from their :META.
  Result<void> fill_in_sessions() {
    auto select = db.prepare("SELECT token, meta FROM approvals WHERE session_id IS NULL");
    if (!select) return fail(select.error().code, select.error().message);
    std::vector<std::pair<std::string, std::string>> sessions;  // token, session
    int rc = SQLITE_OK;
    while ((rc = sqlite3_step(select->get())) == SQLITE_ROW) {
      auto meta = read_sexp(column_text(select->get(), 1));
      sessions.emplace_back(column_text(select->get(), 0), approval_session(meta ? *meta : Value()));
    }
    if (rc != SQLITE_DONE) return db.error("cannot read older approvals");
    if (sessions.empty()) return {};
    auto update = db.prepare("UPDATE approvals SET session_id = ?2 WHERE token = ?1");
    if (!update) return fail(update.error().code, update.error().message);
    return db.in_transaction("cannot record the sessions of older approvals", [&]() -> Result<void> {
      for (const auto& [token, session] : sessions) {
        StatementReset reset(update->get());
        if (!bind_text(update->get(), 1, token) || !bind_text(update->get(), 2, session) ||
            sqlite3_step(update->get()) != SQLITE_DONE) {
          return db.error("cannot record the session of an older approval");
        }
      }
      return {};
    });
  }

  // Runs still recorded as running were cut short by the process's end:
  // they become interrupted, logged once. Returns their tokens.
  Result<std::vector<std::string>> interrupt_runs() {
    auto update = db.prepare(
        "UPDATE approvals SET run_state = 'interrupted', run_error = ?1, run_unix_ms = ?2 "
        "WHERE run_state = 'running' RETURNING token");
    if (!update) return fail(update.error().code, update.error().message);
    std::vector<std::string> tokens;
    if (!bind_text(update->get(), 1, kInterrupted) || sqlite3_bind_int64(update->get(), 2, now_ms()) != SQLITE_OK) {
      return db.error("cannot record interrupted runs");
    }
    int rc = SQLITE_OK;
    while ((rc = sqlite3_step(update->get())) == SQLITE_ROW) tokens.push_back(column_text(update->get(), 0));
    if (rc != SQLITE_DONE) return db.error("cannot record interrupted runs");
    return tokens;
  }

  // Deletes the approvals decided or expired more than `retention` ago (none
  // when it is zero), and schedules the next pruning an hour from now.
  Result<void> prune_due() {
    const std::int64_t now = now_ms();
    next_prune_ms = now + std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(1)).count();
    if (retention.count() == 0) return {};
    if (auto expired = expire_due(); !expired) return expired;
    StatementReset reset(prune.get());
    if (sqlite3_bind_int64(prune.get(), 1, now - retention.count()) != SQLITE_OK ||
        sqlite3_step(prune.get()) != SQLITE_DONE) {
      return db.error("cannot delete old approvals");
    }
    return {};
  }
};

ApprovalStore::ApprovalStore(std::unique_ptr<State> state) : state_(std::move(state)) {}
ApprovalStore::~ApprovalStore() = default;

const fs::path& ApprovalStore::file() const noexcept { return state_->db.file(); }

Result<std::unique_ptr<ApprovalStore>> ApprovalStore::open(const fs::path& file, ApprovalOptions options) {
  if (options.lifetime.count() <= 0) return fail(ErrorCode::invalid_input, "the approval lifetime must be positive");
  if (options.retention.count() < 0) {
    return fail(ErrorCode::invalid_input, "the approval retention cannot be negative (0 keeps approvals for ever)");
  }
  if (options.max_pending == 0 || options.max_pending_per_session == 0) {
    return fail(ErrorCode::invalid_input, "the bounds on pending approvals must be more than zero");
  }
  auto db = SqliteDb::open(file, kSchema);
  if (!db) return fail(db.error().code, db.error().message);
  auto state = std::make_unique<State>(std::move(*db));
  state->lifetime = options.lifetime;
  state->retention = options.retention;
  if (options.clock) state->now_ms = std::move(options.clock);
  state->max_pending = options.max_pending;
  state->max_pending_per_session = options.max_pending_per_session;
  const std::pair<SqliteDb::Statement*, std::string> statements[] = {
      {&state->insert,
       "INSERT INTO approvals (token, action, action_sha256, gates, reason, meta, created_unix_ms, expires_unix_ms, "
       "state, session_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9)"},
      {&state->by_token, std::string(kColumns) + "WHERE token = ?1"},
      {&state->list_pending, std::string(kColumns) + "WHERE state = 'pending' ORDER BY created_unix_ms, rowid"},
      {&state->count_pending, "SELECT count(*), min(expires_unix_ms) FROM approvals WHERE state = 'pending'"},
      {&state->decide,
       "UPDATE approvals SET state = ?2, decided_unix_ms = ?3, decided_by = ?4 WHERE token = ?1 AND state = "
       "'pending' AND expires_unix_ms > ?3"},
      {&state->expire, "UPDATE approvals SET state = 'expired' WHERE state = 'pending' AND expires_unix_ms <= ?1"},
      // Pending and unexpired, whether or not expire_due() has marked them yet.
      {&state->page, std::string(kColumns) + "WHERE state = 'pending' AND expires_unix_ms > ?1 "
                                             "ORDER BY created_unix_ms DESC, rowid DESC LIMIT ?2 OFFSET ?3"},
      {&state->count_live, "SELECT count(*) FROM approvals WHERE state = 'pending' AND expires_unix_ms > ?1"},
      {&state->count_session,
       "SELECT count(*) FROM approvals WHERE session_id = ?1 AND state = 'pending' AND expires_unix_ms > ?2"},
      {&state->deny_session,
       "UPDATE approvals SET state = 'denied', decided_unix_ms = ?2, decided_by = ?3 "
       "WHERE session_id = ?1 AND state = 'pending' AND expires_unix_ms > ?2"},
      {&state->record_run,
       "UPDATE approvals SET run_state = ?2, run_error = ?3, run_unix_ms = ?4 "
       "WHERE token = ?1 AND state = 'approved' AND run_state IN (?5, ?6)"},
      // An approval ends when it is decided, or when it expires undecided.
      {&state->prune,
       "DELETE FROM approvals WHERE state <> 'pending' AND "
       "(CASE WHEN state = 'expired' THEN expires_unix_ms ELSE decided_unix_ms END) <= ?1"},
  };
  for (const auto& [slot, sql] : statements) {
    auto prepared = state->db.prepare(sql);
    if (!prepared) return fail(prepared.error().code, prepared.error().message);
    *slot = std::move(*prepared);
  }
  if (auto pruned = state->prune_due(); !pruned) return fail(pruned.error().code, pruned.error().message);
  if (auto filled = state->fill_in_sessions(); !filled) return fail(filled.error().code, filled.error().message);
  auto interrupted = state->interrupt_runs();
  if (!interrupted) return fail(interrupted.error().code, interrupted.error().message);
  if (!interrupted->empty()) {
    std::string tokens;
    for (const std::string& token : *interrupted) tokens += (tokens.empty() ? "" : ", ") + token;
    const bool one = interrupted->size() == 1;
    log_message(LogLevel::warn, "approvals",
                "{} approved action{} still running when the daemon stopped; recorded as interrupted (whether {} "
                "completed is not known): {}",
                interrupted->size(), one ? " was" : "s were", one ? "it" : "they", tokens);
  }
  return std::unique_ptr<ApprovalStore>(new ApprovalStore(std::move(state)));
}

Result<Approval> ApprovalStore::create(const Value& action, const Value& meta, std::vector<std::string> gates,
                                       std::string reason) {
  Approval approval;
  approval.token = random_hex(16);
  approval.action = action;
  const std::string printed = to_sexp(action);
  approval.action_sha256 = sha256_hex(printed);
  approval.gates = std::move(gates);
  approval.reason = std::move(reason);
  approval.meta = meta;
  approval.session_id = approval_session(meta);
  approval.created_unix_ms = state_->now_ms();
  approval.expires_unix_ms = approval.created_unix_ms + state_->lifetime.count();
  const std::string gates_text = join_lines(approval.gates);
  const std::string meta_text = to_sexp(meta);

  std::lock_guard lock(state_->mutex);
  if (approval.created_unix_ms >= state_->next_prune_ms) {
    if (auto pruned = state_->prune_due(); !pruned) {  // the file keeps growing, but nothing is lost
      log_message(LogLevel::warn, "approvals", pruned.error().message);
    }
  }
  // Counted under the lock the insert is made under: concurrent requests
  // cannot all see room for one more.
  const std::int64_t of_session = state_->live_count(approval.created_unix_ms, &approval.session_id);
  const std::int64_t in_all = of_session < 0 ? -1 : state_->live_count(approval.created_unix_ms, nullptr);
  if (in_all < 0) return state_->db.error("cannot count the pending approvals");
  if (static_cast<std::uint64_t>(of_session) >= state_->max_pending_per_session) {
    state_->refused.fetch_add(1, std::memory_order_relaxed);
    return fail(ErrorCode::limit_exceeded,
                "approval refused: session '" + approval.session_id + "' already has " + std::to_string(of_session) +
                    " pending approvals (--max-pending-approvals-per-session); decide or deny them first: "
                    "passepartout approvals deny --all-from " +
                    shell_word(approval.session_id));
  }
  if (static_cast<std::uint64_t>(in_all) >= state_->max_pending) {
    state_->refused.fetch_add(1, std::memory_order_relaxed);
    return fail(ErrorCode::limit_exceeded,
                "approval refused: " + std::to_string(in_all) +
                    " approvals are pending, the most the daemon keeps (--max-pending-approvals); decide or deny "
                    "them first: passepartout approvals list");
  }
  sqlite3_stmt* insert = state_->insert.get();
  StatementReset reset(insert);
  const bool bound = bind_text(insert, 1, approval.token) && bind_text(insert, 2, printed) &&
                     bind_text(insert, 3, approval.action_sha256) && bind_text(insert, 4, gates_text) &&
                     bind_text(insert, 5, approval.reason) && bind_text(insert, 6, meta_text) &&
                     sqlite3_bind_int64(insert, 7, approval.created_unix_ms) == SQLITE_OK &&
                     sqlite3_bind_int64(insert, 8, approval.expires_unix_ms) == SQLITE_OK &&
                     bind_text(insert, 9, approval.session_id);
  if (!bound || sqlite3_step(insert) != SQLITE_DONE) return state_->db.error("cannot record an approval");
  state_->forget_count();
  return approval;
}

Result<std::vector<Approval>> ApprovalStore::pending() const {
  std::lock_guard lock(state_->mutex);
  if (auto expired = state_->expire_due(); !expired) return fail(expired.error().code, expired.error().message);
  sqlite3_stmt* query = state_->list_pending.get();
  StatementReset reset(query);
  std::vector<Approval> list;
  int rc = SQLITE_OK;
  while ((rc = sqlite3_step(query)) == SQLITE_ROW) {
    auto approval = state_->row(query);
    if (!approval) return fail(approval.error().code, approval.error().message);
    list.push_back(std::move(*approval));
  }
  if (rc != SQLITE_DONE) return state_->db.error("cannot list the approvals");
  return list;
}

Result<ApprovalPage> ApprovalStore::pending_page(std::size_t limit, std::size_t offset) const {
  constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  const std::int64_t now = state_->now_ms();
  ApprovalPage page;
  std::lock_guard lock(state_->mutex);
  const std::int64_t total = state_->live_count(now, nullptr);
  if (total < 0) return state_->db.error("cannot count the pending approvals");
  page.total = static_cast<std::size_t>(total);
  sqlite3_stmt* query = state_->page.get();
  StatementReset reset(query);
  if (sqlite3_bind_int64(query, 1, now) != SQLITE_OK ||
      sqlite3_bind_int64(query, 2, static_cast<std::int64_t>(std::min(limit, kMax))) != SQLITE_OK ||
      sqlite3_bind_int64(query, 3, static_cast<std::int64_t>(std::min(offset, kMax))) != SQLITE_OK) {
    return state_->db.error("cannot list the approvals");
  }
  int rc = SQLITE_OK;
  while ((rc = sqlite3_step(query)) == SQLITE_ROW) {
    auto approval = state_->row(query);
    if (!approval) return fail(approval.error().code, approval.error().message);
    page.approvals.push_back(std::move(*approval));
  }
  if (rc != SQLITE_DONE) return state_->db.error("cannot list the approvals");
  return page;
}

std::uint64_t ApprovalStore::refused_count() const noexcept { return state_->refused.load(std::memory_order_relaxed); }

std::uint64_t ApprovalStore::approved_count() const noexcept {
  return state_->approved.load(std::memory_order_relaxed);
}

std::uint64_t ApprovalStore::denied_count() const noexcept { return state_->denied.load(std::memory_order_relaxed); }

std::size_t ApprovalStore::pending_count() const {
  const std::int64_t known = state_->known_count.load(std::memory_order_acquire);
  if (known >= 0 && state_->now_ms() < state_->known_until_ms.load(std::memory_order_relaxed)) {
    return static_cast<std::size_t>(known);
  }
  std::lock_guard lock(state_->mutex);
  static_cast<void>(state_->expire_due());
  sqlite3_stmt* query = state_->count_pending.get();
  StatementReset reset(query);
  if (sqlite3_step(query) != SQLITE_ROW) return 0;
  const std::int64_t count = sqlite3_column_int64(query, 0);
  state_->known_until_ms.store(sqlite3_column_type(query, 1) == SQLITE_NULL ? std::numeric_limits<std::int64_t>::max()
                                                                            : sqlite3_column_int64(query, 1),
                               std::memory_order_relaxed);
  state_->known_count.store(count, std::memory_order_release);
  return static_cast<std::size_t>(count);
}

Result<Approval> ApprovalStore::find(std::string_view token) const {
  std::lock_guard lock(state_->mutex);
  sqlite3_stmt* query = state_->by_token.get();
  StatementReset reset(query);
  if (!bind_text(query, 1, token)) return state_->db.error("cannot look up an approval");
  const int rc = sqlite3_step(query);
  if (rc == SQLITE_DONE) {
    return fail(ErrorCode::not_found, "no approval with token '" + std::string(token) +
                                          "' (list the pending ones with `passepartout approvals list`)");
  }
  if (rc != SQLITE_ROW) return state_->db.error("cannot look up an approval");
  return state_->row(query);
}

Result<Approval> ApprovalStore::approve(std::string_view token, std::string_view who) {
  return decide(token, who, Approval::State::approved);
}

Result<Approval> ApprovalStore::deny(std::string_view token, std::string_view who) {
  return decide(token, who, Approval::State::denied);
}

Result<std::size_t> ApprovalStore::deny_session(std::string_view session_id, std::string_view who) {
  const std::int64_t now = state_->now_ms();
  std::lock_guard lock(state_->mutex);
  sqlite3_stmt* update = state_->deny_session.get();
  StatementReset reset(update);
  // One statement: every row changes in one transaction, or none does.
  const bool bound =
      bind_text(update, 1, session_id) && sqlite3_bind_int64(update, 2, now) == SQLITE_OK && bind_text(update, 3, who);
  if (!bound || sqlite3_step(update) != SQLITE_DONE) return state_->db.error("cannot record the denials");
  state_->forget_count();
  const auto denied = static_cast<std::size_t>(sqlite3_changes(state_->db.handle()));
  state_->denied.fetch_add(denied, std::memory_order_relaxed);
  return denied;
}

Result<std::vector<Approval>> ApprovalStore::expire_unattended(std::string_view who) {
  const std::int64_t now = state_->now_ms();
  std::lock_guard lock(state_->mutex);
  // One statement: each row is told once, however it came to expire.
  auto update = state_->db.prepare(
      "UPDATE approvals SET state = 'expired', decided_unix_ms = ?1, decided_by = ?2 "
      "WHERE expires_unix_ms <= ?1 AND (state = 'pending' OR (state = 'expired' AND COALESCE(decided_by, '') = '')) "
      "RETURNING token, action, action_sha256, gates, reason, meta, created_unix_ms, expires_unix_ms, state, "
      "decided_unix_ms, decided_by, session_id, run_state, run_error, run_unix_ms");
  if (!update) return fail(update.error().code, update.error().message);
  if (sqlite3_bind_int64(update->get(), 1, now) != SQLITE_OK || !bind_text(update->get(), 2, who)) {
    return state_->db.error("cannot expire unattended approvals");
  }
  std::vector<Approval> expired;
  int rc = SQLITE_OK;
  while ((rc = sqlite3_step(update->get())) == SQLITE_ROW) {
    auto approval = state_->row(update->get());
    if (approval) {
      expired.push_back(std::move(*approval));
    } else {
      log_message(LogLevel::warn, "approvals", "{}", approval.error().message);
    }
  }
  if (rc != SQLITE_DONE) return state_->db.error("cannot expire unattended approvals");
  state_->forget_count();
  state_->denied.fetch_add(expired.size(), std::memory_order_relaxed);
  return expired;
}

Result<void> ApprovalStore::record_run(std::string_view token, Approval::Run to, std::string_view error) {
  // Where `to` may follow from: running from none; done from running; failed from either (a run that could not start).
  Approval::Run from = Approval::Run::running, or_from = Approval::Run::running;
  if (to == Approval::Run::running) {
    from = or_from = Approval::Run::none;
  } else if (to == Approval::Run::failed) {
    from = Approval::Run::none;
  } else if (to != Approval::Run::done) {
    return fail(ErrorCode::invalid_input, std::string("a run is not recorded as ") + to_string(to));
  }
  {
    std::lock_guard lock(state_->mutex);
    sqlite3_stmt* update = state_->record_run.get();
    StatementReset reset(update);
    const bool bound = bind_text(update, 1, token) && bind_text(update, 2, to_string(to)) &&
                       bind_text(update, 3, error) && sqlite3_bind_int64(update, 4, state_->now_ms()) == SQLITE_OK &&
                       bind_text(update, 5, to_string(from)) && bind_text(update, 6, to_string(or_from));
    if (!bound || sqlite3_step(update) != SQLITE_DONE) return state_->db.error("cannot record the run");
    if (sqlite3_changes(state_->db.handle()) == 1) return {};
  }
  auto approval = find(token);
  if (!approval) return fail(approval.error().code, approval.error().message);
  return fail(ErrorCode::refused, "approval " + std::string(token) + " is " + to_string(approval->state) +
                                      " and its run " + to_string(approval->run) + "; it cannot be recorded as " +
                                      to_string(to));
}

Result<Approval> ApprovalStore::decide(std::string_view token, std::string_view who, Approval::State to) {
  if (!plausible_token(token)) {
    return fail(ErrorCode::invalid_input, "'" + std::string(token) + "' is not an approval token (32 hex digits)");
  }
  const std::int64_t now = state_->now_ms();
  bool changed = false;
  {
    std::lock_guard lock(state_->mutex);
    sqlite3_stmt* update = state_->decide.get();
    StatementReset reset(update);
    const bool bound = bind_text(update, 1, token) && bind_text(update, 2, to_string(to)) &&
                       sqlite3_bind_int64(update, 3, now) == SQLITE_OK && bind_text(update, 4, who);
    if (!bound || sqlite3_step(update) != SQLITE_DONE) return state_->db.error("cannot record the decision");
    changed = sqlite3_changes(state_->db.handle()) == 1;
    if (changed)
      (to == Approval::State::approved ? state_->approved : state_->denied).fetch_add(1, std::memory_order_relaxed);
    state_->forget_count();
    if (!changed) static_cast<void>(state_->expire_due());
  }
  auto approval = find(token);
  if (!approval) return approval;
  if (changed) return approval;
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

fs::path approvals_file(const fs::path& state_dir) { return state_dir / "approvals.sqlite3"; }

}  // namespace passepartout
