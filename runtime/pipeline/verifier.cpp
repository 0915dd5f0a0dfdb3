// Verifier::verify, the gate loop, and the seed-shaped values it reports.
#include "pipeline/verifier.hpp"

#include <chrono>
#include <string>

#include "base/crash_context.hpp"
#include "base/log.hpp"
#include "base/log_fields.hpp"
#include "pipeline/credential_rule.hpp"
#include "pipeline/gate_watchdog.hpp"
#include "skills/host_api.hpp"

namespace passepartout {
namespace {

using namespace key_literals;

// One verification in 256 per thread times each gate (two clock reads per
// gate would cost more than the gates themselves); GateCounts reports the sample.
constexpr std::uint64_t kTimingSampleMask = 255;

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

static_assert(Snapshot::kMaxGateBudgetMs == GateWatch::kMaxBudgetMs, "a gate's budget must fit in its ticket");

// The calling thread's watch and counter shard, looked up once per thread:
// a constinit thread_local is one segment-relative load on the hot path.
struct ThreadContext {
  GateWatch* watch;
  std::size_t shard;
};
constinit thread_local ThreadContext t_context{nullptr, 0};

[[gnu::noinline]] const ThreadContext& first_thread_context() {
  t_context = ThreadContext{&GateWatchdog::this_thread(), thread_shard()};
  return t_context;
}

const ThreadContext& thread_context() {
  if (t_context.watch != nullptr) [[likely]]
    return t_context;
  return first_thread_context();
}

std::string gate_label(const Slot& slot) { return "gate '" + slot.name() + "' " + slot.version_text(); }

}  // namespace

const char* to_string(GateResult result) noexcept {
  switch (result) {
    case GateResult::passed:
      return "passed";
    case GateResult::rewritten:
      return "rewritten";
    case GateResult::blocked:
      return "blocked";
    case GateResult::approval:
      return "approval";
    case GateResult::failed:
      return "failed";
  }
  return "failed";
}

const char* to_string(VerifyOutcome outcome) noexcept {
  switch (outcome) {
    case VerifyOutcome::passed:
      return "passed";
    case VerifyOutcome::blocked:
      return "blocked";
    case VerifyOutcome::approval_required:
      return "approval-required";
  }
  return "blocked";
}

Value GateTrace::to_value() const {
  if (prebuilt_ != nullptr && all_plain_passes() && prebuilt_->size() == size_) return *prebuilt_;
  // Up to kInline entries are gathered on the stack; a plain pass is the
  // slot's prebuilt entry, so a trace of passes allocates only its list.
  Value inline_entries[kInline];
  std::vector<Value> spilled;
  Value* entries = inline_entries;
  if (size_ > kInline) {
    spilled.resize(size_);
    entries = spilled.data();
  }
  for (std::size_t i = 0; i < size_; ++i) {
    const GateTraceView e = (*this)[i];
    if (e.slot == nullptr) {  // a host rule
      const char* result = e.result == GateResult::blocked    ? "BLOCKED"
                           : e.result == GateResult::approval ? "APPROVAL"
                                                              : "FAILED";
      entries[i] = Value::list({Value::keyword("GATE"), Value::string(e.name()), Value::keyword("VERSION"),
                                Value::string(kGuardRuleVersion), Value::keyword("RESULT"), Value::keyword(result),
                                Value::keyword("REASON"), e.reason});
      continue;
    }
    if (e.result == GateResult::passed && e.reason.is_nil()) {
      entries[i] = e.slot->passed_trace_entry();
      continue;
    }
    const char* result = "PASSED";
    switch (e.result) {
      case GateResult::passed:
      case GateResult::rewritten:
        result = "PASSED";
        break;
      case GateResult::blocked:
        result = "BLOCKED";
        break;
      case GateResult::approval:
        result = "APPROVAL";
        break;
      case GateResult::failed:
        result = "FAILED";
        break;
    }
    Value entry[10] = {Value::keyword("GATE"),  e.slot->name_value(),     Value::keyword("VERSION"),
                       e.slot->version_value(), Value::keyword("RESULT"), Value::keyword(result)};
    std::size_t used = 6;
    if (e.result == GateResult::rewritten) {
      entry[used++] = Value::keyword("REWRITTEN");
      entry[used++] = Value::t();
    }
    if (!e.reason.is_nil()) {
      entry[used++] = Value::keyword("REASON");
      entry[used++] = e.reason;
    }
    entries[i] = Value::list(std::span<const Value>(entry, used));
  }
  return Value::list(std::span<const Value>(entries, size_));
}

Value rejection(std::string_view level, const std::string& text) {
  return Value::plist({{"TYPE", Value::keyword("LOG")},
                       {"PAYLOAD", Value::plist({{"LEVEL", Value::keyword(level)}, {"TEXT", Value::string(text)}})}});
}

Value Verification::to_value() const {
  Value gate_trace = trace.to_value();
  if (outcome == VerifyOutcome::approval_required) {
    Value payload = Value::plist({{"SENSOR", Value::keyword("APPROVAL-REQUIRED")}, {"ACTION", action}});
    if (!reason.is_nil()) payload = payload.with("REASON", reason);
    return Value::plist({{"TYPE", Value::keyword("EVENT")},
                         {"LEVEL", Value::keyword("APPROVAL-REQUIRED")},
                         {"GATE-TRACE", gate_trace},
                         {"PAYLOAD", payload}});
  }
  return action.with("GATE-TRACE"_key, gate_trace);
}

namespace {

// The gate failed (`failure` says how): it blocks, and the trace says
// "failed", not "blocked".
[[gnu::cold]] void fail_gate(const Snapshot::Gate& gate, std::size_t shard, const std::string& failure,
                             Verification& out) {
  gate.slot->counters().add(shard, GateCounters::failures);
  Value reason = Value::string(failure);
  out.trace.push_back(gate.slot, GateResult::failed, reason);
  out.outcome = VerifyOutcome::blocked;
  out.reason = std::move(reason);
  out.action = rejection("ERROR", "Action blocked: " + gate_label(*gate.slot) + " failed: " + failure);
  log_fields(LogLevel::warn, "verifier",
             {{"skill", gate.slot->name()}, {"version", gate.slot->version_text()}, {"verdict", "failed"}},
             "{} failed: {}", gate_label(*gate.slot), failure);
}

// Everything but a plain pass or rewrite, off the hot path. Returns true when
// the verification is decided (a block or a failure) and must stop; `approval`
// and `approval_action` collect approvals, which do not stop it.
[[gnu::noinline, gnu::cold]] bool settle(const Snapshot::Gate& gate, std::size_t shard, pp_status status,
                                         const pp_verdict& verdict, const pp_call& call, bool late,
                                         const Value& current, Verification& out, bool& approval,
                                         Value& approval_action) {
  GateCounters& counters = gate.slot->counters();
  // Anything not clearly a pass, rewrite, block or approval fails closed.
  std::string failure;
  if (gate.failed_as_late(late, status)) {
    out.timed_out = gate.slot;
    failure = "exceeded its time budget of " + std::to_string(GateWatchdog::budget_of(gate.budget_ms).count()) + " ms";
  } else if (status != PP_OK) {
    failure = call.error.empty() ? std::string("reported an error without a reason") : call.error;
  } else if (verdict_kind(verdict) == VerdictKind::rewrite) {
    failure = "answered a rewrite without an action";
  } else if (verdict_kind(verdict) == VerdictKind::approval) {
    counters.add(shard, GateCounters::approvals);
    Value reason = verdict_reason(verdict);
    if (!reason.is_string()) reason = Value::string(gate_label(*gate.slot) + " asks for approval");
    out.trace.push_back(gate.slot, GateResult::approval, reason);
    const Value* asked = verdict_action(verdict);
    approval_action = asked != nullptr ? *asked : current;
    out.reason = std::move(reason);
    approval = true;
    return false;
  } else if (verdict_kind(verdict) == VerdictKind::block) {
    counters.add(shard, GateCounters::blocks);
    Value reason = verdict_reason(verdict);
    if (!reason.is_string()) reason = Value::string("Action blocked by " + gate_label(*gate.slot) + ".");
    out.trace.push_back(gate.slot, GateResult::blocked, reason);
    out.outcome = VerifyOutcome::blocked;
    out.action = rejection(verdict_warns(verdict) ? "WARN" : "ERROR", std::string(reason.text()));
    log_fields(LogLevel::info, "verifier",
               {{"skill", gate.slot->name()}, {"version", gate.slot->version_text()}, {"verdict", "blocked"}},
               "{} blocked: {}", gate_label(*gate.slot), reason.text());
    out.reason = std::move(reason);
    return true;
  } else {
    failure = "answered an unknown verdict (" + std::to_string(verdict.kind) + ")";
  }

  fail_gate(gate, shard, failure, out);
  return true;
}

// A gate that timed out earlier for this signal: not called again, it fails at once.
[[gnu::noinline, gnu::cold]] void fail_timed_out_before(const Snapshot::Gate& gate, std::size_t shard,
                                                        Verification& out) {
  fail_gate(gate, shard,
            "timed out earlier for this signal, not called again (budget " +
                std::to_string(GateWatchdog::budget_of(gate.budget_ms).count()) + " ms)",
            out);
}

[[gnu::noinline, gnu::cold]] bool named_in(std::span<const std::string> names, const Slot& slot) {
  for (const std::string& name : names) {
    if (name == slot.name()) return true;
  }
  return false;
}

// The guard rule failed: no gate is asked, the action is blocked as a failure.
[[gnu::noinline, gnu::cold]] void fail_unguarded(const std::string& why, Verification& out) {
  Value reason = Value::string(why);
  out.trace.push_host(HostRule::guard, GateResult::failed, reason);
  out.outcome = VerifyOutcome::blocked;
  out.reason = std::move(reason);
  out.action = rejection("ERROR", "Action blocked: " + why + "; it cannot act until the guard is loaded");
  log_message(LogLevel::warn, "verifier", "guard rule failed: {}", why);
}

// The credential rule blocked: no gate is asked.
[[gnu::noinline, gnu::cold]] void block_credential(const std::string& origin, Verification& out) {
  Value reason = Value::string("the action contains the key of a configured provider (" + origin +
                               "); a key is never sent anywhere");
  out.trace.push_host(HostRule::credential, GateResult::blocked, reason);
  out.outcome = VerifyOutcome::blocked;
  out.reason = std::move(reason);
  out.action = rejection("ERROR", "Action blocked: it contains the key of a configured provider (" + origin + ").");
  log_message(LogLevel::warn, "verifier", "credential rule blocked an action: it contains the key from {}", origin);
}

// The gate loop. kCapture: the snapshot carries shadow candidates, and what
// their live gates were given and let through is captured for them (a
// separate instantiation, so a verification without candidates pays nothing).
// kSkip: some gates timed out earlier for this signal (`timed_out`); they
// fail without being called (another instantiation, off the usual path).
template <bool kCapture, bool kSkip = false>
void run_gates(const Snapshot& snapshot, const Value& action, const Value& signal, Verification& out, GateTimes* times,
               const ThreadContext& context, bool timed, ShadowCapture* capture,
               [[maybe_unused]] std::span<const std::string> timed_out = {}) {
  GateWatch& watch = *context.watch;
  const std::size_t shard = context.shard;
  const pp_value* signal_handle = to_handle(signal);
  pp_call call;  // owns what gates build during this verification
  const Value* current = &action;
  bool approval = false;
  Value approval_action;
  if (times != nullptr) times->mark();

  const std::span<const Snapshot::Gate> gates = snapshot.gates();
  for (std::size_t index = 0; index < gates.size(); ++index) {
    const Snapshot::Gate& gate = gates[index];
    [[maybe_unused]] ShadowCapture::Entry* shadowed = nullptr;
    if constexpr (kCapture) {
      if (const std::int32_t s = snapshot.shadow_of_gate(index); s >= 0) {
        shadowed = &capture->entries[static_cast<std::size_t>(s)];
        shadowed->reached = true;
        shadowed->input = *current;
        shadowed->trace_index = out.trace.size();
      }
    }
    if constexpr (kSkip) {
      if (named_in(timed_out, *gate.slot)) {
        fail_timed_out_before(gate, shard, out);
        return;
      }
    }
    pp_verdict verdict{};
    call.reset_error();

    const std::uint64_t started = timed ? now_ns() : 0;
    const std::uint64_t ticket = watch.start(gate.budget_ms);
    t_running_hook.set(&gate.slot->running(), "gate");  // for the crash writer and shutdown: two stores a gate
    const pp_status status = gate.fn(gate.instance, &call, to_handle(*current), signal_handle, &verdict);
    t_running_hook.clear();
    const bool late = watch.finish(ticket);
    if (times != nullptr) times->mark();
    GateCounters& counters = gate.slot->counters();
    if (timed) [[unlikely]] {
      counters.add(shard, GateCounters::timed_calls);
      counters.add(shard, GateCounters::timed_ns, now_ns() - started);
    }

    // The hot path: a timely pass, or a rewrite with an action.
    if (status == PP_OK && !late) [[likely]] {
      if (verdict_kind(verdict) == VerdictKind::pass) [[likely]] {
        counters.add(shard, GateCounters::passes);
        out.trace.push_back(gate.slot, GateResult::passed);
        if constexpr (kCapture) {
          if (shadowed != nullptr) shadowed->output = *current;
        }
        continue;
      }
      const Value* rewritten = verdict_kind(verdict) == VerdictKind::rewrite ? verdict_action(verdict) : nullptr;
      if (rewritten != nullptr) {
        counters.add(shard, GateCounters::rewrites);
        out.trace.push_back(gate.slot, GateResult::rewritten);
        current = rewritten;  // owned by `call` until this verification ends
        if constexpr (kCapture) {
          if (shadowed != nullptr) shadowed->output = *current;
        }
        continue;
      }
    }
    if (settle(gate, shard, status, verdict, call, late, *current, out, approval, approval_action)) return;
  }

  if (approval) {
    out.outcome = VerifyOutcome::approval_required;
    out.action = std::move(approval_action);
    return;
  }
  out.outcome = VerifyOutcome::passed;
  out.action = *current;
}

}  // namespace

void Verifier::verify(const Snapshot& snapshot, const Value& action, const Value& signal, Verification& out,
                      GateTimes* times, ShadowCapture* capture, std::span<const std::string> timed_out) {
  out.trace.clear();
  out.trace.set_prebuilt(snapshot.passed_trace());
  out.reason = Value();
  out.timed_out = nullptr;

  const ThreadContext& context = thread_context();
  GateWatch& watch = *context.watch;
  const bool timed = (watch.next_verification() & kTimingSampleMask) == 0;
  const bool shadowed = capture != nullptr && !snapshot.shadows().empty();
  if (shadowed) [[unlikely]]
    capture->entries.assign(snapshot.shadows().size(), ShadowCapture::Entry{});

  if (const std::string* unguarded = snapshot.unguarded(action)) [[unlikely]] {
    fail_unguarded(*unguarded, out);
    return;
  }
  if (!KnownCredentials::empty()) [[unlikely]] {
    if (const std::string* origin = KnownCredentials::found_in(action)) {
      block_credential(*origin, out);
      return;
    }
  }

  if (!timed_out.empty()) [[unlikely]] {
    if (shadowed) {
      run_gates<true, true>(snapshot, action, signal, out, times, context, timed, capture, timed_out);
    } else {
      run_gates<false, true>(snapshot, action, signal, out, times, context, timed, nullptr, timed_out);
    }
    return;
  }
  if (shadowed) [[unlikely]] {
    run_gates<true>(snapshot, action, signal, out, times, context, timed, capture);
    return;
  }
  run_gates<false>(snapshot, action, signal, out, times, context, timed, nullptr);
}

}  // namespace passepartout
