// Approved runs: an action a human approved runs once, on the blocking
// executor, through the last-mile gates and the actuator or tool its target
// names; each step of its run is recorded in the approval store.
#include <algorithm>
#include <future>
#include <optional>
#include <string>
#include <utility>

#include "base/ascii.hpp"
#include "pipeline/action_record.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/gate_log.hpp"
#include "pipeline/run.hpp"
#include "pipeline/signal.hpp"

namespace passepartout {
namespace {

using namespace key_literals;

// What an approved action runs on, found before the approval is decided.
struct ApprovedRun {
  Value action;   // with the signal's :META when it had none
  Value context;  // (:TYPE :EVENT :META m :PAYLOAD (:SENSOR :APPROVED)): the signal the actuator sees
  const Snapshot::ActuatorEntry* actuator = nullptr;
  const Snapshot::ToolEntry* tool = nullptr;
  // An external tool (an MCP server's), and the catalog that holds it.
  std::shared_ptr<const ToolCatalog> catalog;
  const ExternalTool* external = nullptr;
  Value args;  // for a tool
};

// The approved action runs once, through the last-mile gates: a gate that now
// blocks still stops it; approval requests from the gates that were approved
// (same name and version) are satisfied; a new one is not. Then its target
// must be an actuator or a tool of `snapshot`.
Result<ApprovedRun> plan_approved_run(const std::shared_ptr<const Snapshot>& snapshot, const Approval& approval,
                                      const Pipeline::Services& services, std::string_view granted_by) {
  ApprovedRun run;
  run.context = Value::plist({{"TYPE", Value::keyword("EVENT"_key)},
                              {"META", approval.meta},
                              {"PAYLOAD", Value::plist({{"SENSOR", Value::keyword("APPROVED"_key)}})}});
  Verification check;
  ExternalTools* external_tools = services.external_tools;
  DecisionContext context;
  context.log = services.decisions;
  context.rules = services.rules;
  context.approval_token = approval.token;
  context.granted_by = granted_by;
  verify_and_record(DecisionStage::approval, snapshot, approval.action, run.context, check, context);
  if (check.outcome == VerifyOutcome::blocked) {
    return fail(ErrorCode::refused,
                "the gates now block the action: " + std::string(check.reason.is_string() ? check.reason.text() : ""));
  }
  if (check.outcome == VerifyOutcome::approval_required) {
    for (const std::string& gate : Run::approving_gates(check)) {
      if (std::find(approval.gates.begin(), approval.gates.end(), gate) == approval.gates.end()) {
        return fail(ErrorCode::refused,
                    "gate " + gate + " (not among those the approval is for) now asks too; the action did not run");
      }
    }
  }
  run.action = approval.action;
  if (run.action.get("META"_key) == nullptr && approval.meta.is_list()) {
    run.action = run.action.with("META"_key, approval.meta);
  }
  const std::string target = target_name(run.action.at("TARGET"_key));
  const Actuator found = find_actuator(*snapshot, target, run.action);
  switch (found.kind) {
    case Actuator::Kind::tool:
      if (found.tool == nullptr && external_tools != nullptr) {
        run.catalog = external_tools->catalog();
        run.external = run.catalog->find(found.tool_name);
        if (run.external != nullptr) {
          if (std::string missing = missing_guard(*snapshot, *run.external); !missing.empty()) {
            return fail(ErrorCode::refused, missing + "; the action did not run");
          }
          run.args = tool_args_of(run.action);
          return run;
        }
        if (const std::string_view why = run.catalog->unavailable(found.tool_name); !why.empty()) {
          return fail(ErrorCode::refused, std::string(why) + "; the action did not run");
        }
      }
      if (found.tool == nullptr) {
        return fail(ErrorCode::not_found,
                    "no loaded skill offers the tool '" + found.tool_name + "'; the action did not run");
      }
      run.tool = found.tool;
      run.args = tool_args_of(run.action);
      return run;
    case Actuator::Kind::skill:
      run.actuator = found.actuator;
      return run;
    case Actuator::Kind::reply:   // the built-ins answer or log for a signal in the loop;
    case Actuator::Kind::system:  // an approved run runs apart from its signal
    case Actuator::Kind::none:
      break;
  }
  return fail(ErrorCode::not_found, "no actuator serves target '" + ascii_lower(target) + "'; the action did not run");
}

// An external tool's call, waited for on this blocking-work thread (an
// approved run is one action, run apart from any loop); the source ends every
// call, with its own deadline.
Result<Value> call_external(ExternalTools& tools, const ExternalTool& tool, const Value& args) {
  std::promise<Result<ExternalResult>> promise;
  std::future<Result<ExternalResult>> future = promise.get_future();
  tools.call(tool, args, [&promise](Result<ExternalResult> outcome) { promise.set_value(std::move(outcome)); });
  Result<ExternalResult> outcome = future.get();
  if (!outcome) return fail(outcome.error().code, outcome.error().message);
  if (outcome->is_error) return fail(ErrorCode::failed, outcome->text);
  return Value::plist({{"STATUS", Value::keyword("SUCCESS"_key)}, {"CONTENT", Value::string(outcome->text)}});
}

// What a decided approval did, as the result of the model's call that
// proposed it (the approval's :META :CALL-ID), in its session's transcript.
void settle_call(const std::weak_ptr<Pipeline::Impl>& pipeline, const Approval& approval, const std::string& text) {
  const Value& call = approval.meta.at("CALL-ID"_key);
  if (!call.is_string()) return;
  const std::shared_ptr<Pipeline::Impl> impl = pipeline.lock();
  if (!impl) return;
  impl->note_session(session_id_of(Value::plist({{"META", approval.meta}})),
                     [id = std::string(call.text()), text](Pipeline::Impl::Session& session) {
                       session.transcript.settle_tool_result(id, text);
                     });
}

}  // namespace

void Pipeline::approve(std::string token, std::string who, std::function<void(Result<Value>)> done) {
  run_approval(impl_, std::move(token), std::move(who), {}, std::move(done));
}

namespace {

// Runs an approval claimed under `fence`, on the blocking executor: recorded
// as running, durably, before it runs (a daemon that dies during the run
// finds it so when it starts again: then interrupted), and without that
// record it does not run; its end recorded, its result settled into its
// session's transcript and given to `done`.
void run_claimed(const std::shared_ptr<Pipeline::Impl>& impl, ApprovalStore* store, std::string token, std::string who,
                 std::int64_t fence, ApprovedRun run, Approval decided, std::function<void(Result<Value>)> done) {
  log_message(LogLevel::info, kPipelineComponent, "ACT: running approved action {} (approved by {})", token, who);
  impl->services.blocking.post([store, external_tools = impl->services.external_tools, token = std::move(token),
                                run = std::move(run), done = std::move(done),
                                pipeline = std::weak_ptr<Pipeline::Impl>(impl), decided = std::move(decided), who,
                                fence]() mutable {
    if (auto started = store->record_run(token, Approval::Run::running, fence); !started) {
      log_message(LogLevel::error, kPipelineComponent, "ACT: approved action {} not run: {}", token,
                  started.error().message);
      done(fail(started.error().code, "the action did not run: " + started.error().message));
      return;
    }
    const ActionRecord record(run.actuator != nullptr ? run.actuator->name() : std::string("TOOL"), run.action);
    Result<Value> result = run.external != nullptr   ? call_external(*external_tools, *run.external, run.args)
                           : run.actuator != nullptr ? run.actuator->act(run.action, run.context)
                                                     : run.tool->call(run.args, run.context);
    static_cast<void>(record.finish(result));  // the operator's reply carries the result itself
    const std::string name = run.external != nullptr   ? run.external->name
                             : run.actuator != nullptr ? ascii_lower(run.actuator->name())
                                                       : run.tool->name();
    settle_call(pipeline, decided,
                result ? "Approved by " + who + " and run. " + tool_result_format(name, *result)
                       : "Approved by " + who + ", but the run failed: " + result.error().message);
    auto ended = result ? store->record_run(token, Approval::Run::done, fence)
                        : store->record_run(token, Approval::Run::failed, fence, result.error().message);
    if (!ended) {  // the run happened; only its record is missing (it will read as interrupted)
      log_message(LogLevel::error, kPipelineComponent, "ACT: approved action {}: {}", token, ended.error().message);
    }
    done(std::move(result));
  });
}

// A claimed run whose check failed: recorded as failed (best effort), told to its session.
void fail_claimed(const std::shared_ptr<Pipeline::Impl>& impl, ApprovalStore& store, const Approval& approval,
                  std::int64_t fence, const Error& error) {
  static_cast<void>(store.record_run(approval.token, Approval::Run::failed, fence, error.message));
  settle_call(impl, approval, "Approved by " + approval.decided_by + ", but the action did not run: " + error.message);
}

}  // namespace

void run_approval(const std::shared_ptr<Pipeline::Impl>& impl, std::string token, std::string who,
                  std::string_view granted_by, std::function<void(Result<Value>)> done) {
  ApprovalStore* store = impl->services.approvals;
  if (store == nullptr) {
    done(fail(ErrorCode::refused, "approvals are not enabled on this daemon"));
    return;
  }
  // Checked before the decision is taken, so that an approval that cannot
  // run now (the gates block it, a new gate asks, nothing serves its target)
  // is not used up: it stays pending, to be approved once that has changed,
  // denied, or left to expire. An unknown, decided or expired token goes on
  // to the store, which says which.
  auto snapshot = impl->services.registry.snapshot();
  std::optional<ApprovedRun> run;
  if (auto found = store->find(token); found && found->state == Approval::State::pending) {
    auto planned = plan_approved_run(snapshot, *found, impl->services, granted_by);
    if (!planned) {
      done(fail(planned.error().code, planned.error().message + "; it is still pending"));
      return;
    }
    run = std::move(*planned);
  }
  // Decided once, durably, before it runs.
  auto approval = store->approve(token, who);
  if (!approval) {
    done(fail(approval.error().code, approval.error().message));
    return;
  }
  // Then claimed: in a fleet the node that asked runs it while it is alive.
  auto claim = store->claim_run(token);
  if (!claim) {
    done(fail(claim.error().code, "approved, but the run could not be claimed: " + claim.error().message));
    return;
  }
  if (!*claim) {
    log_message(LogLevel::info, kPipelineComponent, "ACT: approved action {} (approved by {}) runs on node {}", token,
                who, approval->node);
    done(Value::string("approved; node " + approval->node + ", which asked, runs it"));
    return;
  }
  if (!run) {  // not read as pending a moment ago, yet approved now: checked after all
    auto planned = plan_approved_run(snapshot, *approval, impl->services, granted_by);
    if (!planned) {
      static_cast<void>(store->record_run(token, Approval::Run::failed, **claim, planned.error().message));
      done(fail(planned.error().code, planned.error().message));
      return;
    }
    run = std::move(*planned);
  }
  run_claimed(impl, store, std::move(token), std::move(who), **claim, std::move(*run), std::move(*approval),
              std::move(done));
}

void Pipeline::run_approved(std::string token, std::function<void(Result<Value>)> done) {
  ApprovalStore* store = impl_->services.approvals;
  if (store == nullptr) {
    done(fail(ErrorCode::refused, "approvals are not enabled on this daemon"));
    return;
  }
  auto claim = store->claim_run(token);
  if (!claim) {
    done(fail(claim.error().code, claim.error().message));
    return;
  }
  if (!*claim) {
    done(fail(ErrorCode::refused, "approval " + token + " is not this node's to run now"));
    return;
  }
  auto approval = store->find(token);
  if (!approval) {
    done(fail(approval.error().code, approval.error().message));
    return;
  }
  // Checked again here, by this node's gates, the last mile before it runs.
  auto planned = plan_approved_run(impl_->services.registry.snapshot(), *approval, impl_->services, {});
  if (!planned) {
    fail_claimed(impl_, *store, *approval, **claim, planned.error());
    done(fail(planned.error().code, planned.error().message));
    return;
  }
  std::string who = approval->decided_by;
  run_claimed(impl_, store, std::move(token), std::move(who), **claim, std::move(*planned), std::move(*approval),
              std::move(done));
}

Result<Approval> Pipeline::deny(const std::string& token, const std::string& who) {
  ApprovalStore* store = impl_->services.approvals;
  if (store == nullptr) return fail(ErrorCode::refused, "approvals are not enabled on this daemon");
  auto denied = store->deny(token, who);
  if (denied) settle_call(impl_, *denied, "Denied by " + who + ": the action was not run.");
  return denied;
}

void Pipeline::expired(const Approval& approval, const std::string& text) { settle_call(impl_, approval, text); }

}  // namespace passepartout
