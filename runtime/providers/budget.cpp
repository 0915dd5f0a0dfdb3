// Budget: caps with calendar windows, reservations held in memory under one
// lock, and the SQLite ledger every reservation and settlement is written to.
#include "providers/budget.hpp"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <ctime>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "base/digest.hpp"
#include "base/duration_text.hpp"
#include "base/log.hpp"
#include "base/sqlite_db.hpp"

namespace passepartout {
namespace {

constexpr std::string_view kComponent = "BUDGET";
constexpr std::int64_t kHourMs = 3'600'000;
constexpr std::int64_t kDayMs = 24 * kHourMs;

// Ledger rows: reserved until the call ends, then settled; a reservation a
// dead daemon left is abandoned, counted at its reserved worst case.
enum RowState : int { reserved = 0, settled = 1, abandoned = 2 };

constexpr const char* kMigrations[] = {
    "PRAGMA application_id = 1347438915;"  // 'PPLU'
    "CREATE TABLE calls ("
    "  id INTEGER PRIMARY KEY,"
    "  state INTEGER NOT NULL,"
    "  at_ms INTEGER NOT NULL,"
    "  session TEXT NOT NULL,"
    "  provider TEXT NOT NULL,"
    "  model TEXT NOT NULL,"
    "  input INTEGER NOT NULL,"
    "  output INTEGER NOT NULL,"
    "  cached INTEGER NOT NULL,"
    "  usd REAL NOT NULL,"
    "  priced INTEGER NOT NULL,"
    "  estimated INTEGER NOT NULL);"
    "CREATE INDEX calls_at ON calls(at_ms);"
    "CREATE INDEX calls_session ON calls(session) WHERE session <> '';"
    "PRAGMA user_version = 1;",
};
constexpr SqliteSchema kSchema{"usage ledger", 1347438915, kMigrations};

// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
}

std::tm utc_of(std::int64_t unix_ms) {
  const auto seconds = static_cast<std::time_t>(floor_div(unix_ms, 1000));
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return tm;
}

// What the ledger counted from `since` (Unix ms) on, by provider and model.
Result<std::vector<UsageTotals>> usage_since(const SqliteDb& db, std::int64_t since) {
  auto query = db.prepare(
      "SELECT provider, model, COUNT(*), TOTAL(input), TOTAL(cached), TOTAL(output), TOTAL(usd), MIN(priced), "
      "TOTAL(estimated) FROM calls WHERE state > 0 AND at_ms >= ?1 GROUP BY provider, model ORDER BY provider, model");
  if (!query) return fail(query.error().code, query.error().message);
  sqlite3_stmt* row = query->get();
  sqlite3_bind_int64(row, 1, since);
  std::vector<UsageTotals> rows;
  int step = SQLITE_ROW;
  while ((step = sqlite3_step(row)) == SQLITE_ROW) {
    UsageTotals t{column_text(row, 0), column_text(row, 1)};
    t.calls = static_cast<std::uint64_t>(sqlite3_column_int64(row, 2));
    t.input_tokens = static_cast<std::int64_t>(sqlite3_column_double(row, 3));
    t.cached_tokens = static_cast<std::int64_t>(sqlite3_column_double(row, 4));
    t.output_tokens = static_cast<std::int64_t>(sqlite3_column_double(row, 5));
    t.usd = sqlite3_column_double(row, 6);
    t.unpriced = sqlite3_column_int(row, 7) == 0;
    t.estimated = static_cast<std::uint64_t>(sqlite3_column_double(row, 8));
    rows.push_back(std::move(t));
  }
  if (step != SQLITE_DONE) return db.error("cannot read the usage totals");
  return rows;
}

}  // namespace

// --- BudgetPeriod ---------------------------------------------------------------

