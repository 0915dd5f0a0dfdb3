// The pipeline's insides, private to pipeline/: Pipeline::Impl (the shared
// state and the sessions) and Run (one signal's loop, defined stage by stage:
// loop.cpp, perceive.cpp, reason.cpp, act.cpp, error_tiers.cpp).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/executor.hpp"
#include "base/log.hpp"
#include "base/thread_shards.hpp"
#include "pipeline/actuators.hpp"
#include "pipeline/credential_rule.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/errors.hpp"
#include "pipeline/model_routing.hpp"
#include "pipeline/offer.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/prompt_builder.hpp"
#include "pipeline/rule_book.hpp"
#include "pipeline/transcript.hpp"
#include "pipeline/verifier.hpp"
#include "providers/cascade.hpp"
#include "skills/registry.hpp"

namespace passepartout {

inline constexpr std::string_view kPipelineComponent = "pipeline";

// --- the shared state ---------------------------------------------------------

struct Pipeline::Impl {
  Impl(Services s, PipelineOptions o) : services(s), options(std::move(o)) {}

  Services services;
  PipelineOptions options;
  std::atomic<bool> interrupt_flag{false};
  LocalOnlySessions local_only;  // sticky: a session once marked stays local-only
  ConsensusStats consensus;      // what the consensus rounds came to
  // Sets the flag; the first to set it tells the host (Services::on_interrupt)
  // and cancels the model calls in flight.
  void raise_interrupt() noexcept;
  // Pipeline::cancel_calls(): set, model calls are cancelled as they start.
  std::atomic<bool> calls_cancelled{false};
  // No model call may run: interrupted, or cancel_calls().
  bool calls_stopped() const noexcept {
    return interrupt_flag.load(std::memory_order_acquire) || calls_cancelled.load(std::memory_order_acquire);
  }
  // Cancels the model call of every session that has one in flight (call_cancel.cpp).
  void cancel_calls_in_flight() noexcept;
  ShardedCounter processed;  // cycles run
  ShardedCounter active;     // signals injected and not finished
  // Loops ended, by injected sensor and outcome: [sensor * kOutcomes + outcome].
  static constexpr std::size_t kSensors = 11;  // counted_sensors().size()
  static constexpr std::size_t kOutcomes = 8;  // Pipeline::loop_outcomes().size()
  ShardedCounters<kSensors * kOutcomes> finished_loops;

  // What each Run holds on to: aliases of this Impl with a reference count
  // per thread shard (a Run takes one per signal). ~Pipeline publishes null,
  // which breaks the cycle; Runs in flight keep the Impl alive until they end.
  Published<Impl> self{nullptr};

