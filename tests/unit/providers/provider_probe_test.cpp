// Probing providers for `doctor`: the drivers' model-list requests and their
// decoding, model names matched the way servers spell them, and probes
// against loopback servers (listed, refused key, missing model, no list,
// rate limit and quota, TLS to a plain server, refused connection, a stalled
// server), run at once and bounded in time.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "providers/driver.hpp"
#include "providers/provider_probe.hpp"
#include "support/http_stub.hpp"
#include "support/loopback.hpp"
#include "unit/providers/driver_support.hpp"

using namespace passepartout;
using namespace std::chrono_literals;
using passepartout::testing::HttpStub;
using passepartout::testing::StubResponse;

namespace {

constexpr std::string_view kKey = "sk-probe-secret-9876";

ProviderConfig endpoint(std::string kind, std::string base_url, std::string model) {
  ProviderConfig config;
  config.name = kind == "openai" ? "local" : kind;
  config.kind = std::move(kind);
  config.base_url = std::move(base_url);
  config.model = std::move(model);
  config.origin = "preset";
  return config;
}

ProviderConfig openai_at(const HttpStub& stub, std::string model = "stub-model") {
  ProviderConfig config = endpoint("openai", stub.url("/v1"), std::move(model));
  config.api_key = std::string(kKey);
  config.key_source = "OPENAI_API_KEY";
  return config;
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("each driver asks for its API's model list with its credential headers", "[providers][probe]") {
  SECTION("openai") {
    const HttpCall call =
        make_driver("openai")->encode_model_list(testing::settings_for("openai", "https://h/v1/", "sk-k"));
    CHECK(call.method == "GET");
    CHECK(call.url == "https://h/v1/models");
    CHECK(testing::header(call, "authorization") == "Bearer sk-k");
  }
  SECTION("ollama") {
    const HttpCall call =
        make_driver("ollama")->encode_model_list(testing::settings_for("ollama", "http://h:11434", ""));
    CHECK(call.url == "http://h:11434/api/tags");
    CHECK(testing::header(call, "authorization") == "<absent>");
  }
  SECTION("anthropic") {
    const HttpCall call =
        make_driver("anthropic")->encode_model_list(testing::settings_for("anthropic", "https://h", "sk-ant-k"));
    CHECK(call.url == "https://h/v1/models?limit=1000");
    CHECK(testing::header(call, "x-api-key") == "sk-ant-k");
    CHECK(testing::header(call, "anthropic-version") == "2023-06-01");
  }
}

TEST_CASE("model lists decode into names, and a body that is no list says why", "[providers][probe]") {
  auto openai = make_driver("openai")->decode_model_list(R"({"object":"list","data":[{"id":"a"},{"id":"b"}]})");
  REQUIRE(openai);
  CHECK(*openai == std::vector<std::string>{"a", "b"});
  auto ollama = make_driver("ollama")->decode_model_list(R"({"models":[{"name":"qwen2.5:latest","size":1}]})");
  REQUIRE(ollama);
  CHECK(*ollama == std::vector<std::string>{"qwen2.5:latest"});
  auto anthropic = make_driver("anthropic")->decode_model_list(R"({"data":[{"id":"claude-x"}],"has_more":false})");
  REQUIRE(anthropic);
  CHECK(*anthropic == std::vector<std::string>{"claude-x"});
  auto html = make_driver("openai")->decode_model_list("<html>");
  REQUIRE_FALSE(html);
  CHECK(html.error().message == "the model list is not JSON");
  auto other = make_driver("ollama")->decode_model_list(R"({"data":[]})");
  REQUIRE_FALSE(other);
  CHECK(other.error().message == "the model list has no \"models\" array");
}

TEST_CASE("a listed model matches as servers spell it", "[providers][probe]") {
  CHECK(model_matches("gpt-4o", "gpt-4o"));
  CHECK(model_matches("qwen2.5:latest", "qwen2.5"));
  CHECK(model_matches("models/gemini-2.0-flash", "gemini-2.0-flash"));
  CHECK_FALSE(model_matches("qwen2.5:7b", "qwen2.5"));
  CHECK_FALSE(model_matches("gpt-4o-mini", "gpt-4o"));
  CHECK_FALSE(model_matches("qwen2.5", "qwen2.5:latest"));
}

TEST_CASE("a probe finds the configured model in the list", "[providers][probe]") {
  HttpStub stub;
  stub.enqueue(StubResponse::text(R"({"object":"list","data":[{"id":"other"},{"id":"stub-model"}]})"));
  const auto results = probe_providers({openai_at(stub)}, ProbeLimits{});
  REQUIRE(results.size() == 1);
  INFO(results[0].detail);
  CHECK(results[0].usable);
  CHECK(results[0].http_status == 200);
  CHECK(results[0].detail == "model 'stub-model' offered at " + stub.url("/v1") + " (2 models)");
  const auto requests = stub.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].method == "GET");
  CHECK(requests[0].target == "/v1/models");
  CHECK(requests[0].header("authorization") == "Bearer " + std::string(kKey));
}

