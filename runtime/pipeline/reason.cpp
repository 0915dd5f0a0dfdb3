// Reason (seed D7–D16): the prompt is built (system prompt, the triggered
// skill's raw prompt), the provider cascade is asked without holding a
// thread, and its answer is parsed and verified by the gates, up to
// max_attempts times.
#include <string>
#include <utility>
#include <vector>

#include "base/ascii.hpp"
#include "memory/global_awareness.hpp"
#include "memory/memory_store.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/gate_log.hpp"
#include "pipeline/gate_watchdog.hpp"
#include "pipeline/offer.hpp"
#include "pipeline/prompt_selector.hpp"
#include "pipeline/response_parser.hpp"
#include "pipeline/rule_book.hpp"
#include "pipeline/run.hpp"
#include "pipeline/signal.hpp"

namespace passepartout {

using namespace key_literals;

void Run::raw_prompt(std::string& out) {
  if (const Slot* skill = select_prompt_skill(*snapshot, reasoning)) {
    Result<Value> generated = skill->prompt(reasoning);
    if (!generated) {
      throw PipelineError("the prompt generator of skill '" + skill->name() + "' failed: " + generated.error().message);
    }
    if (generated->is_string()) {
      out.assign(generated->text());
      return;
    }
  }
  const Value& text = reasoning.path("PAYLOAD"_key, "TEXT"_key);
  if (text.is_string()) {
    out.assign(text.text());
    return;
  }
  const Value& sensor = sensor_of(reasoning);
  if (sensor.is_keyword("TOOL-OUTPUT"_key) || sensor.is_keyword("TOOL-ERROR"_key)) {
    const Value& tool = reasoning.path("PAYLOAD"_key, "TOOL"_key);
    const std::string name =
        tool.is_string() ? std::string(tool.text()) : ascii_lower(target_name(tool.at("TARGET"_key)));
    if (sensor.is_keyword("TOOL-ERROR"_key)) {
      // An unknown tool's error names no :TOOL (E7); its message names it.
      const std::string message(reasoning.path("PAYLOAD"_key, "MESSAGE"_key).text());
      out = name.empty() ? "ERROR: " + message : "ERROR [" + name + "]: " + message;
      return;
    }
    out = tool_result_format(name, reasoning.path("PAYLOAD"_key, "RESULT"_key));
    return;
  }
  out.assign("Maintain metabolic stasis.");
}

void Run::skill_mandates(std::vector<std::string>& out) const {
  for (const Snapshot::Gate& gate : snapshot->gates()) {
    const Slot& slot = *gate.slot;
    if (!slot.has_mandate()) continue;
    GateWatch& watch = GateWatchdog::this_thread();
    const std::uint64_t ticket = watch.start(gate.budget_ms);
    Result<std::string> line = slot.mandate(reasoning);
    const bool late = watch.finish(ticket);
    if (late) {
      log_message(LogLevel::warn, slot.name(), "its mandate took longer than its budget of {} ms; left out",
                  GateWatchdog::budget_of(gate.budget_ms).count());
    } else if (!line) {
      log_message(LogLevel::warn, slot.name(), "its mandate failed, left out: {}", line.error().message);
    } else if (!line->empty()) {
      out.push_back(std::move(*line));
    }
  }
}

std::string_view Run::config_line(const PromptParts& parts,
                                  const std::shared_ptr<const Cascade::Lineup>& lineup) const {
  struct ConfigView {
    std::uint64_t snapshot_id = 0;
    std::shared_ptr<const Cascade::Lineup> lineup;  // held: a new lineup cannot take its address
    std::size_t rules_learned = 0;
    std::size_t context_tokens = 0;
    std::string version;
    std::string text;
  };
  thread_local ConfigView view;
  if (view.snapshot_id != snapshot->id() || view.lineup != lineup || view.rules_learned != parts.rules_learned ||
      view.context_tokens != parts.context_tokens || view.version != parts.version) {
    view.text = config_section(parts);
    view.snapshot_id = snapshot->id();
    view.lineup = lineup;
    view.rules_learned = parts.rules_learned;
    view.context_tokens = parts.context_tokens;
    view.version = parts.version;
  }
  return view.text;
}

void Run::think() {
  ++attempt;
  MemoryStore* memory = services().memory;
  if (memory != nullptr) memory->snapshot();  // D7: before every LLM call

  PromptParts parts;
  parts.version = options().version;
  std::shared_ptr<const Cascade::Lineup> lineup = services().cascade.lineup();
  parts.providers = lineup->names;
  // The window of the provider asked first, as the presets know it or the
  // operator declared it (the option when none is known).
  parts.context_tokens = lineup->first_context_window != 0 ? lineup->first_context_window : options().context_tokens;
  parts.gates = snapshot->gates().size();
  parts.rules_learned = services().rules != nullptr ? services().rules->standing_count() : 0;
  parts.assistant_name = options().assistant_name;
  parts.rejection = reasoning.path("PAYLOAD"_key, "REJECTION-TRACE"_key);
  parts.identity = options().identity;
  skill_mandates(parts.mandates);
  for (const auto& mandate : options().mandates) {
    try {
      std::string line = mandate(reasoning);
      if (!line.empty()) parts.mandates.push_back(std::move(line));
    } catch (...) {  // NOLINT(bugprone-empty-catch): D8 — a failing mandate is ignored
    }
  }
  parts.config = config_line(parts, lineup);
  offer = offer_of(*snapshot, services().external_tools != nullptr ? services().external_tools->catalog() : nullptr);
  parts.tools = offer->tool_belt();
  parts.grammar = offer->grammar();
  if (memory != nullptr) {
    const std::string foveal = foveal_id_of(reasoning);
    parts.context = mask_secrets(render_global_awareness(*memory, AwarenessOptions{foveal, options().privacy_tags}));
  }
  // LOGS: this session's own lines (those the pipeline logged about it among
  // them), never the process's (boot lines, folders, digests), masked as the
  // gate log masks them.
  thread_local std::string logs;
  const std::size_t lines = std::min(options().log_lines, session->logs.size());
  if (lines == 0) {
    logs.clear();
  } else {
    logs = mask_secrets(session->logs.newest_text(lines));
  }
  parts.logs = logs;
  parts.time = time_section();

  ProviderRequest& request = session->request;
  request.system_prompt.clear();
  request.system_stable = append_system_prompt(request.system_prompt, parts);
  raw_prompt(request.prompt);
  converse(request, *lineup);
  request.prompt_tokens = static_cast<std::int64_t>(estimated_prompt_tokens(request));
  if (const std::string_view id = session_id_of(reasoning); request.session != id) request.session.assign(id);
  request.model.clear();
  request.context = reasoning;
  request.tools = offer->native_tools();
  request.router = nullptr;
  // Routed when a skill routes, or the session is local-only (then the host
  // keeps it on local providers with no router loaded).
  const Snapshot::Router& router = snapshot->router();
  if (const std::string_view session_id = session_id_of(reasoning);
      router.slot != nullptr || pipeline->local_only.contains(session_id)) {
    call_router.emplace(router, pipeline->local_only, std::string(session_id), reasoning, request.tools.size());
    request.router = &*call_router;
  }
  if (reply_open()) {
    // Chunks come before the completion, which holds the run (and its sink) alive.
    request.on_chunk = [run = this](std::string_view delta) {
      run->stream_mask.feed(delta, [run](std::string_view text) { run->send_chunk(text); });
    };
  }
  // The completion may run on any thread; the run is idle meanwhile, and
  // posting the step orders this write before the step's read. The step is
  // posted even when the answer comes during the call: with two loops, a
  // signal run start to end in one task measured about a fifth slower
  // once, and no faster since.
  request.cancel = begin_call();
  if (services().decisions != nullptr) decision_lineup = lineup;
  ConsensusConfig scratch;
  if (const ConsensusConfig* rule = consensus_rule(scratch);
      rule != nullptr && rule->when == ConsensusConfig::When::always) [[unlikely]] {
    request.on_chunk = nullptr;  // several models answer: none streams to the client
    open_round(*rule, nullptr);
    return;
  }
  services().cascade.call_lent(std::move(lineup), request,
                               [self = shared_from_this()](CascadeOutcome&& answer) mutable {  // called once
                                 Run& run = *self;
                                 run.cascade_outcome = std::move(answer);
                                 run.post(std::move(self), [&run] { run.reasoned(run.cascade_outcome); });
                               });
}

DecisionContext Run::decision_context() {
  DecisionContext context;
  context.rules = services().rules;
  context.log = services().decisions;
  if (context.log == nullptr) return context;
  context.pending = &held_decision;
  if (!model_proposed) return context;
  context.provider = cascade_outcome.provider;
  context.model = session->request.model;  // what the answering attempt asked for
  if (context.model.empty() && decision_lineup != nullptr) {
    const auto& names = decision_lineup->names;
    for (std::size_t i = 0; i < names.size() && i < decision_lineup->providers.size(); ++i) {
      if (names[i] == context.provider) context.model = decision_lineup->providers[i]->default_model();
    }
  }
  return context;
}

namespace {

// What answers a call of the model's that was not run (the APIs refuse a
// conversation in which a call has no result).
constexpr std::string_view kCallNotRun = "No result: the call was not run.";
constexpr std::string_view kCallOneAtATime = "Not run: one call is run at a time; call it again if it is still needed.";
constexpr std::string_view kCallAwaitsApproval =
    "Not run yet: it waits for a human's approval; its result will come in a later message.";

bool is_tool_result(const Value& signal) {
  const Value& sensor = sensor_of(signal);
  return sensor.is_keyword("TOOL-OUTPUT"_key) || sensor.is_keyword("TOOL-ERROR"_key);
}

}  // namespace

void Run::send_chunk(std::string_view text) {
  if (!reply_open()) return;
  reply->send(Value::plist(
      {{"TYPE", Value::keyword("STREAM-CHUNK"_key)}, {"PAYLOAD", Value::plist({{"TEXT", Value::string(text)}})}}));
}

void Run::converse(ProviderRequest& request, const Cascade::Lineup& lineup) {
  if (!lineup.reads_transcript) {
    if (!request.transcript.empty()) request.transcript.clear();
    request.prompt_in_transcript = false;
    return;
  }
  Transcript& transcript = session->transcript;
  if (attempt == 1) {  // the cycle's current turn; later attempts end with their rejection
    if (!open_call.id.empty() && is_tool_result(reasoning)) {
      transcript.add_tool_result(open_call, request.prompt);
    } else {
      for (const ToolCall& call : transcript.unanswered_calls()) transcript.add_tool_result(call, kCallNotRun);
      if (!transcript_begun) {
        transcript.begin_signal();
        transcript_begun = true;
      }
      transcript.add_user(request.prompt);
    }
    open_call = ToolCall{};
  }
  // A quarter of the smallest context window among the providers that send
  // transcripts, unless the operator set the budget.
  const std::size_t window = lineup.context_window != 0 ? lineup.context_window : options().context_tokens;
  const std::size_t budget = options().transcript_tokens != 0 ? options().transcript_tokens : window / 4;
  transcript.trim(budget);
  transcript.copy_to(request.transcript);
  request.prompt_in_transcript = true;
}

void Run::record_answer(const ProviderReply& answer) {
  Transcript& transcript = session->transcript;
  transcript.add_assistant(answer.content, answer.wire_calls);
  if (answer.wire_calls.empty()) return;
  open_call = answer.wire_calls.front();  // the one the action carries (D11: the first call only)
  for (std::size_t i = 1; i < answer.wire_calls.size(); ++i) {
    transcript.add_tool_result(answer.wire_calls[i], kCallOneAtATime);
  }
}

void Run::record_verdict(const Verification& verification) {
  Transcript& transcript = session->transcript;
  switch (verification.outcome) {
    case VerifyOutcome::passed:
      return;  // a call's result answers it when it comes back
    case VerifyOutcome::approval_required:
      if (granting_rule != nullptr) return;  // a standing approval answers: the call's result answers it
      if (!open_call.id.empty()) transcript.add_tool_result(open_call, kCallAwaitsApproval);
      approval_call_id = open_call.id;
      break;
    case VerifyOutcome::blocked: {
      const Value& text = verification.action.path("PAYLOAD"_key, "TEXT"_key);
      const std::string why(text.is_string() ? text.text() : std::string_view("Action blocked by a gate."));
      if (!open_call.id.empty()) {
        transcript.add_tool_result(open_call, why + " The call was not run.");
      } else {
        transcript.add_user("Your proposed action was not carried out. " + why);
      }
      break;
    }
  }
  open_call = ToolCall{};
}

void Run::release_request() {
  ProviderRequest& request = session->request;
  request.context = Value();
  request.tools = Value();
  request.on_chunk = nullptr;
}

Run::Proposal Run::proposal_of(const ProviderReply& answer) const {
  Proposal proposal;
  proposal.action = offer->stamp(parse_response(answer, offer.get(), &proposal.problem));
  proposal.target = target_of(proposal.action, false);
  proposal.acts = acts(proposal.target);
  if (needs_aiming(proposal.action, proposal.target)) {
    proposal.implied = proposal.action.get("TARGET"_key) == nullptr;
    proposal.action = std::move(proposal.action).with("TARGET"_key, Value::keyword(proposal.target));
  }
  return proposal;
}

void Run::reasoned(const CascadeOutcome& outcome) {
  release_request();                // the call is over
  if (call_ended(outcome)) return;  // cancelled: the loop has ended
  stream_mask.flush([this](std::string_view text) { send_chunk(text); });
  model_failure = Value();
  if (!outcome.ok()) {
    log_message(LogLevel::warn, kPipelineComponent, "REASON: no provider answered ({} failed)",
                outcome.failures.size());
    model_failure = outcome.failure_value().path({"PAYLOAD"});
    // A skill may handle it; by default the user is told (D11: the
    // exhaustion message is the answer, or the budget's refusal).
    if (outcome.over_budget() && outcome.budget) {
      if (policy_decides(BudgetError(*outcome.budget))) return;
    } else if (policy_decides(LlmError(std::string(Cascade::kExhausted), outcome.failure_messages(), attempt))) {
      return;
    }
  }
  Proposal proposal = proposal_of(outcome.reply);
  if (outcome.ok() && proposal.acts) {
    ConsensusConfig scratch;
    if (const ConsensusConfig* rule = consensus_rule(scratch)) [[unlikely]] {
      open_round(*rule, &proposal);  // the other models are asked before the gates see it
      return;
    }
  }
  proposed(std::move(proposal));
}

void Run::proposed(Proposal proposal) {
  const CascadeOutcome& outcome = cascade_outcome;
  target_implied = proposal.implied;
  const Value action = std::move(proposal.action);  // the proposal is this step's now
  if (session->request.prompt_in_transcript && outcome.ok()) record_answer(outcome.reply);
  Verification verification;
  model_proposed = outcome.ok();
  verify_and_record(DecisionStage::reason, snapshot, action, reasoning, verification, decision_context(),
                    timed_out_gates);
  if (verification.timed_out != nullptr) [[unlikely]]
    timed_out_gates.push_back(verification.timed_out->name());
  if (verification.outcome == VerifyOutcome::approval_required) {
    approval_gates = approving_gates(verification);
    granting_rule = standing_approval(verification.action, approval_gates);
  }
  if (session->request.prompt_in_transcript) record_verdict(verification);
  switch (verification.outcome) {
    case VerifyOutcome::approval_required: {
      reasoning = Value();  // done with: the signal's list is then this loop's alone
      signal = std::move(signal).with("STATUS"_key, Value::keyword("REQUIRES-APPROVAL"_key));
      act(verification.to_value());
      return;
    }
    case VerifyOutcome::passed: {
      reasoning = Value();
      signal = std::move(signal).with("STATUS"_key, Value::keyword("REASONED"_key));
      // The verified action is the approved one without its trace, unless
      // the model wrote a :GATE-TRACE of its own (then act takes it off).
      const bool untraced = verification.action.get("GATE-TRACE"_key) == nullptr;
      act(verification.to_value(), untraced ? &verification.action : nullptr);
      return;
    }
    case VerifyOutcome::blocked:
      rejected(verification, verification.to_value());
      return;
  }
}

void Run::rejected(const Verification& verification, Value rejection) {
  last_rejection = std::move(rejection);
  if (attempt < options().max_attempts) {
    log_message(LogLevel::info, kPipelineComponent, "REASON: proposal rejected (attempt {} of {}); asking again",
                attempt, options().max_attempts);
    reasoning = reasoning.with("PAYLOAD"_key, reasoning.at("PAYLOAD"_key).with("REJECTION-TRACE"_key, last_rejection));
    think();
    return;
  }
  // After the last attempt a skill may handle it; by default the user is
  // shown the rejection (E8).
  if (policy_decides(GateError("every proposal was rejected (" + std::to_string(attempt) + " attempts): " +
                                   std::string(verification.reason.is_string() ? verification.reason.text() : ""),
                               deciding_gate(verification), last_rejection))) {
    return;
  }
  reasoning = Value();
  signal = std::move(signal).with("STATUS"_key, Value::keyword("REASONED"_key));
  act(last_rejection);
}

}  // namespace passepartout