std::pair<std::int64_t, std::int64_t> BudgetPeriod::window(std::int64_t unix_ms) const {
  switch (kind) {
    case Kind::hourly: {
      const std::int64_t start = floor_div(unix_ms, kHourMs) * kHourMs;
      return {start, start + kHourMs};
    }
    case Kind::daily: {
      const std::int64_t start = floor_div(unix_ms, kDayMs) * kDayMs;
      return {start, start + kDayMs};
    }
    case Kind::weekly: {
      const std::int64_t day = floor_div(unix_ms, kDayMs);
      const std::int64_t monday = day - ((day + 3) % 7 + 7) % 7;  // 1970-01-01 was a Thursday
      return {monday * kDayMs, (monday + 7) * kDayMs};
    }
    case Kind::monthly: {
      const std::tm tm = utc_of(unix_ms);
      const std::int64_t year = tm.tm_year + 1900;
      const auto month = static_cast<unsigned>(tm.tm_mon + 1);
      const std::int64_t start = days_from_civil(year, month, 1) * kDayMs;
      const std::int64_t end =
          (month == 12 ? days_from_civil(year + 1, 1, 1) : days_from_civil(year, month + 1, 1)) * kDayMs;
      return {start, end};
    }
    case Kind::span: {
      const std::int64_t length = std::max<std::int64_t>(span.count(), 1);
      const std::int64_t start = floor_div(unix_ms, length) * length;
      return {start, start + length};
    }
    case Kind::session:
      break;
  }
  return {0, 0};
}

std::string BudgetPeriod::text() const {
  switch (kind) {
    case Kind::hourly:
      return "hourly";
    case Kind::daily:
      return "daily";
    case Kind::weekly:
      return "weekly";
    case Kind::monthly:
      return "monthly";
    case Kind::span:
      return "every " + span_text(span);
    case Kind::session:
      break;
  }
  return "session";
}

// --- Budget::State ----------------------------------------------------------------

struct Budget::State {
  struct CapState {
    BudgetCap cap;
    std::int64_t window_start = -1;  // the window `spent` counts; -1: not loaded yet
    std::int64_t window_end = 0;
    double spent = 0;
    double reserved = 0;
  };
  // A session's spend against each session cap (indexed like `caps`; only
  // session caps' entries are used).
  struct SessionSpend {
    std::vector<double> spent;
    std::vector<double> reserved;
    std::size_t open = 0;  // reservations in flight
  };
  struct Hold {
    std::size_t cap;
    std::int64_t window_start;  // the window it was reserved in (session caps: 0)
  };
  struct Open {
    bool used = false;
    std::int64_t id = 0;
    std::string session;
    std::string provider;
    std::string model;
    std::optional<TokenPrice> price;
    bool priced = false;     // by the table, or free as a local model
    std::int64_t input = 0;  // the estimates reserved
    std::int64_t output = 0;
    double usd = 0;
    double tokens = 0;
    std::vector<Hold> holds;
    // In a fleet: the same holds on the shared count, under an id of their own.
    std::string shared_id;
    std::vector<SharedCaps::Hold> shared_holds;
  };

  SqliteDb db;
  BudgetConfig config;
  PriceTable prices;
  SqliteDb::Statement insert;
  SqliteDb::Statement update;
  SqliteDb::Statement remove;
  SqliteDb::Statement window_sum;
  SqliteDb::Statement window_sum_of;
  SqliteDb::Statement session_sums;

  mutable std::mutex mutex;
  std::vector<CapState> caps;
  std::unordered_map<std::string, SessionSpend> sessions;
  std::vector<Open> open;
  std::vector<std::size_t> free_slots;
  std::map<std::pair<std::string, std::string>, UsageTotals> totals;  // all time, by provider and model
  std::uint64_t refusals = 0;
  std::shared_ptr<SharedCaps> shared;  // a fleet's count; null: this node's alone

  State(SqliteDb database, BudgetConfig budget, PriceTable table)
      : db(std::move(database)), config(std::move(budget)), prices(std::move(table)) {
    for (const BudgetCap& cap : config.caps) caps.push_back(CapState{cap});
  }

  static double amount(const BudgetCap& cap, double usd, double tokens) {
    return cap.unit == BudgetUnit::usd ? usd : tokens;
  }
  // "Budget exhausted<whose>: $X remaining, $Y requested (cap NAME, resets T)":
  // `window_end` is when the cap's window ends (unused for a session cap).
  static std::string exhausted(const BudgetCap& cap, std::string_view whose, double remaining, double wanted,
                               std::int64_t window_end) {
    const std::string when = cap.period.kind == BudgetPeriod::Kind::session ? std::string("for this session")
                                                                            : "resets " + utc_timestamp(window_end);
    return fmt::format("Budget exhausted{}: {} remaining, {} requested (cap {}, {})", whose,
                       budget_amount_text(cap.unit, std::max(0.0, remaining)), budget_amount_text(cap.unit, wanted),
                       cap.name, when);
  }
  bool applies(const BudgetCap& cap, std::string_view provider, std::string_view session) const {
    if (!cap.provider.empty() && cap.provider != provider) return false;
    return cap.period.kind != BudgetPeriod::Kind::session || !session.empty();
  }