TEST_CASE("a refused key names where it came from and never shows it", "[providers][probe]") {
  HttpStub stub;
  stub.enqueue(StubResponse::text(R"({"error":{"message":"Incorrect API key provided: )" + std::string(kKey) +
                                      R"(.","type":"invalid_request_error","code":"invalid_api_key"}})",
                                  401));
  const auto results = probe_providers({openai_at(stub)}, ProbeLimits{});
  REQUIRE(results.size() == 1);
  INFO(results[0].detail);
  CHECK_FALSE(results[0].usable);
  CHECK(results[0].http_status == 401);
  CHECK(results[0].detail.starts_with("401 from local: OPENAI_API_KEY is set but refused"));
  CHECK_FALSE(contains(results[0].detail + results[0].hint, kKey));
  SECTION("from a key file") {
    ProviderConfig config = openai_at(stub);
    config.key_source = "/etc/passepartout/local.key";
    stub.enqueue(StubResponse::text(R"({"error":{"message":"no","code":"invalid_api_key"}})", 401));
    const auto again = probe_providers({config}, ProbeLimits{});
    CHECK(again[0].detail.starts_with("401 from local: the key in /etc/passepartout/local.key is refused"));
  }
}

TEST_CASE("a model that ollama does not have is a missing model with its pull command", "[providers][probe]") {
  HttpStub stub;
  stub.set_default(StubResponse::text(R"({"models":[{"name":"llama3:latest"},{"name":"qwen2.5:latest"}]})"));
  const auto results = probe_providers(
      {endpoint("ollama", stub.url(""), "mistral"), endpoint("ollama", stub.url(""), "qwen2.5")}, ProbeLimits{});
  REQUIRE(results.size() == 2);
  CHECK_FALSE(results[0].usable);
  CHECK(results[0].detail == "model 'mistral' is not offered at " + stub.url(""));
  CHECK(results[0].hint == "ollama pull mistral");
  CHECK(results[1].usable);
}

TEST_CASE("an openai model missing from the list says how many it lists", "[providers][probe]") {
  HttpStub stub;
  stub.enqueue(StubResponse::text(R"({"data":[{"id":"a"},{"id":"b"},{"id":"c"}]})"));
  const auto results = probe_providers({openai_at(stub, "gpt-x")}, ProbeLimits{});
  CHECK(results[0].detail == "model 'gpt-x' is not offered at " + stub.url("/v1"));
  CHECK(contains(results[0].hint, "it lists 3 models; check `model:`"));
}

TEST_CASE("a server without a model list is asked for one token instead", "[providers][probe]") {
  HttpStub stub;
  stub.enqueue(StubResponse::text("not found", 404));
  stub.enqueue(StubResponse::text(
      R"({"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"OK"},"finish_reason":"length"}]})"));
  const auto results = probe_providers({openai_at(stub)}, ProbeLimits{});
  INFO(results[0].detail);
  CHECK(results[0].usable);
  CHECK(contains(results[0].detail, "model 'stub-model' answered at"));
  CHECK(contains(results[0].detail, "no model list at " + stub.url("/v1/models")));
  const auto requests = stub.requests();
  REQUIRE(requests.size() == 2);
  CHECK(requests[1].method == "POST");
  CHECK(requests[1].target == "/v1/chat/completions");
  CHECK(contains(requests[1].body, R"("max_tokens":1)"));
  CHECK(contains(requests[1].body, R"("stream":false)"));
}

