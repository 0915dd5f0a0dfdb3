// HttpProvider: a configured endpoint answering over the event loops' HTTP
// clients, against the loopback stub: a streamed answer whose chunks reach
// the caller, a rate limit classified with its Retry-After, a refused
// connection, cancellation that reaches the server, and failover through a
// cascade.
#include <catch2/catch.hpp>

#include <mutex>
#include <string>
#include <vector>

#include "base/executor.hpp"
#include "providers/cascade.hpp"
#include "providers/http_client.hpp"
#include "providers/http_provider.hpp"
#include "support/async_wait.hpp"
#include "support/http_stub.hpp"

using namespace passepartout;
using namespace std::chrono_literals;
using passepartout::testing::Awaited;
using passepartout::testing::HttpStub;
using passepartout::testing::StubChunk;
using passepartout::testing::StubResponse;

namespace {

std::string chunk(std::string_view delta, std::string_view finish_reason = "null") {
  return "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
         "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":" +
         std::string(delta) + ",\"finish_reason\":" + std::string(finish_reason) + "}]}\n\n";
}

ProviderConfig openai_at(const HttpStub& stub, std::string name = "local") {
  ProviderConfig config;
  config.name = std::move(name);
  config.kind = "openai";
  config.base_url = stub.url("/v1");
  config.model = "m";
  config.api_key = "sk-test-key";
  config.timeouts.first_byte = 5s;
  return config;
}

StubResponse streamed(std::vector<std::string> pieces) {
  StubResponse response;
  response.headers = {{"content-type", "text/event-stream"}, {"x-request-id", "req_42"}};
  for (std::string& piece : pieces) response.chunks.push_back(StubChunk{std::move(piece), 5ms});
  return response;
}

struct Loops {
  EventLoops loops{1};
  HttpClients clients{loops};
  ~Loops() {
    clients.stop();
    loops.stop();
  }
};

struct Chunks {
  std::mutex mutex;
  std::string text;
  InlineFunction<void(std::string_view)> sink() {
    return [this](std::string_view delta) {
      std::lock_guard lock(mutex);
      text += delta;
    };
  }
};

ProviderReply call(HttpProvider& provider, ProviderRequest& request) {
  Awaited<ProviderReply> reply;
  provider.complete(request, [&](ProviderReply&& r) { reply.set(std::move(r)); });
  auto got = reply.wait();
  REQUIRE(got.has_value());
  return std::move(*got);
}

}  // namespace

TEST_CASE("an openai endpoint streams its answer to the caller and sends the key as a bearer token",
          "[providers][http][concurrency]") {
  HttpStub stub;
  stub.enqueue(streamed({chunk(R"({"role":"assistant","content":""})"), chunk(R"({"content":"Hel"})"),
                         chunk(R"({"content":"lo!"})"), chunk("{}", "\"stop\""), "data: [DONE]\n\n"}));
  Loops loops;
  HttpProvider provider(openai_at(stub), loops.clients);
  Chunks chunks;
  ProviderRequest request;
  request.system_prompt = "You are the Probabilistic engine.";
  request.prompt = "hello";
  request.on_chunk = chunks.sink();
  const ProviderReply reply = call(provider, request);
  INFO(reply.error);
  REQUIRE(reply.ok());
  CHECK(reply.content == "Hello!");
  CHECK(chunks.text == "Hello!");
  const auto requests = stub.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].target == "/v1/chat/completions");
  CHECK(requests[0].header("authorization") == "Bearer sk-test-key");
  CHECK(requests[0].body.find("\"stream\":true") != std::string::npos);
}

TEST_CASE("a rate limit is classified with its status, request id and Retry-After, and streams nothing",
          "[providers][http][concurrency]") {
  HttpStub stub;
  StubResponse limited = StubResponse::text(
      R"({"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}})", 429);
  limited.headers = {{"retry-after", "7"}, {"x-request-id", "req_9"}};
  stub.enqueue(limited);
  Loops loops;
  HttpProvider provider(openai_at(stub), loops.clients);
  Chunks chunks;
  ProviderRequest request;
  request.prompt = "hello";
  request.on_chunk = chunks.sink();
  const ProviderReply reply = call(provider, request);
  CHECK_FALSE(reply.ok());
  CHECK(reply.failure == FailureClass::rate_limited);
  CHECK(reply.http_status == 429);
  CHECK(reply.request_id == "req_9");
  CHECK(reply.retry_after == 7s);
  CHECK(chunks.text.empty());
  CHECK(reply.error.find("sk-test-key") == std::string::npos);
}

TEST_CASE("a refused connection is a transport failure naming the URL", "[providers][http][concurrency]") {
  std::string url;
  {
    HttpStub gone;
    url = gone.url("/v1");
  }  // nothing listens there any more
  Loops loops;
  ProviderConfig config;
  config.name = "gone";
  config.kind = "openai";
  config.base_url = url;
  config.model = "m";
  HttpProvider provider(config, loops.clients);
  ProviderRequest request;
  request.prompt = "hello";
  const ProviderReply reply = call(provider, request);
  CHECK(reply.failure == FailureClass::transport);
  CHECK(reply.error.find(url + "/chat/completions") == 0);
}

