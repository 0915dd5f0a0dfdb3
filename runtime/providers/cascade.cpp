// The cascade: snapshot publication, and one call as a small state machine
// that moves from provider to provider without blocking or deep recursion.
#include "providers/cascade.hpp"

#include <algorithm>
#include <atomic>
#include <deque>
#include <exception>
#include <optional>
#include <random>
#include <utility>

#include "base/executor.hpp"
#include "base/log.hpp"
#include "base/utf8.hpp"
#include "providers/budget.hpp"

namespace passepartout {
namespace {

constexpr std::string_view kComponent = "PROBABILISTIC";
// What a budget reserves for the answer of a provider that sends no max_tokens.
constexpr std::int64_t kUnboundedOutputTokens = 4096;

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

namespace {

// "rate_limited, HTTP 429, request req_1": what is known of a classified failure.
std::string failure_details(const ProviderReply& reply) {
  if (reply.failure == FailureClass::other || reply.failure == FailureClass::none) return {};
  std::string details = to_string(reply.failure);
  if (reply.http_status != 0) details += ", HTTP " + std::to_string(reply.http_status);
  if (!reply.request_id.empty()) details += ", request " + reply.request_id;
  return details;
}

// Backoff before retry `retry` (0-based): initial doubling up to max, then
// "equal jitter": half of it fixed, half random, so callers that failed
// together do not come back together.
std::chrono::milliseconds backoff(const RetryPolicy& policy, int retry) {
  std::int64_t ms = policy.initial_backoff.count();
  for (int i = 0; i < retry && ms < policy.max_backoff.count(); ++i) ms *= 2;
  ms = std::min<std::int64_t>(ms, policy.max_backoff.count());
  thread_local std::minstd_rand random(std::random_device{}());
  const std::int64_t half = ms / 2;
  std::uniform_int_distribution<std::int64_t> jitter(0, half);
  return std::chrono::milliseconds(half + jitter(random));
}

std::string seconds_text(std::chrono::milliseconds ms) {
  return fmt::format("{:.1f}", static_cast<double>(ms.count()) / 1000.0);
}

}  // namespace

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
  // A Run released with its completion not yet called was dropped on the way
  // (a retry's timer discarded as its executor stopped, or a provider that
  // let its completion go): the call ends as cancelled, so its caller is
  // never left waiting.
  ~Run() {
    if (done_) finish_cancelled("the call was dropped before it ended (the daemon is stopping)");
  }

  // What both kinds of call need before the first attempt.
  void prepare() {
    if (request_.system_prompt.empty()) request_.system_prompt = kDefaultSystemPrompt;
    if (request_.on_chunk) {
      // Chunks pass through here, to know whether an attempt delivered any.
      caller_chunk_ = std::move(request_.on_chunk);
      request_.on_chunk = [this](std::string_view delta) {
        delivered_.store(true, std::memory_order_relaxed);
        caller_chunk_(delta);
      };
    }
  }

  // Attempt number `n`'s hand-off; it lives as long as the Run, which each
  // completion keeps alive. A retry is a new attempt.
  Attempt& attempt(std::size_t n) {
    if (n < kInlineAttempts) return inline_attempts_[n];
    while (more_attempts_.size() <= n - kInlineAttempts) more_attempts_.emplace_back();
    return more_attempts_[n - kInlineAttempts];
  }

  bool cancelled() const noexcept { return request_.cancel && request_.cancel->cancelled(); }

