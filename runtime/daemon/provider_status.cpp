#include "daemon/provider_status.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "base/duration_text.hpp"
#include "providers/budget.hpp"

namespace passepartout {
namespace {

// "rate_limited" -> RATE-LIMITED
std::string class_keyword(FailureClass failure) {
  std::string name = to_string(failure);
  for (char& c : name) c = c == '_' ? '-' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

Value milliseconds(std::chrono::microseconds us) { return Value::integer((us.count() + 500) / 1000); }

}  // namespace

Value provider_status(const Cascade& cascade, const std::vector<ProviderConfig>& endpoints,
                      const std::vector<std::string>& skipped) {
  std::vector<Value> entries;
  for (const Cascade::ProviderStatus& status : cascade.status()) {
    const ProviderFigures& f = status.figures;
    std::vector<Value> fields;
    auto add = [&fields](std::string_view key, Value value) {
      fields.push_back(Value::keyword(key));
      fields.push_back(std::move(value));
    };
    add("NAME", Value::string(status.name));
    auto endpoint = std::find_if(endpoints.begin(), endpoints.end(),
                                 [&](const ProviderConfig& p) { return p.name == status.name; });
    if (endpoint != endpoints.end()) {
      add("KIND", Value::string(endpoint->kind));
      add("MODEL", Value::string(endpoint->model));
      add("BASE-URL", Value::string(endpoint->base_url));
      add("LOCAL", Value::boolean(endpoint->local));
    } else {
      add("KIND", Value::string(status.name));
    }
    std::string state = "ready";
    if (f.cooling_until.time_since_epoch().count() != 0) {
      state = fmt::format("cooling down until {:%H:%M:%S} UTC",
                          std::chrono::time_point_cast<std::chrono::seconds>(f.cooling_until));
    }
    add("STATE", Value::string(state));
    add("CALLS", Value::integer(static_cast<std::int64_t>(f.calls)));
    add("SUCCESSES", Value::integer(static_cast<std::int64_t>(f.successes)));
    std::vector<Value> failure_items;
    for (const auto& [failure, count] : f.failures) {
      failure_items.push_back(Value::keyword(class_keyword(failure)));
      failure_items.push_back(Value::integer(static_cast<std::int64_t>(count)));
    }
    add("FAILURES", Value::list(failure_items));
    add("LATENCY-P50-MS", milliseconds(f.latency_p50));
    add("LATENCY-P99-MS", milliseconds(f.latency_p99));
    add("TOKENS-IN", Value::integer(f.tokens_in));
    add("TOKENS-OUT", Value::integer(f.tokens_out));
    entries.push_back(Value::list(fields));
  }
  for (const std::string& line : skipped) {
    const std::size_t colon = line.find(": ");
    entries.push_back(
        Value::plist({{"NAME", Value::string(line.substr(0, colon))},
                      {"STATE", Value::string(colon == std::string::npos ? "left out" : line.substr(colon + 2))}}));
  }
  return Value::list(entries);
}

}  // namespace passepartout

namespace passepartout {
namespace {

Value usage_rows(const std::vector<UsageTotals>& rows) {
  std::vector<Value> out;
  out.reserve(rows.size());
  for (const UsageTotals& t : rows) {
    out.push_back(Value::plist({{"PROVIDER", Value::string(t.provider)},
                                {"MODEL", Value::string(t.model)},
                                {"CALLS", Value::integer(static_cast<std::int64_t>(t.calls))},
                                {"INPUT-TOKENS", Value::integer(t.input_tokens)},
                                {"CACHED-TOKENS", Value::integer(t.cached_tokens)},
                                {"OUTPUT-TOKENS", Value::integer(t.output_tokens)},
                                {"USD", Value::real(t.usd)},
                                {"UNPRICED", Value::boolean(t.unpriced)},
                                {"ESTIMATED", Value::integer(static_cast<std::int64_t>(t.estimated))}}));
  }
  return Value::list(out);
}

}  // namespace

Value budget_status(const Budget& budget) {
  const BudgetReport report = budget.report();
  std::vector<Value> caps;
  caps.reserve(report.caps.size());
  for (const CapStatus& c : report.caps) {
    caps.push_back(
        Value::plist({{"NAME", Value::string(c.cap.name)},
                      {"PROVIDER", c.cap.provider.empty() ? Value() : Value::string(c.cap.provider)},
                      {"UNIT", Value::string(to_string(c.cap.unit))},
                      {"PERIOD", Value::string(c.cap.period.text())},
                      {"LIMIT", Value::real(c.cap.limit)},
                      {"SPENT", Value::real(c.spent)},
                      {"RESERVED", Value::real(c.reserved)},
                      {"RESETS", c.resets_at_ms == 0 ? Value() : Value::string(utc_timestamp(c.resets_at_ms))}}));
  }
  return Value::plist({{"LEDGER", Value::string(budget.file().string())},
                       {"IN-FLIGHT", Value::integer(static_cast<std::int64_t>(report.in_flight))},
                       {"REFUSED", Value::integer(static_cast<std::int64_t>(report.refusals))},
                       {"CAPS", Value::list(caps)},
                       {"TODAY", usage_rows(report.today)},
                       {"THIS-MONTH", usage_rows(report.this_month)}});
}

}  // namespace passepartout
