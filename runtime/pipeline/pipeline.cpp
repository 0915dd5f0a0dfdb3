// The metabolic loop as continuations: each cycle runs on the executor, hands
// the provider call to the cascade, and goes on from its completion; actuators
// run on the blocking executor and come back the same way.
#include "pipeline/pipeline.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

#include "base/interval_clock.hpp"
#include "base/log.hpp"
#include "memory/global_awareness.hpp"
#include "memory/memory_store.hpp"
#include "pipeline/action_record.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/errors.hpp"
#include "base/executor.hpp"
#include "pipeline/gate_log.hpp"
#include "pipeline/prompt_builder.hpp"
#include "pipeline/prompt_selector.hpp"
#include "pipeline/response_parser.hpp"
#include "pipeline/verifier.hpp"
#include "providers/cascade.hpp"
#include "skills/host_api.hpp"
#include "skills/registry.hpp"
#include "base/thread_shards.hpp"
#include "base/ascii.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

using namespace key_literals;

// Runs the gates and records their decisions when any gate did not simply
// pass. The usual verification, all plain passes, reads the clock once.
void verify_and_record(std::string_view stage, const Snapshot& snapshot, const Value& action, const Value& signal,
                       Verification& out) {
  const IntervalClock::Ticks start = IntervalClock::now();
  Verifier::verify(snapshot, action, signal, out);
  if (out.trace.all_plain_passes()) return;
  log_gate_decisions(stage, out, action, IntervalClock::elapsed(start, IntervalClock::now()));
}

constexpr std::string_view kComponent = "pipeline";

bool type_is(const Value& message, const Key& type) {
  return message.at("TYPE"_key).is_keyword(type);
}
bool is_log_or_event(const Value& message) {
  return type_is(message, "LOG"_key) || type_is(message, "EVENT"_key);
}
const Value& sensor_of(const Value& signal) {
  return signal.path("PAYLOAD"_key, "SENSOR"_key);
}

// The sensor's name ("USER-INPUT"), or "UNKNOWN"; a view into `signal`.
std::string_view sensor_name(const Value& signal) {
  const Value& sensor = sensor_of(signal);
  return sensor.is_keyword() ? sensor.text() : std::string_view("UNKNOWN");
}

std::int64_t depth_of(const Value& signal) {
  const Value& depth = signal.at("DEPTH"_key);
  return depth.is_integer() ? depth.as_integer() : 0;
}

// Whether `name` is `literal`: the built-in targets are compared on every
// signal, and with the length known here the compiler compares the bytes
// in place instead of calling memcmp.
template <std::size_t N>
bool is_named(std::string_view name, const char (&literal)[N]) noexcept {
  return name.size() == N - 1 && std::memcmp(name.data(), literal, N - 1) == 0;
}

// Appends the name a keyword or string gives a target, upper-case without
// ':'; nothing for any other value.
void append_target_name(std::string& out, const Value& target) {
  if (!target.is_keyword() && !target.is_string() && !target.is_symbol()) return;
  std::string_view name = target.text();
  if (!name.empty() && name.front() == ':') name.remove_prefix(1);
  if (target.is_keyword()) {
    out.append(name);  // a keyword's name is kept upper-case
  } else {
    append_upper_ascii(out, name);
  }
}

// A keyword or string naming a target, as an upper-case name without ':'.
std::string target_name(const Value& target) {
  std::string name;
  append_target_name(name, target);
  return name;
}

// E7: the tool a :TOOL action names, lower-cased ("" when it names none).
std::string tool_name_of(const Value& action) {
  const Value& tool = action.path("PAYLOAD"_key, "TOOL"_key);
  return tool.is_string() || tool.is_keyword() || tool.is_symbol() ? ascii_lower(tool.text()) : std::string();
}

// E7: a :TOOL action's arguments, unwrapped one level when the first element is itself a list.
Value tool_args_of(const Value& action) {
  const Value& args = action.path("PAYLOAD"_key, "ARGS"_key);
  return args.is_list() && args.items()[0].is_list() ? args.items()[0] : args;
}

// (:TYPE :EVENT :DEPTH d :META m :PAYLOAD payload)
Value feedback_event(std::int64_t depth, const Value& meta, Value payload) {
  return Value::plist({{"TYPE", Value::keyword("EVENT"_key)},
                       {"DEPTH", Value::integer(depth)},
                       {"META", meta},
                       {"PAYLOAD", std::move(payload)}});
}

// D16 and Decisions 5: what the Reason stage reasons about.
bool is_reasoned(const Value& signal) {
  if (!type_is(signal, "EVENT"_key)) return false;
  const Value& sensor = sensor_of(signal);
  return sensor.is_keyword("USER-INPUT"_key) || sensor.is_keyword("CHAT-MESSAGE"_key) ||
         sensor.is_keyword("TOOL-OUTPUT"_key) || sensor.is_keyword("TOOL-ERROR"_key);
}

}  // namespace

std::string tool_result_format(std::string_view tool, const Value& result) {
  if (result.is_list()) {
    const Value& status = result.at("STATUS"_key);
    if (status.is_keyword("SUCCESS"_key) && result.get("CONTENT"_key) != nullptr) {
      const Value& content = result.at("CONTENT"_key);
      return content.is_string() ? std::string(content.text()) : to_sexp(content);
    }
    if (status.is_keyword("ERROR"_key)) {
      const Value& message = result.at("MESSAGE"_key);
      return "ERROR [" + std::string(tool) + "]: " +
             (message.is_string() ? std::string(message.text()) : to_sexp(message));
    }
    return "TOOL [" + std::string(tool) + "] RESULT: " + to_sexp(result);
  }
  return "TOOL [" + std::string(tool) + "] RESULT: " +
         (result.is_string() ? std::string(result.text()) : to_sexp(result));
}

