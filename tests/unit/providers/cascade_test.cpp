// Cascade (seed D2-D4, Decisions 9): order, logging, the model selector and
// skips, failures and exceptions per provider, inline and asynchronous
// completions, and runtime changes to the list.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/executor.hpp"
#include "base/log.hpp"
#include "providers/cascade.hpp"
#include "support/async_wait.hpp"
#include "value/sexp_printer.hpp"

using namespace passepartout;
using passepartout::testing::Awaited;
using passepartout::testing::CountDown;

namespace {

// A provider whose behaviour is a function of the request; records what it saw.
class FakeProvider final : public Provider {
 public:
  using Behaviour = std::function<void(ProviderRequest, ProviderCompletion)>;

  FakeProvider(std::string name, Behaviour behaviour) : name_(std::move(name)), behaviour_(std::move(behaviour)) {}

  std::string_view name() const noexcept override { return name_; }
  void complete(const ProviderRequest& request, ProviderCompletion done) override {
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(request);
    }
    behaviour_(request, std::move(done));
  }

  std::size_t calls() const {
    std::lock_guard lock(mutex_);
    return requests_.size();
  }
  ProviderRequest last_request() const {
    std::lock_guard lock(mutex_);
    return requests_.back();
  }

 private:
  std::string name_;
  Behaviour behaviour_;
  mutable std::mutex mutex_;  // guards requests_
  std::vector<ProviderRequest> requests_;
};

std::shared_ptr<FakeProvider> answering(std::string name, std::string content) {
  return std::make_shared<FakeProvider>(
      std::move(name), [content](ProviderRequest, ProviderCompletion done) { done(ProviderReply::text(content)); });
}

std::shared_ptr<FakeProvider> failing(std::string name, std::string error) {
  return std::make_shared<FakeProvider>(
      std::move(name), [error](ProviderRequest, ProviderCompletion done) { done(ProviderReply::failed(error)); });
}

std::shared_ptr<FakeProvider> throwing(std::string name, std::string what) {
  return std::make_shared<FakeProvider>(
      std::move(name), [what](ProviderRequest, ProviderCompletion) { throw std::runtime_error(what); });
}

// Calls the cascade and waits for its outcome (which may arrive on another thread).
CascadeOutcome call(const Cascade& cascade, ProviderRequest request = {}) {
  Awaited<CascadeOutcome> outcome;
  cascade.call(std::move(request), [&](CascadeOutcome o) { outcome.set(std::move(o)); });
  auto result = outcome.wait();
  REQUIRE(result.has_value());
  CHECK(outcome.times_set() == 1);
  return std::move(*result);
}

ProviderRequest prompt(std::string text) {
  ProviderRequest request;
  request.prompt = std::move(text);
  return request;
}

