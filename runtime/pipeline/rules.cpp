// Rules: the subject of an action, the matchers, the rule an approval
// teaches, and the rules file read (every problem located) and written.
#include "pipeline/rules.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <ctime>

#include "base/ascii.hpp"
#include "base/digest.hpp"
#include "base/yaml_diagnostics.hpp"
#include "pipeline/actuators.hpp"
#include "value/sexp_printer.hpp"

#include <passepartout/name_pattern.hpp>

namespace passepartout {

using namespace key_literals;

const char* to_string(RuleDecision decision) noexcept {
  switch (decision) {
    case RuleDecision::deny:
      return "deny";
    case RuleDecision::ask:
      return "ask";
    case RuleDecision::allow:
      return "allow";
  }
  return "deny";
}

const char* to_string(TextMatcher::Kind kind) noexcept {
  switch (kind) {
    case TextMatcher::Kind::exact:
      return "exact";
    case TextMatcher::Kind::prefix:
      return "prefix";
    case TextMatcher::Kind::glob:
      return "glob";
  }
  return "exact";
}

RuleSubject rule_subject(const Value& action) {
  RuleSubject subject;
  const std::string target = target_name(action.at("TARGET"_key));
  const Value& payload = action.at("PAYLOAD"_key);
  if (target == "TOOL") {
    subject.name = tool_name_of(action);
    subject.args = tool_args_of(action);
  } else {
    subject.name = ascii_lower(target);
    subject.args = payload;
  }
  if (subject.name == "shell") {
    const Value& command = subject.args.at("CMD"_key);
    if (command.is_string()) subject.command = std::string(command.text());
  }
  return subject;
}

// --- matching -------------------------------------------------------------------

namespace {

// A glob on one text: '*' any run, '?' any one character (a path's
// segments are matched one at a time, so neither crosses a '/' there).
bool segment_glob(std::string_view pattern, std::string_view text) {
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star = std::string_view::npos;
  std::size_t resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t slash = path.find('/', start);
    const std::size_t end = slash == std::string_view::npos ? path.size() : slash;
    parts.push_back(path.substr(start, end - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return parts;
}

bool segments_match(std::span<const std::string_view> pattern, std::span<const std::string_view> text) {
  if (pattern.empty()) return text.empty();
  if (pattern.front() == "**") {
    for (std::size_t skip = 0; skip <= text.size(); ++skip) {
      if (segments_match(pattern.subspan(1), text.subspan(skip))) return true;
    }
    return false;
  }
  return !text.empty() && segment_glob(pattern.front(), text.front()) &&
         segments_match(pattern.subspan(1), text.subspan(1));
}

// What prefix matching refuses to read past: a command with any of these is
// more than one simple command (or expands into one it cannot see).
bool has_shell_syntax(std::string_view command) noexcept {
  return command.find_first_of(";&|<>`$(){}\\'\"\n\r") != std::string_view::npos;
}

// An argument's value as its matchers read it.
std::string arg_text(const Value& value) {
  switch (value.kind()) {
    case Kind::string:
      return std::string(value.text());
    case Kind::nil:
      return "false";
    case Kind::t:
      return "true";
    case Kind::keyword:
      return ascii_lower(value.text());
    default:
      return to_sexp(value);
  }
}

bool arg_matches(const TextMatcher& matcher, const Value& value) {
  const std::string text = arg_text(value);
  switch (matcher.kind) {
    case TextMatcher::Kind::exact:
      return text == matcher.text;
    case TextMatcher::Kind::prefix:
      return text.starts_with(matcher.text);
    case TextMatcher::Kind::glob:
      return value.is_string() && glob_matches(matcher.text, text);
  }
  return false;
}

bool args_match(const Rule& rule, const Value& args) {
  for (const auto& [name, matcher] : rule.args) {
    const Value* value = args.is_list() ? args.get(name) : nullptr;
    if (value == nullptr || !arg_matches(matcher, *value)) return false;
  }
  if (rule.decision != RuleDecision::allow || rule.command) return true;
  // A standing approval of a tool covers no argument it does not name (a
  // command's rule judges the command; the shell bounds the rest).
  const std::span<const Value> items = args.items();
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    const std::string key = ascii_upper(items[i].text());
    const bool named =
        std::any_of(rule.args.begin(), rule.args.end(), [&](const auto& arg) { return arg.first == key; });
    if (!named) return false;
  }
  return true;
}

}  // namespace

bool glob_matches(std::string_view pattern, std::string_view text) {
  const std::vector<std::string_view> words = split_path(text);
  if (std::find(words.begin(), words.end(), "..") != words.end()) return false;
  const std::vector<std::string_view> globs = split_path(pattern);
  return segments_match(globs, words);
}

std::vector<std::string_view> command_words(std::string_view command) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < command.size()) {
    while (i < command.size() && (command[i] == ' ' || command[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < command.size() && command[i] != ' ' && command[i] != '\t') ++i;
    if (i > start) words.push_back(command.substr(start, i - start));
  }
  return words;
}

bool is_path_or_value(std::string_view word) noexcept {
  return word.find('/') != std::string_view::npos || word.starts_with('.') || word.starts_with('~') ||
         word.find('=') != std::string_view::npos;
}

namespace {

// deny and ask: the simple commands within `command`, as the shell would
// split them, with quotes and backslashes removed, so that `a; curl x`,
// `echo $(curl x)` and `"cu"rl x` each show a command that starts "curl".
std::vector<std::string> simple_commands(std::string_view command) {
  std::vector<std::string> parts(1);
  for (char c : command) {
    if (std::string_view(";&|()`\n\r{}").find(c) != std::string_view::npos) {
      parts.emplace_back();
    } else if (c != '\'' && c != '"' && c != '\\' && c != '$') {
      parts.back() += c;
    }
  }
  return parts;
}

bool starts_with_words(std::span<const std::string_view> words, std::span<const std::string_view> prefix) {
  return !prefix.empty() && words.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), words.begin());
}

}  // namespace

