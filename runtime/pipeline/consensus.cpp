// Consensus on actions: the canonical form, the schema check, the tally and
// the counters.
#include "pipeline/consensus.hpp"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/ascii.hpp"
#include "base/json_string.hpp"
#include "base/utf8.hpp"

namespace passepartout {

using namespace key_literals;

std::string ConsensusConfig::describe() const {
  std::string who =
      providers.empty() ? std::string("the cascade's providers") : fmt::format("{}", fmt::join(providers, ", "));
  if (ahead_by > 0) return fmt::format("ahead by {} (at most {} calls) of {}", ahead_by, max_calls, who);
  return fmt::format("quorum {} of {}", quorum, who);
}

// --- the canonical form ------------------------------------------------------------

namespace {

bool is_proper_plist(const Value& value) {
  const std::span<const Value> items = value.items();
  if (!value.is_list() || items.empty() || items.size() % 2 != 0) return false;
  for (std::size_t i = 0; i < items.size(); i += 2) {
    if (!items[i].is_keyword()) return false;
  }
  return true;
}

// Whether `a` and `b` are the same text ignoring ASCII case (keys, which
// the JSON bridge upper-cased, against a schema's property names).
bool same_name(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

void append_number(std::string& out, double number) {
  constexpr double kExact = 9007199254740992.0;  // 2^53: every integer below is exact
  if (std::isfinite(number) && std::trunc(number) == number && std::fabs(number) < kExact) {
    fmt::format_to(std::back_inserter(out), "{}", static_cast<std::int64_t>(number));
    return;
  }
  fmt::format_to(std::back_inserter(out), "{}", number);  // shortest form that reads back the same
}

std::string_view trim_space(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const std::size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kSpace) - begin + 1);
}

void append_canonical(std::string& out, const Value& value, bool command);

// A plist's entries sorted by key, :EXPLANATION left out at `top` (what the
// model says about the step is not the step).
void append_plist(std::string& out, const Value& plist, bool top) {
  const std::span<const Value> items = plist.items();
  std::vector<std::pair<std::string, const Value*>> entries;
  entries.reserve(items.size() / 2);
  for (std::size_t i = 0; i < items.size(); i += 2) {
    std::string key = ascii_upper(items[i].text());
    if (top && key == "EXPLANATION") continue;
    const bool seen = std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.first == key; });
    if (!seen) entries.emplace_back(std::move(key), &items[i + 1]);  // a repeated key: the first value, as lookup
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  out += '{';
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i != 0) out += ',';
    out += entries[i].first;
    out += '=';
    append_canonical(out, *entries[i].second, entries[i].first == "CMD");
  }
  out += '}';
}

void append_canonical(std::string& out, const Value& value, bool command) {
  switch (value.kind()) {
    case Kind::nil:
      out += "nil";
      return;
    case Kind::t:
      out += "t";
      return;
    case Kind::integer:
      fmt::format_to(std::back_inserter(out), "{}", value.as_integer());
      return;
    case Kind::real:
      append_number(out, value.as_float());
      return;
    case Kind::string:
      append_json_string(out, command ? trim_space(value.text()) : value.text());
      return;
    case Kind::keyword:
    case Kind::symbol:
      out += ':';
      out += ascii_upper(value.text());
      return;
    case Kind::list:
      if (is_proper_plist(value)) {
        append_plist(out, value, false);
        return;
      }
      out += '[';
      for (std::size_t i = 0; i < value.items().size(); ++i) {
        if (i != 0) out += ',';
        append_canonical(out, value.items()[i], false);
      }
      out += ']';
      return;
  }
}

}  // namespace

std::string canonical_action(const Value& action, bool acts) {
  if (!acts) return "REPLY";
  const Value& target = action.at("TARGET"_key);
  const Value& payload = action.at("PAYLOAD"_key);
  std::string out;
  if (target.is_keyword("TOOL"_key)) {
    const Value& tool = payload.at("TOOL"_key);
    out = "TOOL ";
    out += ascii_lower(tool.is_string() || tool.is_symbol() || tool.is_keyword() ? tool.text() : "");
    out += ' ';
    const Value& args = payload.at("ARGS"_key);
    if (is_proper_plist(args)) {
      append_plist(out, args, true);
    } else {
      append_canonical(out, args, false);
    }
    return out;
  }
  out = ascii_upper(target.is_keyword() || target.is_symbol() || target.is_string() ? target.text() : "");
  out += ' ';
  if (is_proper_plist(payload)) {
    append_plist(out, payload, true);
  } else {
    append_canonical(out, payload, false);
  }
  return out;
}