  // Moves `cap` to the window holding `now_ms`, reading what the ledger
  // already holds for it.
  void roll(CapState& cap, std::int64_t now_ms) {
    if (cap.cap.period.kind == BudgetPeriod::Kind::session) return;
    if (cap.window_start >= 0 && now_ms >= cap.window_start && now_ms < cap.window_end) return;
    const auto [start, end] = cap.cap.period.window(now_ms);
    cap.window_start = start;
    cap.window_end = end;
    cap.reserved = 0;  // the holds of earlier windows no longer count here
    cap.spent = 0;
    sqlite3_stmt* sum = cap.cap.provider.empty() ? window_sum.get() : window_sum_of.get();
    StatementReset reset(sum);
    sqlite3_bind_int64(sum, 1, start);
    sqlite3_bind_int64(sum, 2, end);
    if (!cap.cap.provider.empty()) bind_text(sum, 3, cap.cap.provider);
    if (sqlite3_step(sum) == SQLITE_ROW) {
      cap.spent = amount(cap.cap, sqlite3_column_double(sum, 0), sqlite3_column_double(sum, 1));
    } else {
      log_message(LogLevel::error, kComponent, "{}",
                  db.error("cannot read the spend of cap " + cap.cap.name).error().message);
    }
  }

  // The session's spend, read from the ledger the first time it is needed.
  SessionSpend& session(const std::string& id) {
    auto found = sessions.find(id);
    if (found != sessions.end()) return found->second;
    if (sessions.size() >= 4096) std::erase_if(sessions, [](const auto& entry) { return entry.second.open == 0; });
    SessionSpend spend{std::vector<double>(caps.size()), std::vector<double>(caps.size()), 0};
    StatementReset reset(session_sums.get());
    bind_text(session_sums.get(), 1, id);
    while (sqlite3_step(session_sums.get()) == SQLITE_ROW) {
      const std::string provider = column_text(session_sums.get(), 0);
      const double usd = sqlite3_column_double(session_sums.get(), 1);
      const double tokens = sqlite3_column_double(session_sums.get(), 2);
      for (std::size_t i = 0; i < caps.size(); ++i) {
        const BudgetCap& cap = caps[i].cap;
        if (cap.period.kind == BudgetPeriod::Kind::session && (cap.provider.empty() || cap.provider == provider)) {
          spend.spent[i] += amount(cap, usd, tokens);
        }
      }
    }
    return sessions.emplace(id, std::move(spend)).first->second;
  }

  UsageTotals& totals_of(const std::string& provider, const std::string& model) {
    auto [entry, added] = totals.try_emplace({provider, model});
    if (added) {
      entry->second.provider = provider;
      entry->second.model = model;
    }
    return entry->second;
  }

  // Takes the reservation in `slot` off the caps, and counts `usd` and
  // `tokens` as spent instead when `spent`.
  void unhold(Open& call, bool spent, double usd, double tokens) {
    SessionSpend* spend = nullptr;
    if (!call.session.empty()) {
      if (auto found = sessions.find(call.session); found != sessions.end()) spend = &found->second;
    }
    for (const Hold& hold : call.holds) {
      CapState& cap = caps[hold.cap];
      const double reserved = amount(cap.cap, call.usd, call.tokens);
      const double used = amount(cap.cap, usd, tokens);
      if (cap.cap.period.kind == BudgetPeriod::Kind::session) {
        if (spend == nullptr) continue;
        spend->reserved[hold.cap] = std::max(0.0, spend->reserved[hold.cap] - reserved);
        if (spent) spend->spent[hold.cap] += used;
      } else if (cap.window_start == hold.window_start) {
        cap.reserved = std::max(0.0, cap.reserved - reserved);
        if (spent) cap.spent += used;
      }
    }
    if (spend != nullptr && spend->open > 0) --spend->open;
    call.used = false;
    call.holds.clear();
  }
};

