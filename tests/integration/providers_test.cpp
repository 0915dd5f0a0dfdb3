// The daemon with a real provider: an openai endpoint declared in the config
// file (played by the loopback HTTP stub) answers a chat, streaming its text
// as :STREAM-CHUNK frames; its key, taken from the environment, appears in
// no log line; an endpoint that refuses the key leaves the user with the
// cascade's exhaustion message; and a call nobody waits for any more (the
// client went away, the daemon stops) is cancelled, its connection closed.
#include <signal.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "integration/daemon_process.hpp"
#include "support/http_stub.hpp"
#include "support/loopback.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"

using namespace passepartout;
using namespace std::chrono_literals;
using passepartout::testing::DaemonProcess;
using passepartout::testing::HttpStub;
using passepartout::testing::StubChunk;
using passepartout::testing::StubResponse;
using passepartout::testing::TempDir;
using passepartout::testing::WireClient;

namespace {

constexpr std::string_view kKey = "sk-integration-secret-4242";

std::string chunk(std::string_view content) {
  return R"(data: {"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":")" +
         std::string(content) + R"("},"finish_reason":null}]})" + "\n\n";
}

// A config file declaring `local`, an openai endpoint at the stub.
std::string write_config(const TempDir& dir, const HttpStub& stub) {
  const auto file = dir.path() / "passepartout.yaml";
  std::ofstream(file) << "providers:\n"
                         "  - name: local\n"
                         "    kind: openai\n"
                         "    base_url: "
                      << stub.url("/v1")
                      << "\n"
                         "    model: stub-model\n"
                         "    api_key_env: LOCAL_KEY\n"
                         "    timeouts: {connect: 10s, first_byte: 120s, idle: 60s}\n";
  return file.string();
}

// An answer that does not begin for a minute: a model that is slow to start.
StubResponse stalled() {
  StubResponse answer = StubResponse::text("{}");
  answer.head_pause = 60s;
  return answer;
}

DaemonProcess::Options with_provider(const std::string& config) {
  DaemonProcess::Options options;
  options.script = "rules: []\n";
  options.provider = "local";
  options.extra_args = {"--config", config};
  options.extra_env = {"LOCAL_KEY=" + std::string(kKey)};
  return options;
}

std::string chat(std::string_view text, std::string_view token) {
  return "(:TYPE :EVENT :META (:SOURCE :TUI) :AUTH \"" + std::string(token) +
         "\" :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"" + std::string(text) + "\"))";
}

// One streamed chunk of an openai answer whose delta is `delta` (JSON).
std::string delta_chunk(std::string_view delta, std::string_view finish = "null") {
  return R"(data: {"id":"c2","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":)" +
         std::string(delta) + R"(,"finish_reason":)" + std::string(finish) + "}]}\n\n";
}

// A streamed tool call of `tool` with the id `id`, its arguments in three
// pieces split inside a JSON string.
StubResponse streamed_tool_call(std::string_view id, std::string_view tool, std::string_view path) {
  StubResponse response;
  response.headers = {{"content-type", "text/event-stream"}};
  const std::string arguments = R"({\"filepath\": \")" + std::string(path) + R"(\"})";
  const std::size_t cut = arguments.size() / 2;
  response.chunks.push_back(StubChunk{
      delta_chunk(R"({"role":"assistant","content":null,"tool_calls":[{"index":0,"id":")" + std::string(id) +
                  R"(","type":"function","function":{"name":")" + std::string(tool) + R"(","arguments":""}}]})"),
      0ms});
  for (const std::string& piece : {arguments.substr(0, cut), arguments.substr(cut)}) {
    response.chunks.push_back(
        StubChunk{delta_chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":")" + piece + R"("}}]})"), 0ms});
  }
  response.chunks.push_back(StubChunk{delta_chunk("{}", R"("tool_calls")"), 0ms});
  response.chunks.push_back(StubChunk{"data: [DONE]\n\n", 0ms});
  return response;
}

StubResponse streamed_text(std::string_view text) {
  StubResponse response;
  response.headers = {{"content-type", "text/event-stream"}};
  response.chunks.push_back(StubChunk{chunk(text), 0ms});
  response.chunks.push_back(StubChunk{"data: [DONE]\n\n", 0ms});
  return response;
}