  // One session's queue: its signals run one at a time, in order. A signal's
  // loop is a chain of steps, each posting at most the next, so a session has
  // at most one step queued or running: the queue orders the session without
  // a strand, and each step sees what the one before wrote (the executor's
  // queue orders them).
  struct Session;
  struct Pending {
    Value signal;
    std::shared_ptr<ReplySink> reply;
    InlineFunction<void(LoopReport)> done;
    std::uint8_t injected_sensor = 0;  // counted_sensor_of() the injected signal
    // Instead of a signal: something done to the session in its turn, after
    // what runs in it now (what an approved action did, for its transcript).
    std::function<void(Session&)> note;
  };
  struct SessionShard;
  struct Session {
    Session(std::size_t log_lines, SessionShard& home) : logs(log_lines), shard(home) {}
    std::deque<Pending> queue;
    bool busy = false;
    std::uint64_t last_used = 0;  // the shard's clock when it last started a signal
    // The session's recent log lines, for its prompts (written and read only
    // by the step that runs, like everything a Run touches).
    RecentLines logs;
    // C2: the memory node the session's client points at (its last
    // :POINT-UPDATE), shown in full in its prompts' CONTEXT. Empty: none.
    std::string foveal_focus;
    // Lent to the cascade for each model call of the session (one at a
    // time): its buffers, the long system prompt's among them, serve every
    // call. Between calls it holds no Value and no reply sink.
    ProviderRequest request;
    // The conversation so far (Decisions 5), for providers that send it.
    Transcript transcript;
    // The cancel signal of the session's model call in flight; null between
    // calls. Under shard.mutex: cancel_calls_in_flight() reads it from any thread.
    std::shared_ptr<CancelSignal> call;
    SessionShard& shard;  // the one it is kept in (by the hash of its id)
  };
  // Looks a session up by a string_view of its id (no string made per signal).
  struct SessionIdHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view id) const noexcept { return std::hash<std::string_view>{}(id); }
  };
  // Sessions by id, spread over shards so that threads serving different
  // sessions rarely take the same lock or touch the same memory (256 shards
  // ran the two-loop benchmark's 64 sessions about 2 % faster than 64). An
  // idle session stays (its recent log lines are the next prompt's LOGS, its
  // request's buffers the next call's) until its shard is full: then the one
  // idle longest makes room for a new one (Pipeline::kMaxIdleSessions in all).
  struct alignas(64) SessionShard {
    std::mutex mutex;  // guards sessions, clock
    std::unordered_map<std::string, std::shared_ptr<Session>, SessionIdHash, std::equal_to<>> sessions;
    std::uint64_t clock = 0;
  };
  static constexpr std::size_t kSessionShards = 256;
  static constexpr std::size_t kSessionsPerShard = kMaxIdleSessions / kSessionShards;  // idle ones beyond: dropped
  std::array<SessionShard, kSessionShards> session_shards;
  SessionShard& shard_of(std::string_view session_id) {
    return session_shards[std::hash<std::string_view>{}(session_id) % kSessionShards];
  }
  // The session for `id`, made (room made first) when there is none. Under shard.mutex.
  std::shared_ptr<Session>& session_in(SessionShard& shard, std::string_view id);

  void enqueue(std::string_view session_id, Pending&& pending);
  // Does `note` to the session `session_id` in its turn (Pending::note).
  void note_session(std::string_view session_id, std::function<void(Session&)> note);
  // Starts the loop of `pending` on the executor.
  void start(const std::shared_ptr<Session>& session, Pending&& pending);
  void finished(const std::shared_ptr<Session>& session);
};

// Pipeline::approve: decides `token` as approved by `who`, checks the action
// again (every gate, with `granted_by` recorded when a standing approval
// decided), runs it once on the blocking executor and reports what it did.
void run_approval(const std::shared_ptr<Pipeline::Impl>& impl, std::string token, std::string who,
                  std::string_view granted_by, std::function<void(Result<Value>)> done);

struct ConsensusRound;  // consensus_round.cpp

// One signal's loop: the injected signal and its feedback, cycle by cycle.
// Each step runs on the executor (or, for an actuator's or tool's call, on
// the blocking executor) and posts at most the next: a Run is touched by one
// thread at a time, and needs no lock.
struct Run : std::enable_shared_from_this<Run> {
  std::shared_ptr<Pipeline::Impl> pipeline;
  std::shared_ptr<Pipeline::Impl::Session> session;
  std::shared_ptr<ReplySink> reply;
  InlineFunction<void(LoopReport)> done;
  LoopReport report;
  std::uint8_t injected_sensor = 0;  // counted_sensor_of() the injected signal, for Impl::finished_loops

