// Budget: hard caps on what LLM calls may spend, in US dollars or tokens, per
// period, per provider or per session (seed D10, A18), and the durable ledger
// of every call's usage behind them.
//
// Before a call goes out its worst case (the prompt's estimate plus the
// provider's max_tokens, priced) is reserved against every cap that applies;
// the reservation is settled to the usage the provider reported when the call
// ends, or released when it failed without reporting any. Concurrent calls
// therefore overshoot a cap by at most what is in flight beyond their
// reservations: nothing, unless a provider bills more than its max_tokens.
//
// In a fleet (SharedCaps) the caps hold for every node together: a call is
// also reserved against the fleet's count, all its caps at once, so N nodes
// overshoot a cap by no more than what is in flight, never N times it.
//
// The ledger is SQLite in the state folder (usage.sqlite3), written with
// synchronous=NORMAL in WAL mode: a settled call survives a crash or kill -9
// of the daemon (not a power cut in its last moment, which would lose at most
// the last calls' rows). A reservation left open by a daemon that died is
// counted, on the next start, at its reserved worst case ("abandoned"): the
// provider may have billed it, and it is never counted twice.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "providers/budget_refusal.hpp"
#include "providers/price_table.hpp"
#include "providers/provider.hpp"

namespace passepartout {

// When a cap's count starts again.
struct BudgetPeriod {
  enum class Kind : std::uint8_t {
    hourly,   // at the top of each UTC hour
    daily,    // at 00:00 UTC
    weekly,   // Monday 00:00 UTC
    monthly,  // the first of the month, 00:00 UTC
    span,     // every `span` since the Unix epoch (LiteLLM's "30d")
    session,  // never: the cap holds for the session's lifetime
  };
  Kind kind = Kind::daily;
  std::chrono::milliseconds span{0};  // Kind::span only

