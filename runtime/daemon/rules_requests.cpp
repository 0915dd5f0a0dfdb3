#include "daemon/rules_requests.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "base/digest.hpp"
#include "base/duration_text.hpp"
#include "base/log.hpp"
#include "daemon/operator_args.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/rule_book.hpp"
#include "skills/skill_host.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {

using namespace operator_args;

namespace {

constexpr std::string_view kComponent = "rules";
constexpr std::string_view kHostRules = "rules@host";

// A rule as :RULES lists it: its fields, its hits, whether it has expired.
Value entry_value(const RuleBook& book, const RuleBook::Entry& entry) {
  return rule_value(entry.rule)
      .with("HITS", num(static_cast<std::int64_t>(entry.hits.load(std::memory_order_relaxed))))
      .with("EXPIRED", Value::boolean(book.expired(entry.rule)));
}

void audit(const OperatorHandler::Services& services, std::string action, const Rule& rule,
           const std::string& requester, std::string details = {}) {
  SkillChange change;
  change.requester = requester;
  change.action = std::move(action);
  change.skill = rule.id;
  change.outcome = "ok";
  change.details = details.empty() ? rule_summary(rule) : std::move(details);
  services.skills.record_external(std::move(change));
}

Value refused(std::string_view message) { return make_error_response(wire_error::kRefused, message); }

// :APPROVE :TOKEN t :REMEMBER T [:MATCH "exact"|"prefix"] [:SCOPE "always"|"session"] [:EXPIRES-S n]:
// the rule is made from the pending approval and checked first (nothing is
// approved when it cannot be taught), then the approval runs, then the rule
// is added once the approval was decided.
void approve_and_remember(const Value& request, const std::string& requester, const OperatorHandler::Services& services,
                          const OperatorHandler::Answer& answer) {
  Value error;
  const Value* token = string_argument(request, "TOKEN", error);
  if (token == nullptr) return answer(error);
  RuleBook* book = services.rules;
  ApprovalStore* store = services.approvals;
  if (book == nullptr || store == nullptr) return answer(refused("rules are not enabled on this daemon"));
  const Value& match = request.at("MATCH");
  const Value& scope = request.at("SCOPE");
  if (!match.is_nil() && !(match.is_string() && (match.text() == "exact" || match.text() == "prefix"))) {
    return answer(bad_request(R"(:MATCH is "exact" or "prefix")"));
  }
  if (!scope.is_nil() && !(scope.is_string() && (scope.text() == "always" || scope.text() == "session"))) {
    return answer(bad_request(R"(:SCOPE is "always" or "session")"));
  }
  std::int64_t expires_s = 0;
  if (!count_argument(request, "EXPIRES-S", 1, std::int64_t{3653} * 24 * 3600, expires_s, error)) return answer(error);

  auto found = store->find(token->text());
  if (!found) return answer(error_response(found.error()));
  if (found->state != Approval::State::pending) {
    return answer(refused("approval " + found->token + " is " + to_string(found->state) +
                          ", not pending: nothing to approve or remember"));
  }
  if (std::find(found->gates.begin(), found->gates.end(), kHostRules) != found->gates.end()) {
    return answer(
        refused("an operator's ask rule asked for this approval, and a standing approval never answers one (ask beats "
                "allow): approve it once, or change that rule (passepartout rules list)"));
  }
  auto taught = taught_rule(found->action, match.is_string() && match.text() == "prefix");
  if (!taught) return answer(bad_request(taught.error().message + "; nothing was approved"));
  Rule rule = std::move(*taught);
  const std::string token_digest = sha256_hex(found->token);
  rule.id = "taught-" + token_digest.substr(0, 8);
  rule.approval = token_digest.substr(0, 16);
  rule.gates = found->gates;
  rule.reason = found->reason.empty() ? "approved always" : "approved always: " + found->reason;
  rule.taught_by = requester;
  rule.taught_unix_ms = book->now_ms();
  if (expires_s > 0) rule.expires_unix_ms = rule.taught_unix_ms + expires_s * 1000;
  if (scope.is_string() && scope.text() == "session") {
    rule.scope = Rule::Scope::session;
    rule.session = found->session_id;
    if (!services.session_open || !services.session_open(rule.session)) {
      return answer(refused("session " + rule.session +
                            " has ended (no open connection carries it), so a rule of its own would never end; "
                            "remember it with --scope always, or approve once; nothing was approved"));
    }
  }
  services.pipeline.approve(
      std::string(token->text()), requester,
      [answer, book, store, rule = std::move(rule), requester, &services,
       approved_token = std::string(token->text())](Result<Value> result) mutable {
        // Taught once the approval was decided, whatever the run then did;
        // an approval that was refused (and stays pending) teaches nothing.
        auto decided = store->find(approved_token);
        if (!decided || decided->state != Approval::State::approved) {
          answer(result ? refused("the approval was not decided; nothing was remembered")
                        : make_error_response(code_for(result.error().code),
                                              result.error().message + "; nothing was remembered"));
          return;
        }
        Value rule_info;
        std::string note;
        auto added = book->add(rule, requester);
        if (added) {
          audit(services, "rule-add", *added, requester, "taught by approving: " + rule_summary(*added));
          log_message(LogLevel::info, kComponent, "rule {} taught by {}: {}", added->id, requester,
                      rule_summary(*added));
          rule_info = rule_value(*added);
          note = "; remembered as rule " + added->id;
        } else {
          log_message(LogLevel::error, kComponent, "rule not taught: {}", added.error().message);
          note = "; not remembered: " + added.error().message;
        }
        if (!result) {
          Value response = make_error_response(code_for(result.error().code), result.error().message + note);
          if (!rule_info.is_nil()) response = response.with("PAYLOAD", response.at("PAYLOAD").with("RULE", rule_info));
          answer(response);
          return;
        }
        Value payload = Value::plist({{"RESULT", *result}});
        payload = rule_info.is_nil() ? payload.with("RULE-ERROR", str(note)) : payload.with("RULE", rule_info);
        answer(make_ok_response("approved" + note, payload));
      });
}

}  // namespace