  // The cycle in progress.
  Value signal;  // as perceived
  std::shared_ptr<const Snapshot> snapshot;
  std::shared_ptr<const Offer> offer;  // what the model is offered for this snapshot (think() sets it)
  int attempt = 0;
  bool target_implied = false;  // the action being acted on named no :TARGET of its own (E4)
  Value reasoning;              // the signal copy reasoning works on (carries :REJECTION-TRACE)
  Value last_rejection;
  // Gates that ran past their budget for this cycle's signal: its further
  // attempts (and last-mile gates) fail them without calling them again.
  std::vector<std::string> timed_out_gates;
  std::vector<std::string> approval_gates;  // "name@version" of the gates that asked
  // The standing approval (pipeline/rule_book.hpp) that answers this
  // cycle's approval request, found when the gates asked; null: none, a
  // human decides.
  std::shared_ptr<const RuleBook::Entry> granting_rule;
  // The cascade's answer, kept here from its completion to the step that
  // reasons on it, so that the posted step holds only the run (and is kept
  // without an allocation; see InlineFunction). reasoned() reads it only
  // before it asks the cascade again, whose completion overwrites it.
  CascadeOutcome cascade_outcome;
  // The model router of the call in flight (the request points at it while
  // it routes: a skill routes, or the session is local-only).
  std::optional<CallRouter> call_router;
  // When no provider answered this cycle's call, (:TEXT "<the exhaustion
  // message>" :FAILURES ((:PROVIDER "p" :MESSAGE "...") ...)), which a reply
  // to the client carries as :MODEL-FAILURE, added after the gates (they
  // judge the action, not this); NIL otherwise.
  Value model_failure;
  // The model's tool call the action being acted on came from (its id
  // empty when none): its result, the next cycle's signal, answers it in
  // the session's transcript.
  ToolCall open_call;
  // The call whose action waits for a human's approval (record_verdict): its
  // id goes with the approval, so that the decision and what the run did
  // become that call's result in the transcript.
  std::string approval_call_id;
  // Streamed text on its way to the client: no configured key passes.
  CredentialStreamMask stream_mask;
  bool transcript_begun = false;  // this signal's first turn is in the session's transcript
  // The decision log's view of who proposed the action being acted on: set
  // when this cycle's model answer was verified (reasoned), cleared by the
  // next cycle. The lineup, held only while the log records, names the
  // answering provider's default model.
  bool model_proposed = false;
  std::shared_ptr<const Cascade::Lineup> decision_lineup;
  // A verification that asked for approval waits here for the token (suspend()).
  PendingDecision held_decision;
  // What the decision log records besides what the gates saw.
  DecisionContext decision_context();

  const PipelineOptions& options() const { return pipeline->options; }
  const Pipeline::Services& services() const { return pipeline->services; }

  bool reply_open() const { return reply != nullptr && reply->is_open(); }

  // Runs `step` on the executor, `keep` (a reference to this run) holding
  // the run alive until it has; an exception goes to the crash tier. Only
  // the last thing a step does: the loop then belongs to the posted step.
  // The caller hands over a reference it has, where it can: each new one is
  // an atomic operation, and a signal takes several steps.
  template <class Step>
  void post(std::shared_ptr<Run> keep, Step step) {
    services().executor.post([keep = std::move(keep), step = std::move(step)]() mutable { keep->guarded(step); });
  }

  template <class Step>
  void guarded(Step& step) {
    const LogScope scope(&session->logs);  // the session's lines, for its prompts
    try {
      step();
    } catch (const PassepartoutError& error) {
      crash(error);
    } catch (const std::exception& error) {
      crash(PipelineError(error.what()));
    }
  }

  // --- the loop (F1): loop.cpp ---------------------------------------------------
  void cycle(Value next);
  // Ends the loop; the report carries `signal` as the loop left it.
  void finish(std::string_view why);
  // Feedback without :META inherits the current one; then the next cycle.
  void next_cycle(Value feedback);

  // --- Perceive (C2): perceive.cpp -------------------------------------------------
  Value perceive(Value incoming);

