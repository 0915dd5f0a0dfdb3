// BudgetRefusal: why a call was refused before it went out (budget.hpp),
// small enough for the cascade's outcome and the pipeline's BudgetError.
#pragma once

#include <cstdint>
#include <string>

namespace passepartout {

enum class BudgetUnit : std::uint8_t { usd, tokens };

// "usd", "tokens".
inline const char* to_string(BudgetUnit unit) noexcept { return unit == BudgetUnit::usd ? "usd" : "tokens"; }

struct BudgetRefusal {
  std::string cap;  // the cap's name as the config has it: "daily_usd", "openai.monthly_usd"
  BudgetUnit unit = BudgetUnit::usd;
  double remaining = 0;           // of the cap, reservations in flight deducted
  double requested = 0;           // the call's worst case
  std::int64_t resets_at_ms = 0;  // Unix ms; 0: never (a session cap)
  // "Budget exhausted: $0.0012 remaining, $0.0161 requested (cap daily_usd, resets 2026-12-04T00:00:00Z)".
  std::string message;
};

}  // namespace passepartout