// The messages of a request the stub received.
nlohmann::json messages_of(const testing::StubRequest& request) {
  return nlohmann::json::parse(request.body).at("messages");
}

// Reads frames until the one that is not a stream chunk and carries `text`
// (tool results and chunks come first); the frames read, in order.
std::vector<Value> frames_until(WireClient& client, std::string_view text) {
  std::vector<Value> frames;
  for (int i = 0; i < 64; ++i) {
    frames.push_back(client.expect_frame());
    const Value& frame = frames.back();
    if (frame.path({"TYPE"}).text() == "STREAM-CHUNK") continue;
    if (to_sexp(frame).find(text) != std::string::npos) break;
  }
  return frames;
}
}  // namespace

TEST_CASE("a daemon with an openai endpoint in its config answers from it, streaming the text",
          "[integration][providers]") {
  HttpStub stub;
  StubResponse answer;
  answer.headers = {{"content-type", "text/event-stream"}};
  for (const char* piece : {"Hello ", "from the ", "model"}) answer.chunks.push_back(StubChunk{chunk(piece), 5ms});
  answer.chunks.push_back(StubChunk{"data: [DONE]\n\n", 0ms});
  stub.enqueue(answer);
  TempDir dir;
  DaemonProcess daemon(with_provider(write_config(dir, stub)));
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  client.send(chat("hello there", daemon.token()));
  std::string streamed;
  Value reply;
  for (;;) {
    reply = client.expect_frame();
    if (reply.path({"TYPE"}).text() != "STREAM-CHUNK") break;
    streamed += reply.path({"PAYLOAD", "TEXT"}).text();
  }
  INFO(to_sexp(reply) << "\n" << daemon.log());
  CHECK(streamed == "Hello from the model");
  CHECK(reply.path({"PAYLOAD", "TEXT"}).text() == "Hello from the model");
  const auto requests = stub.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].target == "/v1/chat/completions");
  CHECK(requests[0].header("authorization") == "Bearer " + std::string(kKey));
  CHECK(requests[0].body.find("hello there") != std::string::npos);
  CHECK(requests[0].body.find("\"model\":\"stub-model\"") != std::string::npos);
  CHECK(daemon.wait_for_log("provider local: openai at " + stub.url("/v1") + ", model stub-model, key from LOCAL_KEY"));
  CHECK(daemon.log().find(kKey) == std::string::npos);

  // status shows the provider, its endpoint (never its key) and its figures.
  const auto env = testing::hermetic_env(daemon.dir());
  const auto status = testing::run_passepartout({"status", "--socket", daemon.socket_path().string()}, env);
  INFO(status.out << status.err);
  CHECK(status.exit_status == 0);
  CHECK(status.out.find("Providers (in cascade order):") != std::string::npos);
  CHECK(status.out.find("stub-model at " + stub.url("/v1")) != std::string::npos);
  CHECK(status.out.find("1 calls") != std::string::npos);
  CHECK(status.out.find(kKey) == std::string::npos);
  const auto json = testing::run_passepartout({"status", "--json", "--socket", daemon.socket_path().string()}, env);
  const auto document = nlohmann::json::parse(json.out);
  REQUIRE(document["providers"].size() == 1);
  const auto& local = document["providers"][0];
  CHECK(local["name"] == "local");
  CHECK(local["kind"] == "openai");
  CHECK(local["model"] == "stub-model");
  CHECK(local["base_url"] == stub.url("/v1"));
  CHECK(local["state"] == "ready");
  CHECK(local["calls"] == 1);
  CHECK(local["successes"] == 1);
  CHECK(local["failures"].is_null());  // none
}