// --- the schema check --------------------------------------------------------------

namespace {

using Json = nlohmann::json;

const char* kind_name(const Value& value) {
  switch (value.kind()) {
    case Kind::nil:
      return "nil (false, null, {} or [])";
    case Kind::t:
      return "boolean";
    case Kind::integer:
      return "integer";
    case Kind::real:
      return "number";
    case Kind::string:
      return "string";
    case Kind::keyword:
    case Kind::symbol:
      return "symbol";
    case Kind::list:
      return is_proper_plist(value) ? "object" : "array";
  }
  return "value";
}

bool is_type(const Value& value, std::string_view type) {
  // NIL is what the JSON bridge makes of false, null, {} and []: any of them.
  if (type == "null") return value.is_nil();
  if (type == "boolean") return value.is_nil() || value.is_true();
  if (type == "object") return value.is_nil() || is_proper_plist(value);
  if (type == "array") return value.is_nil() || value.is_list();
  if (type == "string") return value.is_string();
  if (type == "integer") {
    return value.is_integer() || (value.is_float() && std::trunc(value.as_float()) == value.as_float());
  }
  if (type == "number") return value.is_integer() || value.is_float();
  return true;  // an unknown type name checks nothing
}

double number_of(const Value& value) {
  return value.is_integer() ? static_cast<double>(value.as_integer()) : value.as_float();
}

bool is_number(const Value& value) { return value.is_integer() || value.is_float(); }

// Whether `value` equals the JSON `expected` as the bridge would have read it.
bool equals_json(const Value& value, const Json& expected) {
  switch (expected.type()) {
    case Json::value_t::null:
      return value.is_nil();
    case Json::value_t::boolean:
      return expected.get<bool>() ? value.is_true() : value.is_nil();
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return is_number(value) && number_of(value) == expected.get<double>();
    case Json::value_t::string:
      return value.is_string() && value.text() == expected.get_ref<const std::string&>();
    case Json::value_t::array:
    case Json::value_t::object:
      return expected.empty() ? value.is_nil() : false;  // a structured enum is not compared
    default:
      return false;
  }
}

// The plist's value under `name`, keys compared without case (the bridge
// upper-cased them); null when absent.
const Value* member(const Value& plist, std::string_view name) {
  const std::span<const Value> items = plist.items();
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    if (same_name(items[i].text(), name)) return &items[i + 1];
  }
  return nullptr;
}

std::string check(const Value& value, const Json& schema, const std::string& where);

std::string mismatch(const std::string& where, std::string_view what) {
  return fmt::format("{}: {}", where.empty() ? "/" : where, what);
}

std::string check_type(const Value& value, const Json& type, const std::string& where) {
  if (type.is_string()) {
    if (is_type(value, type.get_ref<const std::string&>())) return {};
    return mismatch(where, fmt::format("expected {}, got {}", type.get<std::string>(), kind_name(value)));
  }
  if (type.is_array()) {
    std::vector<std::string> names;
    for (const Json& each : type) {
      if (!each.is_string()) return {};
      if (is_type(value, each.get_ref<const std::string&>())) return {};
      names.push_back(each.get<std::string>());
    }
    return mismatch(where, fmt::format("expected {}, got {}", fmt::join(names, " or "), kind_name(value)));
  }
  return {};
}

std::string check_object(const Value& value, const Json& schema, const std::string& where) {
  if (!is_proper_plist(value) && !value.is_nil()) return {};
  if (const auto required = schema.find("required"); required != schema.end() && required->is_array()) {
    for (const Json& name : *required) {
      if (name.is_string() && member(value, name.get_ref<const std::string&>()) == nullptr) {
        return mismatch(where, fmt::format("\"{}\" is required", name.get<std::string>()));
      }
    }
  }
  const auto properties = schema.find("properties");
  const bool has_properties = properties != schema.end() && properties->is_object();
  const auto additional = schema.find("additionalProperties");
  const std::span<const Value> items = value.items();
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    const std::string name = ascii_lower(items[i].text());
    std::string at = where;
    at += '/';
    at += name;
    const Json* property = nullptr;
    if (has_properties) {
      for (const auto& [key, sub] : properties->items()) {
        if (same_name(key, name)) property = &sub;
      }
    }
    if (property != nullptr) {
      if (std::string why = check(items[i + 1], *property, at); !why.empty()) return why;
      continue;
    }
    if (additional == schema.end()) continue;
    if (additional->is_boolean() && !additional->get<bool>()) {
      return mismatch(where, fmt::format("\"{}\" is not one of its properties", name));
    }
    if (additional->is_object()) {
      if (std::string why = check(items[i + 1], *additional, at); !why.empty()) return why;
    }
  }
  return {};
}