TEST_CASE("a refused connection to ollama says to start it", "[providers][probe]") {
  const std::uint16_t closed = passepartout::testing::closed_loopback_port();  // nothing listens
  REQUIRE(closed != 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(closed);
  const auto results = probe_providers({endpoint("ollama", url, "llama3")}, ProbeLimits{});
  INFO(results[0].detail);
  CHECK_FALSE(results[0].usable);
  CHECK(results[0].detail == "connection refused at " + url);
  CHECK(contains(results[0].hint, "is Ollama running? (ollama serve"));
  CHECK(results[0].http_status == 0);
}

TEST_CASE("a stalled server ends the probe at its bound, the others unaffected", "[providers][probe]") {
  HttpStub stalled;
  StubResponse never = StubResponse::text("{}");
  never.head_pause = 30s;
  stalled.set_default(never);
  HttpStub healthy;
  healthy.enqueue(StubResponse::text(R"({"data":[{"id":"stub-model"}]})"));
  const ProbeLimits limits{1000ms, 1000ms};
  const auto started = std::chrono::steady_clock::now();
  const auto results = probe_providers({openai_at(stalled), openai_at(healthy)}, limits);
  const auto took = std::chrono::steady_clock::now() - started;
  REQUIRE(results.size() == 2);
  INFO(results[0].detail);
  CHECK_FALSE(results[0].usable);
  CHECK(results[0].detail == "no answer from " + stalled.url("/v1/models") + " within 1 s");
  CHECK(results[1].usable);
  CHECK(took < 10s);  // generous: the bound is 1 s
}

TEST_CASE("404 for both the list and a chat points at the base URL, not the model", "[providers][probe]") {
  HttpStub stub;
  SECTION("nothing there") {
    stub.set_default(StubResponse::text("", 404));
    const auto results = probe_providers({openai_at(stub)}, ProbeLimits{});
    INFO(results[0].detail);
    CHECK(results[0].detail == "404 from local for both its model list and a chat request at " + stub.url("/v1"));
    CHECK(contains(results[0].hint, "usually ending in /v1"));
  }
  SECTION("the chat names the model") {
    stub.enqueue(StubResponse::text("", 404));
    stub.enqueue(StubResponse::text(
        R"({"error":{"message":"The model `stub-model` does not exist","code":"model_not_found"}})", 404));
    const auto results = probe_providers({openai_at(stub)}, ProbeLimits{});
    INFO(results[0].detail);
    CHECK(results[0].detail.starts_with("model 'stub-model' not found at " + stub.url("/v1")));
  }
}

TEST_CASE("rate limits and exhausted quotas are told apart", "[providers][probe]") {
  HttpStub stub;
  SECTION("rate limited, with the wait asked for") {
    StubResponse limited = StubResponse::text(R"({"error":{"message":"slow down","code":"rate_limit_exceeded"}})", 429);
    limited.headers.emplace_back("retry-after", "7");
    stub.enqueue(limited);
    const auto results = probe_providers({openai_at(stub)}, ProbeLimits{});
    INFO(results[0].detail);
    CHECK(results[0].detail.starts_with("429 from local: rate limited"));
    CHECK(contains(results[0].hint, "it asks for 7 s"));
  }
  SECTION("quota") {
    stub.enqueue(StubResponse::text(
        R"({"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}})",
        429));
    const auto results = probe_providers({openai_at(stub)}, ProbeLimits{});
    INFO(results[0].detail);
    CHECK(results[0].detail.starts_with("429 from local: the account's quota or credit is exhausted"));
    CHECK(contains(results[0].hint, "add credit"));
  }
}

TEST_CASE("https to a server that speaks plain http is a TLS error", "[providers][probe]") {
  // A one-shot plain HTTP server: it answers the TLS ClientHello with an HTTP status line.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(listener, 1) == 0);
  const timeval bound{10, 0};  // accept and read give up after it, so the join is bounded
  REQUIRE(::setsockopt(listener, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound) == 0);
  socklen_t size = sizeof address;
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size) == 0);
  std::thread server([listener, bound] {
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
    char hello[512];
    if (::read(fd, hello, sizeof hello) > 0) {
      constexpr std::string_view kAnswer = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
      (void)!::write(fd, kAnswer.data(), kAnswer.size());
    }
    ::close(fd);
  });
  const std::string url = "https://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/v1";
  ProviderConfig config = endpoint("openai", url, "m");
  const auto results = probe_providers({config}, ProbeLimits{});
  server.join();
  ::close(listener);
  INFO(results[0].detail);
  CHECK_FALSE(results[0].usable);
  CHECK(results[0].detail.starts_with("TLS error with " + url));
  CHECK(contains(results[0].hint, "a local server usually wants http://"));
}
