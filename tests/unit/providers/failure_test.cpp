// Failure classification: statuses and error bodies into classes and masked
// messages, request ids, and Retry-After in its three forms.
#include <catch2/catch.hpp>

#include <chrono>

#include "providers/failure.hpp"

using namespace passepartout;
using namespace std::chrono_literals;

namespace {

// Sun, 06 Nov 1994 08:49:37 GMT, the RFC's example date.
const std::chrono::system_clock::time_point kNow =
    std::chrono::sys_days{std::chrono::year{1994} / 11 / 6} + 8h + 49min + 37s;

ProviderReply classify(int status, std::string_view body, const HttpHeaders& headers = {}) {
  return classify_failure(status, body, headers, kNow);
}

}  // namespace

TEST_CASE("classify maps each status to its failure class", "[providers]") {
  const std::string openai_body = R"({"error":{"message":"m","type":"t","param":null,"code":null}})";
  CHECK(classify(400, openai_body).failure == FailureClass::bad_request);
  CHECK(classify(422, openai_body).failure == FailureClass::bad_request);
  CHECK(classify(401, openai_body).failure == FailureClass::authentication);
  CHECK(classify(403, openai_body).failure == FailureClass::authentication);
  CHECK(classify(402, openai_body).failure == FailureClass::quota);
  CHECK(classify(404, openai_body).failure == FailureClass::unknown_model);
  CHECK(classify(429, openai_body).failure == FailureClass::rate_limited);
  CHECK(classify(500, openai_body).failure == FailureClass::server_error);
  CHECK(classify(502, "<html>Bad Gateway</html>").failure == FailureClass::server_error);
  CHECK(classify(503, openai_body).failure == FailureClass::overloaded);
  CHECK(classify(529, openai_body).failure == FailureClass::overloaded);
  CHECK(classify(400, openai_body).http_status == 400);
}

TEST_CASE("classify recognises context-length, quota and unknown-model bodies", "[providers]") {
  CHECK(
      classify(
          400,
          R"({"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})")
          .failure == FailureClass::context_length);
  CHECK(
      classify(
          400,
          R"({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}})")
          .failure == FailureClass::context_length);
  CHECK(
      classify(
          400,
          R"({"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}})")
          .failure == FailureClass::context_length);
  CHECK(classify(500, R"({"error":"input length exceeds maximum context length"})").failure ==
        FailureClass::context_length);
  CHECK(classify(400, R"({"error":"input length exceeds maximum context length"})").failure ==
        FailureClass::context_length);
  CHECK(
      classify(
          429,
          R"({"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}})")
          .failure == FailureClass::quota);
  CHECK(
      classify(
          400,
          R"({"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}})")
          .failure == FailureClass::quota);
  CHECK(
      classify(
          400,
          R"({"error":{"message":"The model `gpt-9` does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}})")
          .failure == FailureClass::unknown_model);
}

TEST_CASE("classify builds the message from the status, the error's code or type and its message", "[providers]") {
  CHECK(
      classify(
          400,
          R"({"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})",
          {{"X-Request-Id", "req_7"}})
          .error ==
      "HTTP 400 context_length_exceeded: This model's maximum context length is 8192 tokens. (request req_7)");
  CHECK(classify(500, "").error == "HTTP 500 with an empty body");
  CHECK(classify(502, "<html>Bad Gateway</html>\n").error == "HTTP 502: <html>Bad Gateway</html>");
  const auto reply = classify(529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})",
                              {{"request-id", "req_011CSHoEeqs5C35K2UUqR7Fy"}});
  CHECK(reply.request_id == "req_011CSHoEeqs5C35K2UUqR7Fy");
  CHECK(reply.error == "HTTP 529 overloaded_error: Overloaded (request req_011CSHoEeqs5C35K2UUqR7Fy)");
  const std::string long_message(1000, 'x');
  CHECK(classify(400, R"({"error":{"message":")" + long_message + R"("}})").error.size() < 400);
}

TEST_CASE("classify masks what looks like a credential in the body", "[providers]") {
  const auto reply = classify(
      401,
      R"({"error":{"message":"Incorrect API key provided: sk-proj-abcdefghijklmnop1234. Sent as Bearer sk-proj-abcdefghijklmnop1234","type":"invalid_request_error","param":null,"code":"invalid_api_key"}})");
  CHECK(reply.failure == FailureClass::authentication);
  CHECK(reply.error == "HTTP 401 invalid_api_key: Incorrect API key provided: sk-***. Sent as Bearer ***");
  CHECK(mask_credentials("key sk-ant-api03-XYZ_abc-123 and Bearer eyJhbGciOi.x.y end") ==
        "key sk-*** and Bearer *** end");
  CHECK(mask_credentials("task-list risk-free") == "task-list risk-free");
}

TEST_CASE("Retry-After is read from retry-after-ms, seconds or an HTTP date", "[providers]") {
  CHECK(parse_retry_after({}, kNow) == -1ms);
  CHECK(parse_retry_after({{"retry-after-ms", "1500"}, {"Retry-After", "9"}}, kNow) == 1500ms);
  CHECK(parse_retry_after({{"Retry-After", "2"}}, kNow) == 2000ms);
  CHECK(parse_retry_after({{"retry-after", "0.5"}}, kNow) == 500ms);
  CHECK(parse_retry_after({{"Retry-After", "Sun, 06 Nov 1994 08:50:07 GMT"}}, kNow) == 30000ms);
  CHECK(parse_retry_after({{"Retry-After", "Sun, 06 Nov 1994 08:49:00 GMT"}}, kNow) == 0ms);
  CHECK(parse_retry_after({{"Retry-After", "soon"}}, kNow) == -1ms);
  CHECK(parse_retry_after({{"Retry-After", "-3"}}, kNow) == -1ms);
  const auto reply =
      classify(429, R"({"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}})",
               {{"retry-after", "20"}});
  CHECK(reply.failure == FailureClass::rate_limited);
  CHECK(reply.retry_after == 20s);
  CHECK(reply.error == "HTTP 429 rate_limit_exceeded: Rate limit reached");
}