std::string check_array(const Value& value, const Json& schema, const std::string& where) {
  if (!value.is_list() && !value.is_nil()) return {};
  const std::span<const Value> items = value.items();
  if (const auto min = schema.find("minItems"); min != schema.end() && min->is_number_unsigned()) {
    if (items.size() < min->get<std::size_t>())
      return mismatch(where, fmt::format("fewer than {} items", min->get<std::size_t>()));
  }
  if (const auto max = schema.find("maxItems"); max != schema.end() && max->is_number_unsigned()) {
    if (items.size() > max->get<std::size_t>())
      return mismatch(where, fmt::format("more than {} items", max->get<std::size_t>()));
  }
  if (const auto each = schema.find("items"); each != schema.end() && each->is_object()) {
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (std::string why = check(items[i], *each, fmt::format("{}/{}", where, i)); !why.empty()) return why;
    }
  }
  return {};
}

std::string check_string(const Value& value, const Json& schema, const std::string& where) {
  if (!value.is_string()) return {};
  const std::size_t length = scan_utf8(value.text()).code_points;
  if (const auto min = schema.find("minLength"); min != schema.end() && min->is_number_unsigned()) {
    if (length < min->get<std::size_t>())
      return mismatch(where, fmt::format("shorter than {} characters", min->get<std::size_t>()));
  }
  if (const auto max = schema.find("maxLength"); max != schema.end() && max->is_number_unsigned()) {
    if (length > max->get<std::size_t>())
      return mismatch(where, fmt::format("longer than {} characters", max->get<std::size_t>()));
  }
  if (const auto pattern = schema.find("pattern"); pattern != schema.end() && pattern->is_string()) {
    RE2::Options options;
    options.set_log_errors(false);
    const RE2 re(pattern->get<std::string>(), options);
    if (re.ok() && !RE2::PartialMatch(value.text(), re)) {
      return mismatch(where, fmt::format("does not match the pattern {}", pattern->get<std::string>()));
    }
  }
  return {};
}

std::string check_number(const Value& value, const Json& schema, const std::string& where) {
  if (!is_number(value)) return {};
  const double number = number_of(value);
  auto bound = [&](const char* name, auto fails, const char* says) -> std::string {
    const auto limit = schema.find(name);
    if (limit == schema.end() || !limit->is_number()) return {};
    const double at = limit->get<double>();
    if (fails(number, at)) return mismatch(where, fmt::format("{} {}", says, at));
    return {};
  };
  for (std::string why : {bound(
                              "minimum", [](double n, double at) { return n < at; }, "less than"),
                          bound(
                              "maximum", [](double n, double at) { return n > at; }, "more than"),
                          bound(
                              "exclusiveMinimum", [](double n, double at) { return n <= at; }, "not more than"),
                          bound(
                              "exclusiveMaximum", [](double n, double at) { return n >= at; }, "not less than")}) {
    if (!why.empty()) return why;
  }
  return {};
}

std::string check_alternatives(const Value& value, const Json& schema, const std::string& where) {
  if (const auto all = schema.find("allOf"); all != schema.end() && all->is_array()) {
    for (const Json& sub : *all) {
      if (std::string why = check(value, sub, where); !why.empty()) return why;
    }
  }
  if (const auto any = schema.find("anyOf"); any != schema.end() && any->is_array() && !any->empty()) {
    const bool one =
        std::any_of(any->begin(), any->end(), [&](const Json& sub) { return check(value, sub, where).empty(); });
    if (!one) return mismatch(where, "matches none of anyOf");
  }
  if (const auto one_of = schema.find("oneOf"); one_of != schema.end() && one_of->is_array() && !one_of->empty()) {
    const auto matching = std::count_if(one_of->begin(), one_of->end(),
                                        [&](const Json& sub) { return check(value, sub, where).empty(); });
    if (matching != 1) return mismatch(where, fmt::format("matches {} of oneOf, not exactly one", matching));
  }
  if (const auto negated = schema.find("not"); negated != schema.end() && negated->is_object()) {
    if (check(value, *negated, where).empty()) return mismatch(where, "matches what \"not\" excludes");
  }
  return {};
}