Value user_input_signal(std::string_view text, std::string_view session, std::string_view source) {
  return Value::plist(
      {{"TYPE", Value::keyword("EVENT"_key)},
       {"META", Value::plist({{"SOURCE", Value::keyword(source)}, {"SESSION-ID", Value::string(session)}})},
       {"PAYLOAD", Value::plist({{"SENSOR", Value::keyword("USER-INPUT"_key)}, {"TEXT", Value::string(text)}})}});
}

Value heartbeat_signal() {
  // :UNIX-TIME is Lisp universal time (seconds since 1900) despite its name (A3).
  return Value::plist({{"TYPE", Value::keyword("EVENT"_key)},
                       {"PAYLOAD", Value::plist({{"SENSOR", Value::keyword("HEARTBEAT"_key)},
                                                 {"UNIX-TIME", Value::integer(universal_time_now())}})}});
}

// --- the shared state ---------------------------------------------------------

struct Pipeline::Impl {
  Impl(Services s, PipelineOptions o) : services(s), options(std::move(o)) {}

  Services services;
  PipelineOptions options;
  std::atomic<bool> interrupt_flag{false};
  // Sets the flag; the first to set it tells the host (Services::on_interrupt).
  void raise_interrupt() noexcept {
    if (interrupt_flag.exchange(true, std::memory_order_acq_rel)) return;
    log_message(LogLevel::warn, kComponent, "METABOLISM: interrupt flag set; every loop stops at its next cycle.");
    if (!services.on_interrupt) return;
    try {
      services.on_interrupt();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the host's callback must not end the loop
    }
  }
  ShardedCounter processed;  // cycles run
  ShardedCounter active;     // signals injected and not finished

  // What each Run holds on to: aliases of this Impl with a reference count
  // per thread shard (a Run takes one per signal). ~Pipeline publishes null,
  // which breaks the cycle; Runs in flight keep the Impl alive until they end.
  Published<Impl> self{nullptr};

  // One session's queue: its signals run one at a time, in order. A signal's
  // loop is a chain of steps, each posting at most the next, so a session has
  // at most one step queued or running: the queue orders the session without
  // a strand, and each step sees what the one before wrote (the executor's
  // queue orders them).
  struct Pending {
    Value signal;
    std::shared_ptr<ReplySink> reply;
    InlineFunction<void(LoopReport)> done;
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
  // Starts the loop of `pending` on the executor.
  void start(const std::shared_ptr<Session>& session, Pending&& pending);
  void finished(const std::shared_ptr<Session>& session);
};

// One signal's loop: the injected signal and its feedback, cycle by cycle.
struct Run : std::enable_shared_from_this<Run> {
  std::shared_ptr<Pipeline::Impl> pipeline;
  std::shared_ptr<Pipeline::Impl::Session> session;
  std::shared_ptr<ReplySink> reply;
  InlineFunction<void(LoopReport)> done;
  LoopReport report;

  // The cycle in progress.
  Value signal;  // as perceived
  std::shared_ptr<const Snapshot> snapshot;
  int attempt = 0;
  bool target_implied = false;  // the action being acted on named no :TARGET of its own (E4)
  Value reasoning;  // the signal copy reasoning works on (carries :REJECTION-TRACE)
  Value last_rejection;
  std::vector<std::string> approval_gates;  // "name@version" of the gates that asked
  // The cascade's answer, kept here from its completion to the step that
  // reasons on it, so that the posted step holds only the run (and is kept
  // without an allocation; see InlineFunction). reasoned() reads it only
  // before it asks the cascade again, whose completion overwrites it.
  CascadeOutcome cascade_outcome;

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

  // --- the loop (F1) -----------------------------------------------------------

  void cycle(Value next) {
    const std::int64_t depth = depth_of(next);
    if (depth > options().max_depth) {
      log_message(LogLevel::error, kComponent, "METABOLISM ERROR: Max recursion depth reached.");
      signal = std::move(next);
      finish("depth");
      return;
    }
    if (pipeline->interrupt_flag.load(std::memory_order_acquire)) {
      log_message(LogLevel::warn, kComponent, "METABOLISM: Interrupted by shutdown signal.");
      signal = std::move(next);
      finish("interrupt");
      return;
    }
    ++report.cycles;
    pipeline->processed.add(1);
    snapshot = services().registry.snapshot();
    signal = perceive(std::move(next));
    if (is_reasoned(signal)) {
      attempt = 0;
      last_rejection = Value();
      reasoning = signal;
      think();
    } else {
      act(Value());
    }
  }

  // Ends the loop; the report carries `signal` as the loop left it.
  void finish(std::string_view why) {
    report.last_signal = std::move(signal);
    report.stopped_by = why;
    if (done) {
      try {
        done(std::move(report));
      } catch (...) {  // NOLINT(bugprone-empty-catch): the caller's callback must not end the loop
      }
    }
    pipeline->finished(session);
  }

  // Feedback without :META inherits the current one; then the next cycle.
  void next_cycle(Value feedback) {
    if (feedback.is_nil()) {
      finish("done");
      return;
    }
    if (feedback.get("META"_key) == nullptr && signal.get("META"_key) != nullptr) {
      feedback = feedback.with("META"_key, signal.at("META"_key));
    }
    post(shared_from_this(), [this, feedback = std::move(feedback)]() mutable { cycle(std::move(feedback)); });
  }

  // --- Perceive (C2) -------------------------------------------------------------

