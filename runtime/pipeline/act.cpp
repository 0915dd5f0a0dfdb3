// Act (seed E1–E7): an approved action is checked by the last-mile gates,
// aimed at its actuator and dispatched; built-ins run on the executor,
// skills' actuators and tools on the blocking executor; what they answer is
// fed back as the next signal.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/ascii.hpp"
#include "base/log_fields.hpp"
#include "pipeline/action_record.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/gate_log.hpp"
#include "pipeline/run.hpp"
#include "pipeline/signal.hpp"

namespace passepartout {

using namespace key_literals;

std::string Run::deciding_gate(const Verification& verification) {
  for (std::size_t i = verification.trace.size(); i-- > 0;) {
    const GateTraceView entry = verification.trace[i];
    if (entry.result == GateResult::blocked || entry.result == GateResult::failed) return std::string(entry.name());
  }
  return {};
}

std::vector<std::string> Run::approving_gates(const Verification& verification) {
  std::vector<std::string> gates;
  for (std::size_t i = 0; i < verification.trace.size(); ++i) {
    const GateTraceView entry = verification.trace[i];
    if (entry.result == GateResult::approval) {
      gates.push_back(std::string(entry.name()) + "@" + std::string(entry.version()));
    }
  }
  return gates;
}

std::shared_ptr<const RuleBook::Entry> Run::standing_approval(const Value& action,
                                                              std::span<const std::string> asked) const {
  if (services().rules == nullptr || services().approvals == nullptr) return nullptr;
  return services().rules->standing(action, asked, approval_session(signal.at("META"_key)));
}

void Run::grant(const Value& approval_event, std::vector<std::string> gates, const Rule& rule) {
  const Value& action = approval_event.path("PAYLOAD"_key, "ACTION"_key);
  const Value& reason = approval_event.path("PAYLOAD"_key, "REASON"_key);
  auto approval = services().approvals->create(action, signal.at("META"_key), std::move(gates),
                                               reason.is_string() ? std::string(reason.text()) : std::string());
  if (!approval) {
    log_message(LogLevel::warn, kPipelineComponent, "ACT: {}", approval.error().message);
    deliver(Value::plist(
        {{"TYPE", Value::keyword("LOG"_key)},
         {"PAYLOAD", Value::plist({{"LEVEL", Value::keyword("ERROR"_key)},
                                   {"TEXT", Value::string("Action not run: " + approval.error().message)}})}}));
    signal = std::move(signal).with("STATUS"_key, Value::keyword("ACTED"_key));
    finish("done");
    return;
  }
  held_decision.submit(approval->token, rule.id);
  log_fields(LogLevel::info, kPipelineComponent, {{"rule", rule.id}, {"session", session_id_of(signal)}},
             "ACT: standing approval {} grants the approval of the action ({})", rule.id, rule_summary(rule));
  deliver(Value::plist(
      {{"TYPE", Value::keyword("LOG"_key)},
       {"GATE-TRACE", approval_event.at("GATE-TRACE"_key)},
       {"PAYLOAD", Value::plist({{"LEVEL", Value::keyword("INFO"_key)},
                                 {"TEXT", Value::string("Approved by standing rule " + rule.id + " (" +
                                                        rule_summary(rule) + ", taught by " + rule.taught_by +
                                                        "): it runs once, after the gates check it again.")},
                                 {"RULE", Value::string(rule.id)},
                                 {"TOKEN", Value::string(approval->token)}})}}));
  run_approval(pipeline, approval->token, "rule " + rule.id, rule.id,
               [self = shared_from_this(), action, id = rule.id](Result<Value> result) mutable {
                 self->post(self, [self, action, id = std::move(id), result = std::move(result)]() {
                   self->granted_run_finished(action, id, result);
                 });
               });
}

void Run::granted_run_finished(const Value& action, const std::string& rule_id, const Result<Value>& result) {
  const std::int64_t depth = depth_of(signal) + 1;
  const std::string target = target_name(action.at("TARGET"_key));
  const bool tool = target == "TOOL";
  const std::string name = tool ? tool_name_of(action) : ascii_lower(target);
  if (!result) {
    log_fields(LogLevel::warn, kPipelineComponent, {{"rule", rule_id}, {"session", session_id_of(signal)}},
               "ACT: the action standing approval {} granted did not run: {}", rule_id, result.error().message);
    deliver(Value::plist(
        {{"TYPE", Value::keyword("LOG"_key)},
         {"PAYLOAD", Value::plist({{"LEVEL", Value::keyword("ERROR"_key)},
                                   {"TEXT", Value::string("Approved by standing rule " + rule_id +
                                                          ", but it did not run: " + result.error().message)}})}}));
    acted(feedback_event(depth, signal.at("META"_key),
                         Value::plist({{"SENSOR", Value::keyword("TOOL-ERROR"_key)},
                                       {"TOOL", Value::string(name)},
                                       {"MESSAGE", Value::string(result.error().message)}})));
    return;
  }
  show_acted(Value::plist({{"ACTION", Value::keyword("MESSAGE"_key)},
                           {"TEXT", Value::string(tool_result_format(name, *result))},
                           {"RULE", Value::string(rule_id)}}));
  if (!tool) {
    acted(make_feedback(action, *result));
    return;
  }
  acted(feedback_event(
      depth, signal.at("META"_key),
      Value::plist(
          {{"SENSOR", Value::keyword("TOOL-OUTPUT"_key)}, {"RESULT", *result}, {"TOOL", Value::string(name)}})));
}

void Run::suspend(const Value& approval_event, std::vector<std::string> gates) {
  const Value& action = approval_event.path("PAYLOAD"_key, "ACTION"_key);
  const Value& reason = approval_event.path("PAYLOAD"_key, "REASON"_key);
  ApprovalStore* store = services().approvals;
  // The action does not run and the signal is not suspended; the source is told why.
  auto refuse = [this](std::string_view text) {
    deliver(Value::plist(
        {{"TYPE", Value::keyword("LOG"_key)},
         {"PAYLOAD", Value::plist({{"LEVEL", Value::keyword("ERROR"_key)}, {"TEXT", Value::string(text)}})}}));
    signal = std::move(signal).with("STATUS"_key, Value::keyword("ACTED"_key));
    finish("done");
  };
  if (store == nullptr) {
    log_message(LogLevel::warn, kPipelineComponent,
                "ACT: an action needs approval but no approval store is configured; blocked");
    refuse("Action blocked: it needs a human's approval and approvals are not enabled.");
    return;
  }
  if (reply != nullptr && !reply->may_request_approval()) {
    log_message(LogLevel::warn, kPipelineComponent,
                "ACT: an action needs approval but its client is not authenticated; blocked (no approval created)");
    deliver(Value::plist(
        {{"TYPE", Value::keyword("LOG"_key)},
         {"GATE-TRACE", approval_event.at("GATE-TRACE"_key)},
         {"PAYLOAD", Value::plist({{"LEVEL", Value::keyword("ERROR"_key)},
                                   {"TEXT", Value::string("Action blocked: it needs a human's approval, and only "
                                                          "an authenticated client may ask for one (send the "
                                                          "daemon's token, as `passepartout chat` does).")}})}}));
    signal = std::move(signal).with("STATUS"_key, Value::keyword("ACTED"_key));
    finish("done");
    return;
  }
  // A standing approval answers it: granted, run, and its outcome fed back.
  if (granting_rule == nullptr) granting_rule = standing_approval(action, gates);
  if (granting_rule != nullptr) {
    const std::shared_ptr<const RuleBook::Entry> rule = std::move(granting_rule);
    grant(approval_event, std::move(gates), rule->rule);
    return;
  }
  // The model's call it answers, when it called natively: the decision and
  // the run's output become that call's result in the session's transcript.
  Value meta = signal.at("META"_key);
  if (!approval_call_id.empty() && meta.is_list()) meta = meta.with("CALL-ID"_key, Value::string(approval_call_id));
  auto approval =
      store->create(action, meta, std::move(gates), reason.is_string() ? std::string(reason.text()) : std::string());
  if (!approval && approval.error().code == ErrorCode::limit_exceeded) {  // too many pending: a flood, or a backlog
    log_message(LogLevel::warn, kPipelineComponent, "ACT: {}", approval.error().message);
    refuse("Action not run: " + approval.error().message);
    return;
  }
  if (!approval) throw PipelineError("cannot record the approval: " + approval.error().message);
  held_decision.submit(approval->token);
  log_message(LogLevel::info, kPipelineComponent, "ACT: Action requires approval — creating Flight Plan + HITL ({})",
              approval->token);
  const std::string text = "Approval required" + (approval->reason.empty() ? std::string() : ": " + approval->reason) +
                           ". Approve with `passepartout approvals approve " + approval->token +
                           "` or deny with `passepartout approvals deny " + approval->token + "`.";
  deliver(Value::plist({{"TYPE", Value::keyword("EVENT"_key)},
                        {"LEVEL", Value::keyword("APPROVAL-REQUIRED"_key)},
                        {"GATE-TRACE", approval_event.at("GATE-TRACE"_key)},
                        {"PAYLOAD", Value::plist({{"SENSOR", Value::keyword("APPROVAL-REQUIRED"_key)},
                                                  {"TEXT", Value::string(text)},
                                                  {"TOKEN", Value::string(approval->token)},
                                                  {"ACTION", action}})}}));
  signal = std::move(signal).with("STATUS"_key, Value::keyword("SUSPENDED"_key));  // K8: stays suspended
  finish("done");
}

void Run::show_acted(Value payload) {
  if (!reply_open()) return;
  const Value& source = signal.path("META"_key, "SOURCE"_key);
  deliver(Value::plist({{"TYPE", Value::keyword("REQUEST"_key)},
                        {"TARGET", source.is_keyword() ? source : Value::keyword("TUI"_key)},
                        {"PAYLOAD", std::move(payload)}}));
}

void Run::act(const Value& approved, const Value* untraced) {
  if (!approved.is_nil()) signal = std::move(signal).with("APPROVED-ACTION"_key, approved);
  // Step 1: an approval request suspends the signal.
  if (approved.at("LEVEL"_key).is_keyword("APPROVAL-REQUIRED"_key)) {
    suspend(approved, std::move(approval_gates));
    return;
  }
  // Step 3's choice of what to dispatch, and where to (E2).
  Value action;
  Value bare;  // `action` without :GATE-TRACE, for the last-mile gates
  bool to_source = false;
  if (type_is(signal, "REQUEST"_key) || type_is(signal, "LOG"_key)) {
    action = signal;
  } else if (!approved.is_nil()) {
    action = approved;
    if (untraced != nullptr) bare = *untraced;
  } else if (type_is(signal, "EVENT"_key) && sensor_of(signal).is_keyword("HEARTBEAT"_key)) {
    acted(Value());  // E2: heartbeats never actuate
    return;
  } else {
    action = signal;  // an event without an approved action goes to its source
    to_source = true;
  }
  std::string target = target_of(action, to_source);
  if (approved.is_nil()) target_implied = false;  // else as reasoning found it
  if (needs_aiming(action, target)) {
    action = aimed(std::move(action), target, to_source);  // the gates see where it goes
    bare = Value();
  }
  // Step 2: last-mile verification of anything that is not itself a log or
  // event, and of anything bound for an actuator that acts (a tool, or a
  // skill's actuator), whatever its type: the gates see everything that
  // touches the world, and only the reply channel and the :SYSTEM log take
  // what they have not seen. A block here really stops the action
  // (Decisions 3, K0).
  if (!is_log_or_event(action) || acts(target)) {
    Verification last_mile;
    if (bare.is_nil()) bare = action.without("GATE-TRACE");
    verify_and_record(DecisionStage::last_mile, snapshot, bare, signal, last_mile, decision_context(), timed_out_gates);
    if (last_mile.outcome == VerifyOutcome::blocked) {
      log_message(LogLevel::warn, kPipelineComponent, "ACT BLOCKED: Action failed last-mile deterministic check.");
      signal = signal.without("APPROVED-ACTION");
      // The rejection goes back to the source, unless the source is itself
      // an actuator that acts: the gates would stop the rejection there
      // too, and again, until the depth limit.
      if (acts(target_of(Value(), true))) {
        acted(Value());
        return;
      }
      const Value rejection = last_mile.to_value();
      acted(feedback_event(depth_of(signal) + 1, signal.at("META"_key), rejection.at("PAYLOAD"_key))
                .with("TYPE"_key, Value::keyword("LOG"_key)));
      return;
    }
    if (last_mile.outcome == VerifyOutcome::approval_required) {
      suspend(last_mile.to_value(), approving_gates(last_mile));
      return;
    }
    action = last_mile.to_value();
  }
  dispatch(std::move(action), target);  // unshared, it takes its :META in place
}

std::string Run::target_of(const Value& action, bool to_source) const {
  std::string target = to_source ? std::string() : target_name(action.at("TARGET"_key));
  if (target.empty()) target = target_name(signal.path("META"_key, "SOURCE"_key));
  if (target.empty()) target = ascii_upper(options().default_actuator);
  if (is_named(target, "SYSTEM") && reply_open()) target = "TUI";
  return target;
}

Value Run::aimed(Value action, std::string_view target, bool to_source) {
  if (!needs_aiming(action, target)) return action;
  if (to_source || action.get("TARGET"_key) == nullptr) target_implied = true;
  return std::move(action).with("TARGET"_key, Value::keyword(target));
}

bool Run::needs_aiming(const Value& action, std::string_view target) {
  if (!action.is_list() || !acts(target)) return false;
  const Value& named = action.at("TARGET"_key);
  return !(named.is_keyword() && named.text() == target);
}

void Run::dispatch(Value action, const std::string& target) {
  if (action.get("META"_key) == nullptr && signal.get("META"_key) != nullptr) {
    action = std::move(action).with("META"_key, signal.at("META"_key));
  }

  const Actuator actuator = find_actuator(*snapshot, target, action);
  switch (actuator.kind) {
    case Actuator::Kind::reply: {
      Value sent = std::move(action);
      if (sent.at("PAYLOAD"_key).is_list() || sent.at("PAYLOAD"_key).is_nil()) {
        const std::size_t rules = services().approvals != nullptr ? services().approvals->pending_count() : 0;
        Value payload = sent.at("PAYLOAD"_key).with("RULE-COUNT"_key, Value::integer(static_cast<std::int64_t>(rules)));
        sent = std::move(sent).with("PAYLOAD"_key, std::move(payload));
      }
      if (!model_failure.is_nil()) sent = std::move(sent).with("MODEL-FAILURE"_key, model_failure);
      deliver(sent);
      acted(Value());
      return;
    }
    case Actuator::Kind::system:
      system_actuator(action);
      acted(Value());
      return;
    case Actuator::Kind::tool:
      tool_actuator(actuator, action);
      return;
    case Actuator::Kind::none:
      log_message(LogLevel::error, kPipelineComponent, "ACT ERROR: No actuator registered for '{}'",
                  ascii_lower(target));
      acted(Value());
      return;
    case Actuator::Kind::skill:
      break;
  }
  if (actuator.actuator->unguarded != nullptr) {  // the gates ran on this snapshot and failed it: never reached
    log_message(LogLevel::error, kPipelineComponent, "ACT ERROR: {}; the action did not run",
                *actuator.actuator->unguarded);
    acted(Value());
    return;
  }
  // The snapshot travels with the task: the skill cannot be unloaded under it.
  services().blocking.post([self = shared_from_this(), snapshot = snapshot, actuator = actuator.actuator, action,
                            target] {
    const LogScope scope(&self->session->logs);  // the session waits for this step alone
    const ActionRecord record(target, action);
    Result<Value> result = actuator->act(action, self->signal);
    Value shown = record.finish(result);
    self->post(self, [self, result = std::move(result), shown = std::move(shown), action, target, actuator]() mutable {
      self->show_acted(std::move(shown));
      if (!result) {
        log_fields(LogLevel::error, kPipelineComponent,
                   {{"actuator", target},
                    {"skill", actuator->slot->name()},
                    {"version", actuator->slot->version_text()},
                    {"session", session_id_of(self->signal)}},
                   "ACT ERROR [{}]: {}", target, result.error().message);
        self->acted(self->make_feedback(action, Value::string("ERROR: " + result.error().message)));
        return;
      }
      self->acted(self->make_feedback(action, *result));
    });
  });
}

Value Run::make_feedback(const Value& action, const Value& result) {
  // An event or log the actuator made is the feedback, one level deeper
  // whatever depth it claims (F2): the depth limit bounds every loop.
  if (result.is_list() && is_log_or_event(result))
    return result.with("DEPTH"_key, Value::integer(depth_of(signal) + 1));
  if (result.is_nil()) return {};
  // E4: an action that named no target of its own is never silent (the
  // :TARGET it carries was written in for the gates).
  const std::string own_target = target_implied ? std::string() : target_name(action.at("TARGET"_key));
  for (const std::string& silent : options().silent_actuators) {
    if (!own_target.empty() && ascii_upper(silent) == own_target) return {};
  }
  return feedback_event(
      depth_of(signal) + 1, signal.at("META"_key),
      Value::plist(
          {{"SENSOR", Value::keyword("TOOL-OUTPUT"_key)}, {"RESULT", result}, {"TOOL", action.without("GATE-TRACE")}}));
}

void Run::tool_actuator(const Actuator& found, const Value& action) {
  const std::string& name = found.tool_name;
  const std::int64_t depth = depth_of(signal) + 1;
  const Snapshot::ToolEntry* tool = found.tool;
  if (tool == nullptr) {
    if (services().external_tools != nullptr) {
      std::shared_ptr<const ToolCatalog> catalog = services().external_tools->catalog();
      if (const ExternalTool* external = catalog->find(name)) {
        external_tool(std::move(catalog), *external, action);
        return;
      }
      if (const std::string_view why = catalog->unavailable(name); !why.empty()) {
        acted(feedback_event(depth, signal.at("META"_key),
                             Value::plist({{"SENSOR", Value::keyword("TOOL-ERROR"_key)},
                                           {"TOOL", Value::string(name)},
                                           {"MESSAGE", Value::string(std::string(why) + "; the call did not run")}})));
        return;
      }
    }
    acted(feedback_event(depth, signal.at("META"_key),
                         Value::plist({{"SENSOR", Value::keyword("TOOL-ERROR"_key)},
                                       {"MESSAGE", Value::string("Tool '" + name + "' not found")}})));
    return;
  }
  if (tool->unguarded != nullptr) {  // the gates ran on this snapshot and failed it: never reached
    acted(feedback_event(depth, signal.at("META"_key),
                         Value::plist({{"SENSOR", Value::keyword("TOOL-ERROR"_key)},
                                       {"TOOL", Value::string(name)},
                                       {"MESSAGE", Value::string(*tool->unguarded)}})));
    return;
  }
  const Value args = tool_args_of(action);
  services().blocking.post([self = shared_from_this(), snapshot = snapshot, tool, args, name, depth, action] {
    const LogScope scope(&self->session->logs);  // the session waits for this step alone
    const ActionRecord record("TOOL", action);
    Result<Value> result = tool->call(args, self->signal);
    Value acted = record.finish(result).at("ACTED"_key);
    self->post(self, [self, result = std::move(result), acted = std::move(acted), name, depth, tool]() mutable {
      self->tool_finished(name, tool->slot, {}, result, std::move(acted), depth);
    });
  });
}

void Run::external_tool(std::shared_ptr<const ToolCatalog> catalog, const ExternalTool& tool, const Value& action) {
  const std::int64_t depth = depth_of(signal) + 1;
  // The guard rule, as for a skill's tool: fails closed while a guard is missing.
  if (std::string missing = missing_guard(*snapshot, tool); !missing.empty()) {
    log_message(LogLevel::error, kPipelineComponent, "ACT ERROR: {}; the call did not run", missing);
    acted(feedback_event(depth, signal.at("META"_key),
                         Value::plist({{"SENSOR", Value::keyword("TOOL-ERROR"_key)},
                                       {"TOOL", Value::string(tool.name)},
                                       {"MESSAGE", Value::string(missing + "; the call did not run")}})));
    return;
  }
  auto record = std::make_shared<const ActionRecord>("TOOL", action);
  services().external_tools->call(
      tool, tool_args_of(action),
      [self = shared_from_this(), catalog = std::move(catalog), &tool, record, depth](Result<ExternalResult> outcome) {
        Result<Value> result =
            outcome && !outcome->is_error
                ? Result<Value>(Value::plist(
                      {{"STATUS", Value::keyword("SUCCESS"_key)}, {"CONTENT", Value::string(outcome->text)}}))
                : Result<Value>(fail(ErrorCode::failed, outcome ? outcome->text : outcome.error().message));
        self->post(self, [self, result = std::move(result), catalog, &tool, record, depth]() mutable {
          Value shown = record->finish(result).at("ACTED"_key);
          self->tool_finished(tool.name, nullptr, tool.server, result, std::move(shown), depth);
        });
      });
}

void Run::tool_finished(const std::string& name, const Slot* skill, const std::string& server,
                        const Result<Value>& result, Value shown, std::int64_t depth) {
  const Value meta = signal.at("META"_key);
  if (!result) {
    // The model sees the error as feedback; the operator sees it here.
    const std::string error = mask_secrets(result.error().message);
    if (skill != nullptr) {
      log_fields(LogLevel::warn, kPipelineComponent,
                 {{"tool", name},
                  {"skill", skill->name()},
                  {"version", skill->version_text()},
                  {"session", session_id_of(signal)}},
                 "tool '{}' of skill '{}' failed: {}", name, skill->name(), error);
    } else {
      log_fields(LogLevel::warn, kPipelineComponent,
                 {{"tool", name}, {"mcp_server", server}, {"session", session_id_of(signal)}},
                 "tool '{}' of mcp server '{}' failed: {}", name, server, error);
    }
    acted(feedback_event(depth, meta,
                         Value::plist({{"SENSOR", Value::keyword("TOOL-ERROR"_key)},
                                       {"TOOL", Value::string(name)},
                                       {"MESSAGE", Value::string(result.error().message)}})));
    return;
  }
  if (signal.path("META"_key, "SOURCE"_key).is_keyword()) {
    deliver(Value::plist({{"TYPE", Value::keyword("REQUEST"_key)},
                          {"TARGET", signal.path("META"_key, "SOURCE"_key)},
                          {"PAYLOAD", Value::plist({{"ACTION", Value::keyword("MESSAGE"_key)},
                                                    {"TEXT", Value::string(tool_result_format(name, *result))},
                                                    {"ACTED", std::move(shown)}})}}));
  }
  acted(feedback_event(
      depth, meta,
      Value::plist(
          {{"SENSOR", Value::keyword("TOOL-OUTPUT"_key)}, {"RESULT", *result}, {"TOOL", Value::string(name)}})));
}

void Run::acted(Value feedback) {
  signal = std::move(signal).with("STATUS"_key, Value::keyword("ACTED"_key));
  next_cycle(std::move(feedback));
}

}  // namespace passepartout