// --- Reservation ------------------------------------------------------------------

Budget::Reservation::Reservation(Reservation&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)), id_(other.id_), slot_(other.slot_) {}

Budget::Reservation& Budget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    if (budget_ != nullptr) budget_->release(*this);
    budget_ = std::exchange(other.budget_, nullptr);
    id_ = other.id_;
    slot_ = other.slot_;
  }
  return *this;
}

Budget::Reservation::~Reservation() {
  if (budget_ != nullptr) budget_->release(*this);
}

// --- Budget -----------------------------------------------------------------------

std::string budget_amount_text(BudgetUnit unit, double amount) {
  if (unit == BudgetUnit::usd) return fmt::format("${:.4f}", amount);
  return fmt::format("{} tokens", static_cast<std::int64_t>(amount));
}

std::filesystem::path usage_file(const std::filesystem::path& state_dir) { return state_dir / "usage.sqlite3"; }

Budget::Budget(std::unique_ptr<State> state) : state_(std::move(state)) {}
Budget::~Budget() = default;

Result<std::shared_ptr<Budget>> Budget::open(const std::filesystem::path& file, BudgetConfig config,
                                             PriceTable prices) {
  auto db = SqliteDb::open(file, kSchema);
  if (!db) return fail(db.error().code, db.error().message);
  // WAL with NORMAL: a commit survives the process dying, and no call waits for an fsync.
  if (auto normal = db->exec("PRAGMA synchronous = NORMAL", "cannot set synchronous=NORMAL"); !normal) {
    return fail(normal.error().code, normal.error().message);
  }
  auto state = std::make_unique<State>(std::move(*db), std::move(config), std::move(prices));
  const SqliteDb& ledger = state->db;
  struct Prepared {
    SqliteDb::Statement* into;
    const char* sql;
  };
  const Prepared statements[] = {
      {&state->insert,
       "INSERT INTO calls (state, at_ms, session, provider, model, input, output, cached, usd, priced, estimated) "
       "VALUES (0, ?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?8, 1)"},
      {&state->update,
       "UPDATE calls SET state = 1, input = ?2, output = ?3, cached = ?4, usd = ?5, estimated = ?6 WHERE id = ?1"},
      {&state->remove, "DELETE FROM calls WHERE id = ?1"},
      {&state->window_sum,
       "SELECT TOTAL(usd), TOTAL(input + output) FROM calls WHERE state > 0 AND at_ms >= ?1 AND at_ms < ?2"},
      {&state->window_sum_of,
       "SELECT TOTAL(usd), TOTAL(input + output) FROM calls "
       "WHERE state > 0 AND at_ms >= ?1 AND at_ms < ?2 AND provider = ?3"},
      {&state->session_sums,
       "SELECT provider, TOTAL(usd), TOTAL(input + output) FROM calls WHERE state > 0 AND session = ?1 "
       "GROUP BY provider"},
  };
  for (const Prepared& p : statements) {
    auto prepared = ledger.prepare(p.sql);
    if (!prepared) return fail(prepared.error().code, prepared.error().message);
    *p.into = std::move(*prepared);
  }
  // What a daemon that died left in flight may have been billed: counted at its worst case.
  if (auto abandoned = ledger.exec("UPDATE calls SET state = 2 WHERE state = 0", "cannot close abandoned reservations");
      !abandoned) {
    return fail(abandoned.error().code, abandoned.error().message);
  }
  if (const int left = sqlite3_changes(ledger.handle()); left > 0) {
    log_message(LogLevel::warn, kComponent,
                "{} call(s) in flight when the daemon last stopped are counted at their reserved worst case", left);
  }
  auto totals = usage_since(ledger, std::numeric_limits<std::int64_t>::min());
  if (!totals) return fail(totals.error().code, totals.error().message);
  for (UsageTotals& t : *totals) state->totals.emplace(std::pair{t.provider, t.model}, std::move(t));
  return std::shared_ptr<Budget>(new Budget(std::move(state)));
}