bool command_matches(const TextMatcher& matcher, std::string_view command, RuleDecision decision) {
  switch (matcher.kind) {
    case TextMatcher::Kind::exact:
      return command == matcher.text;
    case TextMatcher::Kind::glob:
      return segment_glob(matcher.text, command);
    case TextMatcher::Kind::prefix:
      break;
  }
  const std::vector<std::string_view> prefix = command_words(matcher.text);
  if (decision != RuleDecision::allow) {
    for (const std::string& part : simple_commands(command)) {
      if (starts_with_words(command_words(part), prefix)) return true;
    }
    return false;
  }
  if (has_shell_syntax(command)) return false;
  const std::vector<std::string_view> words = command_words(command);
  if (!starts_with_words(words, prefix)) return false;
  for (std::size_t i = prefix.size(); i < words.size(); ++i) {
    if (!is_path_or_value(words[i])) continue;
    const bool allowed = std::any_of(matcher.paths.begin(), matcher.paths.end(), [&](const std::string& glob) {
      return glob == words[i] || glob_matches(glob, words[i]);
    });
    if (!allowed) return false;
  }
  return true;
}

bool rule_matches(const Rule& rule, const RuleSubject& subject) {
  if (!name_matches(rule.subject, subject.name)) return false;
  if (rule.command && (!subject.command || !command_matches(*rule.command, *subject.command, rule.decision))) {
    return false;
  }
  return args_match(rule, subject.args);
}

