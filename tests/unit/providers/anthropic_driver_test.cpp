// The anthropic driver: the Messages request (top-level system, tool_use and
// tool_result blocks, strict alternation) and replies decoded from
// byte-exact fixtures in Anthropic's documented formats.
#include <catch2/catch.hpp>

#include <string>

#include "providers/driver.hpp"
#include "unit/providers/driver_support.hpp"
#include "value/sexp_printer.hpp"

using namespace passepartout;
using passepartout::testing::decode;

namespace {

const auto kDriver = make_driver("anthropic");

std::string event(std::string_view name, std::string_view data) {
  return "event: " + std::string(name) + "\ndata: " + std::string(data) + "\n\n";
}

const std::string kMessageStart = event(
    "message_start",
    R"({"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-20250514", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "output_tokens": 1}}})");
const std::string kPing = event("ping", R"({"type": "ping"})");
const std::string kMessageDelta = event(
    "message_delta",
    R"({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence":null}, "usage": {"output_tokens": 15}})");
const std::string kMessageStop = event("message_stop", R"({"type": "message_stop"})");

std::string text_delta(int index, std::string_view json_text) {
  return event("content_block_delta", "{\"type\": \"content_block_delta\",\"index\": " + std::to_string(index) +
                                          ",\"delta\": {\"type\": \"text_delta\", \"text\": " + std::string(json_text) +
                                          "}}");
}

std::string json_delta(int index, std::string_view json_text) {
  return event("content_block_delta",
               "{\"type\":\"content_block_delta\",\"index\":" + std::to_string(index) +
                   ",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":" + std::string(json_text) + "}}");
}

std::string block_stop(int index) {
  return event("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":" + std::to_string(index) + "}");
}

}  // namespace

TEST_CASE("anthropic driver encodes system on top, tool_use and tool_result blocks, and the headers", "[providers]") {
  auto settings = testing::settings_for("anthropic", "https://api.anthropic.com", "sk-ant-test-123456");
  const HttpCall call = kDriver->encode(settings, testing::conversation_request(), true);
  CHECK(call.url == "https://api.anthropic.com/v1/messages");
  CHECK(testing::header(call, "x-api-key") == "sk-ant-test-123456");
  CHECK(testing::header(call, "anthropic-version") == "2023-06-01");
  CHECK(testing::header(call, "content-type") == "application/json");
  CHECK(testing::header(call, "authorization") == "<absent>");
  CHECK(
      call.body ==
      R"({"model":"test-model","max_tokens":1024,"system":"You are the Probabilistic engine.","messages":[)"
      R"({"role":"user","content":"Read /tmp/a"},)"
      R"({"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"read_file","input":{"path":"/tmp/a"}}]},)"
      R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"hello"}]},)"
      R"({"role":"assistant","content":"It says hello."},)"
      R"({"role":"user","content":"And now?"}],"stream":true,)"
      R"("tools":[{"name":"read_file","description":"Reads a file","input_schema":{"type":"object",)"
      R"("properties":{"path":{"type":"string"}},"required":["path"]}}],"tool_choice":{"type":"auto"}})");
}

TEST_CASE("anthropic driver marks a cache breakpoint where the session's stable system prompt ends", "[providers]") {
  auto settings = testing::settings_for("anthropic", "https://api.anthropic.com", "sk-ant-test-123456");
  ProviderRequest request;
  request.system_prompt = "IDENTITY: Agent\n\nTOOLS:\nnone\n\nTIME: now";
  request.system_stable = request.system_prompt.find("\n\nTIME");
  request.prompt = "hi";
  const HttpCall call = kDriver->encode(settings, request, false);
  CHECK(
      call.body.find(
          R"("system":[{"type":"text","text":"IDENTITY: Agent\n\nTOOLS:\nnone","cache_control":{"type":"ephemeral"}},)"
          R"({"type":"text","text":"\n\nTIME: now"}])") != std::string::npos);
  // Without a known stable part the system prompt goes as one string.
  request.system_stable = 0;
  CHECK(kDriver->encode(settings, request, false).body.find(R"("system":"IDENTITY: Agent)") != std::string::npos);
}

TEST_CASE("anthropic driver merges consecutive turns of one role so user and assistant alternate", "[providers]") {
  auto settings = testing::settings_for("anthropic", "https://api.anthropic.com/", "k");
  settings.parallel_tool_calls = false;
  settings.max_tokens = 64;
  ProviderRequest request;
  request.prompt = "C";
  request.tools = testing::read_file_tool();
  request.transcript = {{Turn::Role::user, "A", {}, {}, {}},
                        {Turn::Role::user, "B", {}, {}, {}},
                        {Turn::Role::assistant,
                         "Let me look.",
                         {{"toolu_1", "read_file", ""}, {"toolu_2", "read_file", "{\"path\":\"b\"}"}},
                         {},
                         {}},
                        {Turn::Role::tool, "one", {}, "toolu_1", "read_file"},
                        {Turn::Role::tool, "two", {}, "toolu_2", "read_file"}};
  const HttpCall call = kDriver->encode(settings, request, false);
  CHECK(call.body == R"({"model":"test-model","max_tokens":64,"messages":[)"
                     R"({"role":"user","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]},)"
                     R"({"role":"assistant","content":[{"type":"text","text":"Let me look."},)"
                     R"({"type":"tool_use","id":"toolu_1","name":"read_file","input":{}},)"
                     R"({"type":"tool_use","id":"toolu_2","name":"read_file","input":{"path":"b"}}]},)"
                     R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"one"},)"
                     R"({"type":"tool_result","tool_use_id":"toolu_2","content":"two"},{"type":"text","text":"C"}]}],)"
                     R"("tools":[{"name":"read_file","description":"Reads a file","input_schema":{"type":"object",)"
                     R"("properties":{"path":{"type":"string"}},"required":["path"]}}],)"
                     R"("tool_choice":{"type":"auto","disable_parallel_tool_use":true}})");
}

