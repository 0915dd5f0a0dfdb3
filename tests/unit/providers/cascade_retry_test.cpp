// The cascade's retries (seed D2-D4, Decisions 9): which failures are tried
// again and after how long (backoff with jitter, Retry-After), cooldown of a
// provider that keeps failing, nothing sent twice once a chunk reached the
// caller, cancellation, and each provider's figures. The retry timers are a
// fake executor the tests run by hand: no test waits for real time.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/executor.hpp"
#include "providers/cascade.hpp"

using namespace passepartout;
using namespace std::chrono_literals;

namespace {

// Holds delayed tasks until the test runs (or drops) them.
class FakeTimers final : public Executor {
 public:
  void post(Task&& task) override { task(); }
  void post_after(std::chrono::nanoseconds delay, Task task) override {
    std::lock_guard lock(mutex_);
    waits_.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(delay));
    tasks_.push_back(std::move(task));
  }
  std::vector<std::chrono::milliseconds> waits() const {
    std::lock_guard lock(mutex_);
    return waits_;
  }
  // Runs the tasks waiting now (not those they post).
  void run_all() {
    std::vector<Task> tasks;
    {
      std::lock_guard lock(mutex_);
      tasks.swap(tasks_);
    }
    for (Task& task : tasks) task();
  }
  void drop_all() {
    std::vector<Task> tasks;
    std::lock_guard lock(mutex_);
    tasks.swap(tasks_);
  }
  std::size_t pending() const {
    std::lock_guard lock(mutex_);
    return tasks_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::chrono::milliseconds> waits_;
  std::vector<Task> tasks_;
};

// Answers each call with the next reply of its list (the last one repeats).
class ListProvider final : public Provider {
 public:
  using Step = std::function<void(const ProviderRequest&, ProviderCompletion&)>;
  ListProvider(std::string name, std::vector<Step> steps) : name_(std::move(name)), steps_(std::move(steps)) {}
  std::string_view name() const noexcept override { return name_; }
  void complete(const ProviderRequest& request, ProviderCompletion done) override {
    const std::size_t n = calls_++;
    steps_[std::min(n, steps_.size() - 1)](request, done);
  }
  std::size_t calls() const noexcept { return calls_; }

 private:
  std::string name_;
  std::vector<Step> steps_;
  std::size_t calls_ = 0;
};

ListProvider::Step fails(FailureClass failure, int status, std::chrono::milliseconds retry_after = -1ms) {
  return [=](const ProviderRequest&, ProviderCompletion& done) {
    ProviderReply reply = ProviderReply::failed("HTTP " + std::to_string(status) + " from the stub", failure);
    reply.http_status = status;
    reply.request_id = "req_1";
    reply.retry_after = retry_after;
    done(std::move(reply));
  };
}

ListProvider::Step answers(std::string text) {
  return [text](const ProviderRequest&, ProviderCompletion& done) {
    ProviderReply reply = ProviderReply::text(text);
    reply.usage = TokenUsage{12, 3};
    done(std::move(reply));
  };
}

struct Outcomes {
  std::vector<CascadeOutcome> got;
  CascadeCompletion sink() {
    return [this](CascadeOutcome&& outcome) { got.push_back(std::move(outcome)); };
  }
};

struct Fixture {
  FakeTimers timers;
  Cascade cascade;
  Outcomes outcomes;
  explicit Fixture(std::vector<std::shared_ptr<Provider>> providers, RetryPolicy policy = {}) {
    cascade.set_providers(std::move(providers));
    cascade.set_retry_policy(policy, &timers);
  }
  void call(ProviderRequest request = {}) { cascade.call(std::move(request), outcomes.sink()); }
};

}  // namespace

TEST_CASE("a rate-limited provider is retried after a jittered backoff and then answers", "[providers][cascade]") {
  auto p = std::make_shared<ListProvider>(
      "p", std::vector<ListProvider::Step>{fails(FailureClass::rate_limited, 429), answers("late answer")});
  Fixture f({p});
  f.call();
  REQUIRE(f.outcomes.got.empty());  // waiting for the retry
  REQUIRE(f.timers.waits().size() == 1);
  CHECK(f.timers.waits()[0] >= 250ms);  // half of 0.5 s fixed, half random
  CHECK(f.timers.waits()[0] <= 500ms);
  f.timers.run_all();
  REQUIRE(f.outcomes.got.size() == 1);
  const CascadeOutcome& outcome = f.outcomes.got[0];
  CHECK(outcome.ok());
  CHECK(outcome.reply.content == "late answer");
  REQUIRE(outcome.failures.size() == 1);
  CHECK(outcome.failures[0].message == "HTTP 429 from the stub (rate_limited, HTTP 429, request req_1)");
  CHECK(outcome.failures[0].failure == FailureClass::rate_limited);
  CHECK(p->calls() == 2);
}