  Value perceive(Value incoming) {
    const Value& sensor = sensor_of(incoming);
    {  // "GATE [Perceive]: EVENT (USER-INPUT) [Source: TUI]", built in one string
      using namespace std::string_view_literals;  // appended without measuring them first
      std::string& line = log_line_buffer();
      line += "GATE [Perceive]: "sv;
      const std::size_t before_type = line.size();
      append_target_name(line, incoming.at("TYPE"_key));
      if (line.size() == before_type) line += "NIL"sv;
      line += " ("sv;
      line += sensor_name(incoming);
      line += ") [Source: "sv;
      append_target_name(line, incoming.path("META"_key, "SOURCE"_key));
      line += ']';
      log_message(LogLevel::info, kComponent, line);
    }
    MemoryStore* memory = services().memory;
    if (type_is(incoming, "EVENT"_key) && memory != nullptr) {
      if (sensor.is_keyword("BUFFER-UPDATE"_key) && incoming.path("PAYLOAD"_key, "AST"_key).is_list()) {
        memory->snapshot();
        if (auto ingested = memory->ingest(incoming.path("PAYLOAD"_key, "AST"_key)); !ingested) {
          log_message(LogLevel::warn, kComponent, "PERCEIVE: " + ingested.error().message);
        }
      } else if (sensor.is_keyword("POINT-UPDATE"_key) && incoming.path("PAYLOAD"_key, "ELEMENT"_key).is_list()) {
        // The element at the client's point: the session's focus from now on.
        const Value& element = incoming.path("PAYLOAD"_key, "ELEMENT"_key);
        memory->snapshot();
        auto ingested = memory->ingest(element);
        if (!ingested) {
          log_message(LogLevel::warn, kComponent, "PERCEIVE: " + ingested.error().message);
        } else {
          session->foveal_focus = *ingested;
        }
      }
    }
    if (sensor.is_keyword("INTERRUPT"_key)) pipeline->raise_interrupt();
    // C2: the signal carries the session's focus (`sensor` points into the
    // signal as it was: not used past here).
    if (!session->foveal_focus.empty() && incoming.get("FOVEAL-FOCUS"_key) == nullptr) {
      incoming = std::move(incoming).with("FOVEAL-FOCUS"_key, Value::string(session->foveal_focus));
    }

    // Skills whose manifest trigger matches see the signal (heartbeats included: Decisions 9).
    for (const Slot* slot : snapshot->observers()) {
      const TriggerSpec& trigger = slot->manifest().trigger;
      if (!trigger.declared() || !trigger.matches(incoming)) continue;
      if (auto observed = slot->observe(incoming); !observed) {
        log_message(LogLevel::warn, slot->name(), "observe failed: " + observed.error().message);
      }
    }
    return std::move(incoming).with("STATUS"_key, Value::keyword("PERCEIVED"_key));
  }

  // --- Reason (D7-D16) -------------------------------------------------------------