TEST_CASE("anthropic driver decodes a plain message with its usage", "[providers]") {
  const std::string body =
      R"({"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[{"type":"text","text":"Hello!"}],)"
      R"("model":"claude-sonnet-4-20250514","stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":6}})";
  const auto decoded = decode(*kDriver, false, body, 200, {{"request-id", "req_018EeWyXxfu5pfWkrYcMdjWG"}});
  REQUIRE(decoded.reply.kind == ProviderReply::Kind::content);
  CHECK(decoded.reply.content == "Hello!");
  CHECK(decoded.reply.usage.input == 12);
  CHECK(decoded.reply.usage.output == 6);
  CHECK(decoded.reply.request_id == "req_018EeWyXxfu5pfWkrYcMdjWG");
}

TEST_CASE("anthropic driver decodes a non-streamed tool_use block", "[providers]") {
  const std::string body =
      R"({"id":"msg_01Aq9w938a90dw8q","model":"claude-sonnet-4-20250514","stop_reason":"tool_use","role":"assistant",)"
      R"("content":[{"type":"text","text":"I'll read it."},{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9",)"
      R"("name":"read_file","input":{"path":"/tmp/a","lines":10}}],"usage":{"input_tokens":5,"output_tokens":9}})";
  const auto reply = decode(*kDriver, false, body).reply;
  REQUIRE(reply.kind == ProviderReply::Kind::tool_calls);
  CHECK(reply.content == "I'll read it.");
  CHECK(to_sexp(reply.tool_calls) ==
        R"(((:ID "toolu_01A09q90qw90lq917835lq9" :NAME "read_file" :ARGUMENTS (:PATH "/tmp/a" :LINES 10))))");
  REQUIRE(reply.wire_calls.size() == 1);
  CHECK(reply.wire_calls[0].arguments == R"({"path":"/tmp/a","lines":10})");
}

TEST_CASE("anthropic driver counts prompt-cache reads and writes as input and the reads as cached", "[providers]") {
  // Anthropic's input_tokens leaves out the tokens read from or written to the cache.
  const std::string start = event(
      "message_start",
      R"({"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","content":[],)"
      R"("model":"claude-3-5-sonnet-20241022","stop_reason":null,"stop_sequence":null,)"
      R"("usage":{"input_tokens":21,"cache_creation_input_tokens":188,"cache_read_input_tokens":1800,"output_tokens":1}}})");
  const std::string body =
      start +
      event("content_block_start",
            R"({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})") +
      text_delta(0, R"("ok")") + block_stop(0) + kMessageDelta + kMessageStop;
  const auto decoded = decode(*kDriver, true, body);
  REQUIRE(decoded.reply.kind == ProviderReply::Kind::content);
  CHECK(decoded.reply.usage.input == 21 + 188 + 1800);
  CHECK(decoded.reply.usage.cached_input == 1800);
  CHECK(decoded.reply.usage.output == 15);
  // Without cache fields the cached count stays unknown.
  CHECK(decode(*kDriver, true, kMessageStart + kMessageDelta + kMessageStop).reply.usage.cached_input == -1);
}

