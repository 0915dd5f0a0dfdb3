// The openai driver: the chat completions request for a conversation with a
// tool call, and replies decoded from byte-exact fixtures in OpenAI's
// documented formats (chat.completion and streamed chat.completion.chunk).
#include <catch2/catch.hpp>

#include <string>

#include "providers/driver.hpp"
#include "providers/stream_parser.hpp"
#include "unit/providers/driver_support.hpp"
#include "value/sexp_printer.hpp"

using namespace passepartout;
using passepartout::testing::decode;

namespace {

const auto kDriver = make_driver("openai");

// One streamed chunk of choice 0 with `delta`, as OpenAI writes it.
std::string chunk(std::string_view delta, std::string_view finish_reason = "null") {
  return "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
         "\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[{\"index\":0,\"delta\":" +
         std::string(delta) + ",\"logprobs\":null,\"finish_reason\":" + std::string(finish_reason) + "}]}\n\n";
}

const std::string kUsageChunk =
    "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
    "\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[],"
    "\"usage\":{\"prompt_tokens\":19,\"completion_tokens\":7,\"total_tokens\":26}}\n\n";

const std::string kDone = "data: [DONE]\n\n";

}  // namespace

TEST_CASE("openai driver encodes the transcript, tools and switches as chat completions", "[providers]") {
  auto settings = testing::settings_for("openai", "https://api.openai.com/v1/", "sk-test-1234567890");
  settings.headers = {{"X-Title", "passepartout"}};
  const ProviderRequest request = testing::conversation_request();

  SECTION("streamed, every switch on") {
    const HttpCall call = kDriver->encode(settings, request, true);
    CHECK(call.method == "POST");
    CHECK(call.url == "https://api.openai.com/v1/chat/completions");
    CHECK(testing::header(call, "authorization") == "Bearer sk-test-1234567890");
    CHECK(testing::header(call, "content-type") == "application/json");
    CHECK(testing::header(call, "x-title") == "passepartout");
    CHECK(call.body ==
          R"({"model":"test-model","messages":[)"
          R"({"role":"system","content":"You are the Probabilistic engine."},)"
          R"({"role":"user","content":"Read /tmp/a"},)"
          R"({"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",)"
          R"("function":{"name":"read_file","arguments":"{\"path\":\"/tmp/a\"}"}}]},)"
          R"({"role":"tool","tool_call_id":"call_1","content":"hello"},)"
          R"({"role":"assistant","content":"It says hello."},)"
          R"({"role":"user","content":"And now?"}],)"
          R"("max_tokens":1024,"stream":true,"stream_options":{"include_usage":true},)"
          R"("tools":[{"type":"function","function":{"name":"read_file","description":"Reads a file",)"
          R"("parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}],)"
          R"("tool_choice":"auto","parallel_tool_calls":true})");
  }

  SECTION("not streamed, switches off, the other token field, the request's model, no key") {
    settings.token_limit_field = "max_completion_tokens";
    settings.stream_usage = false;
    settings.tool_choice = false;
    settings.parallel_tool_calls = false;
    settings.api_key.clear();
    ProviderRequest plain;
    plain.system_prompt = "S";
    plain.prompt = "P";
    plain.model = "gpt-4o";
    plain.tools = testing::read_file_tool();
    const HttpCall call = kDriver->encode(settings, plain, false);
    CHECK(testing::header(call, "authorization") == "<absent>");
    CHECK(call.body ==
          R"({"model":"gpt-4o","messages":[{"role":"system","content":"S"},{"role":"user","content":"P"}],)"
          R"("max_completion_tokens":1024,"stream":false,)"
          R"("tools":[{"type":"function","function":{"name":"read_file","description":"Reads a file",)"
          R"("parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}]})");
    settings.tools = false;
    CHECK(kDriver->encode(settings, plain, true).body ==
          R"({"model":"gpt-4o","messages":[{"role":"system","content":"S"},{"role":"user","content":"P"}],)"
          R"("max_completion_tokens":1024,"stream":true})");
  }
}