  // Tries providers from `next_` on until one has a reply pending on another
  // thread, a retry waits, or the cascade is decided. A reply that arrives
  // before complete() returns is handled here, in the loop, so the stack
  // stays flat.
  void drive() {
    const std::vector<std::shared_ptr<Provider>>& providers = snapshot_->providers;
    while (next_ < providers.size()) {
      if (cancelled()) {
        finish_cancelled("cancelled by the caller");
        return;
      }
      const std::size_t index = next_++;
      Provider& provider = *providers[index];
      const std::string_view name = provider.name();
      ProviderHealth& health = *snapshot_->health[index];
      const auto now = ProviderHealth::Clock::now();
      if (ProviderHealth::Clock::time_point until; retries_ == 0 && health.cooling_down(now, &until)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now);
        log_message(LogLevel::info, kComponent, "Skipping {} (cooling down for another {} s)", name,
                    seconds_text(left));
        record(name, "cooling down for another " + seconds_text(left) + " s after repeated failures",
               FailureClass::other, 0);
        continue;
      }
      log_message(LogLevel::info, kComponent, "Attempting backend {}...", name);

      // Every provider gets the same request, which this Run keeps (or the
      // caller lends it) until the call ends (a provider's answer comes
      // before the next one is tried).
      if (request_.router != nullptr || snapshot_->selector) {
        ModelChoice choice;
        try {
          choice = request_.router != nullptr ? request_.router->choose(provider, request_)
                                              : snapshot_->selector(name, request_.context);
        } catch (...) {
          choice = ModelChoice::failed("the model selector threw: " + exception_text(std::current_exception()));
        }
        if (choice.kind == ModelChoice::Kind::failed || choice.kind == ModelChoice::Kind::skip) {
          if (choice.kind == ModelChoice::Kind::skip) {
            if (choice.reason.empty()) {
              log_message(LogLevel::info, kComponent, "Skipping {} (filtered)", name);
              choice.reason = "skipped by the model selector";
            } else {
              log_message(LogLevel::info, kComponent, "Skipping {} (filtered: {})", name, choice.reason);
            }
          }
          record(name, std::move(choice.reason), FailureClass::other, 0);
          retries_ = 0;
          continue;
        }
        request_.model = std::move(choice.model);
      }
      if (snapshot_->budget != nullptr && !reserve(provider)) {
        retries_ = 0;
        continue;
      }

      const std::size_t n = attempts_++;
      Attempt& attempt = this->attempt(n);
      started_ = ProviderHealth::Clock::now();
      try {
        provider.complete(request_, [self = shared_from_this(), n, index](ProviderReply&& reply) {
          self->on_reply(self->attempt(n), index, std::move(reply));
        });
      } catch (...) {
        // A reply that came before the throw is dropped: the provider broke
        // its contract, and its failure is the safer reading.
        attempt.state.store(Attempt::abandoned);
        if (reservation_) snapshot_->budget->release(reservation_);
        record(name, "threw: " + exception_text(std::current_exception()), FailureClass::other, 0);
        retries_ = 0;
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

  // Takes provider `index`'s reply (moving from it); true when the Run is
  // settled for now: decided, or waiting for a retry.
  bool settle(std::size_t index, ProviderReply& reply) {
    const std::string_view name = snapshot_->providers[index]->name();
    ProviderHealth& health = *snapshot_->health[index];
    const auto latency = ProviderHealth::Clock::now() - started_;
    if (reply.kind == ProviderReply::Kind::tool_calls && reply.tool_calls.size() == 0) {
      reply = ProviderReply::failed("a tool-calls reply without any call");
    }
    if (reservation_) {
      // An answer, a failure that says what it used, or one whose answer had
      // begun costs its usage (the estimate where it is not known); any
      // other failure nothing.
      const bool used =
          reply.ok() || reply.usage.input >= 0 || reply.usage.output >= 0 || delivered_.load(std::memory_order_relaxed);
      if (used) {
        snapshot_->budget->settle(reservation_, reply.usage);
      } else {
        snapshot_->budget->release(reservation_);
      }
    }
    if (reply.ok()) {
      health.succeeded(latency, reply.usage);
      CascadeOutcome outcome;
      outcome.reply = std::move(reply);
      outcome.provider = std::string(name);
      outcome.failures = std::move(failures_);
      finish(std::move(outcome));
      return true;
    }
    const FailureClass failure = reply.failure == FailureClass::none ? FailureClass::other : reply.failure;
    const bool cooling = health.failed(failure, latency, snapshot_->retry.cooldown);
    std::string message = reply.error.empty() ? std::string("no reason given") : std::move(reply.error);
    if (std::string details = failure_details(reply); !details.empty()) message += " (" + details + ")";
    record(name, message, failure, reply.http_status);
    if (failure == FailureClass::cancelled || cancelled()) {
      finish_cancelled("cancelled by the caller");
      return true;
    }
    if (delivered_.load(std::memory_order_relaxed)) {
      // Part of this attempt's answer is with the caller: nothing is sent twice.
      log_message(LogLevel::warn, kComponent, "Backend {} failed after its answer had begun; not retried", name);
      CascadeOutcome outcome;
      outcome.reply =
          ProviderReply::failed(std::string(name) + " failed after its answer had begun: " + message, failure);
      outcome.reply.http_status = reply.http_status;
      outcome.partial = true;
      outcome.failures = std::move(failures_);
      finish(std::move(outcome));
      return true;
    }
    if (cooling) {
      log_message(LogLevel::warn, kComponent, "Backend {} set aside for {} s after {} failures in a row", name,
                  seconds_text(snapshot_->retry.cooldown.length), snapshot_->retry.cooldown.after_failures);
    }
    const RetryPolicy& policy = snapshot_->retry;
    if (is_retriable(failure) && !cooling && snapshot_->timers != nullptr && retries_ < policy.max_retries) {
      std::chrono::milliseconds wait = backoff(policy, retries_);
      if (reply.retry_after.count() >= 0) wait = reply.retry_after;
      if (wait <= policy.max_retry_after) {
        ++retries_;
        log_message(LogLevel::info, kComponent, "Retrying backend {} in {} s (retry {} of {})", name,
                    seconds_text(wait), retries_, policy.max_retries);
        next_ = index;  // the same provider again
        wait_then_drive(wait);
        return true;
      }
      log_message(LogLevel::info, kComponent, "Backend {} asks to wait {} s, longer than {} s: trying the next one",
                  name, seconds_text(wait), seconds_text(policy.max_retry_after));
    }
    retries_ = 0;
    return false;
  }

  // Drives on after `wait`, or at once when the caller cancels meanwhile
  // (whichever comes first; the other finds the Run taken).
  void wait_then_drive(std::chrono::milliseconds wait) {
    waiting_.store(true, std::memory_order_release);
    auto resume = [self = shared_from_this()] {
      if (self->waiting_.exchange(false, std::memory_order_acq_rel)) self->drive();
    };
    if (request_.cancel) request_.cancel->on_cancel(resume);
    snapshot_->timers->post_after(wait, std::move(resume));
  }

  // Reserves this attempt's worst case; false (recorded, logged) when the
  // budget refuses it.
  bool reserve(const Provider& provider) {
    const std::int64_t output =
        provider.max_output_tokens() > 0 ? provider.max_output_tokens() : kUnboundedOutputTokens;
    const BudgetCall call{provider.name(),        request_.model.empty() ? provider.default_model() : request_.model,
                          request_.session,       provider.is_local(),
                          request_.prompt_tokens, output};
    std::optional<BudgetRefusal> refusal = snapshot_->budget->reserve(call, reservation_);
    if (!refusal) return true;
    log_message(LogLevel::info, kComponent, "Skipping {} (over budget: {})", provider.name(), refusal->message);
    record(provider.name(), refusal->message, FailureClass::over_budget, 0);
    if (!refusal_) refusal_ = std::move(refusal);
    return false;
  }

  void record(std::string_view name, std::string message, FailureClass failure, int http_status) {
    log_message(LogLevel::info, kComponent, "Backend {} failed: {}", name, message);
    failures_.push_back(ProviderFailure{std::string(name), std::move(message), failure, http_status});
  }

  void exhausted() {
    CascadeOutcome outcome;
    const bool over_budget = refusal_ && std::all_of(failures_.begin(), failures_.end(), [](const ProviderFailure& f) {
                               return f.failure == FailureClass::over_budget;
                             });
    if (over_budget) {
      // No provider was called: the budget's refusal says why (seed A18).
      log_message(LogLevel::warn, kComponent, refusal_->message);
      outcome.reply = ProviderReply::failed(refusal_->message, FailureClass::over_budget);
    } else {
      log_message(LogLevel::warn, kComponent, kExhausted);
      outcome.reply = ProviderReply::failed(std::string(kExhausted));
    }
    outcome.failures = std::move(failures_);
    finish(std::move(outcome));
  }

  void finish_cancelled(std::string why) {
    CascadeOutcome outcome;
    outcome.reply = ProviderReply::failed(std::move(why), FailureClass::cancelled);
    outcome.cancelled = true;
    outcome.failures = std::move(failures_);
    finish(std::move(outcome));
  }

  void finish(CascadeOutcome&& outcome) {
    outcome.budget = std::move(refusal_);
    CascadeCompletion completion = std::move(done_);
    done_ = nullptr;
    if (request_.cancel) request_.cancel->clear();
    if (caller_chunk_) request_.on_chunk = std::move(caller_chunk_);  // a lent request gets its own back
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
  InlineFunction<void(std::string_view)> caller_chunk_;  // the caller's on_chunk, when it streams
  std::atomic<bool> delivered_{false};                   // a chunk of the current attempt reached the caller
  std::atomic<bool> waiting_{false};                     // a retry waits (timer or cancel takes it)
  std::size_t next_ = 0;
  int retries_ = 0;  // of the provider at next_ - 1 (or next_, while a retry waits)
  std::size_t attempts_ = 0;
  ProviderHealth::Clock::time_point started_;
  std::vector<ProviderFailure> failures_;
  Budget::Reservation reservation_;                  // the current attempt's, while it runs
  std::optional<BudgetRefusal> refusal_;             // the first budget refusal
  static constexpr std::size_t kInlineAttempts = 2;  // most calls: no allocation per attempt
  Attempt inline_attempts_[kInlineAttempts];
  std::deque<Attempt> more_attempts_;
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
  next->health.clear();
  next->reads_transcript = false;
  next->context_window = 0;
  next->first_context_window = next->providers.empty() ? 0 : next->providers.front()->context_window();
  for (const auto& provider : next->providers) {
    next->names.emplace_back(provider->name());
    if (provider->reads_transcript()) {
      next->reads_transcript = true;
      const std::size_t window = provider->context_window();
      if (window != 0 && (next->context_window == 0 || window < next->context_window)) next->context_window = window;
    }
    auto known =
        std::find_if(health_.begin(), health_.end(), [&](const auto& h) { return h.first == provider->name(); });
    if (known == health_.end()) {
      health_.emplace_back(std::string(provider->name()), std::make_shared<ProviderHealth>());
      known = health_.end() - 1;
    }
    next->health.push_back(known->second);
  }
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

void Cascade::set_retry_policy(RetryPolicy policy, Executor* timers) {
  update([&](Snapshot& s) {
    s.retry = policy;
    s.timers = timers;
  });
}

void Cascade::set_budget(std::shared_ptr<Budget> budget) {
  update([&](Snapshot& s) { s.budget = std::move(budget); });
}

std::vector<Cascade::ProviderStatus> Cascade::status() const {
  const auto lineup = snapshot();
  std::vector<ProviderStatus> status;
  status.reserve(lineup->providers.size());
  for (std::size_t i = 0; i < lineup->providers.size(); ++i) {
    status.push_back(ProviderStatus{lineup->names[i], lineup->health[i]->figures()});
  }
  return status;
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
