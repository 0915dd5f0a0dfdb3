// Cascade: the ordered, runtime-mutable list of providers and the asynchronous
// call that tries them in turn until one answers (seed D2-D4, Decisions 9).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/thread_shards.hpp"
#include "providers/budget_refusal.hpp"
#include "providers/provider.hpp"
#include "providers/provider_health.hpp"
#include "value/value.hpp"

namespace passepartout {

class Budget;
class Executor;

// Chooses the model for `provider` given the signal being reasoned about, or
// skips the provider (ModelChoice, provider.hpp). Called on whichever thread
// drives the cascade; must be thread-safe. An exception counts as that
// provider's failure. A request's own router (ProviderRequest::router) is
// asked instead when it has one.
using ModelSelector = std::function<ModelChoice(std::string_view provider, const Value& context)>;

// Why one provider did not answer (one entry per attempt: a retry that
// fails again is a second entry).
struct ProviderFailure {
  std::string provider;
  std::string message;
  FailureClass failure = FailureClass::other;
  int http_status = 0;  // 0: none
};

// How the cascade retries a provider before it goes on to the next (seed
// D2-D4, Decisions 9). Only rate limits, overloads, server and transport
// errors, timeouts and truncated streams are retried (is_retriable); never
// once a chunk of the attempt has reached the caller.
struct RetryPolicy {
  int max_retries = 2;                                             // per provider and call
  std::chrono::milliseconds initial_backoff{500};                  // doubling for each retry ...
  std::chrono::milliseconds max_backoff{std::chrono::seconds(8)};  // ... up to this; each wait is jittered
  // A provider that asks (Retry-After) to wait longer than this is left for
  // the next one instead.
  std::chrono::milliseconds max_retry_after{std::chrono::seconds(60)};
  CooldownPolicy cooldown;
};

// The answer of one cascade call.
struct CascadeOutcome {
  // content or tool_calls from the provider that answered; otherwise a
  // failure whose error is exactly Cascade::kExhausted, or, when the budget
  // refused every provider (none was called), the first refusal's message
  // with the class over_budget.
  ProviderReply reply;
  std::string provider;                   // who answered; empty when none did
  std::vector<ProviderFailure> failures;  // in the order tried (skipped providers included)
  // The attempt that failed had already delivered chunks to the caller: the
  // cascade neither retried nor went on (nothing is sent twice), and the
  // reply is that attempt's failure, not kExhausted.
  bool partial = false;
  // The caller cancelled (ProviderRequest::cancel): the reply is a failure of
  // class cancelled.
  bool cancelled = false;
  // The first budget refusal of the call (a provider skipped as over budget);
  // with every failure of class over_budget it is why the call failed.
  std::optional<BudgetRefusal> budget;

  bool ok() const noexcept { return reply.ok(); }
  // The budget refused every provider: `budget` says which cap.
  bool over_budget() const noexcept { return !ok() && reply.failure == FailureClass::over_budget; }
  // One "<provider>: <message>" line per failure, for LlmError and logs.
  std::vector<std::string> failure_messages() const;
  // The seed's form of an exhausted cascade, with the failures:
  // (:TYPE :LOG :PAYLOAD (:TEXT "Neural Cascade Failure: All providers exhausted."
  //                       :FAILURES ((:PROVIDER "p" :MESSAGE "...") ...)))
  // Meaningful only when !ok().
  Value failure_value() const;
};

// Called exactly once per call, from any thread (the caller's, when every
// provider answered before returning). An exception it throws is logged and
// dropped. The outcome is passed on, never copied.
using CascadeCompletion = InlineFunction<void(CascadeOutcome&&)>;

// Providers in the order they are tried, and the model selector.
//
// Thread safety: every member may be called from any thread at any time. The
// list is published as an immutable snapshot; a call uses the snapshot taken
// when it started, so changing the list affects later calls only.
//
// A call never blocks and never waits: it starts the first provider and goes
// on to the next from the failing provider's completion. Providers that
// complete before complete() returns are handled in a loop, not by recursion,
// so the stack depth does not grow with the number of providers.
class Cascade {
 public:
  static constexpr std::string_view kDefaultSystemPrompt = "You are the Probabilistic engine.";
  static constexpr std::string_view kExhausted = "Neural Cascade Failure: All providers exhausted.";

  Cascade();
  explicit Cascade(std::vector<std::shared_ptr<Provider>> providers);
  Cascade(const Cascade&) = delete;
  Cascade& operator=(const Cascade&) = delete;

