// Failure classification for LLM APIs: an HTTP status, the error body and the
// headers into a FailureClass, a message for the log, and how long to wait.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "providers/http_headers.hpp"
#include "providers/provider.hpp"

namespace passepartout {

// The value of the first header named `name` (ASCII case-insensitive), or
// nullptr.
const std::string* find_header(const HttpHeaders& headers, std::string_view name) noexcept;

// How long the response asks the client to wait: `retry-after-ms`
// (milliseconds, OpenAI's), else `Retry-After` as seconds or as an HTTP date
// (IMF-fixdate, counted from `now`; a date already past gives 0). Negative
// when neither is there or readable.
std::chrono::milliseconds parse_retry_after(const HttpHeaders& headers, std::chrono::system_clock::time_point now);

// `text` with what looks like a credential masked: `sk-...` keys (OpenAI,
// Anthropic's sk-ant-...) become `sk-***`, `Bearer <token>` becomes `Bearer ***`.
std::string mask_credentials(std::string_view text);

// A failed call: an HTTP status other than 2xx with its body, or (status 0)
// an error object a stream carried after a 200. The reply carries the class,
// the status, the request id (`x-request-id`, `request-id`), Retry-After and
// a message built from the status and the body only (the API's error type,
// code and message, masked, at most a few hundred bytes), as
//   `HTTP 429 rate_limit_exceeded: Rate limit reached (request req_123)`.
// Classes: a context-length error (OpenAI's context_length_exceeded code,
// Anthropic's "prompt is too long", Ollama's and llama.cpp's context
// messages) is context_length whatever the status; insufficient_quota, billing
// and 402 are quota (OpenAI sends insufficient_quota with a 429); 404 and
// model_not_found unknown_model; 429 rate_limited; 503, 529 and
// overloaded_error overloaded; other 5xx server_error; 401, 403
// authentication; 400, 413, 422 and other 4xx bad_request. With status 0 an
// error type that names a class (overloaded_error, rate_limit_error, a
// context-length error) gives it, anything else truncated.
ProviderReply classify_failure(int status, std::string_view body, const HttpHeaders& headers,
                               std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

}  // namespace passepartout
