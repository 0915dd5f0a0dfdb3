// `passepartout approvals list|show|approve|deny`: the actions the gates held
// for a human's decision, in the running daemon, and deciding them.
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>
#include "cli/cli11.hpp"

#include "base/duration_text.hpp"
#include "base/utf8.hpp"
#include "cli/client_options.hpp"
#include "cli/client_output.hpp"
#include "cli/exit_status.hpp"
#include "cli/history_format.hpp"
#include "cli/operator_request.hpp"
#include "cli/terminal_text.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout::cli {

namespace {

// A function, not a constant: a static ErrorHints would build its strings before main.
ErrorHints approval_hints() { return {"see the pending approvals with `passepartout approvals list`", ""}; }

// "in 14m 03s" / "3m 02s ago" relative to now; empty when `unix_ms` is not an integer.
std::string relative_time(const Value& unix_ms) {
  if (!unix_ms.is_integer()) return {};
  const auto now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const std::int64_t delta = (unix_ms.as_integer() - now_ms) / 1000;
  return delta >= 0 ? "in " + format_uptime(delta) : format_uptime(-delta) + " ago";
}

// The JSON of an approvals answer, each action also as the s-expression it
// is (for pasting into `passepartout verify`).
void add_action_sexps(OrderedJson& approvals, const std::vector<Value>& listed) {
  for (std::size_t i = 0; i < listed.size() && i < approvals.size(); ++i) {
    if (approvals[i].is_object() && listed[i].get("ACTION") != nullptr) {
      approvals[i]["action_sexp"] = to_sexp(listed[i].at("ACTION"));
    }
  }
}

// "2024-11-26T10:00:00+01:00 (3m 02s ago)", or "" without a time.
std::string when_text(const Value& unix_ms) {
  if (!unix_ms.is_integer()) return {};
  return local_iso8601(unix_ms.as_integer()) + " (" + relative_time(unix_ms) + ")";
}

// One approval: its token, then a line per field it has.
void print_approval(std::ostream& out, const Value& approval) {
  const std::string token = display_text(approval.at("TOKEN"));
  out << "\n  " << (token.empty() ? "(no token)" : token) << '\n';
  const std::string state = json_key(display_text(approval.at("STATE")));
  if (!state.empty() && state != "pending") {
    std::string decided = state;
    if (const std::string by = display_text(approval.at("DECIDED-BY")); !by.empty()) decided += " by " + by;
    if (const std::string when = when_text(approval.at("DECIDED-UNIX-MS")); !when.empty()) decided += ", " + when;
    out << "    state:    " << decided << '\n';
  }
  if (const std::string run = json_key(display_text(approval.at("RUN"))); !run.empty()) {
    const std::string error = display_text(approval.at("RUN-ERROR"));
    out << "    run:      " << run << (error.empty() ? "" : ": " + error) << '\n';
  }
  if (const std::string session = display_text(approval.at("SESSION-ID")); !session.empty()) {
    out << "    session:  " << session << '\n';
  }
  if (const std::string node = display_text(approval.at("NODE")); !node.empty()) {
    out << "    asked on: " << node << '\n';
  }
  if (const std::string reason = display_text(approval.at("REASON")); !reason.empty()) {
    out << "    reason:   " << reason << '\n';
  }
  std::string gates;
  for (const Value& gate : entries_of(approval.at("GATES"))) gates += (gates.empty() ? "" : ", ") + display_text(gate);
  if (approval.at("GATES").is_string()) gates = display_text(approval.at("GATES"));
  if (!gates.empty()) out << "    gates:    " << gates << '\n';
  if (approval.get("ACTION") != nullptr) out << "    action:   " << printable(to_sexp(approval.at("ACTION"))) << '\n';
  if (const std::string when = when_text(approval.at("CREATED-UNIX-MS")); !when.empty()) {
    out << "    created:  " << when << '\n';
  }
  if (const std::string when = when_text(approval.at("EXPIRES-UNIX-MS")); !when.empty()) {
    out << "    expires:  " << when << '\n';
  }
}

// The text of a page of pending approvals.
void print_approvals(const Value& response, std::ostream& out) {
  const auto approvals = entries_of(response.path({"PAYLOAD", "APPROVALS"}));
  const Value& total_value = response.path({"PAYLOAD", "TOTAL"});
  const Value& offset_value = response.path({"PAYLOAD", "OFFSET"});
  // A daemon that does not page sends every pending approval.
  const std::int64_t first = offset_value.is_integer() ? offset_value.as_integer() : 0;
  const auto shown = static_cast<std::int64_t>(approvals.size());
  const std::int64_t total = total_value.is_integer() ? total_value.as_integer() : first + shown;
  if (total == 0) {
    out << "No approvals pending.\n";
    return;
  }
  if (approvals.empty()) {
    out << "no pending approvals at offset " << first << " (" << total << " pending; newest first: --offset 0)\n";
    return;
  }
  out << "showing " << first + 1 << "-" << first + shown << " of " << total << " pending (newest first)";
  if (first + shown < total) out << "; next: --offset " << first + shown;
  out << '\n';
  for (const Value& approval : approvals) print_approval(out, approval);
  out << "\nApprove with `passepartout approvals approve TOKEN`, deny with `passepartout approvals deny TOKEN`\n"
         "(every pending one of a session: `passepartout approvals deny --all-from SESSION`).\n";
}

}  // namespace

