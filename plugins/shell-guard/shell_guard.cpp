// shell-guard: the destructive-command gate. Blocks shell commands that match a
// table of unsafe patterns and, by default, sends every other one to a human.
#include <passepartout/skill.hpp>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pattern_table.hpp"
#include "skill_config.hpp"
#include "skill_text.hpp"

namespace {

using passepartout::Action;
using passepartout::Signal;
using passepartout::ValueRef;
using passepartout::Verdict;
using passepartout::bundled::boolean;
using passepartout::bundled::decimal;
using passepartout::bundled::is_named;
using passepartout::bundled::is_text;
using passepartout::bundled::PatternSpec;
using passepartout::bundled::PatternTable;

// --- DESTRUCTIVE-RM ------------------------------------------------------------
//
// The classic pattern `\brm\s+-rf\s+/` misses every other spelling of the same
// command. This one matches an `rm` invocation whose arguments, up to the next
// command separator and in any order, include a recursive flag, a force flag
// and an absolute path (one starting with '/' or '~'): `rm -fr /`,
// `rm -r -f /`, `rm --recursive --force /`, `rm -rf --no-preserve-root /`,
// `rm -Rf -- /`, `rm / -rf`, `"rm" "-rf" "/"`. RE2 has no lookahead, so "in any
// order" is spelled out as the alternation of every order.

// Arguments are separated by blanks or an escaped newline; a bare newline ends the command.
constexpr std::string_view kSeparator = R"((?:[ \t]|\\\n)+)";
// One argument: it ends at white space or at anything that ends a command.
constexpr std::string_view kArgument = R"([^\s;&|()<>`]+)";
// A short-option cluster holding r or R (-r, -R, -vr, ...), or --recursive
// (GNU getopt accepts any prefix of it, and no other rm option starts with r).
constexpr std::string_view kRecursive = R"((?:-[a-zA-Z]*[rR][a-zA-Z]*|--r[a-z]*))";
// A short-option cluster holding f, or --force (the only rm option starting with f).
constexpr std::string_view kForce = R"((?:-[a-zA-Z]*f[a-zA-Z]*|--f[a-z]*))";
// One cluster holding both: -rf, -fr, -Rf, -rvf, ...
constexpr std::string_view kRecursiveForce = R"(-[a-zA-Z]*(?:[rR][a-zA-Z]*f|f[a-zA-Z]*[rR])[a-zA-Z]*)";
// An argument starting with '/' or '~' (the rest of it does not matter).
constexpr std::string_view kAbsolutePath = R"([/~][^\s;&|()<>`]*)";
// The shell removes quotes before rm sees its arguments: "-rf" is -rf.
constexpr std::string_view kQuote = R"(["']?)";
// Where a flag ends: it must be a whole argument, not the start of one.
constexpr std::string_view kFlagEnd = R"((?:$|[\s;&|()<>`]))";

// `\brm`, then the arguments `parts` in this order, each preceded by any other arguments.
std::string rm_with_arguments(const std::vector<std::string_view>& parts) {
  std::string regex = R"(\brm)";
  regex += kQuote;
  for (const std::string_view part : parts) {
    regex += "(?:";
    regex += kSeparator;
    regex += kArgument;
    regex += ")*";
    regex += kSeparator;
    regex += kQuote;
    regex += part;
    if (part != kAbsolutePath) regex += kQuote;
  }
  // Every part but the last is followed by a separator; a last flag needs its end.
  if (parts.back() != kAbsolutePath) regex += kFlagEnd;
  return regex;
}

std::string destructive_rm_regex() {
  std::vector<std::string_view> parts = {kAbsolutePath, kForce, kRecursive};
  std::vector<std::string> orders;
  std::sort(parts.begin(), parts.end());
  do {
    orders.push_back(rm_with_arguments(parts));
  } while (std::next_permutation(parts.begin(), parts.end()));
  orders.push_back(rm_with_arguments({kRecursiveForce, kAbsolutePath}));
  orders.push_back(rm_with_arguments({kAbsolutePath, kRecursiveForce}));

  std::string regex;
  for (const std::string& order : orders) {
    regex += regex.empty() ? "(?:" : "|(?:";
    regex += order;
    regex += ")";
  }
  return regex;
}

// --- the pattern table -----------------------------------------------------------

std::vector<PatternSpec> builtin_patterns() {
  return {
      {"DESTRUCTIVE-RM", destructive_rm_regex()},
      {"DISK-DUMP", R"(\bdd\s+if=)"},
      {"MKFS", R"(\bmkfs\.)"},
      {"MFORMAT", R"(\bmformat\b)"},
      {"SHRED-DEVICE", R"(\bshred\s+/dev/)"},
      {"WIPEFS-DEVICE", R"(\bwipefs\s+/dev/)"},
      {"BACKTICK-SUBSTITUTION", R"(`[^`]*`)"},
      {"COMMAND-SUBSTITUTION", R"(\$\()"},
  };
}

// `config :EXTRA_PATTERNS`: a list of (:NAME n :REGEX r) plists, appended to the table.
void append_extra_patterns(const ValueRef& config, std::vector<PatternSpec>& table) {
  const ValueRef extra = config.get("EXTRA_PATTERNS");
  if (extra.is_nil()) return;
  if (!extra.is_list()) {
    throw std::invalid_argument("config extra_patterns: expected a list of {name, regex} maps, got " + extra.print());
  }
  for (std::size_t i = 0; i < extra.size(); ++i) {
    const ValueRef entry = extra[i];
    const std::string where = "config extra_patterns[" + decimal(i) + "]";
    const ValueRef name = entry.get("NAME");
    const ValueRef regex = entry.get("REGEX");
    if (!entry.is_list() || !is_text(name) || name.text().empty()) {
      throw std::invalid_argument(where + ": expected {name: NAME, regex: REGEX}, got " + entry.print());
    }
    if (!regex.is_string()) {
      throw std::invalid_argument(where + " (pattern '" + std::string(name.text()) +
                                  "'): regex must be a string, got " + regex.print());
    }
    table.push_back({std::string(name.text()), std::string(regex.text())});
  }
}

// `config :APPROVE_ALL_SHELL`: true (the default) or false.
bool approve_all_shell(const ValueRef& config) {
  return boolean(config, "APPROVE_ALL_SHELL", "approve_all_shell", true);
}

// The command the action would run: :PAYLOAD :CMD for target :SHELL, :PAYLOAD
// :ARGS :CMD for target :TOOL with tool "shell"; NIL for any other action.
ValueRef shell_command(const Action& action) {
  const ValueRef target = action.get("TARGET");
  const ValueRef payload = action.get("PAYLOAD");
  if (is_named(target, "SHELL")) return payload.get("CMD");
  if (is_named(target, "TOOL") && is_named(payload.get("TOOL"), "SHELL")) {
    ValueRef args = payload.get("ARGS");
    if (args.is_list() && args[0].is_list()) args = args[0];  // unwrapped one level, as the host does (E7)
    return args.get("CMD");
  }
  return {};
}

// Immutable after construction: RE2 and RE2::Set match from any number of
// threads at once, so gate() needs no lock.
class ShellGuard final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "shell-guard";
  static constexpr const char kVersion[] = "1.0.0";
  static constexpr passepartout::ConfigKeySpec kConfig[] = {
      {"approve_all_shell", "boolean", "true", "false: commands that match no unsafe pattern pass without approval"},
      {"extra_patterns", "list", "[]", "More to block: [{name: CURL-PIPE-SH, regex: '...'}]"}};