Result<Rule> taught_rule(const Value& action, bool prefix) {
  const RuleSubject subject = rule_subject(action);
  if (subject.name.empty()) return fail(ErrorCode::invalid_input, "the action names no target or tool to remember");
  Rule rule;
  rule.decision = RuleDecision::allow;
  rule.subject = subject.name;
  if (subject.command) {
    TextMatcher matcher;
    matcher.text = *subject.command;
    if (prefix) {
      if (has_shell_syntax(*subject.command)) {
        return fail(ErrorCode::invalid_input,
                    "the command is more than one simple command (it has shell syntax: ; & | < > ` $ ( ) quotes), "
                    "which a prefix never covers; remember it exactly (--match exact)");
      }
      const std::vector<std::string_view> words = command_words(*subject.command);
      std::size_t lead = 0;
      while (lead < words.size() && !is_path_or_value(words[lead])) ++lead;
      if (lead == 0) {
        return fail(ErrorCode::invalid_input,
                    "the command's first word is a path or an option value, so it has no leading words to "
                    "remember; remember it exactly (--match exact)");
      }
      matcher.kind = TextMatcher::Kind::prefix;
      matcher.text.clear();
      for (std::size_t i = 0; i < words.size(); ++i) {
        if (i < lead) {
          if (!matcher.text.empty()) matcher.text += ' ';
          matcher.text += words[i];
        } else if (is_path_or_value(words[i])) {
          matcher.paths.emplace_back(words[i]);
        }
      }
    }
    rule.command = std::move(matcher);
    return rule;
  }
  if (prefix) {
    return fail(ErrorCode::invalid_input,
                "--match prefix applies to shell commands, and this action (" + subject.name +
                    ") has none; its arguments are remembered exactly (--match exact), or write a rule with "
                    "globs in the rules file");
  }
  const std::span<const Value> items = subject.args.items();
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    if (!items[i].is_keyword()) continue;
    TextMatcher exact;
    exact.text = arg_text(items[i + 1]);
    rule.args.emplace_back(ascii_upper(items[i].text()), std::move(exact));
  }
  return rule;
}

// --- times ------------------------------------------------------------------------

