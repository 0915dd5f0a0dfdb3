// Pipeline: the metabolic loop (seed C–F). A signal is perceived, reasoned
// about (prompt, provider cascade, parse, gates, up to 3 attempts), acted on
// (approval, last-mile gates, actuator), and what the actuator answers comes
// back as the next signal, up to depth 10.
//
// Concurrency: signals of one session (:META :SESSION-ID) are processed one at
// a time, in the order injected; sessions run in parallel on the executor. A
// signal waiting on a provider holds no thread: the cascade answers through a
// completion, and the loop continues from there. Actuators and tools, which
// may block for their bounded time (a shell command), run on a separate
// executor so they never hold a reasoning thread. A model call is cancelled,
// from any thread, when its reply sink closes, on interrupt() and on
// cancel_calls(); its completion then ends the loop ("cancelled").
//
// The steps of a signal's loop (members of Run, pipeline/run.hpp), what comes
// after each, and where it runs: "event loop" is Services::executor (the
// daemon's event loops), "blocking pool" Services::blocking, "control thread"
// the daemon's one thread for operator requests.
//
//   step                  next                                          thread
//   inject                cycle, posted (or queued behind its session)  the caller's (a connection, the heartbeat)
//   cycle                 perceive, then think, or act (not reasoned),  event loop
//                         or finish (past max_depth, interrupted)
//   perceive              (returns to cycle)                            event loop
//   think                 the cascade's call; reasoned, posted          event loop; no thread waits on the call
//   (cascade completion)  reasoned, posted                              any: where the provider answered
//   reasoned              act, think (a block, attempts left),          event loop
//                         the error tiers, or finish (cancelled)
//   act                   suspend, or dispatch (after the last-mile     event loop
//                         gates), or acted (a heartbeat, a block)
//   suspend               finish                                        event loop
//   dispatch              acted (:TUI, :SYSTEM, nothing serves it),     event loop
//                         or the tool or actuator call
//   tool / actuator call  acted, posted                                 blocking pool
//   acted                 next_cycle                                    event loop
//   next_cycle            cycle, posted, or finish (no feedback)        event loop
//   policy_decides, crash finish or next_cycle                          event loop
//   finish                done; the session's next signal, posted       event loop
//
//   approve               the run, posted (after the gates, the lookup  control thread
//                         of its actuator and the approval's record)
//   (approved run)        done                                          blocking pool
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/inline_function.hpp"
#include "base/result.hpp"
#include "pipeline/consensus.hpp"
#include "pipeline/signal.hpp"
#include "value/value.hpp"

namespace passepartout {

class Registry;
class Cascade;
class Executor;
class MemoryStore;
class ApprovalStore;
class DecisionLog;
class ExternalTools;
class RuleBook;
struct Approval;

// Where the outcome of a signal goes: the connection (or test) that sent it.
// The :TUI actuator writes replies here; approvals notify through it.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  // Delivers one message. Any thread; must not block for long.
  virtual void send(const Value& message) = 0;
  // False once the other end has gone.
  virtual bool is_open() const = 0;
  // Runs `hook` once when the other end goes away (the client's connection
  // closed): on whichever thread notices, or at once, on this thread, when it
  // has gone already. A sink keeps one hook: a later call replaces it, null
  // removes it. The pipeline cancels the model call in flight this way. A
  // sink that cannot tell keeps none (the default). Any thread; the hook must
  // not block.
  virtual void on_close(InlineFunction<void()> hook) { (void)hook; }
  // Whether the client may ask a human to approve an action (an
  // unauthenticated TCP client may not: it cannot flood the operator's
  // queue). When false, an action that needs approval is blocked instead.
  virtual bool may_request_approval() const { return true; }
};

struct PipelineOptions {
  std::string version;                   // shown in the CONFIG section
  int max_depth = 10;                    // F1: depths 0..10 run, 11 is dropped
  int max_attempts = 3;                  // D16
  std::string default_actuator = "CLI";  // DEFAULT_ACTUATOR
  std::vector<std::string> silent_actuators = {"CLI", "SYSTEM-MESSAGE", "EMACS"};  // SILENT_ACTUATORS
  std::string assistant_name = "Agent";                                            // MEMEX_ASSISTANT
  std::size_t log_lines = 20;                                                      // CONTEXT_LOG_LIMIT
  // PRIVACY_FILTER_TAGS: memory projects tagged with one of these stay out of
  // the prompt's CONTEXT (G7), which may go to a model elsewhere.
  std::vector<std::string> privacy_tags = {"@personal"};
  std::size_t context_tokens = 8192;
  // What a session's transcript may hold, in estimated tokens, before its
  // oldest exchanges are dropped; 0: a quarter of the smallest context
  // window of the cascade's providers (context_tokens when none is known).
  // Kept only while a provider of the cascade sends transcripts (a real model).
  std::size_t transcript_tokens = 0;
  // Standing mandates (D8) besides the skills' own (their mandate hooks):
  // each gets the signal and returns a line or "".
  std::vector<std::function<std::string(const Value&)>> mandates;
  // The identity file's text (seed D8's agent identity), shown in IDENTITY
  // after the assistant's name; "" for none.
  std::string identity;
  // Consensus on actions (pipeline/consensus.hpp): off unless configured; a
  // signal whose :META has :CONSENSUS T asks for it on every proposal.
  ConsensusConfig consensus;
};