  // --- Reason (D7-D16): reason.cpp -------------------------------------------------
  // The raw prompt: the triggered skill's, else the text, else the tool
  // result; written over `out` (the session's buffer, reused).
  void raw_prompt(std::string& out);
  // The skills' standing mandates for the signal being reasoned about (seed
  // D8), each bounded by the gate budget: a failing or late one is left out
  // and logged with the skill's name.
  void skill_mandates(std::vector<std::string>& out) const;
  // The CONFIG line of `parts` (filled but for it): it changes only with the
  // snapshot, the provider lineup, the count of pending approvals and the
  // options, so each thread keeps the last one it built.
  std::string_view config_line(const PromptParts& parts, const std::shared_ptr<const Cascade::Lineup>& lineup) const;
  // Builds the prompt and hands it to the cascade; reasoned() goes on from its answer.
  void think();
  void reasoned(const CascadeOutcome& outcome);
  // The session's transcript for this call, when the cascade sends one:
  // the current turn added (attempt 1), trimmed, copied into the request.
  void converse(ProviderRequest& request, const Cascade::Lineup& lineup);
  // Records the model's answer; for a rejected or held proposal, what
  // answers it (the rejection reaches the next attempt).
  void record_answer(const ProviderReply& answer);
  void record_verdict(const Verification& verification);

  // What one answer proposes: parsed (D11), stamped (Offer::stamp) and
  // aimed (aimed()), read without writing to the run, so a consensus
  // round's calls can read their answers on any thread while the run waits.
  struct Proposal {
    Value action;
    std::string target;    // target_of(action)
    bool acts = false;     // acts(target)
    bool implied = false;  // its :TARGET was written in (target_implied)
    std::string problem;   // why the answer was malformed (parse_response); "" when it was not
  };
  Proposal proposal_of(const ProviderReply& answer) const;
  // Drops what the session's request held for the call that ended: the
  // signal, the tools and the streaming callback into this run.
  void release_request();
  // reasoned()'s second half: `proposal`, the answer of cascade_outcome,
  // verified by the gates and acted on (or asked again).
  void proposed(Proposal proposal);
  // A rejected proposal (`rejection` the seed-shaped value shown and fed
  // back): asked again while attempts remain, else the error policy, else
  // the user is shown it.
  void rejected(const Verification& verification, Value rejection);

  // --- consensus on actions: consensus_round.cpp -------------------------------------
  // The rule this cycle's proposals follow, or null: the configured one,
  // for every proposal when the signal's :META has :CONSENSUS T (then, with
  // none configured, a majority of the cascade's providers), written into
  // `scratch` when it differs from the configured one.
  const ConsensusConfig* consensus_rule(ConsensusConfig& scratch) const;
  // Asks the rule's providers concurrently on the request think() built,
  // the answer in cascade_outcome counting as a vote when `lead` is its
  // proposal; round_decided() goes on once the votes decide.
  void open_round(const ConsensusConfig& rule, const Proposal* lead);
  void round_decided();
  std::shared_ptr<ConsensusRound> consensus;  // the round in flight; null otherwise

  // --- cancelling a model call: call_cancel.cpp ---------------------------------------
  // A new call's cancel signal, for the session's request: cancelled when the
  // reply sink closes (the client went away), the pipeline is interrupted,
  // or cancel_calls() was called, before the call or during it.
  std::shared_ptr<CancelSignal> begin_call();
  // The call is over (its outcome in hand): forgets its signal; when the
  // cascade ended it as cancelled, logs why and ends the loop quietly (no
  // failure reply, no error policy) and returns true.
  bool call_ended(const CascadeOutcome& outcome);