TEST_CASE("openai driver decodes a plain chat.completion with its usage", "[providers]") {
  const std::string body = R"({
  "id": "chatcmpl-123",
  "object": "chat.completion",
  "created": 1677652288,
  "model": "gpt-4o-mini",
  "system_fingerprint": "fp_44709d6fcb",
  "choices": [{
    "index": 0,
    "message": {
      "role": "assistant",
      "content": "Hello there, how may I assist you today?"
    },
    "logprobs": null,
    "finish_reason": "stop"
  }],
  "usage": {
    "prompt_tokens": 9,
    "completion_tokens": 12,
    "total_tokens": 21
  }
}
)";
  const auto decoded = decode(*kDriver, false, body, 200, {{"x-request-id", "req_abc"}});
  REQUIRE(decoded.reply.kind == ProviderReply::Kind::content);
  CHECK(decoded.reply.content == "Hello there, how may I assist you today?");
  CHECK(decoded.pieces.empty());
  CHECK(decoded.reply.usage.input == 9);
  CHECK(decoded.reply.usage.output == 12);
  CHECK(decoded.reply.http_status == 200);
  CHECK(decoded.reply.request_id == "req_abc");
}

TEST_CASE("openai driver decodes a non-streamed tool call", "[providers]") {
  const std::string body =
      R"({"id":"chatcmpl-abc","object":"chat.completion","created":1699896916,"model":"gpt-4o-mini",)"
      R"("choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc123",)"
      R"("type":"function","function":{"name":"read_file","arguments":"{\n\"path\": \"/tmp/a\"\n}"}}]},)"
      R"("logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99}})";
  const auto reply = decode(*kDriver, false, body).reply;
  REQUIRE(reply.kind == ProviderReply::Kind::tool_calls);
  CHECK(to_sexp(reply.tool_calls) == R"(((:ID "call_abc123" :NAME "read_file" :ARGUMENTS (:PATH "/tmp/a"))))");
  REQUIRE(reply.wire_calls.size() == 1);
  CHECK(reply.wire_calls[0].arguments == "{\n\"path\": \"/tmp/a\"\n}");
}

TEST_CASE("openai driver gives a tool call without an id one, so its result can answer it", "[providers]") {
  // As some compatible servers answer (a mock's documented example among them): no "id", no "type".
  const std::string body =
      R"({"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[)"
      R"({"function":{"name":"shell","arguments":"{\"cmd\":\"ls\"}"}},{"function":{"name":"read-file","arguments":"{}"}}]},)"
      R"("finish_reason":"tool_calls"}]})";
  const auto reply = decode(*kDriver, false, body).reply;
  REQUIRE(reply.kind == ProviderReply::Kind::tool_calls);
  REQUIRE(reply.wire_calls.size() == 2);
  CHECK(reply.wire_calls[0].id == "call_0");
  CHECK(reply.wire_calls[1].id == "call_1");
  CHECK(reply.tool_calls.items()[0].at("ID").text() == "call_0");
}

TEST_CASE("openai driver streams text deltas and reads the usage chunk after the last choice", "[providers]") {
  const std::string body = chunk(R"({"role":"assistant","content":"","refusal":null})") +
                           chunk(R"({"content":"Hello"})") + chunk(R"({"content":" w\u00f6rld, caf\u00e9 \u2615"})") +
                           chunk("{}", "\"stop\"") + kUsageChunk + kDone;
  const auto decoded = decode(*kDriver, true, body);
  REQUIRE(decoded.reply.kind == ProviderReply::Kind::content);
  CHECK(decoded.pieces == std::vector<std::string>{"Hello", " w\xC3\xB6rld, caf\xC3\xA9 \xE2\x98\x95"});
  CHECK(decoded.reply.content == decoded.text());
  CHECK(decoded.reply.usage.input == 19);
  CHECK(decoded.reply.usage.output == 7);
}

TEST_CASE("openai driver reads usage that comes on an odd chunk, and skips SSE comments", "[providers]") {
  // Some compatible servers put usage on a chunk that still has a choice; OpenRouter sends comments.
  const std::string odd =
      "data: {\"id\":\"gen-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"m\","
      "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":null}],"
      "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n";
  const std::string body =
      ": OPENROUTER PROCESSING\n\n" + odd + ": OPENROUTER PROCESSING\r\n\r\n" + chunk("{}", "\"stop\"") + kDone;
  const auto decoded = decode(*kDriver, true, body);
  REQUIRE(decoded.reply.kind == ProviderReply::Kind::content);
  CHECK(decoded.reply.content == "ok");
  CHECK(decoded.reply.usage.input == 3);
  CHECK(decoded.reply.usage.output == 1);
}