TEST_CASE("an endpoint that refuses the key leaves the user with the exhaustion message, the key in no log",
          "[integration][providers]") {
  HttpStub stub;
  stub.set_default(StubResponse::text(
      R"({"error":{"message":"Incorrect API key provided: sk-integ***4242","type":"invalid_request_error","code":"invalid_api_key"}})",
      401));
  TempDir dir;
  DaemonProcess daemon(with_provider(write_config(dir, stub)));
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  client.send(chat("hello", daemon.token()));
  const Value reply = client.expect_frame();
  INFO(to_sexp(reply) << "\n" << daemon.log());
  CHECK(reply.path({"PAYLOAD", "TEXT"}).text() == "Neural Cascade Failure: All providers exhausted.");
  CHECK(daemon.wait_for_log("Backend local failed: "));
  CHECK(daemon.wait_for_log("(authentication, HTTP 401"));
  CHECK(stub.requests().size() == 1);  // an authentication failure is not retried
  CHECK(daemon.log().find(kKey) == std::string::npos);
  // The reply says no model answered, and why, after the gates.
  const Value& failure = reply.at("MODEL-FAILURE");
  REQUIRE(failure.is_list());
  CHECK(failure.at("TEXT").text() == "Neural Cascade Failure: All providers exhausted.");
  REQUIRE(failure.at("FAILURES").items().size() == 1);
  CHECK(failure.at("FAILURES").items()[0].at("PROVIDER").text() == "local");

  // passepartout chat: the exhaustion message, each provider's reason, exit status 5.
  const auto env = testing::hermetic_env(daemon.dir());
  const auto chat_run =
      testing::run_passepartout({"chat", "--socket", daemon.socket_path().string(), "hello again"}, env);
  INFO(chat_run.out << chat_run.err);
  CHECK(chat_run.exit_status == 5);
  CHECK(chat_run.out.find("Neural Cascade Failure: All providers exhausted.") != std::string::npos);
  CHECK(chat_run.err.find("no model answered") != std::string::npos);
  CHECK(chat_run.err.find("local: HTTP 401") != std::string::npos);
  const auto json_run =
      testing::run_passepartout({"chat", "--json", "--socket", daemon.socket_path().string(), "and again"}, env);
  CHECK(json_run.exit_status == 5);
  const auto document = nlohmann::json::parse(json_run.out);
  CHECK(document["ok"] == false);
  CHECK(document["outcome"] == "no_model");
  REQUIRE(document["model_failures"].size() == 1);
  CHECK(document["model_failures"][0].get<std::string>().find("local: HTTP 401") == 0);
}

TEST_CASE("the daemon refuses a provider it cannot use, and a bad providers: entry, naming file and line",
          "[integration][providers]") {
  TempDir dir;
  const auto env = testing::hermetic_env(dir.path());
  SECTION("named but without its key") {
    auto run = testing::run_passepartout(
        {"daemon", "--state-dir", (dir.path() / "state").string(), "--provider", "anthropic"}, env);
    CHECK(run.exit_status == 2);
    CHECK(run.err.find("--provider: 'anthropic' names the provider 'anthropic', which cannot be used: "
                       "ANTHROPIC_API_KEY is not set") != std::string::npos);
  }
  SECTION("a typo in the config file") {
    const auto config = dir.path() / "bad.yaml";
    std::ofstream(config) << "providers:\n  - name: local\n    kind: openai\n    model: m\n    base_ulr: http://x\n";
    auto run = testing::run_passepartout(
        {"daemon", "--state-dir", (dir.path() / "state").string(), "--config", config.string()}, env);
    CHECK(run.exit_status == 2);
    CHECK(run.err.find(config.string() + ":5:5: unknown key 'base_ulr' in provider 1; did you mean 'base_url'?") !=
          std::string::npos);
  }
}