std::optional<BudgetRefusal> Budget::reserve(const BudgetCall& call, Reservation& out, std::int64_t now_ms) {
  if (now_ms < 0) now_ms = unix_ms_now();
  if (out.budget_ != nullptr) out.budget_->release(out);
  State& s = *state_;
  const auto& unmetered = s.config.unmetered;
  if (std::find(unmetered.begin(), unmetered.end(), call.provider) != unmetered.end()) return std::nullopt;
  const TokenPrice* price = s.prices.find(call.provider, call.model);
  const std::int64_t input = std::max<std::int64_t>(call.input_tokens, 0);
  const std::int64_t output = std::max<std::int64_t>(call.output_tokens, 0);
  const double usd = price != nullptr ? PriceTable::cost(*price, input, 0, output) : 0.0;
  const auto tokens = static_cast<double>(input + output);
  const bool priced = price != nullptr || call.local;
  const std::string session(call.session);

  std::unique_lock lock(s.mutex);
  auto refuse = [&](const State::CapState& cap, double remaining, std::string message) {
    ++s.refusals;
    BudgetRefusal refusal;
    refusal.cap = cap.cap.name;
    refusal.unit = cap.cap.unit;
    refusal.remaining = std::max(0.0, remaining);
    refusal.requested = State::amount(cap.cap, usd, tokens);
    refusal.resets_at_ms = cap.cap.period.kind == BudgetPeriod::Kind::session ? 0 : cap.window_end;
    refusal.message = std::move(message);
    return refusal;
  };
  std::vector<State::Hold> holds;
  State::SessionSpend* spend = nullptr;
  for (std::size_t i = 0; i < s.caps.size(); ++i) {
    State::CapState& cap = s.caps[i];
    if (!s.applies(cap.cap, call.provider, call.session)) continue;
    if (cap.cap.unit == BudgetUnit::usd && !priced) {
      return refuse(cap, cap.cap.limit - cap.spent - cap.reserved,
                    fmt::format("Budget cannot price model \"{}\" of {}: cap {} cannot hold it; give the model a price "
                                "with --price-table",
                                call.model, call.provider, cap.cap.name));
    }
    const double wanted = State::amount(cap.cap, usd, tokens);
    double used = 0;
    if (cap.cap.period.kind == BudgetPeriod::Kind::session) {
      if (spend == nullptr) spend = &s.session(session);
      used = spend->spent[i] + spend->reserved[i];
    } else {
      s.roll(cap, now_ms);
      used = cap.spent + cap.reserved;
    }
    const double remaining = cap.cap.limit - used;
    if (wanted > remaining) {
      return refuse(cap, remaining, State::exhausted(cap.cap, "", remaining, wanted, cap.window_end));
    }
    holds.push_back(State::Hold{i, cap.window_start});
  }

  // Written before anything is held: a ledger that cannot be written refuses the call.
  sqlite3_stmt* insert = s.insert.get();
  StatementReset reset(insert);
  sqlite3_bind_int64(insert, 1, now_ms);
  bind_text(insert, 2, call.session);
  bind_text(insert, 3, call.provider);
  bind_text(insert, 4, call.model);
  sqlite3_bind_int64(insert, 5, input);
  sqlite3_bind_int64(insert, 6, output);
  sqlite3_bind_double(insert, 7, usd);
  sqlite3_bind_int(insert, 8, priced ? 1 : 0);
  if (sqlite3_step(insert) != SQLITE_DONE) {
    ++s.refusals;
    BudgetRefusal refusal;
    refusal.cap = "ledger";
    refusal.message = "Budget ledger cannot record the call: " + s.db.error("cannot write").error().message;
    return refusal;
  }
  const std::int64_t id = sqlite3_last_insert_rowid(s.db.handle());

  for (const State::Hold& hold : holds) {
    State::CapState& cap = s.caps[hold.cap];
    const double wanted = State::amount(cap.cap, usd, tokens);
    if (cap.cap.period.kind == BudgetPeriod::Kind::session) {
      spend->reserved[hold.cap] += wanted;
    } else {
      cap.reserved += wanted;
    }
  }
  if (spend != nullptr) ++spend->open;
  std::size_t slot = 0;
  if (!s.free_slots.empty()) {
    slot = s.free_slots.back();
    s.free_slots.pop_back();
  } else {
    slot = s.open.size();
    s.open.emplace_back();
  }
  State::Open& entry = s.open[slot];
  entry.used = true;
  entry.id = id;
  entry.session = session;
  entry.provider.assign(call.provider);
  entry.model.assign(call.model);
  entry.price = price != nullptr ? std::optional<TokenPrice>(*price) : std::nullopt;
  entry.priced = priced;
  entry.input = input;
  entry.output = output;
  entry.usd = usd;
  entry.tokens = tokens;
  entry.holds = std::move(holds);
  entry.shared_id.clear();
  entry.shared_holds.clear();
  std::shared_ptr<SharedCaps> shared = s.shared;
  if (shared) {
    entry.shared_id = random_hex(16);
    for (const State::Hold& hold : entry.holds) {
      const State::CapState& cap = s.caps[hold.cap];
      const bool of_session = cap.cap.period.kind == BudgetPeriod::Kind::session;
      entry.shared_holds.push_back({cap.cap.name, of_session ? session : std::string(),
                                    of_session ? 0 : hold.window_start, State::amount(cap.cap, usd, tokens),
                                    cap.cap.limit});
    }
  }

  out.budget_ = this;
  out.id_ = id;
  out.slot_ = slot;
  if (!shared || entry.shared_holds.empty()) return std::nullopt;

  // The fleet's count, without this node's lock held (it waits on the database).
  const std::string shared_id = entry.shared_id;
  const std::vector<SharedCaps::Hold> shared_holds = entry.shared_holds;
  const std::vector<std::size_t> caps_held = [&] {
    std::vector<std::size_t> indexes;
    for (const State::Hold& hold : entry.holds) indexes.push_back(hold.cap);
    return indexes;
  }();
  lock.unlock();
  auto fleet = shared->reserve(shared_id, shared_holds);
  if (fleet && !*fleet) return std::nullopt;
  lock.lock();
  s.open[slot].shared_holds.clear();  // nothing held there: nothing to release there
  lock.unlock();
  release(out);
  lock.lock();
  ++s.refusals;
  BudgetRefusal refusal;
  if (!fleet) {
    refusal.cap = "fleet";
    refusal.message = "Budget cannot reach the fleet's count, so the call is refused: " + fleet.error().message;
    return refusal;
  }
  const State::CapState& cap = s.caps[caps_held[(*fleet)->hold]];
  const double remaining = std::max(0.0, (*fleet)->remaining);
  refusal.cap = cap.cap.name;
  refusal.unit = cap.cap.unit;
  refusal.remaining = remaining;
  refusal.requested = State::amount(cap.cap, usd, tokens);
  const bool of_session = cap.cap.period.kind == BudgetPeriod::Kind::session;
  refusal.resets_at_ms = of_session ? 0 : cap.cap.period.window(shared_holds[(*fleet)->hold].window_start).second;
  refusal.message = State::exhausted(cap.cap, " across the fleet", remaining, refusal.requested, refusal.resets_at_ms);
  return refusal;
}

