#include "providers/budget_yaml.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

#include "base/duration_text.hpp"
#include "base/yaml_scalars.hpp"

namespace passepartout {
namespace {

constexpr std::string_view kCapKeys[] = {
    "hourly_usd",     "hourly_tokens", "daily_usd",      "daily_tokens", "weekly_usd", "weekly_tokens", "monthly_usd",
    "monthly_tokens", "session_usd",   "session_tokens", "usd",          "tokens",     "period",        "per_provider"};
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"max_budget", "usd"}, {"budget_duration", "period"}, {"providers", "per_provider"}, {"duration", "period"}};

struct Period {
  std::string_view prefix;
  BudgetPeriod::Kind kind;
};
constexpr Period kPeriods[] = {{"hourly", BudgetPeriod::Kind::hourly},
                               {"daily", BudgetPeriod::Kind::daily},
                               {"weekly", BudgetPeriod::Kind::weekly},
                               {"monthly", BudgetPeriod::Kind::monthly},
                               {"session", BudgetPeriod::Kind::session}};

// "5", "0.25", "$5": dollars.
std::optional<double> parse_usd(std::string_view text) {
  if (!text.empty() && text.front() == '$') text.remove_prefix(1);
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  return value;
}

// "200000", "200k", "1.5m": tokens.
std::optional<double> parse_tokens(std::string_view text) {
  double scale = 1;
  if (!text.empty() && (text.back() == 'k' || text.back() == 'K')) scale = 1e3;
  if (!text.empty() && (text.back() == 'm' || text.back() == 'M')) scale = 1e6;
  if (scale != 1) text.remove_suffix(1);
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  return std::round(value * scale);
}

// One map of caps: the budget itself, or one provider's under per_provider.
// `provider_mark`: where the provider's name is, for its caps' origin.
void read_caps(const YAML::Node& map, YamlProblems& problems, const std::string& provider,
               const YAML::Mark& provider_mark, BudgetConfig& out) {
  const std::string prefix = provider.empty() ? std::string() : provider + ".";
  const std::string where = provider.empty() ? std::string(" in budget") : " in budget.per_provider." + provider;
  std::optional<BudgetPeriod> period;
  std::string period_text;  // as written: "30d"
  YAML::Mark period_mark;
  std::vector<std::size_t> needs_period;  // caps of `out` written as plain usd: / tokens:
  for (const auto& entry : map) {
    const YAML::Node& key = entry.first;
    const YAML::Node& value = entry.second;
    const std::string name = key.IsScalar() ? key.Scalar() : std::string("?");
    if (std::find(std::begin(kCapKeys), std::end(kCapKeys), name) == std::end(kCapKeys) ||
        (!provider.empty() && name == "per_provider")) {
      problems.problem(key.Mark(), unknown_key_message(name, kCapKeys, where, kAliases));
      continue;
    }
    if (name == "per_provider") {
      if (!value.IsMap()) {
        problems.problem_at(key, value, "per_provider: expected a map of provider names to caps");
        continue;
      }
      for (const auto& each : value) {
        const std::string who = each.first.IsScalar() ? each.first.Scalar() : std::string("?");
        if (!each.second.IsMap()) {
          problems.problem_at(each.first, each.second,
                              "per_provider." + who + ": expected a map of caps (daily_usd: 5)");
          continue;
        }
        read_caps(each.second, problems, who, each.first.Mark(), out);
      }
      continue;
    }
    if (!value.IsScalar()) {
      problems.problem_at(key, value, name + ": expected a single value");
      continue;
    }
    if (name == "period") {
      auto span = parse_span(value.Scalar());
      if (!span) {
        problems.problem(value.Mark(), "period: " + span.error().message);
        continue;
      }
      period = BudgetPeriod{BudgetPeriod::Kind::span, *span};
      period_text = value.Scalar();
      period_mark = key.Mark();
      continue;
    }
    BudgetCap cap;
    cap.provider = provider;
    cap.name = prefix + name;
    cap.origin = location(problems.origin(), provider.empty() ? key.Mark() : provider_mark);
    cap.unit = name.ends_with("_usd") || name == "usd" ? BudgetUnit::usd : BudgetUnit::tokens;
    const std::optional<double> limit =
        cap.unit == BudgetUnit::usd ? parse_usd(value.Scalar()) : parse_tokens(value.Scalar());
    if (!limit) {
      problems.problem(value.Mark(),
                       name + ": " + in_quotes(value.Scalar()) +
                           (cap.unit == BudgetUnit::usd ? " is not an amount of US dollars (write 5 or 0.25)"
                                                        : " is not a number of tokens (write 200000, 200k or 1.5m)"));
      continue;
    }
    cap.limit = *limit;
    if (name == "usd" || name == "tokens") {
      needs_period.push_back(out.caps.size());
    } else {
      for (const Period& p : kPeriods) {
        if (name.starts_with(p.prefix)) cap.period = BudgetPeriod{p.kind};
      }
    }
    out.caps.push_back(std::move(cap));
  }
  for (const std::size_t i : needs_period) {
    BudgetCap& cap = out.caps[i];
    if (!period) {
      problems.problem(map.Mark(), cap.name + " needs a period" + where + " (period: 30d), or write daily_" +
                                       to_string(cap.unit) + ", monthly_" + to_string(cap.unit) + ", ...");
      continue;
    }
    cap.period = *period;
    cap.name += "_" + period_text;
  }
  if (period && needs_period.empty()) {
    problems.problem(period_mark, "period" + where + " applies only to usd: and tokens:, and neither is set");
  }
}

}  // namespace

void read_budget(const YAML::Node& node, YamlProblems& problems, BudgetConfig& out) {
  if (node.IsNull()) return;
  if (!node.IsMap()) {
    problems.problem(node.Mark(), "budget: expected a map of caps (daily_usd: 5, session_tokens: 200k, ...)");
    return;
  }
  read_caps(node, problems, "", node.Mark(), out);
}

}  // namespace passepartout