namespace {

std::string utc_text(std::int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  std::array<char, 32> buffer{};
  const std::size_t n = std::strftime(buffer.data(), buffer.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buffer.data(), n);
}

std::optional<std::int64_t> parse_utc(std::string_view text) {
  std::tm tm{};
  int year = 0;
  int month = 0;
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  char zone = 0;
  const std::string copy(text);
  if (std::sscanf(copy.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &year, &month, &day, &hour, &minute, &second, &zone) !=
          7 ||
      zone != 'Z' || copy.size() != 20 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 ||
      second > 60) {
    return std::nullopt;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

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
      const std::string key = item.first.as<std::string>("");
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
      } else if (key == "expires") {
        const std::string text = scalar(item.first, value, "expires");
        if (auto at = parse_utc(text)) {
          rule.expires_unix_ms = *at;
        } else if (!text.empty()) {
          problems_.problem_at(item.first, value,
                               "expires " + in_quotes(text) + " is not a UTC time like 2026-12-31T23:59:00Z");
        }
      } else if (key == "taught_at") {
        const std::string text = scalar(item.first, value, "taught_at");
        if (auto at = parse_utc(text)) {
          rule.taught_unix_ms = *at;
        } else if (!text.empty()) {
          problems_.problem_at(item.first, value,
                               "taught_at " + in_quotes(text) + " is not a UTC time like 2026-12-31T23:59:00Z");
        }
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
      problems_.problem(node.Mark(), std::string("a ") + to_string(rule.decision) +
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
      const std::string name = item.first.as<std::string>("");
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
      const std::string name = item.first.as<std::string>("");
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
    return args_match(rule, example);
  }

  YamlProblems& problems_;
};

YAML::Node load(std::string_view text, const std::string& origin, YamlProblems& problems) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    problems.problem(e.mark, e.msg);
    return {};
  }
  (void)origin;
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
    out << YAML::Key << ascii_lower(items[i].text()) << YAML::Value << arg_text(items[i + 1]);
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
  if (rule.expires_unix_ms != 0) out << YAML::Key << "expires" << YAML::Value << utc_text(rule.expires_unix_ms);
  if (!rule.taught_by.empty()) out << YAML::Key << "taught_by" << YAML::Value << rule.taught_by;
  if (rule.taught_unix_ms != 0) out << YAML::Key << "taught_at" << YAML::Value << utc_text(rule.taught_unix_ms);
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
  const YAML::Node root = load(text, origin, problems);
  if (!problems.ok()) return fail(ErrorCode::invalid_input, problems.message());
  std::vector<Rule> rules;
  if (!root.IsDefined() || root.IsNull()) return rules;  // an empty file: no rules
  if (!root.IsMap() || !root["rules"].IsDefined()) {
    problems.problem(root.Mark(), "expected a mapping with rules: (a list of rules)");
    return fail(ErrorCode::invalid_input, problems.message());
  }
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>("");
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
  const YAML::Node root = load(text, origin, problems);
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

std::string rule_summary(const Rule& rule) {
  std::string out = std::string(to_string(rule.decision)) + " " + rule.subject;
  if (rule.command) {
    out += std::string(" command ") + to_string(rule.command->kind) + " " + in_quotes(rule.command->text);
    if (!rule.command->paths.empty()) out += " (paths " + std::to_string(rule.command->paths.size()) + ")";
  }
  for (const auto& [name, matcher] : rule.args) {
    out += " " + ascii_lower(name) + " " + to_string(matcher.kind) + " " + in_quotes(matcher.text);
  }
  return out;
}

Value rule_value(const Rule& rule) {
  std::vector<std::pair<std::string_view, Value>> fields{
      {"ID", Value::string(rule.id)},
      {"DECISION", Value::string(to_string(rule.decision))},
      {"SUBJECT", Value::string(rule.subject)},
      {"SUMMARY", Value::string(rule_summary(rule))},
      {"REASON", Value::string(rule.reason)},
      {"SCOPE", Value::string(rule.scope == Rule::Scope::always ? "always" : "session")},
  };
  if (rule.command) {
    std::vector<Value> paths;
    for (const std::string& path : rule.command->paths) paths.push_back(Value::string(path));
    fields.emplace_back("COMMAND", Value::plist({{"MATCH", Value::string(to_string(rule.command->kind))},
                                                 {"TEXT", Value::string(rule.command->text)},
                                                 {"PATHS", Value::list(paths)}}));
  }
  if (!rule.args.empty()) {
    std::vector<Value> args;
    for (const auto& [name, matcher] : rule.args) {
      args.push_back(Value::plist({{"NAME", Value::string(ascii_lower(name))},
                                   {"MATCH", Value::string(to_string(matcher.kind))},
                                   {"TEXT", Value::string(matcher.text)}}));
    }
    fields.emplace_back("ARGS", Value::list(args));
  }
  std::vector<Value> gates;
  for (const std::string& gate : rule.gates) gates.push_back(Value::string(gate));
  fields.emplace_back("GATES", Value::list(gates));
  if (!rule.session.empty()) fields.emplace_back("SESSION", Value::string(rule.session));
  fields.emplace_back("EXPIRES-UNIX-MS", Value::integer(rule.expires_unix_ms));
  fields.emplace_back("TAUGHT-BY", Value::string(rule.taught_by));
  fields.emplace_back("TAUGHT-UNIX-MS", Value::integer(rule.taught_unix_ms));
  if (!rule.approval.empty()) fields.emplace_back("APPROVAL", Value::string(rule.approval));
  if (!rule.note.empty()) fields.emplace_back("NOTE", Value::string(rule.note));
  fields.emplace_back("WHERE", Value::string(rule.where));
  std::vector<Value> items;
  items.reserve(fields.size() * 2);
  for (auto& [key, value] : fields) {
    items.push_back(Value::keyword(key));
    items.push_back(std::move(value));
  }
  return Value::list(items);
}

}  // namespace passepartout
