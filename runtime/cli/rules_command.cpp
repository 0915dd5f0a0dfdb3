// `passepartout rules list|show|add|remove|test|carry`: the operator's rules
// and standing approvals of the running daemon (docs/rules.md).
#include <chrono>
#include <fstream>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "base/duration_text.hpp"
#include "base/utf8.hpp"
#include "cli/cli11.hpp"
#include "cli/client_options.hpp"
#include "cli/client_output.hpp"
#include "cli/exit_status.hpp"
#include "cli/operator_request.hpp"
#include "cli/terminal_text.hpp"
#include "value/json_bridge.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout::cli {

namespace {

ErrorHints rule_hints() { return {"see the rules with `passepartout rules list`", ""}; }

// What `rules add` and `rules test` read from their options.
struct RulesArgs {
  std::string id;
  std::string decision;
  std::string target;
  std::string tool;
  std::string command;
  std::string prefix;
  std::string glob;
  std::vector<std::string> paths;
  std::vector<std::string> args;  // NAME=exact:TEXT, NAME=prefix:TEXT, NAME=glob:PATTERN
  std::vector<std::string> gates;
  std::string reason;
  std::string note;
  std::string expires;
  std::filesystem::path file;
  std::string action;     // rules test: a shell command, or an action's s-expression
  std::string args_json;  // rules test --tool's arguments
  std::string session;    // rules test --session
};

// A YAML scalar that reads back as `text`: JSON's string syntax is YAML's double-quoted one.
std::string quoted(const std::string& text) { return OrderedJson(text).dump(); }

// The rule `rules add` describes, as the one-rule YAML the daemon reads; an
// error message (empty on success) otherwise.
std::string rule_yaml(const RulesArgs& a, std::string& yaml) {
  std::ostringstream out;
  if (!a.id.empty()) out << "id: " << quoted(a.id) << '\n';
  out << "decision: " << quoted(a.decision) << '\n';
  if (a.target.empty() == a.tool.empty()) return "name what the rule covers: --target NAME or --tool NAME (one)";
  if (!a.target.empty()) out << "target: " << quoted(a.target) << '\n';
  if (!a.tool.empty()) out << "tool: " << quoted(a.tool) << '\n';
  const int matchers = int(!a.command.empty()) + int(!a.prefix.empty()) + int(!a.glob.empty());
  if (matchers > 1) return "--command, --prefix and --glob exclude each other: give one";
  if (!a.paths.empty() && a.prefix.empty()) return "--path belongs to a --prefix";
  if (matchers == 1) {
    out << "command: {";
    if (!a.command.empty()) out << "exact: " << quoted(a.command);
    if (!a.prefix.empty()) out << "prefix: " << quoted(a.prefix);
    if (!a.glob.empty()) out << "glob: " << quoted(a.glob);
    if (!a.paths.empty()) {
      out << ", paths: [";
      for (std::size_t i = 0; i < a.paths.size(); ++i) out << (i == 0 ? "" : ", ") << quoted(a.paths[i]);
      out << ']';
    }
    out << "}\n";
  }
  if (!a.args.empty()) {
    out << "args:\n";
    for (const std::string& arg : a.args) {
      const std::size_t eq = arg.find('=');
      const std::size_t colon = eq == std::string::npos ? std::string::npos : arg.find(':', eq);
      const std::string kind = colon == std::string::npos ? "" : arg.substr(eq + 1, colon - eq - 1);
      if (eq == 0 || colon == std::string::npos || (kind != "exact" && kind != "prefix" && kind != "glob")) {
        return "--arg " + arg + ": write NAME=exact:TEXT, NAME=prefix:TEXT or NAME=glob:PATTERN";
      }
      out << "  " << quoted(arg.substr(0, eq)) << ": {" << kind << ": " << quoted(arg.substr(colon + 1)) << "}\n";
    }
  }
  if (!a.reason.empty()) out << "reason: " << quoted(a.reason) << '\n';
  if (!a.gates.empty()) {
    out << "gates: [";
    for (std::size_t i = 0; i < a.gates.size(); ++i) out << (i == 0 ? "" : ", ") << quoted(a.gates[i]);
    out << "]\n";
  }
  if (!a.expires.empty()) {
    auto span = parse_span(a.expires);
    if (!span) return "--expires: " + span.error().message;
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    out << "expires: "
        << quoted(utc_timestamp(std::chrono::duration_cast<std::chrono::milliseconds>(now + *span).count())) << '\n';
  }
  if (!a.note.empty()) out << "note: " << quoted(a.note) << '\n';
  yaml = out.str();
  return {};
}

// The action `rules test` asks about: an s-expression, a tool call, or a shell command.
std::string test_action(const RulesArgs& a, Value& action) {
  if (!a.tool.empty()) {
    Value args;
    if (!a.args_json.empty()) {
      auto read = json_to_value(a.args_json);
      if (!read) return "--args: " + read.error().message;
      args = *read;
    }
    action = Value::plist({{"TYPE", Value::keyword("REQUEST")},
                           {"TARGET", Value::keyword("TOOL")},
                           {"PAYLOAD", Value::plist({{"TOOL", Value::string(a.tool)}, {"ARGS", args}})}});
    return {};
  }
  if (a.action.empty()) return "give the action: a shell command, an action's s-expression, or --tool NAME";
  if (a.action.front() == '(') {
    auto read = read_sexp(a.action);
    if (!read) return "the action does not read: " + read.error().message;
    action = *read;
    return {};
  }
  action = Value::plist({{"TYPE", Value::keyword("REQUEST")},
                         {"TARGET", Value::keyword("SHELL")},
                         {"PAYLOAD", Value::plist({{"CMD", Value::string(a.action)}})}});
  return {};
}

void print_rule_line(std::ostream& out, const Value& rule) {
  out << "  " << printable(display_text(rule.at("ID"))) << "  " << printable(display_text(rule.at("SUMMARY")));
  const Value& hits = rule.at("HITS");
  if (hits.is_integer()) out << "  hits " << hits.as_integer();
  if (display_text(rule.at("SCOPE")) == "session") out << "  session " << printable(display_text(rule.at("SESSION")));
  if (rule.at("EXPIRED").is_true()) {
    out << "  EXPIRED";
  } else if (const Value& expires = rule.at("EXPIRES-UNIX-MS"); expires.is_integer() && expires.as_integer() > 0) {
    out << "  expires " << local_iso8601(expires.as_integer());
  }
  out << '\n';
  if (const std::string reason = display_text(rule.at("REASON")); !reason.empty()) {
    out << "      reason: " << printable(reason) << '\n';
  }
  std::string gates;
  for (const Value& gate : entries_of(rule.at("GATES"))) gates += (gates.empty() ? "" : ", ") + display_text(gate);
  if (!gates.empty()) out << "      answers: " << printable(gates) << '\n';
  if (const std::string by = display_text(rule.at("TAUGHT-BY")); !by.empty()) {
    const Value& at = rule.at("TAUGHT-UNIX-MS");
    out << "      by " << printable(by);
    if (at.is_integer() && at.as_integer() > 0) out << ", " << local_iso8601(at.as_integer());
    out << '\n';
  }
}

int simple(const Target& target, const Output& output, const OperatorRequest& request) {
  return run_operator_command(target, output, request, [](const Value& response, std::ostream& out) {
    out << response_message(response, "done") << '\n';
    if (const Value& rule = response.path({"PAYLOAD", "RULE"}); rule.is_list()) print_rule_line(out, rule);
  });
}

}  // namespace