int run_approvals_list(const Target& target, const ApprovalsPage& page, const Output& output) {
  const Value limit = page.limit ? Value::integer(*page.limit) : Value();
  const Value offset = page.offset ? Value::integer(*page.offset) : Value();
  return run_operator_command(
      target, output, {"APPROVALS", {{"LIMIT", limit}, {"OFFSET", offset}}, approval_hints(), {"APPROVALS"}},
      print_approvals, [](OrderedJson& document, const Value& response) {
        add_action_sexps(document["approvals"], entries_of(response.path({"PAYLOAD", "APPROVALS"})));
      });
}

int run_approvals_show(const Target& target, const std::string& token, const Output& output) {
  if (!is_valid_utf8(token)) return report_failure(output, "the token is not UTF-8", "", kExitUsage);
  return run_operator_command(
      target, output, {"APPROVAL", {{"TOKEN", Value::string(token)}}, approval_hints(), {}},
      [&](const Value& response, std::ostream& out) {
        const Value& approval = response.path({"PAYLOAD", "APPROVAL"});
        const std::string state = json_key(display_text(approval.at("STATE")));
        out << "Approval " << printable(token) << ": " << (state.empty() ? "unknown state" : state) << '\n';
        print_approval(out, approval);
      },
      [](OrderedJson& document, const Value& response) {
        const Value& approval = response.path({"PAYLOAD", "APPROVAL"});
        if (document.contains("approval") && document["approval"].is_object() && approval.get("ACTION") != nullptr) {
          document["approval"]["action_sexp"] = to_sexp(approval.at("ACTION"));
        }
      });
}

int run_approvals_deny_session(const Target& target, const std::string& session, const Output& output) {
  if (session.empty() || !is_valid_utf8(session)) {
    return report_failure(output, "--all-from needs a session id (UTF-8 text)",
                          "the SESSION column of `passepartout approvals list` shows them", kExitUsage);
  }
  return run_operator_command(target, output, {"DENY", {{"SESSION", Value::string(session)}}, approval_hints(), {}},
                              [&](const Value& response, std::ostream& out) {
                                const Value& denied = response.path({"PAYLOAD", "DENIED"});
                                const std::string fallback =
                                    denied.is_integer() && denied.as_integer() > 0
                                        ? "denied " + std::to_string(denied.as_integer()) +
                                              " pending approvals of session '" + printable(session) + "'"
                                        : "no pending approvals of session '" + printable(session) + "'";
                                out << response_message(response, fallback) << '\n';
                              });
}

int run_approvals_decide(const Target& target, const std::string& token, bool approve, const Output& output,
                         const RememberOptions& remember) {
  if (!is_valid_utf8(token)) return report_failure(output, "the token is not UTF-8", "", kExitUsage);
  OperatorRequest request{approve ? "APPROVE" : "DENY", {{"TOKEN", Value::string(token)}}, approval_hints(), {}};
  if (remember.remember) {
    if (!approve)
      return report_failure(output, "--remember teaches a standing approval; deny has none", "", kExitUsage);
    Value expires;
    if (!remember.expires.empty()) {
      auto span = parse_span(remember.expires);
      if (!span) return report_failure(output, "--expires: " + span.error().message, "", kExitUsage);
      expires = Value::integer(std::chrono::duration_cast<std::chrono::seconds>(*span).count());
    }
    request.arguments.emplace_back("REMEMBER", Value::t());
    request.arguments.emplace_back("MATCH", Value::string(remember.match));
    request.arguments.emplace_back("SCOPE", Value::string(remember.scope));
    request.arguments.emplace_back("EXPIRES-S", expires);
  }
  return run_operator_command(
      target, output, request,
      [&](const Value& response, std::ostream& out) {
        out << response_message(response, (approve ? "Approved " : "Denied ") + printable(token) + ".") << '\n';
        if (const Value& rule = response.path({"PAYLOAD", "RULE"}); rule.is_list()) {
          out << "Standing approval " << printable(display_text(rule.at("ID"))) << ": "
              << printable(display_text(rule.at("SUMMARY"))) << " (remove it with `passepartout rules remove "
              << printable(display_text(rule.at("ID"))) << "`)\n";
        }
        if (!approve) return;
        const Value& result = response.path({"PAYLOAD", "RESULT"});
        if (result.is_nil()) return;
        const Value& text = result.is_string() ? result : result.path({"PAYLOAD", "TEXT"});
        out << "Result: " << (text.is_string() ? printable(text.text(), true) : printable(to_sexp(result))) << '\n';
      },
      [&](OrderedJson& document, const Value&) {
        document["token"] = token;
        document["decision"] = approve ? "approved" : "denied";
      });
}