  // --- Act (E1): act.cpp -----------------------------------------------------------
  // The gate whose block or failure decided `verification` ("" when none did).
  static std::string deciding_gate(const Verification& verification);
  // Gates that asked for approval, as "name@version".
  static std::vector<std::string> approving_gates(const Verification& verification);
  // E1 step 1: record the approval, tell the source, suspend (no feedback);
  // or, when a standing approval answers it, grant().
  void suspend(const Value& approval_event, std::vector<std::string> gates);
  // The standing approval answering the gates `asked` about `action` in this
  // signal's session, or null (no rules, no approval store).
  std::shared_ptr<const RuleBook::Entry> standing_approval(const Value& action,
                                                           std::span<const std::string> asked) const;
  // The approval recorded and decided by `rule`, then run once the way a
  // human's approval runs (run_approval: every gate again, the last mile,
  // the record of its run); what it did comes back to granted_run_finished().
  void grant(const Value& approval_event, std::vector<std::string> gates, const Rule& rule);
  void granted_run_finished(const Value& action, const std::string& rule_id, const Result<Value>& result);
  // A :STREAM-CHUNK frame of streamed text to the source (A15).
  void send_chunk(std::string_view text);
  // Sends `message` to the signal's source when it has an open reply sink.
  void deliver(const Value& message) {
    if (reply_open()) reply->send(message);
  }
  // Tells the source what an actuator ran and what came of it (an
  // ActionRecord's message), so the user sees it whatever the model says next.
  void show_acted(Value payload);
  // `untraced`, when given, is `approved` without its :GATE-TRACE.
  void act(const Value& approved, const Value* untraced = nullptr);
  // E2: where `action` goes, as an upper-case name: its :TARGET (unless
  // `to_source`), else the signal's source, else DEFAULT_ACTUATOR; :SYSTEM
  // becomes :TUI while the source has an open reply stream.
  std::string target_of(const Value& action, bool to_source) const;
  // Whether `target` acts on the world: everything but the source's reply
  // channel and the :SYSTEM actuator, which only logs (Decisions 8).
  static bool acts(std::string_view target) { return !is_named(target, "TUI") && !is_named(target, "SYSTEM"); }
  // `action` as the gates must see it: when it goes to an actuator that acts,
  // its :TARGET is that actuator as the keyword the host dispatches to (a
  // string or symbol ":shell" names :SHELL; an action that names none goes
  // to its signal's source or DEFAULT_ACTUATOR, which is written in), so
  // gates and dispatch cannot disagree about where it goes. Actions for the
  // reply channel or the :SYSTEM log are left as they are.
  // `target` is target_of(action, to_source). Notes in target_implied when
  // the target it writes in was not the action's own.
  Value aimed(Value action, std::string_view target, bool to_source);
  // Whether aimed() would change `action`: it goes to an actuator that acts,
  // and its :TARGET is not already that actuator's keyword.
  static bool needs_aiming(const Value& action, std::string_view target);
  // E2: hands `action` to the actuator `target` (target_of()); built-ins run
  // here, skills' on the blocking executor.
  void dispatch(Value action, const std::string& target);
  // A skill's actuator, on the blocking executor.
  void skill_actuator(const Snapshot::ActuatorEntry& actuator, Value action, const std::string& target);
  // E1 step 3: what an actuator's result feeds back.
  Value make_feedback(const Value& action, const Value& result);
  // E7: a tool call, on the blocking executor.
  void tool_actuator(const Actuator& tool, const Value& action);
  // An external tool's call (an MCP server's), made asynchronously: no
  // thread waits on the server.
  void external_tool(std::shared_ptr<const ToolCatalog> catalog, const ExternalTool& tool, const Value& action);
  // A tool's outcome, shown to the source and fed back to the model; a
  // failure is logged with who ran it: `skill`'s tool, or else `server`'s.
  void tool_finished(const std::string& name, const Slot* skill, const std::string& server, const Result<Value>& result,
                     Value shown, std::int64_t depth);
  // E1 step 4.
  void acted(Value feedback);

  // --- error tiers (F4, F5): error_tiers.cpp -----------------------------------------
  // F4: the skills' error policies see `error` ((:KIND :llm :MESSAGE "..." ...)),
  // highest priority first; the first to choose other than the standard
  // handling decides: skip ends the loop, abort too, fallback continues with
  // a :LOOP-ERROR carrying its text (to the source). True when one decided.
  bool policy_decides(const PassepartoutError& error);
  void crash(const PassepartoutError& error);
};

}  // namespace passepartout
