// The rules file: read with every problem located (and each rule's examples
// checked against it), and written back in one fixed shape.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <ctime>
#include <optional>

#include "base/ascii.hpp"
#include "base/digest.hpp"
#include "base/duration_text.hpp"
#include "base/yaml_diagnostics.hpp"
#include "pipeline/rules.hpp"
#include "value/sexp_printer.hpp"

#include <passepartout/name_pattern.hpp>

namespace passepartout {

namespace {

// --- reading ------------------------------------------------------------------------

constexpr std::string_view kRuleKeys[] = {"id",        "decision",  "target",   "tool",  "command",
                                          "args",      "reason",    "gates",    "scope", "expires",
                                          "taught_by", "taught_at", "approval", "note",  "examples"};
constexpr std::pair<std::string_view, std::string_view> kRuleAliases[] = {
    {"action", "decision"}, {"verdict", "decision"}, {"cmd", "command"},    {"arguments", "args"},
    {"why", "reason"},      {"gate", "gates"},       {"expiry", "expires"}, {"example", "examples"}};
constexpr std::string_view kMatcherKeys[] = {"exact", "prefix", "glob", "paths"};
constexpr std::string_view kExampleKeys[] = {"match", "not_match"};

bool valid_id(std::string_view id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

bool valid_gate(std::string_view gate) {
  const std::size_t at = gate.find('@');
  return at != std::string_view::npos && at > 0 && at + 1 < gate.size() && gate.find('@', at + 1) == gate.npos;
}

class RuleReader {
 public:
  explicit RuleReader(YamlProblems& problems) : problems_(problems) {}

  std::optional<Rule> read(const YAML::Node& node) {
    if (!node.IsMap()) {
      problems_.problem(node.Mark(), "expected a rule (a mapping with decision:, target: or tool:, ...)");
      return std::nullopt;
    }
    const std::size_t before = problems_.count();
    Rule rule;
    rule.where = located_where(node.Mark());
    bool has_decision = false;
    std::optional<YAML::Node> examples;
    for (const auto& item : node) {
      const auto key = item.first.as<std::string>("");
      const YAML::Node& value = item.second;
      if (key == "id") {
        rule.id = scalar(item.first, value, "id");
        if (!rule.id.empty() && !valid_id(rule.id)) {
          problems_.problem_at(item.first, value, "id " + in_quotes(rule.id) + " is not 1 to 64 of A-Z a-z 0-9 . _ -");
        }
      } else if (key == "decision") {
        const std::string text = scalar(item.first, value, "decision");
        has_decision = true;
        if (text == "deny") {
          rule.decision = RuleDecision::deny;
        } else if (text == "ask") {
          rule.decision = RuleDecision::ask;
        } else if (text == "allow") {
          rule.decision = RuleDecision::allow;
        } else {
          problems_.problem_at(item.first, value, "decision " + in_quotes(text) + " is not deny, ask or allow");
        }
      } else if (key == "target" || key == "tool") {
        if (!rule.subject.empty()) {
          problems_.problem(item.first.Mark(), "a rule names one target or tool, not both");
          continue;
        }
        rule.subject = ascii_lower(scalar(item.first, value, key));
        if (rule.subject.empty()) problems_.problem_at(item.first, value, key + " is empty");
      } else if (key == "command") {
        rule.command = matcher(item.first, value, true);
      } else if (key == "args") {
        read_args(item.first, value, rule);
      } else if (key == "reason") {
        rule.reason = scalar(item.first, value, "reason");
      } else if (key == "gates") {
        read_gates(item.first, value, rule);
      } else if (key == "scope") {
        const std::string text = scalar(item.first, value, "scope");
        if (text == "session") {
          problems_.problem_at(item.first, value,
                               "scope session is not written in the file: a session's rules live in the daemon "
                               "while the session does (teach one with approve --remember --scope session)");
        } else if (text != "always") {
          problems_.problem_at(item.first, value, "scope " + in_quotes(text) + " is not always");
        }
      } else if (key == "expires" || key == "taught_at") {
        utc_time(item.first, value, key, key == "expires" ? rule.expires_unix_ms : rule.taught_unix_ms);
      } else if (key == "taught_by") {
        rule.taught_by = scalar(item.first, value, "taught_by");
      } else if (key == "approval") {
        rule.approval = scalar(item.first, value, "approval");
      } else if (key == "note") {
        rule.note = scalar(item.first, value, "note");
      } else if (key == "examples") {
        examples = value;
      } else {
        problems_.problem(item.first.Mark(), unknown_key_message(key, kRuleKeys, " of a rule", kRuleAliases));
      }
    }
    if (!has_decision) problems_.problem(node.Mark(), "the rule has no decision: (deny, ask or allow)");
    if (rule.subject.empty()) {
      problems_.problem(node.Mark(), "the rule names no target: or tool: (a name pattern, like shell or mcp__fs__*)");
    }
    if (rule.decision != RuleDecision::allow && has_decision && rule.reason.empty()) {
      problems_.problem(node.Mark(), std::string(rule.decision == RuleDecision::ask ? "an " : "a ") +
                                         to_string(rule.decision) +
                                         " rule needs a reason: (the user and the trace are shown it)");
    }
    if (rule.decision == RuleDecision::allow && rule.gates.empty()) {
      problems_.problem(node.Mark(),
                        "an allow rule names the gates it answers: gates: [name@version, ...] (a standing "
                        "approval answers only the gate versions it was taught for)");
    }
    if (rule.decision != RuleDecision::allow && !rule.gates.empty()) {
      problems_.problem(node.Mark(), "gates: belongs to allow rules only");
    }
    if (rule.command && rule.subject != "shell" && rule.subject != "*") {
      problems_.problem(node.Mark(), "command: matches shell commands; the rule's target is " +
                                         in_quotes(rule.subject) + " (use target: shell, or args: for a tool)");
    }
    if (problems_.count() != before) return std::nullopt;
    if (examples) read_examples(*examples, rule);
    if (rule.id.empty())
      rule.id = std::string(to_string(rule.decision)) + "-" + sha256_hex(rule_text(rule)).substr(0, 8);
    if (problems_.count() != before) return std::nullopt;
    return rule;
  }

 private:
  std::string located_where(const YAML::Mark& mark) const {
    return problems_.origin() + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
  }

  std::string scalar(const YAML::Node& key, const YAML::Node& value, const std::string& what) {
    if (!value.IsScalar()) {
      problems_.problem_at(key, value, what + " must be a single value");
      return {};
    }
    return value.Scalar();
  }

  // A point in time written "2026-12-31T23:59:00Z" into `out`.
  void utc_time(const YAML::Node& key, const YAML::Node& value, const std::string& what, std::int64_t& out) {
    const std::string text = scalar(key, value, what);
    if (auto at = parse_utc_timestamp(text)) {
      out = *at;
    } else if (!text.empty()) {
      problems_.problem_at(key, value, what + " " + in_quotes(text) + " is not a UTC time like 2026-12-31T23:59:00Z");
    }
  }

  std::optional<TextMatcher> matcher(const YAML::Node& key, const YAML::Node& value, bool command) {
    TextMatcher out;
    if (value.IsScalar()) {
      out.text = value.Scalar();
      return out;
    }
    if (!value.IsMap()) {
      problems_.problem_at(key, value, "expected a matcher: {exact: text}, {prefix: text} or {glob: pattern}");
      return std::nullopt;
    }
    int kinds = 0;
    for (const auto& item : value) {
      const auto name = item.first.as<std::string>("");
      if (name == "exact" || name == "prefix" || name == "glob") {
        out.kind = name == "exact"    ? TextMatcher::Kind::exact
                   : name == "prefix" ? TextMatcher::Kind::prefix
                                      : TextMatcher::Kind::glob;
        out.text = scalar(item.first, item.second, name);
        ++kinds;
      } else if (name == "paths") {
        if (!command) {
          problems_.problem(item.first.Mark(), "paths: belongs to a prefix on a command");
          continue;
        }
        if (!item.second.IsSequence()) {
          problems_.problem_at(item.first, item.second, "paths: is a list of globs");
          continue;
        }
        for (const auto& path : item.second) out.paths.push_back(scalar(item.first, path, "a path glob"));
      } else {
        problems_.problem(item.first.Mark(), unknown_key_message(name, kMatcherKeys, " of a matcher", {}));
      }
    }
    if (kinds != 1) {
      problems_.problem(value.Mark(), "a matcher has exactly one of exact:, prefix: or glob:");
      return std::nullopt;
    }
    if (!out.paths.empty() && out.kind != TextMatcher::Kind::prefix) {
      problems_.problem(value.Mark(), "paths: belongs to a prefix");
    }
    if (out.text.empty() && out.kind == TextMatcher::Kind::prefix) {
      problems_.problem(value.Mark(), "an empty prefix would match everything; use the target alone");
    }
    return out;
  }

  void read_args(const YAML::Node& key, const YAML::Node& value, Rule& rule) {
    if (!value.IsMap()) {
      problems_.problem_at(key, value, "args: maps argument names to matchers ({path: {glob: \"/srv/**\"}})");
      return;
    }
    for (const auto& item : value) {
      const std::string name = ascii_upper(item.first.as<std::string>(""));
      if (name.empty()) {
        problems_.problem(item.first.Mark(), "an argument's name is empty");
        continue;
      }
      if (auto m = matcher(item.first, item.second, false)) rule.args.emplace_back(name, std::move(*m));
    }
  }

  void read_gates(const YAML::Node& key, const YAML::Node& value, Rule& rule) {
    if (!value.IsSequence()) {
      problems_.problem_at(key, value, "gates: is a list of name@version");
      return;
    }
    for (const auto& gate : value) {
      std::string text = scalar(key, gate, "a gate");
      if (!valid_gate(text)) {
        problems_.problem(gate.Mark(), "gate " + in_quotes(text) + " is not name@version (shell-guard@1.0.0)");
        continue;
      }
      rule.gates.push_back(std::move(text));
    }
  }

  // An example as a Value: a string (a command, or a subject name), or a
  // plist of arguments.
  std::optional<Value> example(const YAML::Node& node) {
    if (node.IsScalar()) return Value::string(node.Scalar());
    if (node.IsMap()) {
      std::vector<Value> items;
      for (const auto& item : node) {
        if (!item.second.IsScalar()) {
          problems_.problem(item.second.Mark(), "an example's argument is a single value");
          return std::nullopt;
        }
        items.push_back(Value::keyword(ascii_upper(item.first.as<std::string>(""))));
        items.push_back(Value::string(item.second.Scalar()));
      }
      return Value::list(items);
    }
    problems_.problem(node.Mark(), "an example is a command or name (a string) or arguments (a mapping)");
    return std::nullopt;
  }

  void read_examples(const YAML::Node& node, Rule& rule) {
    if (!node.IsMap()) {
      problems_.problem(node.Mark(), "examples: has match: and not_match: lists");
      return;
    }
    for (const auto& item : node) {
      const auto name = item.first.as<std::string>("");
      const bool should_match = name == "match";
      if (!should_match && name != "not_match") {
        problems_.problem(item.first.Mark(), unknown_key_message(name, kExampleKeys, " of examples", {}));
        continue;
      }
      if (!item.second.IsSequence()) {
        problems_.problem_at(item.first, item.second, name + ": is a list of examples");
        continue;
      }
      for (const auto& one : item.second) {
        std::optional<Value> value = example(one);
        if (!value) continue;
        if (example_matches(rule, *value) != should_match) {
          problems_.problem(one.Mark(),
                            "rule " + in_quotes(rule.id.empty() ? rule_summary(rule) : rule.id) + ": the example " +
                                in_quotes(value->is_string() ? value->text() : to_sexp(*value)) +
                                (should_match ? " should match, and does not" : " should not match, and does"));
        }
        (should_match ? rule.match_examples : rule.not_match_examples).push_back(std::move(*value));
      }
    }
  }

  // A string example is a command for a rule with a command matcher, else a
  // subject name; a mapping is arguments (the subject then taken as covered).
  static bool example_matches(const Rule& rule, const Value& example) {
    if (example.is_string()) {
      if (rule.command) return command_matches(*rule.command, example.text(), rule.decision);
      return name_matches(rule.subject, ascii_lower(example.text()));
    }
    return rule_args_match(rule, example);
  }

  YamlProblems& problems_;
};

YAML::Node load(std::string_view text, YamlProblems& problems) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    problems.problem(e.mark, e.msg);
    return {};
  }
}

// --- writing ------------------------------------------------------------------------

void emit_matcher(YAML::Emitter& out, const TextMatcher& m) {
  out << YAML::Flow << YAML::BeginMap << YAML::Key << to_string(m.kind) << YAML::Value << m.text;
  if (!m.paths.empty()) {
    out << YAML::Key << "paths" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& path : m.paths) out << path;
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
}

void emit_example(YAML::Emitter& out, const Value& example) {
  if (example.is_string()) {
    out << std::string(example.text());
    return;
  }
  out << YAML::Flow << YAML::BeginMap;
  const std::span<const Value> items = example.items();
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    out << YAML::Key << ascii_lower(items[i].text()) << YAML::Value << argument_text(items[i + 1]);
  }
  out << YAML::EndMap;
}

