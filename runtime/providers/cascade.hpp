// Cascade: the ordered, runtime-mutable list of providers and the asynchronous
// call that tries them in turn until one answers (seed D2-D4, Decisions 9).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/thread_shards.hpp"
#include "providers/provider.hpp"
#include "value/value.hpp"

namespace passepartout {

// What the model selector decided for one provider (seed D3).
struct ModelChoice {
  bool is_skip = false;
  std::string model;  // empty: the provider's default model

  static ModelChoice use(std::string model) { return ModelChoice{false, std::move(model)}; }
  static ModelChoice provider_default() { return ModelChoice{}; }
  static ModelChoice skip() { return ModelChoice{true, {}}; }
};

// Chooses the model for `provider` given the signal being reasoned about, or
// skips the provider. Called on whichever thread drives the cascade; must be
// thread-safe. An exception counts as that provider's failure.
using ModelSelector = std::function<ModelChoice(std::string_view provider, const Value& context)>;

// Why one provider did not answer.
struct ProviderFailure {
  std::string provider;
  std::string message;
};

// The answer of one cascade call.
struct CascadeOutcome {
  // content or tool_calls from the provider that answered; otherwise a
  // failure whose error is exactly Cascade::kExhausted.
  ProviderReply reply;
  std::string provider;                   // who answered; empty when none did
  std::vector<ProviderFailure> failures;  // in the order tried (skipped providers included)

  bool ok() const noexcept { return reply.ok(); }
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
    std::vector<std::string> names;  // the providers' names, in order
    ModelSelector selector;
  };
  std::shared_ptr<const Lineup> lineup() const;
  // An empty selector (the default) passes each request's model unchanged.
  void set_model_selector(ModelSelector selector);

  // Tries the providers in order with `request` (an empty system prompt
  // becomes kDefaultSystemPrompt); the first content or tool-calls reply is
  // the outcome. Logs, under the component PROBABILISTIC:
  //   "Attempting backend <p>..."         before each provider
  //   "Skipping <p> (filtered)"           when the selector skips it
  //   "Backend <p> failed: <message>"     for a skip, a failure reply or an exception
  // Streamed chunks (request.on_chunk) from a provider that then fails have
  // already been delivered; a caller that streams should be ready for that.
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

  std::mutex update_mutex_;             // one change at a time (read, copy, publish)
  Published<const Snapshot> snapshot_;  // taken by every call: per-thread shards
};

}  // namespace passepartout
