// Drivers: what one LLM API (OpenAI chat completions, Ollama's /api/chat,
// Anthropic's Messages) sends and answers, without any I/O.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/inline_function.hpp"
#include "base/result.hpp"
#include "providers/failure.hpp"
#include "providers/provider.hpp"

namespace passepartout {

// What a configured provider says about its endpoint.
struct EndpointSettings {
  std::string name;      // the provider's name, as the cascade and logs show it
  std::string base_url;  // openai: ".../v1"; ollama: "http://host:11434"; anthropic: without /v1
  std::string model;     // used when the request names none
  std::string api_key;   // may be empty (Ollama, local servers): then no credential header is sent
  HttpHeaders headers;   // extra headers (OpenRouter's HTTP-Referer and X-Title)
  int max_tokens = 1024;
  // The request field carrying max_tokens (openai): "max_tokens" or "max_completion_tokens".
  std::string token_limit_field = "max_tokens";
  bool stream_usage = true;  // openai: ask for usage in streams (stream_options.include_usage)
  bool tools = true;         // the endpoint takes tools
  bool tool_choice = true;   // ... and tool_choice
  bool parallel_tool_calls =
      true;  // ... and parallel tool calls (openai's field, anthropic's disable_parallel_tool_use)
};

// One HTTP request, ready for a transport.
struct HttpCall {
  std::string method;
  std::string url;
  HttpHeaders headers;  // holds the credential: never log them
  std::string body;
};

// Reads one response. One per call; not thread-safe.
class ReplyDecoder {
 public:
  using OnText = InlineFunction<void(std::string_view)>;

  virtual ~ReplyDecoder() = default;
  // The response body's bytes as they arrive, split anywhere. Each text
  // delta goes to `on_text` as soon as its event or line is complete (so
  // never split inside a UTF-8 character); `on_text` may be empty. Feeding
  // an error body (a status other than 2xx) is harmless: no text comes out.
  virtual void feed(std::string_view bytes, const OnText& on_text) = 0;
  // The body ended; `status` is the HTTP status. The reply (content, or tool
  // calls with any text beside them, and usage), or a failure: the status's
  // class (classify_failure), truncated (no end marker, or an error event
  // after a 200), unparseable (a body or event that is not what the API
  // documents, tool-call arguments that are not a JSON object: the message
  // names the tool and the JSON error), too_large (an event or line over
  // its cap). Every reply carries http_status and the request id. Call once.
  virtual ProviderReply finish(int status, const HttpHeaders& headers) = 0;
};

// One API's wire format. Stateless: one per kind can serve every call, from
// any thread.
class Driver {
 public:
  virtual ~Driver() = default;
  // The HTTP request for `request` (system prompt, transcript in the API's
  // own form, the current prompt, tools as the switches allow).
  virtual HttpCall encode(const EndpointSettings& settings, const ProviderRequest& request, bool stream) const = 0;
  // A decoder for one response to a request encoded with the same `stream`.
  virtual std::unique_ptr<ReplyDecoder> decoder(bool stream) const = 0;
  // The request listing the models the endpoint offers (openai: GET
  // {base_url}/models; ollama: GET {base_url}/api/tags; anthropic: GET
  // {base_url}/v1/models), with the same credential and extra headers as encode().
  virtual HttpCall encode_model_list(const EndpointSettings& settings) const = 0;
  // The model names in a 2xx answer to that request, in the order listed;
  // invalid_input saying what is missing when the body is not such a list.
  virtual Result<std::vector<std::string>> decode_model_list(std::string_view body) const = 0;
  // "openai", "ollama" or "anthropic".
  virtual const char* kind() const noexcept = 0;
};

// The driver for `kind` ("openai", "ollama", "anthropic"), or null.
std::unique_ptr<Driver> make_driver(std::string_view kind);

std::unique_ptr<Driver> make_openai_driver();
std::unique_ptr<Driver> make_ollama_driver();
std::unique_ptr<Driver> make_anthropic_driver();

}  // namespace passepartout