TEST_CASE("openai driver reads the cached part of the prompt from a stream's usage chunk and from a plain body",
          "[providers]") {
  // OpenAI reports prompt caching under prompt_tokens_details, as part of prompt_tokens.
  const std::string usage = R"("usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,)"
                            R"("prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0}})";
  const std::string streamed = chunk(R"({"content":"hi"})") + chunk("{}", "\"stop\"") +
                               "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[]," + usage +
                               "}\n\n" + kDone;
  const auto decoded = decode(*kDriver, true, streamed);
  REQUIRE(decoded.reply.kind == ProviderReply::Kind::content);
  CHECK(decoded.reply.usage.input == 2006);
  CHECK(decoded.reply.usage.cached_input == 1920);
  CHECK(decoded.reply.usage.output == 300);

  const std::string plain = R"({"id":"c","object":"chat.completion","choices":[{"index":0,)"
                            R"("message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],)" +
                            usage + "}";
  const auto whole = decode(*kDriver, false, plain).reply;
  REQUIRE(whole.kind == ProviderReply::Kind::content);
  CHECK(whole.usage.cached_input == 1920);
  // A server that says nothing of caching leaves it unknown.
  CHECK(decode(*kDriver, true, chunk(R"({"content":"x"})") + kUsageChunk + kDone).reply.usage.cached_input == -1);
}

TEST_CASE("openai driver assembles a streamed tool call whose arguments come in many pieces", "[providers]") {
  // The pieces split the JSON inside a string and inside an escape; the
  // whole-body splits of decode() also cut inside the UTF-8 of "é".
  const std::string body =
      chunk(
          R"({"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"read_file","arguments":""}}]})") +
      chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"{\""}}]})") +
      chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"pa"}}]})") +
      chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"th\":\"/tmp/caf"}}]})") +
      chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"é \\"}}]})") +
      chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"\"q\\\".txt\"}"}}]})") +
      chunk("{}", "\"tool_calls\"") + kUsageChunk + kDone;
  const auto decoded = decode(*kDriver, true, body);
  REQUIRE(decoded.reply.kind == ProviderReply::Kind::tool_calls);
  CHECK(decoded.pieces.empty());
  CHECK(to_sexp(decoded.reply.tool_calls) ==
        "((:ID \"call_DdmO9pD3xa9XTPNJ32zg2hcA\" :NAME \"read_file\" :ARGUMENTS (:PATH \"/tmp/caf\xC3\xA9 "
        "\\\"q\\\".txt\")))");
  REQUIRE(decoded.reply.wire_calls.size() == 1);
  CHECK(decoded.reply.wire_calls[0].arguments == "{\"path\":\"/tmp/caf\xC3\xA9 \\\"q\\\".txt\"}");
  CHECK(decoded.reply.usage.output == 7);
}

TEST_CASE("openai driver assembles two parallel tool calls by index", "[providers]") {
  const std::string body =
      chunk(
          R"({"role":"assistant","content":"Reading both.","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]})") +
      chunk(
          R"({"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"list_dir","arguments":""}}]})") +
      chunk(
          R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}},{"index":1,"function":{"arguments":"{\"dir\":"}}]})") +
      chunk(R"({"tool_calls":[{"index":1,"function":{"arguments":"\"/tmp\"}"}}]})") +
      chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"\"/a\"}"}}]})") + chunk("{}", "\"tool_calls\"") +
      kDone;
  const auto decoded = decode(*kDriver, true, body);
  REQUIRE(decoded.reply.kind == ProviderReply::Kind::tool_calls);
  CHECK(decoded.reply.content == "Reading both.");
  CHECK(decoded.pieces == std::vector<std::string>{"Reading both."});
  CHECK(to_sexp(decoded.reply.tool_calls) == R"(((:ID "call_a" :NAME "read_file" :ARGUMENTS (:PATH "/a")) )"
                                             R"((:ID "call_b" :NAME "list_dir" :ARGUMENTS (:DIR "/tmp"))))");
}

