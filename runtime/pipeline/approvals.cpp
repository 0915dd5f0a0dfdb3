// ApprovalStore over SqliteDb: one row per approval; a decision is one
// conditional UPDATE, so two approvers racing for a token cannot both win.
#include "pipeline/approvals.hpp"

#include <sqlite3.h>

#include <array>
#include <atomic>
#include <limits>
#include <mutex>
#include <utility>

#include "digest.hpp"
#include "log.hpp"
#include "sqlite_db.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout {
namespace fs = std::filesystem;

namespace {

// "PPAP" in PRAGMA application_id.
constexpr std::int32_t kApplicationId = 0x50504150;
constexpr std::array<const char*, 1> kMigrations = {
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
};
static_assert(kApplicationId == 1347436880, "the migration writes the application id literally");
constexpr SqliteSchema kSchema{"approvals store", kApplicationId, kMigrations};

constexpr const char* kColumns =
    "SELECT token, action, action_sha256, gates, reason, meta, created_unix_ms, expires_unix_ms, state, "
    "decided_unix_ms, decided_by FROM approvals ";


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

bool plausible_token(std::string_view token) {
  if (token.size() != 32) return false;
  for (const char c : token) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::int64_t ApprovalStore::system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* to_string(Approval::State state) noexcept {
  switch (state) {
    case Approval::State::pending: return "pending";
    case Approval::State::approved: return "approved";
    case Approval::State::denied: return "denied";
    case Approval::State::expired: return "expired";
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
  SqliteDb::Statement insert, by_token, list_pending, count_pending, decide, expire, prune;
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
  auto db = SqliteDb::open(file, kSchema);
  if (!db) return fail(db.error().code, db.error().message);
  auto state = std::make_unique<State>(std::move(*db));
  state->lifetime = options.lifetime;
  state->retention = options.retention;
  if (options.clock) state->now_ms = std::move(options.clock);
  const std::pair<SqliteDb::Statement*, std::string> statements[] = {
      {&state->insert,
       "INSERT INTO approvals (token, action, action_sha256, gates, reason, meta, created_unix_ms, expires_unix_ms, "
       "state) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending')"},
      {&state->by_token, std::string(kColumns) + "WHERE token = ?1"},
      {&state->list_pending, std::string(kColumns) + "WHERE state = 'pending' ORDER BY created_unix_ms, rowid"},
      {&state->count_pending, "SELECT count(*), min(expires_unix_ms) FROM approvals WHERE state = 'pending'"},
      {&state->decide,
       "UPDATE approvals SET state = ?2, decided_unix_ms = ?3, decided_by = ?4 WHERE token = ?1 AND state = "
       "'pending' AND expires_unix_ms > ?3"},
      {&state->expire, "UPDATE approvals SET state = 'expired' WHERE state = 'pending' AND expires_unix_ms <= ?1"},
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
  sqlite3_stmt* insert = state_->insert.get();
  StatementReset reset(insert);
  const bool bound = bind_text(insert, 1, approval.token) && bind_text(insert, 2, printed) &&
                     bind_text(insert, 3, approval.action_sha256) && bind_text(insert, 4, gates_text) &&
                     bind_text(insert, 5, approval.reason) && bind_text(insert, 6, meta_text) &&
                     sqlite3_bind_int64(insert, 7, approval.created_unix_ms) == SQLITE_OK &&
                     sqlite3_bind_int64(insert, 8, approval.expires_unix_ms) == SQLITE_OK;
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
    state_->forget_count();
    if (!changed) static_cast<void>(state_->expire_due());
  }
  auto approval = find(token);
  if (!approval) return approval;
  if (changed) return approval;
  // Say why nothing changed.
  switch (approval->state) {
    case Approval::State::approved:
    case Approval::State::denied:
      return fail(ErrorCode::refused, "approval " + std::string(token) + " was already " + to_string(approval->state) +
                                          " by " + approval->decided_by + "; an approval is decided only once");
    case Approval::State::expired:
    case Approval::State::pending:
      return fail(ErrorCode::refused, "approval " + std::string(token) +
                                          " has expired; ask again so that a new approval is created");
  }
  return approval;
}

fs::path approvals_file(const fs::path& state_dir) { return state_dir / "approvals.sqlite3"; }

}  // namespace passepartout