void emit_rule(YAML::Emitter& out, const Rule& rule) {
  out << YAML::BeginMap;
  out << YAML::Key << "id" << YAML::Value << rule.id;
  out << YAML::Key << "decision" << YAML::Value << to_string(rule.decision);
  out << YAML::Key << (rule.subject.starts_with("mcp__") ? "tool" : "target") << YAML::Value << rule.subject;
  if (rule.command) {
    out << YAML::Key << "command" << YAML::Value;
    emit_matcher(out, *rule.command);
  }
  if (!rule.args.empty()) {
    out << YAML::Key << "args" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, matcher] : rule.args) {
      out << YAML::Key << ascii_lower(name) << YAML::Value;
      emit_matcher(out, matcher);
    }
    out << YAML::EndMap;
  }
  if (!rule.reason.empty()) out << YAML::Key << "reason" << YAML::Value << rule.reason;
  if (!rule.gates.empty()) {
    out << YAML::Key << "gates" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& gate : rule.gates) out << gate;
    out << YAML::EndSeq;
  }
  if (rule.expires_unix_ms != 0) out << YAML::Key << "expires" << YAML::Value << utc_timestamp(rule.expires_unix_ms);
  if (!rule.taught_by.empty()) out << YAML::Key << "taught_by" << YAML::Value << rule.taught_by;
  if (rule.taught_unix_ms != 0) out << YAML::Key << "taught_at" << YAML::Value << utc_timestamp(rule.taught_unix_ms);
  if (!rule.approval.empty()) out << YAML::Key << "approval" << YAML::Value << rule.approval;
  if (!rule.note.empty()) out << YAML::Key << "note" << YAML::Value << rule.note;
  if (!rule.match_examples.empty() || !rule.not_match_examples.empty()) {
    out << YAML::Key << "examples" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, list] : {std::pair<const char*, const std::vector<Value>*>{"match", &rule.match_examples},
                                     {"not_match", &rule.not_match_examples}}) {
      if (list->empty()) continue;
      out << YAML::Key << name << YAML::Value << YAML::BeginSeq;
      for (const Value& example : *list) emit_example(out, example);
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}

}  // namespace