TEST_CASE("cancelling a call stops the transfer: the server sees its connection closed",
          "[providers][http][concurrency]") {
  HttpStub stub;
  StubResponse slow = streamed({chunk(R"({"content":"a"})"), chunk(R"({"content":"b"})")});
  slow.chunks[1].pause = 30s;  // never reached: the call is cancelled first
  stub.enqueue(slow);
  Loops loops;
  HttpProvider provider(openai_at(stub), loops.clients);
  Awaited<ProviderReply> reply;
  Awaited<bool> first_chunk;
  ProviderRequest request;
  request.prompt = "hello";
  request.on_chunk = [&](std::string_view) { first_chunk.set(true); };
  request.cancel = std::make_shared<CancelSignal>();
  provider.complete(request, [&](ProviderReply&& r) { reply.set(std::move(r)); });
  REQUIRE(first_chunk.wait().has_value());
  request.cancel->cancel();
  const auto got = reply.wait();
  REQUIRE(got.has_value());
  CHECK(got->failure == FailureClass::cancelled);
  CHECK(stub.wait_connections_closed(1, 10s));
  CHECK(reply.times_set() == 1);
}

TEST_CASE("a cascade of two endpoints fails over from a 500 to the second, which answers",
          "[providers][http][concurrency]") {
  HttpStub first;
  first.set_default(StubResponse::text(R"({"error":{"message":"boom","type":"server_error"}})", 500));
  HttpStub second;
  second.enqueue(streamed({chunk(R"({"content":"from the second"})"), chunk("{}", "\"stop\""), "data: [DONE]\n\n"}));
  Loops loops;
  Cascade cascade({std::make_shared<HttpProvider>(openai_at(first, "first"), loops.clients),
                   std::make_shared<HttpProvider>(openai_at(second, "second"), loops.clients)});
  Awaited<CascadeOutcome> outcome;
  ProviderRequest request;
  request.prompt = "hello";
  cascade.call(std::move(request), [&](CascadeOutcome&& o) { outcome.set(std::move(o)); });
  const auto got = outcome.wait();
  REQUIRE(got.has_value());
  REQUIRE(got->ok());
  CHECK(got->provider == "second");
  CHECK(got->reply.content == "from the second");
  REQUIRE(got->failures.size() == 1);
  CHECK(got->failures[0].failure == FailureClass::server_error);
  CHECK(got->failures[0].http_status == 500);
}

TEST_CASE("a cascade retries an overloaded endpoint on a real loop, and a cancel while the retry waits ends it once",
          "[providers][http][cascade][concurrency]") {
  HttpStub stub;
  StubResponse overloaded = StubResponse::text(R"({"error":{"message":"busy","type":"overloaded"}})", 503);
  Loops loops;
  Cascade cascade({std::make_shared<HttpProvider>(openai_at(stub), loops.clients)});
  RetryPolicy policy;
  SECTION("the retry answers") {
    policy.initial_backoff = 10ms;
    cascade.set_retry_policy(policy, &loops.loops);
    stub.enqueue(overloaded);
    stub.enqueue(streamed({chunk(R"({"content":"second time"})"), chunk("{}", "\"stop\""), "data: [DONE]\n\n"}));
    Awaited<CascadeOutcome> outcome;
    ProviderRequest request;
    request.prompt = "hello";
    cascade.call(std::move(request), [&](CascadeOutcome&& o) { outcome.set(std::move(o)); });
    const auto got = outcome.wait();
    REQUIRE(got.has_value());
    REQUIRE(got->ok());
    CHECK(got->reply.content == "second time");
    CHECK(stub.requests().size() == 2);
    CHECK(outcome.times_set() == 1);
  }
  SECTION("cancelled from another thread while the retry waits") {
    policy.initial_backoff = 60s;  // never reached: the cancel comes first
    policy.max_backoff = 60s;
    cascade.set_retry_policy(policy, &loops.loops);
    stub.set_default(overloaded);
    Awaited<CascadeOutcome> outcome;
    ProviderRequest request;
    request.prompt = "hello";
    auto cancel = std::make_shared<CancelSignal>();
    request.cancel = cancel;
    cascade.call(std::move(request), [&](CascadeOutcome&& o) { outcome.set(std::move(o)); });
    REQUIRE(stub.wait_requests(1, 10s));
    // The 503 may still be on its way to the cascade: cancel from here either way.
    cancel->cancel();
    const auto got = outcome.wait();
    REQUIRE(got.has_value());
    CHECK(got->cancelled);
    CHECK(got->reply.failure == FailureClass::cancelled);
    CHECK(stub.requests().size() == 1);
    CHECK(outcome.times_set() == 1);
  }
}