TEST_CASE("anthropic driver streams text deltas through pings, with usage from message_start and message_delta",
          "[providers]") {
  const std::string body =
      kMessageStart +
      event("content_block_start",
            R"({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})") +
      kPing + text_delta(0, R"("Hello")") + text_delta(0, R"(" wörld 😀")") + block_stop(0) + kMessageDelta +
      kMessageStop;
  const auto decoded = decode(*kDriver, true, body);
  REQUIRE(decoded.reply.kind == ProviderReply::Kind::content);
  CHECK(decoded.pieces == std::vector<std::string>{"Hello", " w\xC3\xB6rld \xF0\x9F\x98\x80"});
  CHECK(decoded.reply.content == decoded.text());
  CHECK(decoded.reply.usage.input == 25);
  CHECK(decoded.reply.usage.output == 15);
}

TEST_CASE("anthropic driver assembles streamed tool_use blocks from input_json_delta pieces", "[providers]") {
  const std::string body =
      kMessageStart +
      event("content_block_start",
            R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})") +
      text_delta(0, R"("Checking.")") + block_stop(0) +
      event(
          "content_block_start",
          R"({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"read_file","input":{}}})") +
      json_delta(1, R"("")") + json_delta(1, R"("{\"path\": \"/tmp/caf")") + json_delta(1, R"("é\"}")") +
      block_stop(1) +
      event(
          "content_block_start",
          R"({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"list_dir","input":{}}})") +
      json_delta(2, R"("{\"dir\"")") + kPing + json_delta(2, R"(": \"/\"}")") + block_stop(2) +
      event(
          "message_delta",
          R"({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}})") +
      kMessageStop;
  const auto decoded = decode(*kDriver, true, body);
  REQUIRE(decoded.reply.kind == ProviderReply::Kind::tool_calls);
  CHECK(decoded.reply.content == "Checking.");
  CHECK(to_sexp(decoded.reply.tool_calls) ==
        "((:ID \"toolu_01T1x1fJ34qAmk2tNTrN7Up6\" :NAME \"read_file\" :ARGUMENTS (:PATH \"/tmp/caf\xC3\xA9\")) "
        "(:ID \"toolu_02\" :NAME \"list_dir\" :ARGUMENTS (:DIR \"/\")))");
  REQUIRE(decoded.reply.wire_calls.size() == 2);
  CHECK(decoded.reply.wire_calls[0].arguments == "{\"path\": \"/tmp/caf\xC3\xA9\"}");
  CHECK(decoded.reply.usage.output == 89);
}

TEST_CASE("anthropic driver fails an error event after a 200 with the error's class", "[providers]") {
  const std::string body =
      kMessageStart + kPing + text_delta(0, R"("Hi")") +
      event("error", R"({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})");
  const auto decoded = decode(*kDriver, true, body);
  REQUIRE_FALSE(decoded.reply.ok());
  CHECK(decoded.reply.failure == FailureClass::overloaded);
  CHECK(decoded.reply.error == "error event after HTTP 200 overloaded_error: Overloaded");
}

TEST_CASE("anthropic driver fails a stream without message_stop as truncated", "[providers]") {
  const auto decoded = decode(*kDriver, true, kMessageStart + text_delta(0, R"("Hi")"));
  CHECK(decoded.text() == "Hi");
  CHECK(decoded.reply.failure == FailureClass::truncated);
  CHECK(decoded.reply.error == "stream ended without message_stop");
}

TEST_CASE("anthropic driver fails tool input that is not valid JSON, naming the tool", "[providers]") {
  const std::string body =
      kMessageStart +
      event(
          "content_block_start",
          R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_9","name":"read_file","input":{}}})") +
      json_delta(0, R"("{\"path\": ")") + block_stop(0) + kMessageDelta + kMessageStop;
  const auto reply = decode(*kDriver, true, body).reply;
  CHECK(reply.failure == FailureClass::unparseable);
  CHECK_THAT(reply.error, Catch::StartsWith("tool 'read_file' (call toolu_9): arguments are not valid JSON: byte "));
}

TEST_CASE("anthropic driver classifies 529 and a prompt that is too long", "[providers]") {
  const auto overloaded =
      decode(*kDriver, true, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})", 529,
             {{"request-id", "req_011"}})
          .reply;
  CHECK(overloaded.failure == FailureClass::overloaded);
  CHECK(overloaded.error == "HTTP 529 overloaded_error: Overloaded (request req_011)");
  const auto context = decode(*kDriver, false,
                              R"({"type":"error","error":{"type":"invalid_request_error",)"
                              R"("message":"prompt is too long: 208310 tokens > 200000 maximum"}})",
                              400)
                           .reply;
  CHECK(context.failure == FailureClass::context_length);
  CHECK(context.error == "HTTP 400 invalid_request_error: prompt is too long: 208310 tokens > 200000 maximum");
}
