// The caps the budget benchmarks reserve against: a daily dollar cap and a
// session token cap, both too high to refuse anything, so that every call
// is held against two caps and settled, as a capped daemon's calls are.
#pragma once

#include "providers/budget.hpp"

namespace passepartout::bench {

inline BudgetConfig daily_and_session_caps() {
  BudgetCap daily;
  daily.unit = BudgetUnit::usd;
  daily.limit = 1e9;
  daily.name = "daily_usd";
  BudgetCap session;
  session.unit = BudgetUnit::tokens;
  session.period = BudgetPeriod{BudgetPeriod::Kind::session};
  session.limit = 1e12;
  session.name = "session_tokens";
  BudgetConfig config;
  config.caps = {daily, session};
  return config;
}

}  // namespace passepartout::bench