std::vector<std::string> probabilistic_lines(const LogCapture& log) {
  std::vector<std::string> lines;
  for (const std::string& line : log.lines()) {
    if (line.rfind("PROBABILISTIC: ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

}  // namespace

TEST_CASE("an empty cascade fails with the exhausted text (test-backend-cascade-no-backends)", "[providers][cascade]") {
  LogCapture log;
  Cascade cascade;
  CascadeOutcome outcome = call(cascade, prompt("hello"));
  CHECK_FALSE(outcome.ok());
  CHECK(outcome.reply.error == "Neural Cascade Failure: All providers exhausted.");
  CHECK(outcome.failures.empty());
  CHECK(outcome.provider.empty());
  Value failure = outcome.failure_value();
  CHECK(failure.at("TYPE").is_keyword("LOG"));
  CHECK(std::string(failure.path({"PAYLOAD", "TEXT"}).text()).find("exhausted") != std::string::npos);
  CHECK(log.contains("PROBABILISTIC: Neural Cascade Failure: All providers exhausted."));
}

TEST_CASE("a provider's content is the answer (test-backend-cascade-with-mock)", "[providers][cascade]") {
  Cascade cascade({answering("mock", "mock-response")});
  CascadeOutcome outcome = call(cascade, prompt("hello"));
  REQUIRE(outcome.ok());
  CHECK(outcome.reply.kind == ProviderReply::Kind::content);
  CHECK(outcome.reply.content == "mock-response");
  CHECK(outcome.provider == "mock");
}

TEST_CASE("providers are tried in order and the first answer wins", "[providers][cascade]") {
  LogCapture log;
  auto first = failing("first", "connection refused");
  auto second = answering("second", "from second");
  auto third = answering("third", "from third");
  Cascade cascade({first, second, third});

  CascadeOutcome outcome = call(cascade, prompt("hello"));
  REQUIRE(outcome.ok());
  CHECK(outcome.reply.content == "from second");
  CHECK(outcome.provider == "second");
  REQUIRE(outcome.failures.size() == 1);
  CHECK(outcome.failures[0].provider == "first");
  CHECK(outcome.failures[0].message == "connection refused");
  CHECK(first->calls() == 1);
  CHECK(second->calls() == 1);
  CHECK(third->calls() == 0);
  CHECK(probabilistic_lines(log) == std::vector<std::string>{
                                        "PROBABILISTIC: Attempting backend first...",
                                        "PROBABILISTIC: Backend first failed: connection refused",
                                        "PROBABILISTIC: Attempting backend second...",
                                    });
}

TEST_CASE("every provider tried sees the whole request, the last one too", "[providers][cascade]") {
  auto first = failing("first", "down");
  auto second = throwing("second", "broken");
  auto third = answering("third", "from third");
  Cascade cascade({first, second, third});
  ProviderRequest request = prompt("what failed?");
  request.system_prompt = "TIME: now\n\nCONFIG: ...";
  request.context = Value::plist({{"SENSOR", Value::keyword("USER-INPUT")}});
  request.tools = Value::list({Value::plist({{"NAME", Value::string("read_file")}})});

  REQUIRE(call(cascade, request).reply.content == "from third");
  for (const auto& provider : {first, second, third}) {
    const ProviderRequest seen = provider->last_request();
    CHECK(seen.prompt == request.prompt);
    CHECK(seen.system_prompt == request.system_prompt);
    CHECK(seen.context == request.context);
    CHECK(seen.tools == request.tools);
  }
}

TEST_CASE("every provider failing gives the exhausted text and each failure", "[providers][cascade]") {
  Cascade cascade({failing("a", "down"), throwing("b", "socket closed"), failing("c", "")});
  CascadeOutcome outcome = call(cascade);
  CHECK_FALSE(outcome.ok());
  CHECK(outcome.reply.error == Cascade::kExhausted);
  REQUIRE(outcome.failures.size() == 3);
  CHECK(outcome.failures[0].provider == "a");
  CHECK(outcome.failures[0].message == "down");
  CHECK(outcome.failures[1].provider == "b");
  CHECK(outcome.failures[1].message == "threw: socket closed");
  CHECK(outcome.failures[2].message == "no reason given");
  CHECK(outcome.failure_messages() ==
        std::vector<std::string>{"a: down", "b: threw: socket closed", "c: no reason given"});
  CHECK(to_sexp(outcome.failure_value()) ==
        "(:TYPE :LOG :PAYLOAD (:TEXT \"Neural Cascade Failure: All providers exhausted.\" :FAILURES "
        "((:PROVIDER \"a\" :MESSAGE \"down\") (:PROVIDER \"b\" :MESSAGE \"threw: socket closed\") "
        "(:PROVIDER \"c\" :MESSAGE \"no reason given\"))))");
}

TEST_CASE("an exception from a provider is caught and the next provider answers", "[providers][cascade]") {
  LogCapture log;
  Cascade cascade({throwing("flaky", "provider crashed"), answering("steady", "fine")});
  CascadeOutcome outcome = call(cascade);
  REQUIRE(outcome.ok());
  CHECK(outcome.reply.content == "fine");
  REQUIRE(outcome.failures.size() == 1);
  CHECK(outcome.failures[0].message == "threw: provider crashed");
  CHECK(log.contains("PROBABILISTIC: Backend flaky failed: threw: provider crashed"));
}

TEST_CASE("a provider that answers and then throws counts as failed, and the cascade answers once",
          "[providers][cascade]") {
  auto rude = std::make_shared<FakeProvider>("rude", [](ProviderRequest, ProviderCompletion done) {
    done(ProviderReply::text("early"));
    throw std::runtime_error("and then threw");
  });
  Cascade cascade({rude, answering("steady", "fine")});
  CascadeOutcome outcome = call(cascade);
  REQUIRE(outcome.ok());
  CHECK(outcome.reply.content == "fine");
  REQUIRE(outcome.failures.size() == 1);
  CHECK(outcome.failures[0].message == "threw: and then threw");
}

TEST_CASE("a provider that completes twice is heard once", "[providers][cascade]") {
  LogCapture log;
  auto twice = std::make_shared<FakeProvider>("twice", [](ProviderRequest, ProviderCompletion done) {
    done(ProviderReply::failed("first answer"));
    done(ProviderReply::text("second answer"));
  });
  Cascade cascade({twice, answering("next", "from next")});
  CascadeOutcome outcome = call(cascade);
  REQUIRE(outcome.ok());
  CHECK(outcome.reply.content == "from next");
  CHECK(log.contains("PROBABILISTIC: Backend twice answered more than once; the extra answer is ignored"));
}

TEST_CASE("the model selector chooses the model and can skip a provider", "[providers][cascade]") {
  LogCapture log;
  auto big = answering("big", "from big");
  auto small = answering("small", "from small");
  Cascade cascade({big, small});

  SECTION("a skipped provider is logged as skipped and failed, and not called") {
    cascade.set_model_selector([](std::string_view provider, const Value& context) {
      CHECK(context.at("SENSOR").is_keyword("HEARTBEAT"));
      return provider == "big" ? ModelChoice::skip() : ModelChoice::use("tiny-1b");
    });
    ProviderRequest request = prompt("tick");
    request.context = Value::plist({{"SENSOR", Value::keyword("HEARTBEAT")}});
    CascadeOutcome outcome = call(cascade, request);
    REQUIRE(outcome.ok());
    CHECK(outcome.reply.content == "from small");
    CHECK(big->calls() == 0);
    CHECK(small->last_request().model == "tiny-1b");
    REQUIRE(outcome.failures.size() == 1);
    CHECK(outcome.failures[0].provider == "big");
    CHECK(probabilistic_lines(log) == std::vector<std::string>{
                                          "PROBABILISTIC: Attempting backend big...",
                                          "PROBABILISTIC: Skipping big (filtered)",
                                          "PROBABILISTIC: Backend big failed: skipped by the model selector",
                                          "PROBABILISTIC: Attempting backend small...",
                                      });
  }
  SECTION("an empty choice is the provider's default model") {
    cascade.set_model_selector([](std::string_view, const Value&) { return ModelChoice::provider_default(); });
    ProviderRequest request = prompt("hi");
    request.model = "ignored-when-a-selector-is-set";
    CHECK(call(cascade, request).reply.content == "from big");
    CHECK(big->last_request().model.empty());
  }
  SECTION("without a selector the request's model is passed unchanged") {
    ProviderRequest request = prompt("hi");
    request.model = "gpt-x";
    CHECK(call(cascade, request).ok());
    CHECK(big->last_request().model == "gpt-x");
  }
  SECTION("a selector that throws fails that provider only") {
    cascade.set_model_selector([](std::string_view provider, const Value&) {
      if (provider == "big") throw std::runtime_error("no table for big");
      return ModelChoice::provider_default();
    });
    CascadeOutcome outcome = call(cascade);
    REQUIRE(outcome.ok());
    CHECK(outcome.provider == "small");
    CHECK(outcome.failures[0].message == "the model selector threw: no table for big");
  }
  SECTION("skipping every provider exhausts the cascade") {
    cascade.set_model_selector([](std::string_view, const Value&) { return ModelChoice::skip(); });
    CascadeOutcome outcome = call(cascade);
    CHECK(outcome.reply.error == Cascade::kExhausted);
    CHECK(outcome.failures.size() == 2);
  }
}

TEST_CASE("the system prompt defaults to the Probabilistic engine's", "[providers][cascade]") {
  auto provider = answering("p", "ok");
  Cascade cascade({provider});
  REQUIRE(call(cascade, prompt("x")).ok());
  CHECK(provider->last_request().system_prompt == "You are the Probabilistic engine.");
  ProviderRequest request = prompt("x");
  request.system_prompt = "Be brief.";
  request.tools = Value::list({Value::plist({{"NAME", Value::string("shell")}})});
  REQUIRE(call(cascade, request).ok());
  CHECK(provider->last_request().system_prompt == "Be brief.");
  CHECK(provider->last_request().tools == request.tools);
  CHECK(provider->last_request().prompt == "x");
}

TEST_CASE("a tool-calls reply is an answer, one without calls is a failure", "[providers][cascade]") {
  const Value calls = Value::list({Value::plist({{"NAME", Value::string("shell")}, {"ARGUMENTS", Value()}})});
  auto caller = std::make_shared<FakeProvider>(
      "caller", [calls](ProviderRequest, ProviderCompletion done) { done(ProviderReply::calls(calls)); });
  auto empty = std::make_shared<FakeProvider>(
      "empty", [](ProviderRequest, ProviderCompletion done) { done(ProviderReply::calls(Value())); });
  Cascade cascade({empty, caller});
  CascadeOutcome outcome = call(cascade);
  REQUIRE(outcome.ok());
  CHECK(outcome.reply.kind == ProviderReply::Kind::tool_calls);
  CHECK(outcome.reply.tool_calls == calls);
  REQUIRE(outcome.failures.size() == 1);
  CHECK(outcome.failures[0].message == "a tool-calls reply without any call");
}

TEST_CASE("ten thousand providers completing inline keep the stack flat", "[providers][cascade]") {
  constexpr std::size_t kProviders = 10000;
  std::uintptr_t lowest = UINTPTR_MAX;
  std::uintptr_t highest = 0;
  auto note_stack = [&] {
    int marker = 0;
    const auto here = reinterpret_cast<std::uintptr_t>(&marker);
    lowest = std::min(lowest, here);
    highest = std::max(highest, here);
  };
  std::vector<std::shared_ptr<Provider>> providers;
  for (std::size_t i = 0; i + 1 < kProviders; ++i) {
    providers.push_back(
        std::make_shared<FakeProvider>("p" + std::to_string(i), [&](ProviderRequest, ProviderCompletion done) {
          note_stack();
          done(ProviderReply::failed("nope"));
        }));
  }
  SECTION("the last one answers") {
    providers.push_back(std::make_shared<FakeProvider>("last", [&](ProviderRequest, ProviderCompletion done) {
      note_stack();
      done(ProviderReply::text("at last"));
    }));
    Cascade cascade(providers);
    CascadeOutcome outcome = call(cascade);
    REQUIRE(outcome.ok());
    CHECK(outcome.reply.content == "at last");
    CHECK(outcome.failures.size() == kProviders - 1);
  }
  SECTION("none answers") {
    Cascade cascade(providers);
    CascadeOutcome outcome = call(cascade);
    CHECK(outcome.reply.error == Cascade::kExhausted);
    CHECK(outcome.failures.size() == kProviders - 1);
  }
  // Recursion would put each provider a few hundred bytes deeper than the last.
  CHECK(highest - lowest < 4096);
}

TEST_CASE("a provider answering later from another thread continues the cascade there",
          "[providers][cascade][concurrency]") {
  ThreadPool pool(3);
  // Nothing answers before call() has returned, so the cascade must go on from a pool thread.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto later = [&pool, released](std::string name, ProviderReply reply) {
    return std::make_shared<FakeProvider>(std::move(name),
                                          [&pool, released, reply](ProviderRequest, ProviderCompletion done) {
                                            pool.post([released, done, reply] {
                                              released.wait();
                                              done(ProviderReply(reply));
                                            });
                                          });
  };
  Cascade cascade({later("a", ProviderReply::failed("busy")), failing("b", "inline failure"),
                   later("c", ProviderReply::failed("also busy")), later("d", ProviderReply::text("from d")),
                   answering("e", "never asked")});
  const std::thread::id caller = std::this_thread::get_id();
  Awaited<std::thread::id> answered_on;
  Awaited<CascadeOutcome> outcome;
  cascade.call(prompt("x"), [&](CascadeOutcome o) {
    answered_on.set(std::this_thread::get_id());
    outcome.set(std::move(o));
  });
  CHECK_FALSE(outcome.is_set());
  release.set_value();
  auto result = outcome.wait();
  REQUIRE(result.has_value());
  CHECK(result->reply.content == "from d");
  CHECK(result->failures.size() == 3);
  CHECK(*answered_on.wait() != caller);
  CHECK(outcome.times_set() == 1);
}

TEST_CASE("a call keeps the list it started with while the list changes", "[providers][cascade]") {
  ProviderCompletion held;
  auto slow = std::make_shared<FakeProvider>("slow", [&](ProviderRequest, ProviderCompletion done) {
    held = std::move(done);  // answered by the test, later
  });
  auto backup = answering("backup", "from backup");
  Cascade cascade({slow, backup});

  Awaited<CascadeOutcome> outcome;
  cascade.call(prompt("x"), [&](CascadeOutcome o) { outcome.set(std::move(o)); });
  REQUIRE(held);
  CHECK_FALSE(outcome.is_set());

  cascade.set_providers({});
  CHECK(cascade.names().empty());
  held(ProviderReply::failed("timed out"));  // drives the cascade on, on this thread
  auto result = outcome.wait();
  REQUIRE(result.has_value());
  CHECK(result->reply.content == "from backup");
  CHECK(call(cascade).reply.error == Cascade::kExhausted);  // a new call sees the new list
}

TEST_CASE("providers can be added, replaced by name and removed at run time", "[providers][cascade]") {
  Cascade cascade;
  cascade.add(answering("alpha", "a1"));
  cascade.add(answering("beta", "b"));
  cascade.add(nullptr);
  CHECK(cascade.names() == std::vector<std::string>{"alpha", "beta"});
  CHECK(call(cascade).reply.content == "a1");

  cascade.add(answering("alpha", "a2"));  // registering again replaces, in place
  CHECK(cascade.names() == std::vector<std::string>{"alpha", "beta"});
  CHECK(call(cascade).reply.content == "a2");

  CHECK(cascade.remove("alpha"));
  CHECK_FALSE(cascade.remove("alpha"));
  CHECK(cascade.names() == std::vector<std::string>{"beta"});
  CHECK(call(cascade).reply.content == "b");
  CHECK(cascade.providers().size() == 1);
}

TEST_CASE("a lineup taken before a change is what a call with it names and tries", "[providers][cascade]") {
  Cascade cascade({answering("alpha", "a"), answering("beta", "b")});
  std::shared_ptr<const Cascade::Lineup> lineup = cascade.lineup();
  cascade.remove("alpha");
  CHECK(lineup->names == std::vector<std::string>{"alpha", "beta"});
  CHECK(cascade.lineup()->names == std::vector<std::string>{"beta"});

  Awaited<CascadeOutcome> outcome;
  cascade.call(lineup, {}, [&](CascadeOutcome o) { outcome.set(std::move(o)); });
  auto result = outcome.wait();
  REQUIRE(result.has_value());
  CHECK(result->provider == "alpha");
  CHECK(call(cascade).provider == "beta");
}

TEST_CASE("a completion that throws is logged, not propagated", "[providers][cascade]") {
  LogCapture log;
  Cascade cascade({answering("p", "ok")});
  CHECK_NOTHROW(cascade.call({}, [](CascadeOutcome) { throw std::runtime_error("caller bug"); }));
  CHECK(log.contains("PROBABILISTIC: the cascade's completion threw: caller bug"));
}

TEST_CASE("calls from many threads while the list changes each get one outcome", "[providers][cascade][concurrency]") {
  ThreadPool pool(4);
  auto async_answer =
      std::make_shared<FakeProvider>("async", [&pool](ProviderRequest request, ProviderCompletion done) {
        pool.post([done, text = request.prompt] { done(ProviderReply::text("echo " + text)); });
      });
  Cascade cascade({failing("down", "no route"), async_answer});
  constexpr int kThreads = 4;
  constexpr int kCalls = 200;
  CountDown finished(kThreads * kCalls);
  std::atomic<int> answered{0};
  std::atomic<int> exhausted{0};

  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        cascade.call(prompt(std::to_string(t) + "-" + std::to_string(i)), [&](CascadeOutcome outcome) {
          (outcome.ok() ? answered : exhausted).fetch_add(1);
          finished.arrive();
        });
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    cascade.add(failing("extra", "flapping"));
    cascade.remove("extra");
  }
  for (std::thread& caller : callers) caller.join();
  REQUIRE(finished.wait());
  CHECK(answered == kThreads * kCalls);
  CHECK(exhausted == 0);
}

namespace {

// Answers (or fails) inline and records the address and model of each request it is given.
class AddressRecorder final : public Provider {
 public:
  AddressRecorder(std::string name, bool answers) : name_(std::move(name)), answers_(answers) {}
  std::string_view name() const noexcept override { return name_; }
  void complete(const ProviderRequest& request, ProviderCompletion done) override {
    addresses.push_back(&request);
    models.push_back(request.model);
    done(answers_ ? ProviderReply::text("from " + name_) : ProviderReply::failed("down"));
  }
  std::vector<const ProviderRequest*> addresses;
  std::vector<std::string> models;

 private:
  std::string name_;
  bool answers_;
};

}  // namespace

TEST_CASE("a lent request is the one every provider sees, and stays the caller's", "[providers][cascade]") {
  auto first = std::make_shared<AddressRecorder>("first", false);
  auto second = std::make_shared<AddressRecorder>("second", true);
  Cascade cascade({first, second});
  cascade.set_model_selector(
      [](std::string_view provider, const Value&) { return ModelChoice::use("model-of-" + std::string(provider)); });
  ProviderRequest lent = prompt("hello");
  const auto call_lent = [&] {
    Awaited<CascadeOutcome> outcome;
    cascade.call_lent(cascade.lineup(), lent, [&](CascadeOutcome&& o) { outcome.set(std::move(o)); });
    auto result = outcome.wait();
    REQUIRE(result.has_value());
    return std::move(*result);
  };

  CascadeOutcome outcome = call_lent();
  REQUIRE(outcome.ok());
  CHECK(outcome.reply.content == "from second");
  CHECK(first->addresses == std::vector<const ProviderRequest*>{&lent});
  CHECK(second->addresses == std::vector<const ProviderRequest*>{&lent});
  CHECK(first->models == std::vector<std::string>{"model-of-first"});
  CHECK(second->models == std::vector<std::string>{"model-of-second"});
  // What the call wrote into it: the last attempt's model, the default system prompt.
  CHECK(lent.model == "model-of-second");
  CHECK(lent.system_prompt == Cascade::kDefaultSystemPrompt);
  CHECK(lent.prompt == "hello");

  // The next call uses the same buffers: a long system prompt is not moved away.
  lent.system_prompt.assign(4096, 'x');
  const char* const buffer = lent.system_prompt.data();
  outcome = call_lent();
  REQUIRE(outcome.ok());
  CHECK(lent.system_prompt.data() == buffer);
  CHECK(lent.system_prompt == std::string(4096, 'x'));
}