  // The raw prompt: the triggered skill's, else the text, else the tool
  // result; written over `out` (the session's buffer, reused).
  void raw_prompt(std::string& out) {
    if (const Slot* skill = select_prompt_skill(*snapshot, reasoning)) {
      pp_call call;
      const pp_value* generated = nullptr;
      if (skill->api().prompt(skill->instance(), &call, to_handle(reasoning), &generated) != PP_OK) {
        throw PipelineError("the prompt generator of skill '" + skill->name() +
                            "' failed: " + (call.error.empty() ? std::string("no reason given") : call.error));
      }
      const Value& text = from_handle(generated);
      if (text.is_string()) {
        out.assign(text.text());
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

  // The TOOLS section and the tools handed to providers depend only on the
  // snapshot: built once per snapshot and thread, not per signal.
  struct ToolView {
    std::uint64_t snapshot_id = 0;
    std::string belt;
    Value values;  // ((:NAME .. :DESCRIPTION .. :PARAMETERS ..) ...), NIL when none
  };

  const ToolView& tool_view() const {
    thread_local ToolView view;
    if (view.snapshot_id == snapshot->id()) return view;
    std::vector<ToolListing> listings;
    std::vector<Value> values;
    for (const Snapshot::ToolEntry& entry : snapshot->tools()) {
      const SkillTool& tool = entry.tool();
      listings.push_back(ToolListing{tool.name, tool.description, tool.parameters_json});
      values.push_back(Value::plist({{"NAME", Value::string(tool.name)},
                                     {"DESCRIPTION", Value::string(tool.description)},
                                     {"PARAMETERS", tool.parameters}}));
    }
    view.belt = tool_belt(std::move(listings));
    view.values = Value::list(values);
    view.snapshot_id = snapshot->id();
    return view;
  }

  // The CONFIG line of `parts` (filled but for it): it changes only with the
  // snapshot, the provider lineup, the count of pending approvals and the
  // options, so each thread keeps the last one it built.
  std::string_view config_line(const PromptParts& parts, const std::shared_ptr<const Cascade::Lineup>& lineup) const {
    struct ConfigView {
      std::uint64_t snapshot_id = 0;
      std::shared_ptr<const Cascade::Lineup> lineup;  // held: a new lineup cannot take its address
      std::size_t pending_approvals = 0;
      std::size_t context_tokens = 0;
      std::string version;
      std::string text;
    };
    thread_local ConfigView view;
    if (view.snapshot_id != snapshot->id() || view.lineup != lineup ||
        view.pending_approvals != parts.pending_approvals || view.context_tokens != parts.context_tokens ||
        view.version != parts.version) {
      view.text = config_section(parts);
      view.snapshot_id = snapshot->id();
      view.lineup = lineup;
      view.pending_approvals = parts.pending_approvals;
      view.context_tokens = parts.context_tokens;
      view.version = parts.version;
    }
    return view.text;
  }

  void think() {
    ++attempt;
    MemoryStore* memory = services().memory;
    if (memory != nullptr) memory->snapshot();  // D7: before every LLM call

    PromptParts parts;
    parts.version = options().version;
    std::shared_ptr<const Cascade::Lineup> lineup = services().cascade.lineup();
    parts.providers = lineup->names;
    parts.context_tokens = options().context_tokens;
    parts.gates = snapshot->gates().size();
    parts.pending_approvals = services().approvals != nullptr ? services().approvals->pending_count() : 0;
    parts.assistant_name = options().assistant_name;
    parts.rejection = reasoning.path("PAYLOAD"_key, "REJECTION-TRACE"_key);
    for (const auto& mandate : options().mandates) {
      try {
        std::string line = mandate(reasoning);
        if (!line.empty()) parts.mandates.push_back(std::move(line));
      } catch (...) {  // NOLINT(bugprone-empty-catch): D8 — a failing mandate is ignored
      }
    }
    parts.config = config_line(parts, lineup);
    const ToolView& tools = tool_view();
    parts.tools = tools.belt;
    if (memory != nullptr) {
      const std::string foveal = foveal_id_of(reasoning);
      parts.context = render_global_awareness(*memory, AwarenessOptions{foveal, options().privacy_tags});
    }
    thread_local std::string logs;  // the LOGS section when it is not the session's own text
    parts.logs = recent_log_text(options().log_lines, &session->logs, logs);
    parts.time = time_section();

    ProviderRequest& request = session->request;
    request.system_prompt.clear();
    append_system_prompt(request.system_prompt, parts);
    raw_prompt(request.prompt);
    request.model.clear();
    request.context = reasoning;
    request.tools = tools.values;
    if (reply_open()) {
      // Chunks come before the completion, which holds the run (and its sink) alive.
      request.on_chunk = [run = this](std::string_view delta) {
        run->reply->send(Value::plist({{"TYPE", Value::keyword("STREAM-CHUNK"_key)},
                                       {"PAYLOAD", Value::plist({{"TEXT", Value::string(delta)}})}}));
      };
    }
    // The completion may run on any thread; the run is idle meanwhile, and
    // posting the step orders this write before the step's read. The step is
    // posted even when the answer comes during the call: with two loops, a
    // signal run start to end in one task measured about a fifth slower
    // once, and no faster since.
    services().cascade.call_lent(std::move(lineup), request,
                                 [self = shared_from_this()](CascadeOutcome&& answer) mutable {  // called once
                                   Run& run = *self;
                                   run.cascade_outcome = std::move(answer);
                                   run.post(std::move(self), [&run] { run.reasoned(run.cascade_outcome); });
                                 });
  }

  void reasoned(const CascadeOutcome& outcome) {
    {  // the call is over: the session's request lets go of the signal and of the callback into this run
      ProviderRequest& request = session->request;
      request.context = Value();
      request.tools = Value();
      request.on_chunk = nullptr;
    }
    if (!outcome.ok()) {
      log_message(LogLevel::warn, kComponent,
                  "REASON: no provider answered (" + std::to_string(outcome.failures.size()) + " failed)");
      // A skill may handle it; by default the user is told (D11: the
      // exhaustion message is the answer).
      if (policy_decides(LlmError(std::string(Cascade::kExhausted), outcome.failure_messages(), attempt))) return;
    }
    target_implied = false;
    Value action = parse_response(outcome.reply);
    const std::string target = target_of(action, false);
    action = aimed(std::move(action), target, false);
    Verification verification;
    verify_and_record("reason", *snapshot, action, reasoning, verification);
    switch (verification.outcome) {
      case VerifyOutcome::approval_required: {
        approval_gates = approving_gates(verification);
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
      case VerifyOutcome::blocked: {
        last_rejection = verification.to_value();
        if (attempt < options().max_attempts) {
          log_message(LogLevel::info, kComponent,
                      "REASON: proposal rejected (attempt " + std::to_string(attempt) + " of " +
                          std::to_string(options().max_attempts) + "); asking again");
          reasoning =
              reasoning.with("PAYLOAD"_key, reasoning.at("PAYLOAD"_key).with("REJECTION-TRACE"_key, last_rejection));
          think();
          return;
        }
        // After the last attempt a skill may handle it; by default the user
        // is shown the rejection (E8).
        if (policy_decides(GateError("every proposal was rejected (" + std::to_string(attempt) + " attempts): " +
                                         std::string(verification.reason.is_string() ? verification.reason.text() : ""),
                                     deciding_gate(verification), last_rejection))) {
          return;
        }
        reasoning = Value();
        signal = std::move(signal).with("STATUS"_key, Value::keyword("REASONED"_key));
        act(last_rejection);
        return;
      }
    }
  }

  // --- Act (E1) ----------------------------------------------------------------------

  // The gate whose block or failure decided `verification` ("" when none did).
  static std::string deciding_gate(const Verification& verification) {
    for (std::size_t i = verification.trace.size(); i-- > 0;) {
      const GateTraceView entry = verification.trace[i];
      if (entry.result == GateResult::blocked || entry.result == GateResult::failed) return std::string(entry.name());
    }
    return {};
  }

  // Gates that asked for approval, as "name@version".
  static std::vector<std::string> approving_gates(const Verification& verification) {
    std::vector<std::string> gates;
    for (std::size_t i = 0; i < verification.trace.size(); ++i) {
      const GateTraceView entry = verification.trace[i];
      if (entry.result == GateResult::approval) gates.push_back(entry.slot->name() + "@" + entry.slot->version_text());
    }
    return gates;
  }

  // E1 step 1: record the approval, tell the source, suspend (no feedback).
  void suspend(const Value& approval_event, std::vector<std::string> gates) {
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
      log_message(LogLevel::warn, kComponent,
                  "ACT: an action needs approval but no approval store is configured; blocked");
      refuse("Action blocked: it needs a human's approval and approvals are not enabled.");
      return;
    }
    if (reply != nullptr && !reply->may_request_approval()) {
      log_message(LogLevel::warn, kComponent,
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
    auto approval = store->create(action, signal.at("META"_key), std::move(gates),
                                  reason.is_string() ? std::string(reason.text()) : std::string());
    if (!approval && approval.error().code == ErrorCode::limit_exceeded) {  // too many pending: a flood, or a backlog
      log_message(LogLevel::warn, kComponent, "ACT: " + approval.error().message);
      refuse("Action not run: " + approval.error().message);
      return;
    }
    if (!approval) throw PipelineError("cannot record the approval: " + approval.error().message);
    log_message(LogLevel::info, kComponent,
                "ACT: Action requires approval — creating Flight Plan + HITL (" + approval->token + ")");
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

  // Sends `message` to the signal's source when it has an open reply sink.
  void deliver(const Value& message) {
    if (reply_open()) reply->send(message);
  }

  // Tells the source what an actuator ran and what came of it (an
  // ActionRecord's message), so the user sees it whatever the model says next.
  void show_acted(Value payload) {
    if (!reply_open()) return;
    const Value& source = signal.path("META"_key, "SOURCE"_key);
    deliver(Value::plist({{"TYPE", Value::keyword("REQUEST"_key)},
                          {"TARGET", source.is_keyword() ? source : Value::keyword("TUI"_key)},
                          {"PAYLOAD", std::move(payload)}}));
  }

  // `untraced`, when given, is `approved` without its :GATE-TRACE.
  void act(const Value& approved, const Value* untraced = nullptr) {
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
      verify_and_record("last-mile", *snapshot, bare, signal, last_mile);
      if (last_mile.outcome == VerifyOutcome::blocked) {
        log_message(LogLevel::warn, kComponent, "ACT BLOCKED: Action failed last-mile deterministic check.");
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

  // E2: where `action` goes, as an upper-case name: its :TARGET (unless
  // `to_source`), else the signal's source, else DEFAULT_ACTUATOR; :SYSTEM
  // becomes :TUI while the source has an open reply stream.
  std::string target_of(const Value& action, bool to_source) const {
    std::string target = to_source ? std::string() : target_name(action.at("TARGET"_key));
    if (target.empty()) target = target_name(signal.path("META"_key, "SOURCE"_key));
    if (target.empty()) target = ascii_upper(options().default_actuator);
    if (is_named(target, "SYSTEM") && reply_open()) target = "TUI";
    return target;
  }

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
  Value aimed(Value action, std::string_view target, bool to_source) {
    if (!needs_aiming(action, target)) return action;
    if (to_source || action.get("TARGET"_key) == nullptr) target_implied = true;
    return std::move(action).with("TARGET"_key, Value::keyword(target));
  }
  // Whether aimed() would change `action`: it goes to an actuator that acts,
  // and its :TARGET is not already that actuator's keyword.
  static bool needs_aiming(const Value& action, std::string_view target) {
    if (!action.is_list() || !acts(target)) return false;
    const Value& named = action.at("TARGET"_key);
    return !(named.is_keyword() && named.text() == target);
  }

  // E2: hands `action` to the actuator `target` (target_of()); built-ins run
  // here, skills' on the blocking executor.
  void dispatch(Value action, const std::string& target) {
    if (action.get("META"_key) == nullptr && signal.get("META"_key) != nullptr) {
      action = std::move(action).with("META"_key, signal.at("META"_key));
    }

    if (is_named(target, "TUI")) {
      Value sent = std::move(action);
      if (sent.at("PAYLOAD"_key).is_list() || sent.at("PAYLOAD"_key).is_nil()) {
        const std::size_t rules = services().approvals != nullptr ? services().approvals->pending_count() : 0;
        Value payload = sent.at("PAYLOAD"_key).with("RULE-COUNT"_key, Value::integer(static_cast<std::int64_t>(rules)));
        sent = std::move(sent).with("PAYLOAD"_key, std::move(payload));
      }
      deliver(sent);
      acted(Value());
      return;
    }
    if (is_named(target, "SYSTEM")) {
      system_actuator(action);
      acted(Value());
      return;
    }
    if (is_named(target, "TOOL")) {
      tool_actuator(action);
      return;
    }
    const Snapshot::ActuatorEntry* actuator = snapshot->find_actuator(target);
    if (actuator == nullptr) {
      log_message(LogLevel::error, kComponent, "ACT ERROR: No actuator registered for '" + ascii_lower(target) + "'");
      acted(Value());
      return;
    }
    if (actuator->unguarded != nullptr) {  // the gates ran on this snapshot and failed it: never reached
      log_message(LogLevel::error, kComponent, "ACT ERROR: " + *actuator->unguarded + "; the action did not run");
      acted(Value());
      return;
    }
    // The snapshot travels with the task: the skill cannot be unloaded under it.
    services().blocking.post([self = shared_from_this(), snapshot = snapshot, actuator, action, target] {
      const LogScope scope(&self->session->logs);  // the session waits for this step alone
      const ActionRecord record(target, action);
      Result<Value> result = actuator->act(action, self->signal);
      Value shown = record.finish(result);
      self->post(self, [self, result = std::move(result), shown = std::move(shown), action, target]() mutable {
        self->show_acted(std::move(shown));
        if (!result) {
          log_message(LogLevel::error, kComponent, "ACT ERROR [" + target + "]: " + result.error().message);
          self->acted(self->make_feedback(action, Value::string("ERROR: " + result.error().message)));
          return;
        }
        self->acted(self->make_feedback(action, *result));
      });
    });
  }

  // E1 step 3: what an actuator's result feeds back.
  Value make_feedback(const Value& action, const Value& result) {
    // An event or log the actuator made is the feedback, one level deeper
    // whatever depth it claims (F2): the depth limit bounds every loop.
    if (result.is_list() && is_log_or_event(result)) return result.with("DEPTH"_key, Value::integer(depth_of(signal) + 1));
    if (result.is_nil()) return Value();
    // E4: an action that named no target of its own is never silent (the
    // :TARGET it carries was written in for the gates).
    const std::string own_target = target_implied ? std::string() : target_name(action.at("TARGET"_key));
    for (const std::string& silent : options().silent_actuators) {
      if (!own_target.empty() && ascii_upper(silent) == own_target) return Value();
    }
    return feedback_event(depth_of(signal) + 1, signal.at("META"_key),
                          Value::plist({{"SENSOR", Value::keyword("TOOL-OUTPUT"_key)},
                                        {"RESULT", result},
                                        {"TOOL", action.without("GATE-TRACE")}}));
  }

  // E6, Decisions 8: messages are logged; there is no evaluator.
  static void system_actuator(const Value& action) {
    const Value& command = action.path("PAYLOAD"_key, "ACTION"_key);
    if (command.is_keyword("MESSAGE"_key)) {
      const Value& text = action.path("PAYLOAD"_key, "TEXT"_key);
      log_message(LogLevel::info, "system",
                  "ACT [System]: " + (text.is_string() ? std::string(text.text()) : to_sexp(text)));
    } else if (command.is_keyword("EVAL"_key)) {
      log_message(LogLevel::error, "system",
                  "ACT ERROR [System]: :EVAL is refused: Passepartout has no evaluator (use a skill's tool instead)");
    } else {
      log_message(LogLevel::error, "system", "ACT ERROR [System]: Unknown command '" + to_sexp(command) + "'");
    }
  }

  // E7: a tool call, on the blocking executor.
  void tool_actuator(const Value& action) {
    const std::string name = tool_name_of(action);
    const Value args = tool_args_of(action);
    const std::int64_t depth = depth_of(signal) + 1;
    const Snapshot::ToolEntry* tool = snapshot->find_tool(name);
    if (tool == nullptr) {
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
    services().blocking.post([self = shared_from_this(), snapshot = snapshot, tool, args, name, depth, action] {
      const LogScope scope(&self->session->logs);  // the session waits for this step alone
      const ActionRecord record("TOOL", action);
      Result<Value> result = tool->call(args, self->signal);
      Value acted = record.finish(result).at("ACTED"_key);
      self->post(self, [self, result = std::move(result), acted = std::move(acted), name, depth]() mutable {
        const Value meta = self->signal.at("META"_key);
        if (!result) {
          self->acted(feedback_event(depth, meta,
                                     Value::plist({{"SENSOR", Value::keyword("TOOL-ERROR"_key)},
                                                   {"TOOL", Value::string(name)},
                                                   {"MESSAGE", Value::string(result.error().message)}})));
          return;
        }
        if (self->signal.path("META"_key, "SOURCE"_key).is_keyword()) {
          self->deliver(
              Value::plist({{"TYPE", Value::keyword("REQUEST"_key)},
                            {"TARGET", self->signal.path("META"_key, "SOURCE"_key)},
                            {"PAYLOAD", Value::plist({{"ACTION", Value::keyword("MESSAGE"_key)},
                                                      {"TEXT", Value::string(tool_result_format(name, *result))},
                                                      {"ACTED", acted}})}}));
        }
        self->acted(feedback_event(
            depth, meta,
            Value::plist(
                {{"SENSOR", Value::keyword("TOOL-OUTPUT"_key)}, {"RESULT", *result}, {"TOOL", Value::string(name)}})));
      });
    });
  }

  // E1 step 4.
  void acted(Value feedback) {
    signal = std::move(signal).with("STATUS"_key, Value::keyword("ACTED"_key));
    next_cycle(std::move(feedback));
  }

  // --- error tiers (F4, F5) ------------------------------------------------------------

  // F4: the skills' error policies see `error` ((:KIND :llm :MESSAGE "..." ...)),
  // highest priority first; the first to choose other than the standard
  // handling decides: skip ends the loop, abort too, fallback continues with
  // a :LOOP-ERROR carrying its text (to the source). True when one decided.
  bool policy_decides(const PassepartoutError& error) {
    if (snapshot == nullptr || snapshot->error_policies().empty()) return false;
    const Value value = error.to_value();
    std::optional<ErrorChoice> choice;
    for (const Slot* slot : snapshot->error_policies()) {
      choice = slot->error_policy(signal, value);
      if (choice && choice->kind != ErrorChoice::Kind::standard) break;
      choice.reset();
    }
    if (!choice) return false;
    log_message(LogLevel::info, kComponent,
                std::string("ERROR POLICY: ") + error.kind() + " error handled by '" + to_string(choice->kind) + "'");
    const std::int64_t depth = depth_of(signal);
    switch (choice->kind) {
      case ErrorChoice::Kind::skip:
        finish("skip");
        return true;
      case ErrorChoice::Kind::abort:
        finish("abort");
        return true;
      case ErrorChoice::Kind::fallback:
        next_cycle(feedback_event(depth + 1, signal.at("META"_key),
                                  Value::plist({{"SENSOR", Value::keyword("LOOP-ERROR"_key)},
                                                {"MESSAGE", choice->text},
                                                {"DEPTH", Value::integer(depth)}})));
        return true;
      case ErrorChoice::Kind::standard:
        break;
    }
    return false;
  }

  void crash(const PassepartoutError& error) {
    const std::string sensor(sensor_name(signal));
    const std::string message = error.what();
    log_message(LogLevel::error, kComponent, "METABOLISM CRASH [" + sensor + "]: " + message);
    if (policy_decides(error)) return;  // a skill's error policy chooses first
    const std::int64_t depth = depth_of(signal);
    const bool quiet_sensor = sensor == "LOOP-ERROR" || sensor == "TOOL-ERROR" || sensor == "SYNTAX-ERROR";
    if (!quiet_sensor) {
      log_message(LogLevel::error, kComponent, "CRITICAL ERROR: Initiating Micro-Rollback.");
      if (MemoryStore* memory = services().memory) static_cast<void>(memory->rollback(0));
    }
    if (depth > 2 || sensor == "LOOP-ERROR" || sensor == "TOOL-ERROR") {
      finish("error");
      return;
    }
    next_cycle(feedback_event(depth + 1, signal.at("META"_key),
                              Value::plist({{"SENSOR", Value::keyword("LOOP-ERROR"_key)},
                                            {"MESSAGE", Value::string(message)},
                                            {"DEPTH", Value::integer(depth)}})));
  }
};

// --- sessions ------------------------------------------------------------------------------

std::shared_ptr<Pipeline::Impl::Session>& Pipeline::Impl::session_in(SessionShard& shard, std::string_view id) {
  auto found = shard.sessions.find(id);
  if (found != shard.sessions.end()) return found->second;
  if (shard.sessions.size() >= kSessionsPerShard) {
    auto oldest = shard.sessions.end();
    for (auto it = shard.sessions.begin(); it != shard.sessions.end(); ++it) {
      if (!it->second->busy && (oldest == shard.sessions.end() || it->second->last_used < oldest->second->last_used)) {
        oldest = it;
      }
    }
    if (oldest != shard.sessions.end()) shard.sessions.erase(oldest);
  }
  auto& session = shard.sessions[std::string(id)];
  session = std::make_shared<Session>(options.log_lines, shard);
  return session;
}

void Pipeline::Impl::enqueue(std::string_view session_id, Pending&& pending) {
  std::shared_ptr<Session> session;
  {
    SessionShard& shard = shard_of(session_id);
    std::lock_guard lock(shard.mutex);
    session = session_in(shard, session_id);
    if (session->busy) {
      session->queue.push_back(std::move(pending));
      return;
    }
    session->busy = true;
    session->last_used = ++shard.clock;
  }
  start(session, std::move(pending));
}

void Pipeline::Impl::start(const std::shared_ptr<Session>& session, Pending&& pending) {
  auto run = std::make_shared<Run>();
  run->pipeline = self.get();
  if (!run->pipeline) {  // the Pipeline is gone: nothing new starts, and its caller hears so
    active.add(-1);
    if (pending.done) {
      try {
        pending.done(LoopReport{0, std::move(pending.signal), "interrupt"});
      } catch (...) {  // NOLINT(bugprone-empty-catch): the caller's callback must not end the loop
      }
    }
    return;
  }
  run->session = session;
  run->reply = std::move(pending.reply);
  run->done = std::move(pending.done);
  Run& started = *run;
  started.post(std::move(run), [&started, signal = std::move(pending.signal)]() mutable {
    started.cycle(std::move(signal));
  });
}

void Pipeline::Impl::finished(const std::shared_ptr<Session>& session) {
  active.add(-1);
  Pending next;
  {
    SessionShard& shard = session->shard;
    std::lock_guard lock(shard.mutex);
    if (session->queue.empty()) {
      session->busy = false;
      return;
    }
    next = std::move(session->queue.front());
    session->queue.pop_front();
    session->last_used = ++shard.clock;
  }
  start(session, std::move(next));
}

// --- Pipeline --------------------------------------------------------------------------------

Pipeline::Pipeline(Services services, PipelineOptions options)
    : impl_(std::make_shared<Impl>(services, std::move(options))) {
  impl_->self.publish(impl_);
}

Pipeline::~Pipeline() {
  impl_->self.publish(nullptr);
}

void Pipeline::inject(Value signal, std::shared_ptr<ReplySink> reply, InlineFunction<void(LoopReport)> done) {
  // C1: default meta; the client cannot choose its depth.
  if (!signal.is_list()) {
    signal = Value::plist({{"TYPE", Value::keyword("EVENT"_key)}, {"PAYLOAD", Value::plist({{"TEXT", signal}})}});
  }
  if (!signal.at("META"_key).is_list()) {
    signal = std::move(signal).with("META"_key, Value::plist({{"SOURCE", Value::keyword("SYSTEM"_key)},
                                                              {"SESSION-ID", Value::string("internal")}}));
  }
  signal = std::move(signal).with("DEPTH"_key, Value::integer(0));
  const Value& session = signal.path("META"_key, "SESSION-ID"_key);
  const std::string session_id = session.is_string() || session.is_keyword() ? std::string(session.text()) : "internal";
  impl_->active.add(1);
  impl_->enqueue(session_id, Impl::Pending{std::move(signal), std::move(reply), std::move(done)});
}

namespace {

// What an approved action runs on, found before the approval is decided.
struct ApprovedRun {
  Value action;   // with the signal's :META when it had none
  Value context;  // (:TYPE :EVENT :META m :PAYLOAD (:SENSOR :APPROVED)): the signal the actuator sees
  const Snapshot::ActuatorEntry* actuator = nullptr;
  const Snapshot::ToolEntry* tool = nullptr;
  Value args;  // for a tool
};

// The approved action runs once, through the last-mile gates: a gate that now
// blocks still stops it; approval requests from the gates that were approved
// (same name and version) are satisfied; a new one is not. Then its target
// must be an actuator or a tool of `snapshot`.
Result<ApprovedRun> plan_approved_run(const Snapshot& snapshot, const Approval& approval) {
  ApprovedRun run;
  run.context = Value::plist({{"TYPE", Value::keyword("EVENT"_key)},
                              {"META", approval.meta},
                              {"PAYLOAD", Value::plist({{"SENSOR", Value::keyword("APPROVED"_key)}})}});
  Verification check;
  verify_and_record("approval", snapshot, approval.action, run.context, check);
  if (check.outcome == VerifyOutcome::blocked) {
    return fail(ErrorCode::refused, "the gates now block the action: " +
                                        std::string(check.reason.is_string() ? check.reason.text() : ""));
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
  if (target == "TOOL") {
    run.tool = snapshot.find_tool(tool_name_of(run.action));
    run.args = tool_args_of(run.action);
    if (run.tool == nullptr) {
      return fail(ErrorCode::not_found,
                  "no loaded skill offers the tool '" + tool_name_of(run.action) + "'; the action did not run");
    }
    return run;
  }
  run.actuator = target.empty() ? nullptr : snapshot.find_actuator(target);
  if (run.actuator == nullptr) {
    return fail(ErrorCode::not_found, "no actuator serves target '" + ascii_lower(target) + "'; the action did not run");
  }
  return run;
}

}  // namespace

void Pipeline::approve(std::string token, std::string who, std::function<void(Result<Value>)> done) {
  ApprovalStore* store = impl_->services.approvals;
  if (store == nullptr) {
    done(fail(ErrorCode::refused, "approvals are not enabled on this daemon"));
    return;
  }
  // Checked before the decision is taken, so that an approval that cannot
  // run now (the gates block it, a new gate asks, nothing serves its target)
  // is not used up: it stays pending, to be approved once that has changed,
  // denied, or left to expire. An unknown, decided or expired token goes on
  // to the store, which says which.
  auto snapshot = impl_->services.registry.snapshot();
  std::optional<ApprovedRun> run;
  if (auto found = store->find(token); found && found->state == Approval::State::pending) {
    auto planned = plan_approved_run(*snapshot, *found);
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
  if (!run) {  // not read as pending a moment ago, yet approved now: checked after all
    auto planned = plan_approved_run(*snapshot, *approval);
    if (!planned) {
      static_cast<void>(store->record_run(token, Approval::Run::failed, planned.error().message));  // best effort
      done(fail(planned.error().code, planned.error().message));
      return;
    }
    run = std::move(*planned);
  }
  log_message(LogLevel::info, kComponent, "ACT: running approved action " + token + " (approved by " + who + ")");
  impl_->services.blocking.post([store, token = std::move(token), snapshot, run = std::move(*run),
                                 done = std::move(done)] {
    // Recorded as running, durably, before it runs: a daemon that dies
    // during the run finds it so when it starts again (then: interrupted).
    // Without that record it does not run.
    if (auto started = store->record_run(token, Approval::Run::running); !started) {
      log_message(LogLevel::error, kComponent,
                  "ACT: approved action " + token + " not run: " + started.error().message);
      done(fail(started.error().code, "the action did not run: " + started.error().message));
      return;
    }
    const ActionRecord record(run.actuator != nullptr ? run.actuator->name() : std::string("TOOL"), run.action);
    Result<Value> result =
        run.actuator != nullptr ? run.actuator->act(run.action, run.context) : run.tool->call(run.args, run.context);
    static_cast<void>(record.finish(result));  // the operator's reply carries the result itself
    auto ended = result ? store->record_run(token, Approval::Run::done)
                        : store->record_run(token, Approval::Run::failed, result.error().message);
    if (!ended) {  // the run happened; only its record is missing (it will read as interrupted)
      log_message(LogLevel::error, kComponent, "ACT: approved action " + token + ": " + ended.error().message);
    }
    done(std::move(result));
  });
}

Result<Approval> Pipeline::deny(const std::string& token, const std::string& who) {
  ApprovalStore* store = impl_->services.approvals;
  if (store == nullptr) return fail(ErrorCode::refused, "approvals are not enabled on this daemon");
  return store->deny(token, who);
}

void Pipeline::interrupt() noexcept { impl_->raise_interrupt(); }
bool Pipeline::interrupted() const noexcept { return impl_->interrupt_flag.load(std::memory_order_acquire); }
std::uint64_t Pipeline::signals_processed() const noexcept {
  return static_cast<std::uint64_t>(impl_->processed.sum());
}
std::size_t Pipeline::sessions_kept() const {
  std::size_t kept = 0;
  for (Impl::SessionShard& shard : impl_->session_shards) {
    std::lock_guard lock(shard.mutex);
    kept += shard.sessions.size();
  }
  return kept;
}

std::size_t Pipeline::in_flight() const noexcept {
  const std::int64_t active = impl_->active.sum();  // shards read one after another: never below 0 for long
  return active > 0 ? static_cast<std::size_t>(active) : 0;
}

}  // namespace passepartout
