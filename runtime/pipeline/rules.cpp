// Rules: the subject of an action, the matchers, the rule an approval
// teaches, and how a rule reads in a message (the file: rules_file.cpp).
#include "pipeline/rules.hpp"

#include <algorithm>
#include <span>

#include "base/ascii.hpp"
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

// A glob on one text: '*' any run, '?' any one character (a path's segments
// are matched one at a time, so neither crosses a '/' there).
bool segment_glob(std::string_view pattern, std::string_view text) { return wildcard_matches(pattern, text, true); }

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

}  // namespace

std::string argument_text(const Value& value) {
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

namespace {

bool arg_matches(const TextMatcher& matcher, const Value& value) {
  const std::string text = argument_text(value);
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

}  // namespace

bool rule_args_match(const Rule& rule, const Value& args) {
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
  return rule_args_match(rule, subject.args);
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
    exact.text = argument_text(items[i + 1]);
    rule.args.emplace_back(ascii_upper(items[i].text()), std::move(exact));
  }
  return rule;
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
