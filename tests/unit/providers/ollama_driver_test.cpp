// The ollama driver: the /api/chat request and replies decoded from
// byte-exact NDJSON fixtures in Ollama's documented format.
#include <catch2/catch.hpp>

#include <string>

#include "providers/driver.hpp"
#include "unit/providers/driver_support.hpp"
#include "value/sexp_printer.hpp"

using namespace passepartout;
using passepartout::testing::decode;

namespace {

const auto kDriver = make_driver("ollama");

std::string line(std::string_view content) {
  return R"({"model":"llama3.2","created_at":"2023-08-04T08:52:19.385406455-07:00","message":{"role":"assistant","content":)" +
         std::string(content) + "},\"done\":false}\n";
}

const std::string kDone =
    R"({"model":"llama3.2","created_at":"2023-08-04T19:22:45.499127Z","message":{"role":"assistant","content":""},)"
    R"("done":true,"done_reason":"stop","total_duration":4883583458,"load_duration":1334875,"prompt_eval_count":26,)"
    R"("prompt_eval_duration":342546000,"eval_count":282,"eval_duration":4535599000})"
    "\n";

}  // namespace

TEST_CASE("ollama driver encodes the transcript with tool messages and arguments as objects", "[providers]") {
  const auto settings = testing::settings_for("ollama", "http://127.0.0.1:11434", "");
  const HttpCall call = kDriver->encode(settings, testing::conversation_request(), true);
  CHECK(call.url == "http://127.0.0.1:11434/api/chat");
  CHECK(testing::header(call, "authorization") == "<absent>");
  CHECK(
      call.body ==
      R"({"model":"test-model","messages":[)"
      R"({"role":"system","content":"You are the Probabilistic engine."},)"
      R"({"role":"user","content":"Read /tmp/a"},)"
      R"({"role":"assistant","content":"","tool_calls":[{"function":{"name":"read_file","arguments":{"path":"/tmp/a"}}}]},)"
      R"({"role":"tool","content":"hello","tool_name":"read_file"},)"
      R"({"role":"assistant","content":"It says hello."},)"
      R"({"role":"user","content":"And now?"}],"stream":true,"options":{"num_predict":1024},)"
      R"("tools":[{"type":"function","function":{"name":"read_file","description":"Reads a file",)"
      R"("parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}]})");
}

TEST_CASE("ollama driver streams text lines and reads the counts of the done line", "[providers]") {
  const std::string body = line(R"("The")") + line(R"(" caf\u00e9")") + line(R"(" é 😀")") + kDone;
  const auto decoded = decode(*kDriver, true, body);
  REQUIRE(decoded.reply.kind == ProviderReply::Kind::content);
  CHECK(decoded.pieces == std::vector<std::string>{"The", " caf\xC3\xA9", " \xC3\xA9 \xF0\x9F\x98\x80"});
  CHECK(decoded.reply.content == decoded.text());
  CHECK(decoded.reply.usage.input == 26);
  CHECK(decoded.reply.usage.output == 282);
}

TEST_CASE("ollama driver decodes tool calls with made-up ids", "[providers]") {
  const std::string body =
      R"({"model":"llama3.2","created_at":"2024-07-22T20:33:28.123648Z","message":{"role":"assistant","content":"",)"
      R"("tool_calls":[{"function":{"name":"get_current_weather","arguments":{"format":"celsius","location":"Paris, FR"}}},)"
      R"({"function":{"name":"read_file","arguments":{"path":"/tmp/a"}}}]},"done_reason":"stop","done":true,)"
      R"("total_duration":885095291,"load_duration":3753500,"prompt_eval_count":122,"prompt_eval_duration":328493000,)"
      R"("eval_count":33,"eval_duration":552222000})";
  for (const bool stream : {false, true}) {
    const auto reply = decode(*kDriver, stream, body + "\n").reply;
    REQUIRE(reply.kind == ProviderReply::Kind::tool_calls);
    CHECK(to_sexp(reply.tool_calls) ==
          R"(((:ID "call_0" :NAME "get_current_weather" :ARGUMENTS (:FORMAT "celsius" :LOCATION "Paris, FR")) )"
          R"((:ID "call_1" :NAME "read_file" :ARGUMENTS (:PATH "/tmp/a"))))");
    REQUIRE(reply.wire_calls.size() == 2);
    CHECK(reply.wire_calls[0].arguments == R"({"format":"celsius","location":"Paris, FR"})");
    CHECK(reply.usage.input == 122);
    CHECK(reply.usage.output == 33);
  }
}

TEST_CASE("ollama driver fails a stream without done:true as truncated", "[providers]") {
  const auto decoded = decode(*kDriver, true, line(R"("The")") + R"({"model":"llama3.2","created_at":"2023)");
  CHECK(decoded.text() == "The");
  CHECK(decoded.reply.failure == FailureClass::truncated);
  CHECK(decoded.reply.error == "stream ended without done:true");
}

TEST_CASE("ollama driver fails on an error line after a 200 and classifies a 404", "[providers]") {
  const auto mid =
      decode(*kDriver, true, line(R"("The")") + "{\"error\":\"an error was encountered while running the model\"}\n");
  CHECK(mid.reply.failure == FailureClass::truncated);
  CHECK(mid.reply.error == "error event after HTTP 200: an error was encountered while running the model");

  const auto missing =
      decode(*kDriver, true, "{\"error\":\"model \\\"nope\\\" not found, try pulling it first\"}", 404);
  CHECK(missing.reply.failure == FailureClass::unknown_model);
  CHECK(missing.reply.error == "HTTP 404: model \"nope\" not found, try pulling it first");
  CHECK(missing.pieces.empty());
}

TEST_CASE("ollama driver fails a whole body without done:true, and reads an error object in one", "[providers]") {
  const auto cut =
      decode(*kDriver, false, R"({"model":"llama3.2","message":{"role":"assistant","content":"Hi"},"done":false})");
  CHECK(cut.reply.failure == FailureClass::truncated);
  CHECK(cut.reply.error == "response without done:true");
  const auto error = decode(*kDriver, false, R"({"error":"unexpected server status"})");
  CHECK_FALSE(error.reply.ok());
  CHECK(error.reply.error == "error event after HTTP 200: unexpected server status");
}