TEST_CASE("a model's tool call runs a bundled tool through the gates, its result goes back as a tool message",
          "[integration][providers][conversation]") {
  HttpStub stub;
  stub.enqueue(streamed_tool_call("call_abc", "read-file", "notes.txt"));
  stub.enqueue(streamed_text("The notes say hello."));
  TempDir dir;
  DaemonProcess daemon(with_provider(write_config(dir, stub)));
  std::ofstream(daemon.state_dir() / "workspace" / "notes.txt") << "hello from the notes file";
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  client.send(chat("what do my notes say?", daemon.token()));
  const auto frames = frames_until(client, "The notes say hello.");
  std::string shown;
  for (const Value& frame : frames) shown += to_sexp(frame) + "\n";
  INFO(shown << daemon.log());
  CHECK(shown.find("hello from the notes file") != std::string::npos);  // the tool's result, shown to the user
  CHECK(to_sexp(frames.back()).find("The notes say hello.") != std::string::npos);

  REQUIRE(stub.requests().size() == 2);
  const auto messages = messages_of(stub.requests()[1]);
  // system, the user's text, the assistant's call, the tool's result answering it
  REQUIRE(messages.size() == 4);
  CHECK(messages[1]["role"] == "user");
  CHECK(messages[1]["content"] == "what do my notes say?");
  CHECK(messages[2]["role"] == "assistant");
  CHECK(messages[2]["tool_calls"][0]["id"] == "call_abc");
  CHECK(messages[2]["tool_calls"][0]["function"]["name"] == "read-file");
  CHECK(nlohmann::json::parse(messages[2]["tool_calls"][0]["function"]["arguments"].get<std::string>()) ==
        nlohmann::json{{"filepath", "notes.txt"}});
  CHECK(messages[3]["role"] == "tool");
  CHECK(messages[3]["tool_call_id"] == "call_abc");
  CHECK(messages[3]["content"].get<std::string>().find("hello from the notes file") != std::string::npos);

  // The next chat of the session continues the conversation.
  stub.enqueue(streamed_text("You are welcome."));
  client.send(chat("thanks", daemon.token()));
  frames_until(client, "You are welcome.");
  REQUIRE(stub.requests().size() == 3);
  const auto next = messages_of(stub.requests()[2]);
  REQUIRE(next.size() == 6);
  CHECK(next[4]["role"] == "assistant");
  CHECK(next[4]["content"] == "The notes say hello.");
  CHECK(next[5]["content"] == "thanks");

  // passepartout chat shows the tool's result, then the model's answer, and exits 0.
  stub.enqueue(streamed_tool_call("call_def", "read-file", "notes.txt"));
  stub.enqueue(streamed_text("Your notes greet you."));
  const auto run = testing::run_passepartout({"chat", "--socket", daemon.socket_path().string(), "read my notes"},
                                             testing::hermetic_env(daemon.dir()));
  INFO(run.out << run.err);
  CHECK(run.exit_status == 0);
  const auto result_at = run.out.find("hello from the notes file");
  const auto answer_at = run.out.find("Your notes greet you.");
  CHECK(result_at != std::string::npos);
  CHECK(answer_at != std::string::npos);
  CHECK(result_at < answer_at);
}

TEST_CASE("a blocked tool call's rejection reaches the model's next attempt as that call's result",
          "[integration][providers][conversation]") {
  HttpStub stub;
  stub.enqueue(streamed_tool_call("call_key", "read-file", ".ssh/id_rsa"));  // harmless: no such file, never read
  stub.enqueue(streamed_text("I may not read that file."));
  TempDir dir;
  DaemonProcess daemon(with_provider(write_config(dir, stub)));
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  client.send(chat("show me my ssh key", daemon.token()));
  const auto frames = frames_until(client, "I may not read that file.");
  INFO(to_sexp(frames.back()) << "\n" << daemon.log());
  CHECK(to_sexp(frames.back()).find("I may not read that file.") != std::string::npos);
  REQUIRE(stub.requests().size() == 2);
  const auto messages = messages_of(stub.requests()[1]);
  REQUIRE(messages.size() == 4);
  CHECK(messages[3]["role"] == "tool");
  CHECK(messages[3]["tool_call_id"] == "call_key");
  const std::string rejection = messages[3]["content"];
  CHECK(rejection.find("protected path") != std::string::npos);
  CHECK(rejection.find("The call was not run.") != std::string::npos);
  CHECK(daemon.wait_for_log("GATE DECISION [reason]: dispatcher@"));
}