TEST_CASE("openai driver takes a delta without index as its position and a new id at a used index as a new call",
          "[providers]") {
  const std::string body =
      chunk(
          R"({"tool_calls":[{"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{}"}},{"id":"call_b","type":"function","function":{"name":"list_dir","arguments":"{\"dir\""}}]})") +
      chunk(R"({"tool_calls":[{"index":1,"function":{"arguments":":\"/\"}"}}]})") +
      chunk(
          R"({"tool_calls":[{"index":0,"id":"call_c","type":"function","function":{"name":"stat","arguments":"{}"}}]})") +
      chunk("{}", "\"tool_calls\"") + kDone;
  const auto reply = decode(*kDriver, true, body).reply;
  REQUIRE(reply.kind == ProviderReply::Kind::tool_calls);
  CHECK(to_sexp(reply.tool_calls) ==
        R"(((:ID "call_a" :NAME "read_file" :ARGUMENTS NIL) (:ID "call_b" :NAME "list_dir" :ARGUMENTS (:DIR "/")) )"
        R"((:ID "call_c" :NAME "stat" :ARGUMENTS NIL)))");
}

TEST_CASE("openai driver fails a stream that ends without [DONE] as truncated", "[providers]") {
  const std::string body = chunk(R"({"content":"Hel"})") + chunk(R"({"content":"lo"})");
  const auto decoded = decode(*kDriver, true, body);
  CHECK(decoded.pieces == std::vector<std::string>{"Hel", "lo"});
  REQUIRE_FALSE(decoded.reply.ok());
  CHECK(decoded.reply.failure == FailureClass::truncated);
  CHECK(decoded.reply.error == "stream ended without [DONE]");
  // Cut inside an event: still truncated, the partial event never read as text.
  const auto cut = decode(*kDriver, true, chunk(R"({"content":"Hel"})") + "data: {\"id\":\"chatcmpl-7\",\"obj");
  CHECK(cut.reply.failure == FailureClass::truncated);
  CHECK(cut.text() == "Hel");
}

TEST_CASE("openai driver fails on an error object or a vLLM error after a 200", "[providers]") {
  const std::string error =
      "data: {\"error\":{\"message\":\"The server had an error while processing your request. Sorry about that!\","
      "\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n";
  const auto decoded = decode(*kDriver, true, chunk(R"({"content":"Hi"})") + error + kDone);
  REQUIRE_FALSE(decoded.reply.ok());
  CHECK(decoded.reply.failure == FailureClass::truncated);
  CHECK(decoded.reply.error ==
        "error event after HTTP 200 server_error: The server had an error while processing your request. Sorry about "
        "that!");
  CHECK(decoded.reply.http_status == 200);

  const std::string vllm =
      "data: {\"object\":\"error\",\"message\":\"This model's maximum context length is 4096 tokens.\","
      "\"type\":\"BadRequestError\",\"param\":null,\"code\":400}\n\n";
  const auto context = decode(*kDriver, true, vllm + kDone);
  CHECK(context.reply.failure == FailureClass::context_length);
}

TEST_CASE("openai driver fails tool-call arguments that are not valid JSON, naming the tool", "[providers]") {
  const std::string body =
      chunk(
          R"({"tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"/tm"}}]})") +
      chunk("{}", "\"tool_calls\"") + kDone;
  const auto reply = decode(*kDriver, true, body).reply;
  REQUIRE_FALSE(reply.ok());
  CHECK(reply.failure == FailureClass::unparseable);
  CHECK_THAT(reply.error, Catch::StartsWith("tool 'read_file' (call call_x): arguments are not valid JSON: byte "));
  CHECK(reply.content.empty());

  const auto array = decode(*kDriver, false,
                            R"({"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[)"
                            R"({"id":"call_y","type":"function","function":{"name":"stat","arguments":"[1]"}}]}}]})")
                         .reply;
  CHECK(array.failure == FailureClass::unparseable);
  CHECK(array.error == "tool 'stat' (call call_y): arguments are not a JSON object");
}

TEST_CASE("openai driver fails an event that is not JSON as unparseable", "[providers]") {
  const auto reply = decode(*kDriver, true, chunk(R"({"content":"a"})") + "data: {not json\n\n" + kDone).reply;
  CHECK(reply.failure == FailureClass::unparseable);
  CHECK(reply.error == "stream event 1 is not a JSON object");
}