Result<std::vector<Rule>> parse_rules(std::string_view text, const std::string& origin) {
  YamlProblems problems(origin);
  const YAML::Node root = load(text, problems);
  if (!problems.ok()) return fail(ErrorCode::invalid_input, problems.message());
  std::vector<Rule> rules;
  if (!root.IsDefined() || root.IsNull()) return rules;  // an empty file: no rules
  if (!root.IsMap() || !root["rules"].IsDefined()) {
    problems.problem(root.Mark(), "expected a mapping with rules: (a list of rules)");
    return fail(ErrorCode::invalid_input, problems.message());
  }
  for (const auto& item : root) {
    const auto key = item.first.as<std::string>("");
    if (key != "rules") {
      constexpr std::string_view kTop[] = {"rules"};
      problems.problem(item.first.Mark(), unknown_key_message(key, kTop, "", {}));
    }
  }
  const YAML::Node list = root["rules"];
  if (!list.IsNull() && !list.IsSequence()) {
    problems.problem(list.Mark(), "rules: is a list of rules");
    return fail(ErrorCode::invalid_input, problems.message());
  }
  RuleReader reader(problems);
  for (const auto& node : list) {
    if (std::optional<Rule> rule = reader.read(node)) {
      const auto same = std::find_if(rules.begin(), rules.end(), [&](const Rule& r) { return r.id == rule->id; });
      if (same != rules.end()) {
        problems.problem(node.Mark(), "rule id " + in_quotes(rule->id) + " is used already, at " + same->where);
        continue;
      }
      rules.push_back(std::move(*rule));
    }
  }
  if (!problems.ok()) return fail(ErrorCode::invalid_input, problems.message());
  return rules;
}

