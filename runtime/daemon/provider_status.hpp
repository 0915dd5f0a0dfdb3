// The PROVIDERS section of `status`: each provider of the cascade, in order,
// with its endpoint (never its key), its state and its figures, then the
// configured ones left out of it and why.
#pragma once

#include <string>
#include <vector>

#include "providers/cascade.hpp"
#include "providers/provider_config.hpp"
#include "value/value.hpp"

namespace passepartout {

// A list of plists, one per provider:
//   (:NAME "openai" :KIND "openai" :MODEL "gpt-4o-mini" :BASE-URL "https://api.openai.com/v1"
//    :STATE "ready" :CALLS 12 :SUCCESSES 11 :FAILURES (:RATE-LIMITED 1)
//    :LATENCY-P50-MS 812 :LATENCY-P99-MS 2400 :TOKENS-IN 5310 :TOKENS-OUT 402)
// :STATE is "ready", "cooling down until <UTC time>" or, for one left out,
// the reason ("ANTHROPIC_API_KEY is not set"). Built-in providers (scripted,
// offline) have no :MODEL or :BASE-URL.
Value provider_status(const Cascade& cascade, const std::vector<ProviderConfig>& endpoints,
                      const std::vector<std::string>& skipped);

class Budget;

// STATUS's BUDGET and the BUDGET request's payload:
//   (:LEDGER "<state dir>/usage.sqlite3" :IN-FLIGHT 0 :REFUSED 2
//    :CAPS ((:NAME "daily_usd" :PROVIDER NIL :UNIT "usd" :PERIOD "daily" :LIMIT 5.0
//            :SPENT 0.0123 :RESERVED 0.0 :RESETS "2026-12-04T00:00:00Z") ...)
//    :TODAY ((:PROVIDER "openai" :MODEL "gpt-4o-mini" :CALLS 3 :INPUT-TOKENS 5310
//             :CACHED-TOKENS 2048 :OUTPUT-TOKENS 402 :USD 0.0011 :UNPRICED NIL :ESTIMATED 0) ...)
//    :THIS-MONTH (...))
// A session cap has :RESETS NIL and the figures of the session that spent most.
Value budget_status(const Budget& budget);

}  // namespace passepartout