TEST_CASE("openai driver classifies an error status from its body", "[providers]") {
  const std::string body = R"({
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": null,
        "code": "insufficient_quota"
    }
}
)";
  const auto decoded = decode(*kDriver, true, body, 429, {{"x-request-id", "req_q"}});
  CHECK(decoded.pieces.empty());
  CHECK(decoded.reply.failure == FailureClass::quota);
  CHECK(decoded.reply.http_status == 429);
  CHECK(decoded.reply.request_id == "req_q");
  CHECK(decoded.reply.error ==
        "HTTP 429 insufficient_quota: You exceeded your current quota, please check your plan and billing details. "
        "(request req_q)");
}

TEST_CASE("openai driver fails an event past the parser's cap as too large, with no text from it", "[providers]") {
  auto decoder = kDriver->decoder(true);
  std::string text;
  const ReplyDecoder::OnText on_text = [&](std::string_view piece) { text += piece; };
  decoder->feed(chunk(R"({"content":"a"})"), on_text);
  decoder->feed(
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + std::string(SseParser::kDefaultMaxEventBytes, 'x'),
      on_text);
  decoder->feed("\"}}]}\n\n" + kDone, on_text);
  const ProviderReply reply = decoder->finish(200, {});
  CHECK(text == "a");
  CHECK(reply.failure == FailureClass::too_large);
  CHECK(reply.error == "server-sent event larger than 1048576 bytes");
}

TEST_CASE("openai driver sends a tool's schema as the skill wrote it, keys in their case", "[providers]") {
  const auto settings = testing::settings_for("openai", "https://api.openai.com/v1", "");
  ProviderRequest request;
  request.prompt = "p";
  request.tools = Value::list(
      {Value::plist({{"NAME", Value::string("write-file")},
                     {"DESCRIPTION", Value::string("Writes")},
                     {"PARAMETERS", Value::plist({{"TYPE", Value::string("object")}})},
                     {"PARAMETERS-JSON",
                      Value::string(R"({"type":"object","properties":{"filePath":{"type":"string","minLength":1}},)"
                                    R"("additionalProperties":false})")}})});
  const HttpCall call = kDriver->encode(settings, request, false);
  CHECK(call.body.find(R"("parameters":{"type":"object","properties":{"filePath":{"type":"string","minLength":1}},)"
                       R"("additionalProperties":false})") != std::string::npos);

  SECTION("a schema text that is not a JSON object falls back to the plist") {
    request.tools = Value::list({Value::plist({{"NAME", Value::string("t")},
                                               {"PARAMETERS", Value::plist({{"TYPE", Value::string("object")}})},
                                               {"PARAMETERS-JSON", Value::string("[1,2")}})});
    CHECK(kDriver->encode(settings, request, false).body.find(R"("parameters":{"type":"object"})") !=
          std::string::npos);
  }
}

TEST_CASE("openai driver encodes other tools as soon as a request offers them, never the last ones again",
          "[providers]") {
  const auto settings = testing::settings_for("openai", "https://api.openai.com/v1", "");
  auto tool = [](const char* name, const char* schema) {
    return Value::list({Value::plist({{"NAME", Value::string(name)},
                                      {"DESCRIPTION", Value::string("A tool")},
                                      {"PARAMETERS-JSON", Value::string(schema)}})});
  };
  ProviderRequest request;
  request.prompt = "p";
  request.tools = tool("first", R"({"type":"object","properties":{"a":{"type":"string"}}})");
  const std::string once = kDriver->encode(settings, request, false).body;
  CHECK(kDriver->encode(settings, request, false).body == once);  // the same tools: the same body
  request.tools = tool("first", R"({"type":"object","properties":{"b":{"type":"string"}}})");  // equal name, new schema
  const std::string changed = kDriver->encode(settings, request, false).body;
  CHECK(changed.find(R"("properties":{"b":)") != std::string::npos);
  CHECK(changed.find(R"("properties":{"a":)") == std::string::npos);
  request.tools = Value();
  CHECK(kDriver->encode(settings, request, false).body.find("\"tools\"") == std::string::npos);
  request.tools = tool("first", R"({"type":"object","properties":{"a":{"type":"string"}}})");  // equal, another list
  CHECK(kDriver->encode(settings, request, false).body == once);
}