bool handle_rules_request(std::string_view name, const Value& request, const std::string& requester,
                          const OperatorHandler::Services& services, const OperatorHandler::Answer& answer) {
  const bool known = name == "RULES" || name == "RULE" || name == "RULE-ADD" || name == "RULE-REMOVE" ||
                     name == "RULE-TEST" || name == "RULES-CARRY" ||
                     (name == "APPROVE" && static_cast<bool>(request.at("REMEMBER")));
  if (!known) return false;
  if (name == "APPROVE") {
    approve_and_remember(request, requester, services, answer);
    return true;
  }
  RuleBook* book = services.rules;
  if (book == nullptr) {
    answer(refused("rules are not enabled on this daemon"));
    return true;
  }
  Value error;
  if (name == "RULES") {
    std::vector<Value> items;
    for (const auto& entry : book->rules()) items.push_back(entry_value(*book, *entry));
    const RuleBook::Counts counts = book->counts();
    answer(make_ok_response(std::to_string(items.size()) + " rules (" + std::to_string(counts.deny) + " deny, " +
                                std::to_string(counts.ask) + " ask, " + std::to_string(counts.allow) +
                                " standing approvals)",
                            Value::plist({{"RULES", Value::list(items)}, {"FILE", str(book->file().string())}})));
    return true;
  }
  if (name == "RULE") {
    const Value* id = string_argument(request, "ID", error);
    if (id == nullptr) return answer(error), true;
    const auto entry = book->find(id->text());
    if (entry == nullptr) {
      answer(make_error_response(wire_error::kNotFound, "no rule has the id " + std::string(id->text())));
      return true;
    }
    answer(make_ok_response(rule_summary(entry->rule), Value::plist({{"RULE", entry_value(*book, *entry)},
                                                                     {"TEXT", str(rule_text(entry->rule))}})));
    return true;
  }
  if (name == "RULE-ADD") {
    const Value* text = string_argument(request, "YAML", error);
    if (text == nullptr) return answer(error), true;
    auto rule = parse_rule(text->text(), "the rule");
    if (!rule) return answer(bad_request(rule.error().message + "; nothing changed")), true;
    if (rule->taught_by.empty()) rule->taught_by = requester;
    auto added = book->add(std::move(*rule), requester);
    if (!added) return answer(error_response(added.error())), true;
    audit(services, "rule-add", *added, requester);
    log_message(LogLevel::info, kComponent, "rule {} added by {}: {}", added->id, requester, rule_summary(*added));
    answer(make_ok_response("added rule " + added->id, Value::plist({{"RULE", rule_value(*added)}})));
    return true;
  }
  if (name == "RULE-REMOVE") {
    const Value* id = string_argument(request, "ID", error);
    if (id == nullptr) return answer(error), true;
    auto removed = book->remove(id->text());
    if (!removed) return answer(error_response(removed.error())), true;
    audit(services, "rule-remove", *removed, requester);
    log_message(LogLevel::info, kComponent, "rule {} removed by {}: {}", removed->id, requester,
                rule_summary(*removed));
    answer(make_ok_response("removed rule " + removed->id, Value::plist({{"RULE", rule_value(*removed)}})));
    return true;
  }
  if (name == "RULE-TEST") {
    const Value& action = request.at("ACTION");
    if (!action.is_list()) return answer(bad_request(":ACTION (:TARGET ... :PAYLOAD ...) is required")), true;
    const Value& session = request.at("SESSION");
    const RuleBook::Verdict verdict = book->test(action, session.is_string() ? session.text() : "");
    const RuleSubject subject = rule_subject(action);
    std::string decision = "none";
    std::string why =
        "no rule covers " + (subject.name.empty() ? std::string("it") : subject.name) + ": the gates alone decide";
    Value deciding;
    if (verdict.deny) {
      decision = "deny";
      deciding = entry_value(*book, *verdict.deny);
      why = "rule " + verdict.deny->rule.id + " (" + rule_summary(verdict.deny->rule) +
            ") blocks it before any gate runs: " + verdict.deny->rule.reason;
    } else if (verdict.ask) {
      decision = "ask";
      deciding = entry_value(*book, *verdict.ask);
      why = "rule " + verdict.ask->rule.id + " (" + rule_summary(verdict.ask->rule) +
            ") asks a human for it, whatever the gates say (no standing approval answers it): " +
            verdict.ask->rule.reason;
    } else if (!verdict.allow.empty()) {
      decision = "allow";
      deciding = entry_value(*book, *verdict.allow.front());
      std::string gates;
      for (const std::string& gate : verdict.allow.front()->rule.gates) gates += (gates.empty() ? "" : ", ") + gate;
      why = "standing approval " + verdict.allow.front()->rule.id + " (" + rule_summary(verdict.allow.front()->rule) +
            ") approves it when " + gates + " asks; the gates still run, and a block or a failure still stops it";
    }
    std::vector<Value> allow;
    for (const auto& entry : verdict.allow) allow.push_back(entry_value(*book, *entry));
    answer(make_ok_response(why, Value::plist({{"DECISION", str(decision)},
                                               {"RULE", deciding},
                                               {"WHY", str(why)},
                                               {"SUBJECT", str(subject.name)},
                                               {"ALLOW", Value::list(allow)}})));
    return true;
  }
  // RULES-CARRY
  const Value* gate = string_argument(request, "NAME", error);
  if (gate == nullptr) return answer(error), true;
  const std::string gate_name(gate->text());
  const Slot* slot = services.skills.snapshot()->find(gate_name);
  if (slot == nullptr) {
    answer(make_error_response(wire_error::kNotFound,
                               "no skill named '" + gate_name + "' is loaded: its rules carry to a loaded version"));
    return true;
  }
  auto carried = book->carry(gate_name, slot->version_text());
  if (!carried) return answer(error_response(carried.error())), true;
  Rule marker;
  marker.id = gate_name;
  audit(services, "rule-carry", marker, requester,
        std::to_string(*carried) + " standing approval(s) now answer " + gate_name + "@" + slot->version_text());
  log_message(LogLevel::info, kComponent, "{} standing approval(s) carried to {}@{} by {}", *carried, gate_name,
              slot->version_text(), requester);
  answer(make_ok_response(
      std::to_string(*carried) + " standing approval(s) now answer " + gate_name + "@" + slot->version_text(),
      Value::plist({{"CARRIED", num(static_cast<std::int64_t>(*carried))}, {"VERSION", str(slot->version_text())}})));
  return true;
}

}  // namespace passepartout