TEST_CASE("retries back off by doubling, at most twice, then the next provider is tried", "[providers][cascade]") {
  auto flaky =
      std::make_shared<ListProvider>("flaky", std::vector<ListProvider::Step>{fails(FailureClass::server_error, 500)});
  auto backup = std::make_shared<ListProvider>("backup", std::vector<ListProvider::Step>{answers("backup here")});
  RetryPolicy policy;
  policy.cooldown.after_failures = 0;  // not this test's subject
  Fixture f({flaky, backup}, policy);
  f.call();
  f.timers.run_all();
  f.timers.run_all();
  REQUIRE(f.outcomes.got.size() == 1);
  CHECK(f.outcomes.got[0].provider == "backup");
  CHECK(flaky->calls() == 3);  // one try and two retries
  const auto waits = f.timers.waits();
  REQUIRE(waits.size() == 2);
  CHECK(waits[1] >= 500ms);  // the second wait is drawn from 1 s
  CHECK(waits[1] <= 1000ms);
  CHECK(f.outcomes.got[0].failures.size() == 3);
}

TEST_CASE("Retry-After is honoured, and a wait longer than a minute goes to the next provider",
          "[providers][cascade]") {
  SECTION("three seconds asked, three seconds waited") {
    auto p = std::make_shared<ListProvider>(
        "p", std::vector<ListProvider::Step>{fails(FailureClass::overloaded, 529, 3000ms), answers("ok")});
    Fixture f({p});
    f.call();
    REQUIRE(f.timers.waits() == std::vector<std::chrono::milliseconds>{3000ms});
    f.timers.run_all();
    REQUIRE(f.outcomes.got.size() == 1);
    CHECK(f.outcomes.got[0].ok());
  }
  SECTION("two minutes asked: the next provider at once") {
    auto p = std::make_shared<ListProvider>(
        "p", std::vector<ListProvider::Step>{fails(FailureClass::rate_limited, 429, 120'000ms)});
    auto next = std::make_shared<ListProvider>("next", std::vector<ListProvider::Step>{answers("next")});
    Fixture f({p, next});
    f.call();
    CHECK(f.timers.waits().empty());
    REQUIRE(f.outcomes.got.size() == 1);
    CHECK(f.outcomes.got[0].provider == "next");
  }
}

TEST_CASE("authentication, bad requests, unknown models, quota and context length are never retried",
          "[providers][cascade]") {
  for (const FailureClass failure : {FailureClass::authentication, FailureClass::bad_request,
                                     FailureClass::unknown_model, FailureClass::quota, FailureClass::context_length}) {
    INFO(to_string(failure));
    auto p = std::make_shared<ListProvider>("p", std::vector<ListProvider::Step>{fails(failure, 400)});
    auto next = std::make_shared<ListProvider>("next", std::vector<ListProvider::Step>{answers("next")});
    Fixture f({p, next});
    f.call();
    CHECK(f.timers.waits().empty());
    CHECK(p->calls() == 1);
    REQUIRE(f.outcomes.got.size() == 1);
    CHECK(f.outcomes.got[0].provider == "next");
  }
}

TEST_CASE("a provider failing three times in a row is set aside for the cooldown, and status says so",
          "[providers][cascade]") {
  auto down =
      std::make_shared<ListProvider>("down", std::vector<ListProvider::Step>{fails(FailureClass::transport, 0)});
  auto up = std::make_shared<ListProvider>("up", std::vector<ListProvider::Step>{answers("up")});
  RetryPolicy policy;
  policy.cooldown.length = std::chrono::hours(1);
  Fixture f({down, up}, policy);
  f.call();
  f.timers.run_all();
  f.timers.run_all();  // the third failure starts the cooldown: no third retry
  REQUIRE(f.outcomes.got.size() == 1);
  CHECK(f.outcomes.got[0].provider == "up");
  CHECK(down->calls() == 3);
  CHECK(f.timers.pending() == 0);

  f.call();  // set aside: not called
  REQUIRE(f.outcomes.got.size() == 2);
  CHECK(down->calls() == 3);
  REQUIRE_FALSE(f.outcomes.got[1].failures.empty());
  CHECK(f.outcomes.got[1].failures[0].message.find("cooling down for another") == 0);

  const auto status = f.cascade.status();
  REQUIRE(status.size() == 2);
  CHECK(status[0].name == "down");
  CHECK(status[0].figures.calls == 3);
  CHECK(status[0].figures.cooling_until > std::chrono::system_clock::now() + 50min);
  REQUIRE(status[0].figures.failures.size() == 1);
  CHECK(status[0].figures.failures[0] == std::pair<FailureClass, std::uint64_t>{FailureClass::transport, 3});
  CHECK(status[1].figures.successes == 2);
  CHECK(status[1].figures.tokens_in == 24);
  CHECK(status[1].figures.tokens_out == 6);
}

TEST_CASE("a provider set aside is tried again once its cooldown is over, and a success ends the run",
          "[providers][cascade]") {
  ProviderHealth health;
  const CooldownPolicy policy{3, 30s};
  const auto t0 = ProviderHealth::Clock::now();
  CHECK_FALSE(health.failed(FailureClass::timeout, 1ms, policy, t0));
  CHECK_FALSE(health.failed(FailureClass::authentication, 1ms, policy, t0));  // not retriable: not counted
  CHECK_FALSE(health.failed(FailureClass::timeout, 1ms, policy, t0));
  CHECK(health.failed(FailureClass::overloaded, 1ms, policy, t0));
  CHECK(health.cooling_down(t0 + 29s));
  CHECK_FALSE(health.cooling_down(t0 + 30s));
  health.succeeded(2ms, {});
  CHECK_FALSE(health.failed(FailureClass::timeout, 1ms, policy, t0 + 31s));  // a new run starts from one
  CHECK(health.figures().consecutive_failures == 1);
}

TEST_CASE("latency percentiles come from the attempts' times", "[providers][cascade]") {
  ProviderHealth health;
  for (int i = 0; i < 98; ++i) health.succeeded(10ms, {});
  health.succeeded(2s, {});
  health.succeeded(2s, {});
  const ProviderFigures figures = health.figures();
  CHECK(figures.latency_p50 >= 9ms);
  CHECK(figures.latency_p50 <= 11ms);
  CHECK(figures.latency_p99 >= 1800ms);
  CHECK(figures.latency_p99 <= 2200ms);
}

TEST_CASE("once a chunk reached the caller a failure is neither retried nor failed over", "[providers][cascade]") {
  auto streaming = std::make_shared<ListProvider>(
      "streaming", std::vector<ListProvider::Step>{[](const ProviderRequest& request, ProviderCompletion& done) {
        request.on_chunk("Hello, ");
        ProviderReply reply = ProviderReply::failed("connection reset", FailureClass::transport);
        done(std::move(reply));
      }});
  auto next = std::make_shared<ListProvider>("next", std::vector<ListProvider::Step>{answers("again")});
  Fixture f({streaming, next});
  std::string received;
  ProviderRequest request;
  request.on_chunk = [&](std::string_view chunk) { received += chunk; };
  f.call(std::move(request));
  REQUIRE(f.outcomes.got.size() == 1);
  const CascadeOutcome& outcome = f.outcomes.got[0];
  CHECK_FALSE(outcome.ok());
  CHECK(outcome.partial);
  CHECK(outcome.reply.error == "streaming failed after its answer had begun: connection reset (transport)");
  CHECK(received == "Hello, ");
  CHECK(f.timers.waits().empty());
  CHECK(next->calls() == 0);
}

TEST_CASE("a cancelled call ends once, as cancelled, whether a provider or a retry was waiting",
          "[providers][cascade]") {
  SECTION("the provider in flight stops and reports the cancellation") {
    auto slow = std::make_shared<ListProvider>(
        "slow", std::vector<ListProvider::Step>{[](const ProviderRequest& request, ProviderCompletion& done) {
          request.cancel->on_cancel([done = std::move(done)]() mutable {
            done(ProviderReply::failed("cancelled", FailureClass::cancelled));
          });
        }});
    auto next = std::make_shared<ListProvider>("next", std::vector<ListProvider::Step>{answers("x")});
    Fixture f({slow, next});
    ProviderRequest request;
    auto cancel = std::make_shared<CancelSignal>();
    request.cancel = cancel;
    f.call(std::move(request));
    CHECK(f.outcomes.got.empty());
    cancel->cancel();
    REQUIRE(f.outcomes.got.size() == 1);
    CHECK(f.outcomes.got[0].cancelled);
    CHECK(f.outcomes.got[0].reply.failure == FailureClass::cancelled);
    CHECK(next->calls() == 0);
  }
  SECTION("a retry waiting is abandoned at once, and its timer later finds nothing to do") {
    auto p = std::make_shared<ListProvider>("p", std::vector<ListProvider::Step>{fails(FailureClass::overloaded, 503)});
    Fixture f({p});
    ProviderRequest request;
    auto cancel = std::make_shared<CancelSignal>();
    request.cancel = cancel;
    f.call(std::move(request));
    REQUIRE(f.timers.pending() == 1);
    cancel->cancel();
    REQUIRE(f.outcomes.got.size() == 1);
    CHECK(f.outcomes.got[0].cancelled);
    f.timers.run_all();
    CHECK(f.outcomes.got.size() == 1);
    CHECK(p->calls() == 1);
  }
  SECTION("a retry whose timer is dropped (the daemon stops) ends the call as cancelled") {
    auto p = std::make_shared<ListProvider>("p", std::vector<ListProvider::Step>{fails(FailureClass::overloaded, 503)});
    Fixture f({p});
    f.call();
    REQUIRE(f.outcomes.got.empty());
    f.timers.drop_all();
    REQUIRE(f.outcomes.got.size() == 1);
    CHECK(f.outcomes.got[0].cancelled);
  }
}

TEST_CASE("without timers a retriable failure goes straight to the next provider", "[providers][cascade]") {
  auto p = std::make_shared<ListProvider>("p", std::vector<ListProvider::Step>{fails(FailureClass::rate_limited, 429)});
  auto next = std::make_shared<ListProvider>("next", std::vector<ListProvider::Step>{answers("x")});
  Cascade cascade({p, next});
  Outcomes outcomes;
  cascade.call(ProviderRequest{}, outcomes.sink());
  REQUIRE(outcomes.got.size() == 1);
  CHECK(outcomes.got[0].provider == "next");
  CHECK(p->calls() == 1);
}