void Budget::share(std::shared_ptr<SharedCaps> shared) {
  const std::lock_guard lock(state_->mutex);
  state_->shared = std::move(shared);
}

void Budget::settle(Reservation& reservation, const TokenUsage& usage) {
  if (reservation.budget_ != this) return;
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  State::Open& call = s.open[reservation.slot_];
  const bool estimated = usage.input < 0 || usage.output < 0;
  const std::int64_t input = usage.input >= 0 ? usage.input : call.input;
  const std::int64_t output = usage.output >= 0 ? usage.output : call.output;
  const std::int64_t cached = std::clamp<std::int64_t>(usage.cached_input, 0, input);
  const double usd = call.price ? PriceTable::cost(*call.price, input, cached, output) : 0.0;
  const auto tokens = static_cast<double>(input + output);

  sqlite3_stmt* update = s.update.get();
  StatementReset reset(update);
  sqlite3_bind_int64(update, 1, call.id);
  sqlite3_bind_int64(update, 2, input);
  sqlite3_bind_int64(update, 3, output);
  sqlite3_bind_int64(update, 4, cached);
  sqlite3_bind_double(update, 5, usd);
  sqlite3_bind_int(update, 6, estimated ? 1 : 0);
  if (sqlite3_step(update) != SQLITE_DONE) {
    // Counted in memory all the same; the row stays a reservation, counted
    // at its worst case after a restart.
    log_message(LogLevel::error, kComponent, "{}", s.db.error("cannot settle a call").error().message);
  }
  UsageTotals& totals = s.totals_of(call.provider, call.model);
  ++totals.calls;
  totals.input_tokens += input;
  totals.cached_tokens += cached;
  totals.output_tokens += output;
  totals.usd += usd;
  if (!call.priced) totals.unpriced = true;
  if (estimated) ++totals.estimated;

  std::vector<double> used;
  for (const State::Hold& hold : call.holds) used.push_back(State::amount(s.caps[hold.cap].cap, usd, tokens));
  std::string shared_id = std::move(call.shared_id);
  std::vector<SharedCaps::Hold> shared_holds = std::move(call.shared_holds);
  call.shared_holds.clear();
  s.unhold(call, true, usd, tokens);
  s.free_slots.push_back(reservation.slot_);
  reservation.budget_ = nullptr;
  if (s.shared && !shared_holds.empty()) {
    std::shared_ptr<SharedCaps> shared = s.shared;
    lock.unlock();
    shared->settle(shared_id, shared_holds, used);
  }
}