Result<Rule> parse_rule(std::string_view text, const std::string& origin) {
  YamlProblems problems(origin);
  const YAML::Node root = load(text, problems);
  if (!problems.ok()) return fail(ErrorCode::invalid_input, problems.message());
  RuleReader reader(problems);
  std::optional<Rule> rule = reader.read(root);
  if (!rule) return fail(ErrorCode::invalid_input, problems.message());
  return std::move(*rule);
}

std::string rules_text(const std::vector<Rule>& rules) {
  YAML::Emitter out;
  out << YAML::Comment(
      "Passepartout's rules (docs/rules.md): deny beats ask beats allow.\n"
      "The daemon rewrites this file when a rule is taught, added or removed: keep your words in note:.");
  out << YAML::BeginMap << YAML::Key << "rules" << YAML::Value;
  std::size_t written = 0;
  out << YAML::BeginSeq;
  for (const Rule& rule : rules) {
    if (rule.scope != Rule::Scope::always) continue;
    emit_rule(out, rule);
    ++written;
  }
  out << YAML::EndSeq << YAML::EndMap;
  std::string text = out.c_str();
  if (written == 0) {  // yaml-cpp writes an empty block sequence as nothing
    const std::size_t at = text.rfind("rules:");
    text = text.substr(0, at) + "rules: []";
  }
  return text + "\n";
}

std::string rule_text(const Rule& rule) {
  YAML::Emitter out;
  emit_rule(out, rule);
  return std::string(out.c_str()) + "\n";
}

}  // namespace passepartout
