// Operator rules and standing approvals (docs/rules.md): what an operator
// teaches the host besides the gates, as deterministic as a gate and read
// from one file. A rule names what it covers (a target or tool, by name
// pattern; a matcher on the shell command or on named arguments) and a
// decision:
//   deny   blocks the action before any skill's gate runs (and after, should
//          a gate rewrite it into one a deny rule covers)
//   ask    asks a human to approve what the gates would let through
//   allow  a standing approval: when the gates ask, and every gate that asked
//          is one the rule was taught for (name and version), the host
//          approves on the human's behalf; the action still passes every gate
//          and the last mile, and runs once
// deny beats ask beats allow. A rule never turns a block or a failure into a
// pass: allow answers only an ask.
//
// This header is the model and its matching (rules.cpp) and the file's text
// (rules_file.cpp), free of I/O; RuleBook (pipeline/rule_book.hpp) holds the
// rules in force, reads and writes the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "value/value.hpp"

namespace passepartout {

enum class RuleDecision : std::uint8_t { deny, ask, allow };
const char* to_string(RuleDecision decision) noexcept;  // "deny", "ask", "allow"

// How a rule matches one text: the shell command, or one argument's value.
struct TextMatcher {
  enum class Kind : std::uint8_t {
    exact,   // the whole text, byte for byte
    prefix,  // a command: its leading words are these words (see command_matches); an argument: its leading text
    glob,    // '*' within a path segment, '**' across them, '?' one character; a path with a ".." segment never matches
  };
  Kind kind = Kind::exact;
  std::string text;
  // A prefix on a command: the globs the further words that are paths or
  // option values must each match (none: the command may add none).
  std::vector<std::string> paths;
};
const char* to_string(TextMatcher::Kind kind) noexcept;  // "exact", "prefix", "glob"

// What rules see of an action.
struct RuleSubject {
  // The tool's name for a :TARGET :TOOL action, else the target's, lower-case
  // ("shell", "mcp__fs__write_file"): the `shell` tool and the :SHELL
  // actuator are one subject.
  std::string name;
  // The shell command (:PAYLOAD :CMD, or the tool's :ARGS :CMD) when the
  // action carries one as a string.
  std::optional<std::string> command;
  // The named arguments: a tool's :ARGS, else the :PAYLOAD, as a plist.
  Value args;
};
RuleSubject rule_subject(const Value& action);

struct Rule {
  std::string id;  // unique in the file; [A-Za-z0-9._-], 1 to 64
  RuleDecision decision = RuleDecision::deny;
  // A name pattern ('*' any run) on RuleSubject::name, lower-case. The file
  // writes it as `target:` or `tool:` (the same thing).
  std::string subject;
  std::optional<TextMatcher> command;
  // Argument name (upper-case, as the action's plist keys are) and matcher.
  // deny and ask: each named one must match (others are free). allow: as
  // well, and the action may carry no argument the rule does not name.
  std::vector<std::pair<std::string, TextMatcher>> args;
  std::string reason;
  // allow: the gates it answers, "name@version" (at least one).
  std::vector<std::string> gates;
  enum class Scope : std::uint8_t { always, session };
  Scope scope = Scope::always;
  std::string session;               // scope session: the session it covers
  std::int64_t expires_unix_ms = 0;  // 0: never
  std::string taught_by;             // who made it ("wire uid=0 pid=1", "file")
  std::int64_t taught_unix_ms = 0;   // 0: not known (written by hand)
  std::string approval;              // taught by approving: the first 16 hex digits of the approval token's SHA-256
  std::string note;                  // the operator's words, kept when the host rewrites the file
  // Checked when the rule is read: strings are commands (a rule with a
  // command matcher) or subject names; maps are arguments.
  std::vector<Value> match_examples;
  std::vector<Value> not_match_examples;
  std::string where;  // "rules.yaml:12:5", for messages; empty for a rule made in memory
};

// Whether `rule` covers `subject`, leaving out its scope, expiry and gates
// (RuleBook checks those): its subject pattern, command matcher and argument
// matchers.
bool rule_matches(const Rule& rule, const RuleSubject& subject);

// Whether the arguments `args` (a plist) meet the rule's argument matchers:
// each named one present and matching; for allow without a command matcher,
// no argument the rule does not name.
bool rule_args_match(const Rule& rule, const Value& args);
// An argument's value as its matchers read it: a string's text, "true" or
// "false", a keyword's lower-case name, else the printed form.
std::string argument_text(const Value& value);

// Whether `command` is matched by `matcher` (TextMatcher::Kind on a command)
// in a rule of `decision`:
//   exact   the same text
//   prefix  allow (it narrows what runs unasked): a simple command (no ; & |
//           < > ` $ ( ) { } \ quotes or newline: one with any never matches)
//           whose words begin with the matcher's words, every further word
//           that is a path (holds a '/', or starts with '.' or '~') or an
//           option value (holds '=') matching one of `paths`.
//           deny and ask (they widen what is stopped): any simple command
//           within it (split at ; & | ( ) ` $( and newlines, with quotes and
//           backslashes removed) whose words begin with the matcher's words,
//           whatever follows
//   glob    the whole text, as a glob ('*' any run, '?' one character)
bool command_matches(const TextMatcher& matcher, std::string_view command, RuleDecision decision);
// Whether a glob matches `text` (TextMatcher::Kind::glob).
bool glob_matches(std::string_view pattern, std::string_view text);

// The rule approving `action` "always" would teach: its subject exactly; for
// a shell command, the command exactly or (prefix) its leading words up to
// the first that is a path or an option value, with the further paths and
// option values as they were shown (so the same command with another path
// still asks); for another action, each argument exactly. Never broader than
// what was shown. Refused (invalid_input, saying what to do instead) for a
// prefix on an action without a command, or a command whose first word is
// already a path or option value.
Result<Rule> taught_rule(const Value& action, bool prefix);

// The words of a command as rules split them (on spaces and tabs).
std::vector<std::string_view> command_words(std::string_view command);
// Whether a word is a path or an option value, as prefix matching reads it.
bool is_path_or_value(std::string_view word) noexcept;

// The rules of a file, read and checked: ids unique, every key known, every
// example agreeing with its rule. `origin` names the file in messages.
// Problems come back together, one per line, each "<origin>:<line>:<col>: ...".
Result<std::vector<Rule>> parse_rules(std::string_view text, const std::string& origin);
// One rule, written alone as a YAML mapping (`rules add`, `:RULE-ADD`).
Result<Rule> parse_rule(std::string_view text, const std::string& origin);
// The file's text for `rules` (those of scope always), in order, each field
// in a fixed order, with a header saying what the file is.
std::string rules_text(const std::vector<Rule>& rules);
// One rule as a plist for the wire: (:ID "r" :DECISION "deny" :SUBJECT "shell" ...).
Value rule_value(const Rule& rule);
// One rule as rules_text writes it (a YAML mapping), for `rules show`.
std::string rule_text(const Rule& rule);
// A short description: "deny shell command prefix 'curl'".
std::string rule_summary(const Rule& rule);

}  // namespace passepartout