  // Compiles every pattern once. Throws, naming the pattern, when one does not compile.
  explicit ShellGuard(const ValueRef& config)
      : approve_all_shell_(approve_all_shell(config)), patterns_(all_patterns(config)) {}

  passepartout::Verdict gate(const Action& action, const Signal& /*signal*/) override {
    const ValueRef command = shell_command(action);
    if (command.is_nil()) return Verdict::pass();
    // A command that is not text cannot be checked, so it must not run.
    if (!command.is_string()) {
      return Verdict::block("Shell command blocked: command is not a string: " + command.print());
    }

    const std::string matched = matching_pattern_names(command.text());
    if (!matched.empty()) {
      return Verdict::block("Shell command blocked: contains unsafe pattern (" + matched + ")");
    }
    if (!approve_all_shell_) return Verdict::pass();
    return Verdict::approval("Shell command requires approval: " + std::string(command.text()));
  }

  void self_test() override {
    if (matching_pattern_names("rm -rf /").find("DESTRUCTIVE-RM") == std::string::npos) {
      throw std::runtime_error("self-test: 'rm -rf /' is not recognised as DESTRUCTIVE-RM");
    }
    if (!matching_pattern_names("ls -la /tmp").empty()) {
      throw std::runtime_error("self-test: 'ls -la /tmp' matches an unsafe pattern");
    }
  }

 private:
  static std::vector<PatternSpec> all_patterns(const ValueRef& config) {
    std::vector<PatternSpec> table = builtin_patterns();
    append_extra_patterns(config, table);
    return table;
  }

  // The names of every pattern `command` matches, space-separated, in table order.
  std::string matching_pattern_names(std::string_view command) const {
    std::string names;
    for (const std::size_t index : patterns_.matches(command)) {
      if (!names.empty()) names += ' ';
      names += patterns_.name(index);
    }
    return names;
  }

  bool approve_all_shell_;
  PatternTable patterns_;  // table order: the built-in patterns, then extra_patterns
};

}  // namespace

PASSEPARTOUT_SKILL(ShellGuard);
