// The cascade: snapshot publication, and one call as a small state machine
// that moves from provider to provider without blocking or deep recursion.
#include "providers/cascade.hpp"

#include <atomic>
#include <exception>
#include <optional>
#include <utility>

#include "base/log.hpp"
#include "base/utf8.hpp"

namespace passepartout {
namespace {

constexpr std::string_view kComponent = "PROBABILISTIC";

std::string exception_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

// --- CascadeOutcome -------------------------------------------------------------

std::vector<std::string> CascadeOutcome::failure_messages() const {
  std::vector<std::string> lines;
  lines.reserve(failures.size());
  for (const ProviderFailure& failure : failures) lines.push_back(failure.provider + ": " + failure.message);
  return lines;
}

Value CascadeOutcome::failure_value() const {
  std::vector<Value> failed;
  failed.reserve(failures.size());
  for (const ProviderFailure& failure : failures) {
    failed.push_back(Value::plist({{"PROVIDER", Value::string(replace_invalid_utf8(failure.provider))},
                                   {"MESSAGE", Value::string(replace_invalid_utf8(failure.message))}}));
  }
  return Value::plist(
      {{"TYPE", Value::keyword("LOG")},
       {"PAYLOAD", Value::plist({{"TEXT", Value::string(Cascade::kExhausted)}, {"FAILURES", Value::list(failed)}})}});
}

// --- one call ---------------------------------------------------------------------

// The hand-off between the thread that calls a provider's complete() and the
// thread that runs its completion. Whichever learns second that both have
// happened drives the cascade on, so exactly one thread owns the Run at a time.
struct Attempt {
  enum State : int {
    calling,    // complete() has not returned and no reply has arrived
    returned,   // complete() returned first: the completion drives on
    replied,    // the reply arrived first: the caller drives on when complete() returns
    abandoned,  // complete() threw: a later completion is ignored
  };
  std::atomic<int> state{calling};
  std::atomic<bool> completed{false};  // the completion has been called (once is the contract)
  ProviderReply reply;                 // written by the completion before it publishes `replied`
};

// State of one call. Only the thread that currently drives it touches the
// members below; the Attempt states hand ownership over.
struct Cascade::Run : std::enable_shared_from_this<Cascade::Run> {
  // A call with a request of its own.
  Run(std::shared_ptr<const Snapshot> snapshot, ProviderRequest&& request, CascadeCompletion&& done)
      : snapshot_(std::move(snapshot)), owned_(std::move(request)), request_(owned_), done_(std::move(done)) {
    prepare();
  }
  // A call with the caller's request (call_lent()).
  Run(std::shared_ptr<const Snapshot> snapshot, ProviderRequest& lent, CascadeCompletion&& done)
      : snapshot_(std::move(snapshot)), request_(lent), done_(std::move(done)) {
    prepare();
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  // What both kinds of call need before the first attempt.
  void prepare() {
    if (request_.system_prompt.empty()) request_.system_prompt = kDefaultSystemPrompt;
    if (snapshot_->providers.size() > kInlineAttempts) {
      more_attempts_ = std::make_unique<Attempt[]>(snapshot_->providers.size() - kInlineAttempts);
    }
  }

  // Provider `index`'s hand-off; it lives as long as the Run, which each
  // completion keeps alive.
  Attempt& attempt(std::size_t index) noexcept {
    return index < kInlineAttempts ? inline_attempts_[index] : more_attempts_[index - kInlineAttempts];
  }

  // Tries providers from `next_` on until one has a reply pending on another
  // thread or the cascade is decided. A reply that arrives before complete()
  // returns is handled here, in the loop, so the stack stays flat.
  void drive() {
    const std::vector<std::shared_ptr<Provider>>& providers = snapshot_->providers;
    while (next_ < providers.size()) {
      const std::size_t index = next_++;
      Provider& provider = *providers[index];
      const std::string_view name = provider.name();
      log_message(LogLevel::info, kComponent, "Attempting backend {}...", name);

      // Every provider gets the same request, which this Run keeps (or the
      // caller lends it) until the call ends (a provider's answer comes
      // before the next one is tried).
      if (snapshot_->selector) {
        ModelChoice choice;
        try {
          choice = snapshot_->selector(name, request_.context);
        } catch (...) {
          record(name, "the model selector threw: " + exception_text(std::current_exception()));
          continue;
        }
        if (choice.is_skip) {
          log_message(LogLevel::info, kComponent, "Skipping {} (filtered)", name);
          record(name, "skipped by the model selector");
          continue;
        }
        request_.model = std::move(choice.model);
      }

      Attempt& attempt = this->attempt(index);
      try {
        provider.complete(request_, [self = shared_from_this(), index](ProviderReply&& reply) {
          self->on_reply(self->attempt(index), index, std::move(reply));
        });
      } catch (...) {
        // A reply that came before the throw is dropped: the provider broke
        // its contract, and its failure is the safer reading.
        attempt.state.store(Attempt::abandoned);
        record(name, "threw: " + exception_text(std::current_exception()));
        continue;
      }
      int expected = Attempt::calling;
      if (attempt.state.compare_exchange_strong(expected, Attempt::returned)) return;  // the completion drives on
      if (settle(index, attempt.reply)) return;
    }
    exhausted();
  }

  // The completion of provider `index`; any thread, possibly inside complete().
  void on_reply(Attempt& attempt, std::size_t index, ProviderReply&& reply) {
    if (attempt.completed.exchange(true)) {
      log_message(LogLevel::warn, kComponent, "Backend {} answered more than once; the extra answer is ignored",
                  snapshot_->providers[index]->name());
      return;
    }
    attempt.reply = std::move(reply);
    int expected = Attempt::calling;
    if (attempt.state.compare_exchange_strong(expected, Attempt::replied)) return;  // the caller drives on
    if (expected != Attempt::returned) return;                                      // abandoned: complete() threw
    if (!settle(index, attempt.reply)) drive();
  }

  // Takes provider `index`'s reply (moving from it); true when it decides the cascade.
  bool settle(std::size_t index, ProviderReply& reply) {
    const std::string_view name = snapshot_->providers[index]->name();
    if (reply.kind == ProviderReply::Kind::tool_calls && reply.tool_calls.size() == 0) {
      record(name, "a tool-calls reply without any call");
      return false;
    }
    if (reply.ok()) {
      CascadeOutcome outcome;
      outcome.reply = std::move(reply);
      outcome.provider = std::string(name);
      outcome.failures = std::move(failures_);
      finish(std::move(outcome));
      return true;
    }
    record(name, reply.error.empty() ? std::string("no reason given") : std::move(reply.error));
    return false;
  }

  void record(std::string_view name, std::string message) {
    log_message(LogLevel::info, kComponent, "Backend {} failed: {}", name, message);
    failures_.push_back(ProviderFailure{std::string(name), std::move(message)});
  }

  void exhausted() {
    log_message(LogLevel::warn, kComponent, kExhausted);
    CascadeOutcome outcome;
    outcome.reply = ProviderReply::failed(std::string(kExhausted));
    outcome.failures = std::move(failures_);
    finish(std::move(outcome));
  }

  void finish(CascadeOutcome&& outcome) {
    CascadeCompletion completion = std::move(done_);
    try {
      completion(std::move(outcome));
    } catch (...) {
      log_message(LogLevel::error, kComponent, "the cascade's completion threw: {}",
                  exception_text(std::current_exception()));
    }
  }

  std::shared_ptr<const Snapshot> snapshot_;
  ProviderRequest owned_;     // the call's own request; empty when lent
  ProviderRequest& request_;  // owned_ or the lent one, valid until the completion is called
  CascadeCompletion done_;
  std::size_t next_ = 0;
  std::vector<ProviderFailure> failures_;
  static constexpr std::size_t kInlineAttempts = 2;  // most cascades: no allocation per attempt
  Attempt inline_attempts_[kInlineAttempts];
  std::unique_ptr<Attempt[]> more_attempts_;
};

// --- Cascade ----------------------------------------------------------------------

Cascade::Cascade() : snapshot_(std::make_shared<const Snapshot>()) {}

Cascade::Cascade(std::vector<std::shared_ptr<Provider>> providers) : Cascade() { set_providers(std::move(providers)); }

std::shared_ptr<const Cascade::Snapshot> Cascade::snapshot() const { return snapshot_.get(); }

template <class Change>
void Cascade::update(Change&& change) {
  std::lock_guard lock(update_mutex_);
  auto next = std::make_shared<Snapshot>(*snapshot_.get());
  change(*next);
  next->names.clear();
  for (const auto& provider : next->providers) next->names.emplace_back(provider->name());
  snapshot_.publish(std::move(next));
}

void Cascade::set_providers(std::vector<std::shared_ptr<Provider>> providers) {
  std::erase(providers, nullptr);
  update([&](Snapshot& s) { s.providers = std::move(providers); });
}

void Cascade::add(std::shared_ptr<Provider> provider) {
  if (!provider) return;
  update([&](Snapshot& s) {
    for (std::shared_ptr<Provider>& existing : s.providers) {
      if (existing->name() == provider->name()) {
        existing = std::move(provider);
        return;
      }
    }
    s.providers.push_back(std::move(provider));
  });
}

bool Cascade::remove(std::string_view name) {
  bool removed = false;
  update(
      [&](Snapshot& s) { removed = std::erase_if(s.providers, [&](const auto& p) { return p->name() == name; }) > 0; });
  return removed;
}

std::vector<std::shared_ptr<Provider>> Cascade::providers() const { return snapshot()->providers; }

std::vector<std::string> Cascade::names() const { return snapshot()->names; }

std::shared_ptr<const Cascade::Lineup> Cascade::lineup() const { return snapshot(); }

void Cascade::set_model_selector(ModelSelector selector) {
  update([&](Snapshot& s) { s.selector = std::move(selector); });
}

void Cascade::call(ProviderRequest&& request, CascadeCompletion&& done) const {
  call(snapshot(), std::move(request), std::move(done));
}

void Cascade::call(std::shared_ptr<const Lineup> lineup, ProviderRequest&& request, CascadeCompletion&& done) const {
  auto run = std::make_shared<Run>(std::move(lineup), std::move(request), std::move(done));
  run->drive();
}

void Cascade::call_lent(std::shared_ptr<const Lineup> lineup, ProviderRequest& request,
                        CascadeCompletion&& done) const {
  auto run = std::make_shared<Run>(std::move(lineup), request, std::move(done));
  run->drive();
}

}  // namespace passepartout