TEST_CASE("an action carrying a configured key is blocked by the host, whichever gates are loaded",
          "[integration][providers][credentials]") {
  // A key no secret pattern recognises: only the host knows it is one.
  constexpr std::string_view kPlainKey = "correct-horse-battery-staple-4242";
  HttpStub stub;
  const std::string proposal = R"((:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"echo )" + std::string(kPlainKey) +
                               R"(\" :EXPLANATION \"Printing the key to check it is set.\")))";
  stub.set_default(streamed_text(proposal));
  TempDir dir;
  DaemonProcess::Options options = with_provider(write_config(dir, stub));
  options.extra_env = {"LOCAL_KEY=" + std::string(kPlainKey)};
  DaemonProcess daemon(options);
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  client.send(chat("check my key works", daemon.token()));
  const auto frames = frames_until(client, "credential-rule");
  std::string streamed;
  for (const Value& frame : frames) {
    if (frame.path({"TYPE"}).text() == "STREAM-CHUNK") streamed += frame.path({"PAYLOAD", "TEXT"}).text();
  }
  CHECK(streamed.find("(:CMD \"echo [MASKED]\"") != std::string::npos);  // streamed text is masked too
  const std::string shown = to_sexp(frames.back());
  INFO(shown << "\n" << daemon.log());
  CHECK(shown.find(":GATE \"credential-rule\" :VERSION \"host\" :RESULT :BLOCKED") != std::string::npos);
  CHECK(shown.find("(LOCAL_KEY)") != std::string::npos);
  CHECK(shown.find(kPlainKey) == std::string::npos);
  CHECK(daemon.wait_for_log("credential rule blocked an action: it contains the key from LOCAL_KEY"));
  CHECK(daemon.log().find(kPlainKey) == std::string::npos);
  // Every attempt was blocked; what the model is sent back never holds the key.
  REQUIRE(stub.requests().size() == 3);
  for (std::size_t i = 1; i < 3; ++i) {
    const std::string body = stub.requests()[i].body;
    CHECK(body.find(kPlainKey) == std::string::npos);
    CHECK(body.find("[MASKED]") != std::string::npos);
  }
}

TEST_CASE("a client that goes away cancels its model call: the endpoint sees its connection closed",
          "[integration][providers][cancel]") {
  HttpStub stub;
  stub.enqueue(stalled());
  StubResponse answer;
  answer.headers = {{"content-type", "text/event-stream"}};
  answer.chunks = {StubChunk{chunk("Still here"), 0ms}, StubChunk{"data: [DONE]\n\n", 0ms}};
  stub.enqueue(answer);
  TempDir dir;
  DaemonProcess daemon(with_provider(write_config(dir, stub)));
  {
    WireClient client = WireClient::tcp(daemon.port());
    client.expect_handshake();
    client.send(chat("take your time", daemon.token()));
    REQUIRE(stub.wait_requests(1, 30s));
    client.reset();  // gone, without waiting for the answer
  }
  INFO(daemon.log());
  CHECK(stub.wait_connections_closed(1, 30s));
  CHECK(daemon.wait_for_log("the model call was cancelled (the client went away); the loop ends"));
  CHECK(daemon.log().find("Neural Cascade Failure") == std::string::npos);  // no failover, no exhaustion
  CHECK(daemon.log().find("Retrying backend") == std::string::npos);

  // The daemon goes on serving: the next client's call is answered.
  WireClient next = WireClient::tcp(daemon.port());
  next.expect_handshake();
  next.send(chat("are you there?", daemon.token()));
  Value reply = next.expect_frame();
  while (reply.path({"TYPE"}).text() == "STREAM-CHUNK") reply = next.expect_frame();
  INFO(to_sexp(reply));
  CHECK(reply.path({"PAYLOAD", "TEXT"}).text() == "Still here");
  CHECK(stub.requests().size() == 2);
}

TEST_CASE("SIGTERM with a model call in flight cancels it, and the daemon exits 0 well within its grace",
          "[integration][providers][cancel]") {
  HttpStub stub;
  stub.set_default(stalled());
  TempDir dir;
  DaemonProcess::Options options = with_provider(write_config(dir, stub));
  options.extra_args.insert(options.extra_args.end(), {"--shutdown-grace", "30"});
  DaemonProcess daemon(options);
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  client.send(chat("take your time", daemon.token()));
  REQUIRE(stub.wait_requests(1, 30s));

  const auto stopping = std::chrono::steady_clock::now();
  daemon.signal(SIGTERM);
  const auto status = daemon.wait_exit(30s);
  const auto took = std::chrono::steady_clock::now() - stopping;
  INFO(daemon.log());
  CHECK(status == 0);
  CHECK(took < 10s);  // the grace is 30 s; the model would take a minute
  CHECK(stub.wait_connections_closed(1, 5s));
  CHECK(daemon.log().find("1 model call(s) in flight cancelled") != std::string::npos);
  CHECK(daemon.log().find("the model call was cancelled (model calls were stopped)") != std::string::npos);
  CHECK(client.closed_by_server());  // the request ended without an answer, then the connection
}