std::string check(const Value& value, const Json& schema, const std::string& where) {
  if (schema.is_boolean()) return schema.get<bool>() ? std::string() : mismatch(where, "nothing is allowed here");
  if (!schema.is_object()) return {};
  if (const auto type = schema.find("type"); type != schema.end()) {
    if (std::string why = check_type(value, *type, where); !why.empty()) return why;
  }
  if (const auto allowed = schema.find("enum"); allowed != schema.end() && allowed->is_array()) {
    const bool listed =
        std::any_of(allowed->begin(), allowed->end(), [&](const Json& e) { return equals_json(value, e); });
    if (!listed) return mismatch(where, fmt::format("not one of {}", allowed->dump()));
  }
  if (const auto fixed = schema.find("const"); fixed != schema.end() && !equals_json(value, *fixed)) {
    return mismatch(where, fmt::format("not {}", fixed->dump()));
  }
  for (auto part : {check_object, check_array, check_string, check_number, check_alternatives}) {
    if (std::string why = part(value, schema, where); !why.empty()) return why;
  }
  return {};
}

}  // namespace

std::string schema_mismatch(const Value& value, std::string_view schema_json) {
  if (schema_json.empty()) return {};
  const Json schema = Json::parse(schema_json, nullptr, false);
  if (schema.is_discarded()) return {};
  return check(value, schema, "");
}

// --- the tally ---------------------------------------------------------------------

void ConsensusTally::vote(std::string key, std::size_t answer, std::string provider) {
  ++votes_;
  for (Candidate& candidate : candidates_) {
    if (candidate.key == key) {
      ++candidate.votes;
      candidate.providers.push_back(std::move(provider));
      return;
    }
  }
  candidates_.push_back(Candidate{std::move(key), answer, 1, {std::move(provider)}});
}

const ConsensusTally::Candidate* ConsensusTally::leader() const {
  const Candidate* best = nullptr;
  for (const Candidate& candidate : candidates_) {
    if (best == nullptr || candidate.votes > best->votes) best = &candidate;
  }
  return best;
}

int ConsensusTally::lead() const {
  int first = 0;
  int second = 0;
  for (const Candidate& candidate : candidates_) {
    if (candidate.votes > first) {
      second = first;
      first = candidate.votes;
    } else if (candidate.votes > second) {
      second = candidate.votes;
    }
  }
  return first - second;
}

int ConsensusTally::needed() const {
  const Candidate* top = leader();
  const int votes = top != nullptr ? top->votes : 0;
  if (config_->ahead_by > 0) return std::max(0, config_->ahead_by - lead());
  return std::max(0, config_->quorum - votes);
}

ConsensusTally::State ConsensusTally::state(int remaining) const {
  const Candidate* top = leader();
  const int votes = top != nullptr ? top->votes : 0;
  if (config_->ahead_by > 0) {
    if (top != nullptr && lead() >= config_->ahead_by) return State::agreed;
    // Undecided for good once no action, a new one included, can get k ahead
    // with the calls left: the best case is every remaining vote for one.
    int best = remaining;  // a new action's
    for (const Candidate& candidate : candidates_) {
      int others = 0;
      for (const Candidate& other : candidates_) {
        if (&other != &candidate) others = std::max(others, other.votes);
      }
      best = std::max(best, candidate.votes + remaining - others);
    }
    return best >= config_->ahead_by ? State::open : State::disagreed;
  }
  if (votes >= config_->quorum) return State::agreed;
  return votes + remaining >= config_->quorum ? State::open : State::disagreed;
}

// --- the counters ------------------------------------------------------------------

ConsensusStats::Figures& ConsensusStats::of(std::string_view set) {
  auto found = sets_.find(set);
  if (found == sets_.end()) found = sets_.emplace(std::string(set), Figures{}).first;
  return found->second;
}

void ConsensusStats::agreed(std::string_view set) {
  const std::lock_guard lock(mutex_);
  ++of(set).agreed;
}

void ConsensusStats::disagreed(std::string_view set) {
  const std::lock_guard lock(mutex_);
  ++of(set).disagreed;
}

void ConsensusStats::calls(std::string_view set, std::uint64_t made, std::uint64_t cancelled) {
  const std::lock_guard lock(mutex_);
  Figures& figures = of(set);
  figures.calls += made;
  figures.cancelled += cancelled;
}

void ConsensusStats::red_flag(std::string_view set, std::string_view provider) {
  const std::lock_guard lock(mutex_);
  auto& flags = of(set).red_flags;
  auto found = flags.find(provider);
  if (found == flags.end()) found = flags.emplace(std::string(provider), 0).first;
  ++found->second;
}

std::map<std::string, ConsensusStats::Figures, std::less<>> ConsensusStats::figures() const {
  const std::lock_guard lock(mutex_);
  return sets_;
}

}  // namespace passepartout