void Budget::release(Reservation& reservation) {
  if (reservation.budget_ != this) return;
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  State::Open& call = s.open[reservation.slot_];
  sqlite3_stmt* remove = s.remove.get();
  StatementReset reset(remove);
  sqlite3_bind_int64(remove, 1, call.id);
  if (sqlite3_step(remove) != SQLITE_DONE) {
    log_message(LogLevel::error, kComponent, "{}", s.db.error("cannot release a reservation").error().message);
  }
  std::string shared_id = std::move(call.shared_id);
  std::vector<SharedCaps::Hold> shared_holds = std::move(call.shared_holds);
  call.shared_holds.clear();
  s.unhold(call, false, 0, 0);
  s.free_slots.push_back(reservation.slot_);
  reservation.budget_ = nullptr;
  if (s.shared && !shared_holds.empty()) {
    std::shared_ptr<SharedCaps> shared = s.shared;
    lock.unlock();
    shared->release(shared_id, shared_holds);
  }
}

BudgetReport Budget::report(std::int64_t now_ms, bool periods) const {
  if (now_ms < 0) now_ms = unix_ms_now();
  State& s = *state_;
  BudgetReport report;
  std::lock_guard lock(s.mutex);
  for (State::CapState& cap : s.caps) {
    CapStatus status{cap.cap};
    if (cap.cap.period.kind == BudgetPeriod::Kind::session) {
      const auto index = static_cast<std::size_t>(&cap - s.caps.data());
      for (const auto& [id, spend] : s.sessions) {
        if (spend.spent[index] + spend.reserved[index] > status.spent + status.reserved) {
          status.spent = spend.spent[index];
          status.reserved = spend.reserved[index];
        }
      }
    } else {
      s.roll(cap, now_ms);
      status.spent = cap.spent;
      status.reserved = cap.reserved;
      status.resets_at_ms = cap.window_end;
    }
    report.caps.push_back(std::move(status));
  }
  const auto by_model = [&](std::int64_t since) {
    auto rows = usage_since(s.db, since);
    if (!rows) {
      log_message(LogLevel::error, kComponent, "{}", rows.error().message);
      return std::vector<UsageTotals>();
    }
    return std::move(*rows);
  };
  if (periods) report.today = by_model(BudgetPeriod{BudgetPeriod::Kind::daily}.window(now_ms).first);
  if (periods) report.this_month = by_model(BudgetPeriod{BudgetPeriod::Kind::monthly}.window(now_ms).first);
  for (const auto& [key, totals] : s.totals) report.all_time.push_back(totals);
  report.in_flight = s.open.size() - s.free_slots.size();
  report.refusals = s.refusals;
  return report;
}

const BudgetConfig& Budget::config() const noexcept { return state_->config; }
const std::filesystem::path& Budget::file() const noexcept { return state_->db.file(); }

}  // namespace passepartout