void add_approvals_commands(CLI::App& app, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen) {
  // approvals list|show|approve|deny
  auto* approvals = app.add_subcommand(
      "approvals", "Actions the gates held for a human's decision, in the running daemon: list, show, approve, deny.");
  approvals->require_subcommand(1);
  auto* pending = approvals->add_subcommand(
      "list",
      "List the pending approvals a page at a time, newest first: token, session, reason, the gates that\n"
      "asked, the action, when it expires; and how many are pending in all.");
  pending->add_option("--limit", parsed->limit, "Approvals per page (default 100)")
      ->type_name("N")
      ->check(CLI::Range(1, 1000));
  pending->add_option("--offset", parsed->offset, "Skip this many of the newest first (default 0)")
      ->type_name("N")
      ->check(CLI::NonNegativeNumber);
  add_connection_options(*pending, *parsed, kReplyTimeoutS);
  pending->footer(kExitFooter);
  pending->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      ApprovalsPage page;
      if (parsed->limit > 0) page.limit = parsed->limit;
      if (parsed->offset >= 0) page.offset = parsed->offset;
      return run_approvals_list(target, page, output);
    });
  });
  auto* show = approvals->add_subcommand(
      "show",
      "Show one approval in whatever state: pending, or approved or denied (by whom, when), or expired;\n"
      "and for an approved one what came of its run: running, done, failed (why), or interrupted (the\n"
      "daemon stopped while it ran).");
  show->add_option("token", parsed->token, "The approval's token")->required()->type_name("TOKEN");
  add_connection_options(*show, *parsed, kReplyTimeoutS);
  show->footer(kExitFooter);
  show->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      return run_approvals_show(target, parsed->token, output);
    });
  });
  for (const bool approve : {true, false}) {
    auto* decide = approvals->add_subcommand(
        approve ? "approve" : "deny",
        approve ? "Approve a pending action: it runs (exactly once) and its result is printed."
                : "Deny a pending action: it is dropped and never runs. With --all-from SESSION, deny every\n"
                  "pending action of that session at once (a flood of requests) and print how many.");
    auto* token =
        decide->add_option("token", parsed->token, "The approval's token (from `passepartout approvals list` or chat)")
            ->type_name("TOKEN");
    if (approve) {
      token->required();
      decide->add_flag("--remember", parsed->remember.remember,
                       "Approve always, not once: teach a standing approval (docs/rules.md) that approves\n"
                       "this action when the same gates ask about it again; it still passes every gate");
      decide
          ->add_option("--match", parsed->remember.match,
                       "exact (default): the same command or arguments; prefix: a shell command's leading\n"
                       "words up to its first path or option value, the same paths (never wider than shown)")
          ->check(CLI::IsMember({"exact", "prefix"}))
          ->type_name("exact|prefix");
      decide
          ->add_option("--scope", parsed->remember.scope,
                       "always (default: kept in the rules file) or session (ends with the action's session)")
          ->check(CLI::IsMember({"always", "session"}))
          ->type_name("always|session");
      decide->add_option("--expires", parsed->remember.expires, "The rule ends after this long: 30m, 12h, 7d")
          ->type_name("DURATION");
    } else {
      decide->add_option("--all-from", parsed->all_from, "Deny every pending approval of this session instead")
          ->type_name("SESSION")
          ->excludes(token);
    }
    add_connection_options(*decide, *parsed, kReplyTimeoutS);
    decide->footer(kExitFooter);
    decide->callback([parsed, approve, &chosen] {
      choose(chosen, parsed, kReplyTimeoutS, [parsed, approve](const Target& target, const Output& output) {
        if (!approve && !parsed->all_from.empty()) return run_approvals_deny_session(target, parsed->all_from, output);
        if (parsed->token.empty()) {
          return report_failure(output, "deny needs a TOKEN or --all-from SESSION",
                                "see the pending approvals with `passepartout approvals list`", kExitUsage);
        }
        if (!parsed->remember.remember && (parsed->remember.match != "exact" || parsed->remember.scope != "always" ||
                                           !parsed->remember.expires.empty())) {
          return report_failure(output, "--match, --scope and --expires describe a standing approval: add --remember",
                                "", kExitUsage);
        }
        return run_approvals_decide(target, parsed->token, approve, output, parsed->remember);
      });
    });
  }
}

}  // namespace passepartout::cli