// How the loop of one injected signal ended, for the caller and tests.
struct LoopReport {
  int cycles = 0;     // signals processed, the injected one and its feedback
  Value last_signal;  // the last signal as the loop left it (with :STATUS)
  // "done", "depth", "interrupt", "error", "skip", "abort", "cancelled"
  // (its model call was cancelled: the client went away, or the pipeline
  // stopped making calls): static text.
  std::string_view stopped_by;
};

class LocalOnlySessions;

class Pipeline {
 public:
  struct Services {
    Registry& registry;
    Cascade& cascade;
    Executor& executor;                  // reasoning, gates, continuations
    Executor& blocking;                  // actuators and tools
    MemoryStore* memory = nullptr;       // optional
    ApprovalStore* approvals = nullptr;  // optional: without it approvals are refused (blocked)
    // Called once, on the thread that perceived it, when the interrupt flag
    // is first set (the :INTERRUPT sensor, or interrupt()): the host's cue to
    // shut down (seed H7). Optional.
    std::function<void()> on_interrupt = {};
    // Optional: every verification is recorded there (pipeline/decision_log.hpp).
    DecisionLog* decisions = nullptr;
    // Optional: tools served outside the skills (the daemon's MCP servers),
    // offered and dispatched beside the skills' own (pipeline/external_tools.hpp).
    ExternalTools* external_tools = nullptr;
    // Optional: the operator's rules and standing approvals
    // (pipeline/rule_book.hpp), applied around every verification.
    RuleBook* rules = nullptr;
  };

  Pipeline(const Services& services, PipelineOptions options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // C1: takes in a signal. Without :META it gets (:SOURCE :SYSTEM :SESSION-ID
  // "internal"); :DEPTH is forced to 0. `reply` receives what the :TUI
  // actuator sends and approval notices (may be null); `done` is called once,
  // on a pipeline thread, when the signal's loop has ended (stopped_by
  // "interrupt" without a cycle when the Pipeline was destroyed while the
  // signal still waited behind others of its session).
  void inject(Value signal, std::shared_ptr<ReplySink> reply = nullptr,
              InlineFunction<void(LoopReport)> done = nullptr);

  // Approves a pending action by token, runs it once through the last-mile
  // gates and its actuator, and reports the outcome (the actuator's result, or
  // why it did not run). `who` is recorded ("cli", "wire"), and so is the run:
  // running before the actuator is called, done or failed after.
  void approve(std::string token, std::string who, std::function<void(Result<Value>)> done);
  // In a fleet: runs an action approved on another node, once this node has
  // claimed its run (refused when it may not), through this node's gates
  // and actuator, as approve() does after its decision.
  void run_approved(std::string token, std::function<void(Result<Value>)> done);
  // Denies a pending action by token.
  Result<Approval> deny(const std::string& token, const std::string& who);
  // Tells the session of an approval that expired undecided what came of it
  // (`text`): the model's call that proposed it is answered with it in the
  // session's transcript.
  void expired(const Approval& approval, const std::string& text);

  // F3: sets the interrupt flag; every loop stops at its next cycle, and
  // every signal injected after it ends at once ("interrupt"). It is never
  // cleared: an interrupted pipeline is shutting down. Model calls in flight
  // are cancelled (their loops end "interrupt").
  void interrupt() noexcept;
  bool interrupted() const noexcept;
  // Cancels every model call in flight, and every later one as it starts:
  // their loops end quietly ("cancelled"); the rest of a loop (an actuator
  // running) goes on. For a host that stops and will not wait on a model.
  // Never undone. Any thread.
  void cancel_calls() noexcept;

  // Signals processed (cycles run) since start, for status.
  std::uint64_t signals_processed() const noexcept;
  // Signals currently being processed or queued.
  std::size_t in_flight() const noexcept;
  // Injected signals whose loop has ended, by the sensor of the signal
  // injected (counted_sensors(), signal.hpp) and how its loop ended
  // (LoopReport::stopped_by, or "other"), for metrics: one entry per pair,
  // zeros included. Sharded counts, read without a lock; any thread.
  struct SignalTally {
    std::string_view sensor;
    std::string_view outcome;
    std::uint64_t count = 0;
  };
  std::vector<SignalTally> signals_finished() const;
  // The values SignalTally::outcome takes.
  static std::span<const std::string_view> loop_outcomes() noexcept;
  // Sessions kept (busy, or idle with their recent log lines); idle ones
  // beyond kMaxIdleSessions are dropped, the one idle longest first.
  std::size_t sessions_kept() const;
  static constexpr std::size_t kMaxIdleSessions = 4096;
  // Sessions that reached private data: their model calls go to local
  // providers only, for as long as the pipeline lives (pipeline/model_routing.hpp).
  const LocalOnlySessions& local_only_sessions() const noexcept;
  // What the consensus rounds came to, per set of voting providers.
  const ConsensusStats& consensus_stats() const noexcept;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// E7: how a tool's result reads: (:STATUS :SUCCESS :CONTENT c) -> c;
// (:STATUS :ERROR :MESSAGE m) -> "ERROR [<tool>]: m"; other lists ->
// "TOOL [<tool>] RESULT: <printed>"; anything else -> "TOOL [<tool>] RESULT: <value>".
std::string tool_result_format(std::string_view tool, const Value& result);

}  // namespace passepartout