  // Replaces the whole list (null entries are dropped).
  void set_providers(std::vector<std::shared_ptr<Provider>> providers);
  // Appends `provider`, or replaces the one with the same name in place
  // (registering again replaces, seed D1). Null is ignored.
  void add(std::shared_ptr<Provider> provider);
  // Removes the provider named `name`; false when there was none.
  bool remove(std::string_view name);
  // The current list, in order.
  std::vector<std::shared_ptr<Provider>> providers() const;
  std::vector<std::string> names() const;

  // The list as it stands, immutable: what one call tries, in order.
  struct Lineup {
    std::vector<std::shared_ptr<Provider>> providers;
    std::vector<std::string> names;                       // the providers' names, in order
    std::vector<std::shared_ptr<ProviderHealth>> health;  // each provider's, kept across changes by name
    ModelSelector selector;
    RetryPolicy retry;
    Executor* timers = nullptr;            // where a retry waits; null: no retry
    std::shared_ptr<Budget> budget;        // what each attempt reserves against; null: no caps, no ledger
    bool reads_transcript = false;         // a provider sends the session's transcript (Provider::reads_transcript)
    std::size_t context_window = 0;        // the smallest known context window of those that do (0: none known)
    std::size_t first_context_window = 0;  // the first provider's, the one asked first (0: not known)
  };
  std::shared_ptr<const Lineup> lineup() const;
  // An empty selector (the default) passes each request's model unchanged.
  void set_model_selector(ModelSelector selector);
  // Retries wait on `timers` (which must outlive the calls); without it (the
  // default) a failed provider is never retried, only the next one tried.
  // Tasks `timers` drops when it stops end their call as cancelled.
  void set_retry_policy(RetryPolicy policy, Executor* timers);
  // Each attempt's worst case is reserved against `budget` before the
  // provider is called, and settled to its usage after; a provider whose cap
  // is spent is skipped like a cooling one. Null (the default): none.
  void set_budget(std::shared_ptr<Budget> budget);

  // Each provider's figures, in cascade order.
  struct ProviderStatus {
    std::string name;
    ProviderFigures figures;
  };
  std::vector<ProviderStatus> status() const;

  // Tries the providers in order with `request` (an empty system prompt
  // becomes kDefaultSystemPrompt); the first content or tool-calls reply is
  // the outcome. Logs, under the component PROBABILISTIC:
  //   "Attempting backend <p>..."         before each provider
  //   "Skipping <p> (filtered)"           when the selector skips it
  //   "Backend <p> failed: <message>"     for a skip, a failure reply or an exception;
  //                                       a classified failure adds "(<class>, HTTP <status>,
  //                                       request <id>)", as much of it as is known
  //   "Retrying backend <p> in <t> s (retry <n> of <max>)"
  //   "Skipping <p> (cooling down ...)"   while a provider is set aside
  //   "Skipping <p> (over budget: ...)"   when the budget refuses the attempt
  // Streamed chunks (request.on_chunk) from a provider that then fails have
  // already been delivered: the call then ends with that failure (partial).
  // A cancelled request (request.cancel) ends with a cancelled outcome,
  // exactly once, without trying further providers.
  void call(ProviderRequest&& request, CascadeCompletion&& done) const;
  // The same with a lineup taken before (to build the prompt from the names
  // the call then tries).
  void call(std::shared_ptr<const Lineup> lineup, ProviderRequest&& request, CascadeCompletion&& done) const;
  // The same with a request the caller lends instead of handing over: it
  // must stay valid until `done` is called, and the call writes into it each
  // attempt's model (and the default system prompt when it has none). For a
  // caller that makes call after call (the pipeline, one request per
  // session): its buffers serve them all, and a long prompt costs no
  // allocation per call.
  void call_lent(std::shared_ptr<const Lineup> lineup, ProviderRequest& request, CascadeCompletion&& done) const;

 private:
  using Snapshot = Lineup;

  struct Run;  // one call in flight

  std::shared_ptr<const Snapshot> snapshot() const;
  // Applies `change` to a copy of the current snapshot and publishes it.
  template <class Change>
  void update(Change&& change);

  std::mutex update_mutex_;  // one change at a time (read, copy, publish)
  // Every provider's health by name, so a provider replaced or re-added keeps its figures.
  std::vector<std::pair<std::string, std::shared_ptr<ProviderHealth>>> health_;  // under update_mutex_
  Published<const Snapshot> snapshot_;  // taken by every call: per-thread shards
};

}  // namespace passepartout