void add_rules_commands(CLI::App& app, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen) {
  auto args = std::make_shared<RulesArgs>();
  auto* rules = app.add_subcommand(
      "rules",
      "The operator's rules in the running daemon (docs/rules.md): deny and ask rules on targets, tools,\n"
      "commands and arguments, and the standing approvals taught by `approvals approve --remember`.\n"
      "deny beats ask beats allow; a rule never lets through what a gate blocks.");
  rules->require_subcommand(1);

  auto* list =
      rules->add_subcommand("list", "Every rule in force: id, what it covers, hits, scope, expiry, who taught it.");
  add_connection_options(*list, *parsed, kReplyTimeoutS);
  list->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [](const Target& target, const Output& output) {
      return run_operator_command(
          target, output, {"RULES", {}, rule_hints(), {"RULES"}}, [](const Value& response, std::ostream& out) {
            const auto listed = entries_of(response.path({"PAYLOAD", "RULES"}));
            out << response_message(response, std::to_string(listed.size()) + " rules") << " in "
                << printable(display_text(response.path({"PAYLOAD", "FILE"}))) << '\n';
            for (const Value& rule : listed) print_rule_line(out, rule);
          });
    });
  });

  auto* show = rules->add_subcommand("show", "One rule, as the rules file writes it, with its hits.");
  show->add_option("id", args->id, "The rule's id (rules list)")->required()->type_name("ID");
  add_connection_options(*show, *parsed, kReplyTimeoutS);
  show->callback([parsed, args, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [args](const Target& target, const Output& output) {
      return run_operator_command(target, output, {"RULE", {{"ID", Value::string(args->id)}}, rule_hints(), {}},
                                  [](const Value& response, std::ostream& out) {
                                    print_rule_line(out, response.path({"PAYLOAD", "RULE"}));
                                    out << printable(display_text(response.path({"PAYLOAD", "TEXT"})), true);
                                  });
    });
  });

  auto* add = rules->add_subcommand(
      "add",
      "Add a rule, written to the rules file before this returns:\n"
      "  rules add deny --target shell --prefix curl --reason \"fetch through the http tool\"\n"
      "  rules add ask --tool 'mcp__fs__write_*' --arg path=glob:/srv/notes/** --reason \"writes are reviewed\"\n"
      "  rules add --file rule.yaml      (one rule as the rules file writes it, examples: included)");
  add->add_option("decision", args->decision, "deny, ask or allow")
      ->check(CLI::IsMember({"deny", "ask", "allow"}))
      ->type_name("DECISION");
  add->add_option("--file", args->file, "One rule in YAML (the rules file's format), instead of the options")
      ->type_name("FILE");
  add->add_option("--id", args->id, "Its id (default: made from what it says)")->type_name("ID");
  add->add_option("--target", args->target, "The target it covers, a name pattern: shell, cli, *")->type_name("NAME");
  add->add_option("--tool", args->tool, "The tool it covers, a name pattern: mcp__fs__*")->type_name("NAME");
  add->add_option("--command", args->command, "The exact shell command")->type_name("TEXT");
  add->add_option("--prefix", args->prefix,
                  "A shell command's leading words (a command with ; & | < > ` $ ( ) or quotes never matches)")
      ->type_name("WORDS");
  add->add_option("--glob", args->glob, "A glob on the whole shell command")->type_name("PATTERN");
  add->add_option("--path", args->paths, "With --prefix: a glob the command's further paths may match (repeatable)")
      ->type_name("GLOB");
  add->add_option("--arg", args->args, "A named argument: NAME=exact:TEXT, NAME=prefix:TEXT, NAME=glob:PATTERN")
      ->type_name("MATCH");
  add->add_option("--reason", args->reason, "Why (required for deny and ask: the user and the trace see it)")
      ->type_name("TEXT");
  add->add_option("--gate", args->gates, "allow: a gate it answers, NAME@VERSION (repeatable)")->type_name("GATE");
  add->add_option("--expires", args->expires, "It ends after this long: 30m, 12h, 7d")->type_name("DURATION");
  add->add_option("--note", args->note, "Your words, kept with the rule")->type_name("TEXT");
  add_connection_options(*add, *parsed, kReplyTimeoutS);
  add->callback([parsed, args, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [args](const Target& target, const Output& output) {
      std::string yaml;
      if (!args->file.empty()) {
        std::ifstream in(args->file);
        if (!in) return report_failure(output, "cannot read " + args->file.string(), "", kExitUsage);
        std::stringstream text;
        text << in.rdbuf();
        yaml = text.str();
      } else {
        if (args->decision.empty()) {
          return report_failure(output, "give the decision (deny, ask or allow) or --file", "", kExitUsage);
        }
        if (const std::string problem = rule_yaml(*args, yaml); !problem.empty()) {
          return report_failure(output, problem, "see `passepartout rules add --help`", kExitUsage);
        }
      }
      if (!is_valid_utf8(yaml)) return report_failure(output, "the rule is not UTF-8", "", kExitUsage);
      return simple(target, output, {"RULE-ADD", {{"YAML", Value::string(yaml)}}, rule_hints(), {}});
    });
  });

  auto* remove = rules->add_subcommand("remove", "Remove a rule (the file is rewritten before this returns).");
  remove->add_option("id", args->id, "The rule's id (rules list)")->required()->type_name("ID");
  add_connection_options(*remove, *parsed, kReplyTimeoutS);
  remove->callback([parsed, args, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [args](const Target& target, const Output& output) {
      return simple(target, output, {"RULE-REMOVE", {{"ID", Value::string(args->id)}}, rule_hints(), {}});
    });
  });

  auto* test = rules->add_subcommand(
      "test",
      "Which rule, if any, decides an action, and why: a deny blocks it before the gates, an ask asks a\n"
      "human, a standing approval answers the gates it was taught for. Nothing runs.\n"
      "  rules test 'curl https://example.com'          (a shell command)\n"
      "  rules test --tool mcp__fs__write_file --args '{\"path\":\"/srv/notes/a\"}'\n"
      "  rules test '(:TARGET :SHELL :PAYLOAD (:CMD \"ls\"))'");
  test->add_option("action", args->action, "A shell command, or an action's s-expression")->type_name("ACTION");
  test->add_option("--tool", args->tool, "A tool call instead: the tool's name")->type_name("NAME");
  test->add_option("--args", args->args_json, "The tool call's arguments, a JSON object")->type_name("JSON");
  test->add_option("--session", args->session, "The session the action would come from (session rules)")
      ->type_name("SESSION");
  add_connection_options(*test, *parsed, kReplyTimeoutS);
  test->callback([parsed, args, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [args](const Target& target, const Output& output) {
      Value action;
      if (const std::string problem = test_action(*args, action); !problem.empty()) {
        return report_failure(output, problem, "see `passepartout rules test --help`", kExitUsage);
      }
      const Value session = args->session.empty() ? Value() : Value::string(args->session);
      return run_operator_command(target, output,
                                  {"RULE-TEST", {{"ACTION", action}, {"SESSION", session}}, rule_hints(), {"ALLOW"}},
                                  [](const Value& response, std::ostream& out) {
                                    out << json_key(display_text(response.path({"PAYLOAD", "DECISION"}))) << ": "
                                        << printable(display_text(response.path({"PAYLOAD", "WHY"}))) << '\n';
                                  });
    });
  });

  auto* carry = rules->add_subcommand(
      "carry",
      "Let the standing approvals taught for another version of the gate NAME answer its loaded version\n"
      "(a swapped gate is never pre-approved on its own).");
  carry->add_option("name", args->id, "The gate's skill name")->required()->type_name("NAME");
  add_connection_options(*carry, *parsed, kReplyTimeoutS);
  carry->callback([parsed, args, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [args](const Target& target, const Output& output) {
      return simple(target, output, {"RULES-CARRY", {{"NAME", Value::string(args->id)}}, rule_hints(), {}});
    });
  });
  for (CLI::App* sub : {list, show, add, remove, test, carry}) sub->footer(kExitFooter);
}

}  // namespace passepartout::cli