  // The window holding `unix_ms`: [start, end) in Unix ms; a session's is
  // [0, 0) (no end).
  std::pair<std::int64_t, std::int64_t> window(std::int64_t unix_ms) const;
  // "daily", "30 d", "session".
  std::string text() const;
};

// One cap: at most `limit` of `unit` per period, over every provider or one.
struct BudgetCap {
  std::string provider;  // empty: every provider's calls together
  BudgetUnit unit = BudgetUnit::usd;
  BudgetPeriod period;
  double limit = 0;
  // How the config names it: "daily_usd", "openai.monthly_usd", "usd_30d".
  std::string name;
  std::string origin;  // "<file>:<line>:<column>" in the config (of its provider's name under per_provider)
};

struct BudgetConfig {
  std::vector<BudgetCap> caps;
  // Providers whose calls cost nothing and report no usage (the built-in
  // scripted and offline ones): neither held to the caps nor recorded.
  std::vector<std::string> unmetered;
  bool empty() const noexcept { return caps.empty(); }
};

// What one call is about to spend, for reserve().
struct BudgetCall {
  std::string_view provider;
  std::string_view model;          // as sent (the provider's default when the request names none)
  std::string_view session;        // empty: not a session's call (session caps do not apply)
  bool local = false;              // the provider runs on this machine: free unless the price table prices it
  std::int64_t input_tokens = 0;   // the prompt's estimate
  std::int64_t output_tokens = 0;  // at most (the provider's max_tokens)
};

// Usage totals of one provider and model.
struct UsageTotals {
  std::string provider;
  std::string model;
  std::uint64_t calls = 0;
  std::int64_t input_tokens = 0;  // cached ones included
  std::int64_t cached_tokens = 0;
  std::int64_t output_tokens = 0;
  double usd = 0;
  bool unpriced = false;        // some of these calls had no price: counted in tokens only
  std::uint64_t estimated = 0;  // calls whose provider reported no usage: counted at their estimate
};

// A cap at one moment.
struct CapStatus {
  BudgetCap cap;
  double spent = 0;               // settled in the current window (or the session with most)
  double reserved = 0;            // in flight in it
  std::int64_t resets_at_ms = 0;  // 0: never (a session cap)
};

struct BudgetReport {
  std::vector<CapStatus> caps;
  std::vector<UsageTotals> today;       // since 00:00 UTC, by provider and model
  std::vector<UsageTotals> this_month;  // since the first of the month
  std::vector<UsageTotals> all_time;    // since the ledger began (for counters)
  std::size_t in_flight = 0;            // reservations not yet settled
  std::uint64_t refusals = 0;           // calls refused since the daemon started
};

// "$0.0123" or "1200 tokens": an amount of a cap, as messages show it.
std::string budget_amount_text(BudgetUnit unit, double amount);

// <state_dir>/usage.sqlite3.
std::filesystem::path usage_file(const std::filesystem::path& state_dir);

// The caps' count shared by a fleet (daemon/pg_budget.hpp): a call's holds
// on the caps, reserved all together or not at all against what every node
// has spent and holds, then settled or released. Budget keeps its own count
// beside it (this node's calls, and the ledger's rows).
class SharedCaps {
 public:
  struct Hold {
    std::string cap;                // its name
    std::string scope;              // a session cap's session; "" for the others
    std::int64_t window_start = 0;  // Unix ms; 0 for a session cap
    double amount = 0;              // the call's worst case, in the cap's unit
    double limit = 0;
  };
  struct Shortfall {
    std::size_t hold = 0;  // which hold did not fit
    double remaining = 0;  // of its cap, the fleet's holds deducted
  };
  virtual ~SharedCaps() = default;
  // Reserves every hold of `id` (unique per call), or none: nullopt when all
  // fit, else the first that did not. Refused (an error) when the count
  // cannot be reached: the call is then refused, fail closed.
  virtual Result<std::optional<Shortfall>> reserve(const std::string& id, const std::vector<Hold>& holds) = 0;
  // `used[i]` spent against holds[i] instead of its amount; once per id.
  virtual void settle(const std::string& id, const std::vector<Hold>& holds, const std::vector<double>& used) = 0;
  virtual void release(const std::string& id, const std::vector<Hold>& holds) = 0;
};

class Budget {
 public:
  // A call's hold on the caps, from reserve() to settle() or release().
  // Move-only; one that is dropped unsettled is released.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation();
    explicit operator bool() const noexcept { return budget_ != nullptr; }

   private:
    friend class Budget;
    Budget* budget_ = nullptr;
    std::int64_t id_ = 0;   // the ledger row
    std::size_t slot_ = 0;  // in the budget's table of open reservations
  };

  // Opens (creating) the ledger at `file` with `config`'s caps and `prices`.
  static Result<std::shared_ptr<Budget>> open(const std::filesystem::path& file, BudgetConfig config,
                                              PriceTable prices);
  ~Budget();
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;

  // Reserves `call`'s worst case against every cap that applies, or refuses
  // it (naming the cap, what remains and when it resets) without changing
  // anything. A call to a remote model the price table does not know is
  // refused while a dollar cap applies to it (it cannot be held to it). Any
  // thread. `now_ms`: Unix ms (the system clock by default).
  // On success `out` holds the reservation and the result is empty; for an
  // unmetered provider `out` stays empty (nothing is held or recorded).
  std::optional<BudgetRefusal> reserve(const BudgetCall& call, Reservation& out, std::int64_t now_ms = -1);
  // The call ended with `usage` (a -1 count: the reserved estimate is kept
  // for it, and the call is flagged estimated).
  void settle(Reservation& reservation, const TokenUsage& usage);
  // The call failed before it cost anything.
  void release(Reservation& reservation);

  // The caps now, the totals by provider and model, and (with `periods`)
  // today's and this month's, which the ledger is asked for.
  BudgetReport report(std::int64_t now_ms = -1, bool periods = true) const;
  // From now on every reservation is also held against `shared` (a fleet's
  // count); null: this node's count alone. Before the first call.
  void share(std::shared_ptr<SharedCaps> shared);
  const BudgetConfig& config() const noexcept;
  const std::filesystem::path& file() const noexcept;

 private:
  struct State;
  explicit Budget(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace passepartout
