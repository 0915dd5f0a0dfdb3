// Reading a config file's `budget:` map. Included only by the config reader's
// .cpp: it brings in yaml-cpp.
#pragma once

#include "base/yaml_diagnostics.hpp"
#include "providers/budget.hpp"

namespace passepartout {

// Appends the caps of `node` to `out`, and each problem, located at its line
// and key, to `problems`:
//   budget:
//     daily_usd: 5               # <hourly|daily|weekly|monthly|session>_<usd|tokens>
//     session_tokens: 200k       # tokens: a whole number, k (thousand) or m (million) after it
//     usd: 100                   # a cap with a period of its own (LiteLLM's budget_duration) ...
//     period: 30d                # ... s, m, h, d or w
//     per_provider:
//       openai: {monthly_usd: 50}
// A cap's `provider` is the per_provider key as written; the caller checks it
// names a provider (BudgetCap::origin locates it).
void read_budget(const YAML::Node& node, YamlProblems& problems, BudgetConfig& out);

}  // namespace passepartout
