// Provider: one LLM backend behind an asynchronous interface. A provider never
// blocks the calling thread: it answers through a completion, later, from any
// thread (seed D1, Decisions 9).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/inline_function.hpp"
#include "value/value.hpp"

namespace passepartout {

// One tool call a model made: the provider's id for it (Anthropic's
// "toolu_...", OpenAI's "call_..."; made up by the driver where the API has
// none, as Ollama's), the tool's name, and its arguments as the JSON object
// text the model wrote, checked to be valid JSON before a reply carries it.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON object text
};

// One earlier message of a session's conversation (Decisions 5: the model
// sees a tool's result and takes the next step). Each driver sends the
// transcript in its API's own form.
struct Turn {
  enum class Role : std::uint8_t { user, assistant, tool };
  Role role = Role::user;
  std::string text;                  // user and assistant: the text; tool: the result
  std::vector<ToolCall> tool_calls;  // assistant: the calls it made (text may be empty then)
  std::string tool_call_id;          // tool: the call this result answers
  std::string tool_name;             // tool: that call's tool
};

// A way for the caller to stop a call in flight: the client went away, the
// session was interrupted, the daemon stops. Thread-safe. A provider that
// answers later registers what stops its work (on_cancel); cancel() runs it
// once, on the cancelling thread, and the provider then completes the call
// exactly once, with FailureClass::cancelled.
class CancelSignal {
 public:
  using Stop = InlineFunction<void()>;
  // Marks the call cancelled and runs the registered stop, if any (once).
  void cancel();
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }
  // Registers `stop` (replacing one registered before); runs it at once, on
  // this thread, when the call was already cancelled. Any thread.
  void on_cancel(Stop stop);
  // Forgets the registered stop (the call completed). Any thread.
  void clear();

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  Stop stop_;
};

class Provider;
struct ProviderRequest;

// What the model selector (seed D3) decided for one provider of one call.
struct ModelChoice {
  enum class Kind : std::uint8_t {
    provider_default,  // the provider's default model
    use,               // `model`
    skip,              // not called; `reason` says why (logged as the seed's "filtered")
    failed,            // the selector failed: the provider counts as failed, `reason` says how
  };
  Kind kind = Kind::provider_default;
  std::string model;
  std::string reason;

  static ModelChoice use(std::string model) { return ModelChoice{Kind::use, std::move(model), {}}; }
  static ModelChoice provider_default() { return ModelChoice{}; }
  static ModelChoice skip(std::string reason = {}) { return ModelChoice{Kind::skip, {}, std::move(reason)}; }
  static ModelChoice failed(std::string reason) { return ModelChoice{Kind::failed, {}, std::move(reason)}; }
};

// Chooses the model of each provider for one call (the pipeline's: the
// session's privacy and the skills' router). Called on whichever thread
// drives the cascade, once per attempt, never concurrently for one call.
// May throw: that counts as the provider's failure.
class ModelRouter {
 public:
  virtual ModelChoice choose(const Provider& provider, const ProviderRequest& request) = 0;

 protected:
  ModelRouter() = default;
  ~ModelRouter() = default;
  ModelRouter(const ModelRouter&) = default;
  ModelRouter& operator=(const ModelRouter&) = default;
};

struct ProviderRequest {
  std::string system_prompt;  // seed default: "You are the Probabilistic engine."
  // How many bytes of system_prompt stay the same from call to call of a
  // session (0: not known): where a driver marks a prompt-cache breakpoint
  // (Anthropic's cache_control; OpenAI and Ollama reuse a shared prefix by
  // themselves).
  std::size_t system_stable = 0;
  std::string prompt;  // the current user turn
  std::string model;   // empty: the provider's default (the model selector's NIL)
  // NIL, or a list of tool descriptors (:NAME "x" :DESCRIPTION "..." :PARAMETERS (...)
  // :PARAMETERS-JSON "{...}"): the schema as a plist and, when the skill gave
  // one, as the JSON text it wrote, which drivers send (its keys keep their case).
  Value tools;
  Value context;                 // the signal being reasoned about
  std::vector<Turn> transcript;  // the session's earlier turns, oldest first; may be empty
  // The transcript ends with the current turn (the user's text, a tool's
  // result, a rejection): a driver sends the transcript alone. Otherwise it
  // sends `prompt` after it, as the user's message. `prompt` is set either
  // way, for providers that read only the prompt (the scripted one).
  bool prompt_in_transcript = false;
  // Called with each streamed text delta before the completion, when the
  // provider streams and the caller wants chunks; may be empty.
  InlineFunction<void(std::string_view)> on_chunk;
  // Set by a caller that may cancel the call; may be null.
  std::shared_ptr<CancelSignal> cancel;
  // This call's model router, which the cascade asks before each provider in
  // place of the lineup's selector; may be null. Set by the caller, who keeps
  // it alive until the call ends.
  ModelRouter* router = nullptr;
  // What the budget (providers/budget.hpp) reserves for the call: the
  // prompt's size in tokens as the caller estimated it (0: the budget holds
  // only the answer's max_tokens for it), and the session it is for (empty:
  // none; session caps do not apply).
  std::int64_t prompt_tokens = 0;
  std::string session;
};

// Why a call failed, in the classes that decide what happens next (seed
// D2-D4, Decisions 9); is_retriable says which ones the cascade retries.
enum class FailureClass : std::uint8_t {
  none,            // not a failure
  authentication,  // 401, 403: the key is missing or refused
  bad_request,     // 400 (other than a context that is too long), 422
  unknown_model,   // 404, or the API's model_not_found
  context_length,  // the prompt does not fit the model's context: the next provider may take it
  quota,           // 402, insufficient_quota, billing: waiting does not help
  rate_limited,    // 429
  overloaded,      // 529, 503
  server_error,    // any other 5xx
  transport,       // refused, reset, DNS, TLS: no complete HTTP answer
  timeout,         // connect, first byte, or idle between two chunks
  truncated,       // the stream ended without its end marker, or an error event came after a 200
  unparseable,     // the body or an event is not what the API documents
  too_large,       // the body passed its size cap
  cancelled,       // the caller cancelled (CancelSignal)
  over_budget,     // refused before it went out: a budget cap would be passed (providers/budget.hpp)
  other,           // a provider's own failure outside these (scripted, offline)
};

// "rate_limited", "server_error", ...: the enumerator's name.
const char* to_string(FailureClass failure) noexcept;

// True for the failures worth trying again on the same provider after a
// pause: rate limits, overloads, server errors, transport errors, timeouts
// and truncated streams.
constexpr bool is_retriable(FailureClass failure) noexcept {
  switch (failure) {
    case FailureClass::rate_limited:
    case FailureClass::overloaded:
    case FailureClass::server_error:
    case FailureClass::transport:
    case FailureClass::timeout:
    case FailureClass::truncated:
      return true;
    default:
      return false;
  }
}

// Tokens one call used, as the API reported them; -1 where it did not.
// `input` counts every prompt token, `cached_input` those of them the
// provider served from its prompt cache (billed at its cache-read price).
struct TokenUsage {
  std::int64_t input = -1;
  std::int64_t output = -1;
  std::int64_t cached_input = -1;
};

struct ProviderReply {
  enum class Kind { content, tool_calls, failure };
  Kind kind = Kind::failure;
  // content: the text; tool_calls: any text the model wrote beside the calls.
  std::string content;
  // tool_calls: a list of (:ID "call_1" :NAME "tool" :ARGUMENTS plist), the
  // arguments converted by json_to_value. `wire_calls` holds the same calls
  // as the model wrote them, for the session's transcript (may be empty for
  // a provider that has no ids, as the scripted one).
  Value tool_calls;
  std::vector<ToolCall> wire_calls;
  std::string error;                          // failure: what went wrong, for the log (never a credential)
  FailureClass failure = FailureClass::none;  // failure: its class
  int http_status = 0;                        // the HTTP status; 0 when there was none
  std::string request_id;                     // the provider's request id, when it sent one
  // rate_limited, overloaded: how long the provider asked to wait
  // (retry-after-ms, or Retry-After in seconds or as an HTTP date); negative
  // when it did not say.
  std::chrono::milliseconds retry_after{-1};
  TokenUsage usage;

  static ProviderReply text(std::string content) {
    ProviderReply reply;
    reply.kind = Kind::content;
    reply.content = std::move(content);
    return reply;
  }
  static ProviderReply calls(Value tool_calls) {
    ProviderReply reply;
    reply.kind = Kind::tool_calls;
    reply.tool_calls = std::move(tool_calls);
    return reply;
  }
  static ProviderReply failed(std::string error, FailureClass failure = FailureClass::other) {
    ProviderReply reply;
    reply.error = std::move(error);
    reply.failure = failure;
    return reply;
  }
  bool ok() const noexcept { return kind != Kind::failure; }
};

// Called exactly once per request, from any thread, possibly before
// complete() returns. The reply is passed on, never copied.
using ProviderCompletion = InlineFunction<void(ProviderReply&&)>;

class Provider {
 public:
  virtual ~Provider() = default;
  // The provider's name as the cascade and the CONFIG section show it ("scripted").
  virtual std::string_view name() const noexcept = 0;
  // True when the provider sends a session's transcript to its model: the
  // pipeline keeps transcripts only while one in the cascade does.
  virtual bool reads_transcript() const noexcept { return false; }
  // The model's context window in tokens, when known (0: not known).
  virtual std::size_t context_window() const noexcept { return 0; }
  // The model a request that names none goes to ("" when the provider has no such name).
  virtual std::string_view default_model() const noexcept { return {}; }
  // True when what it is sent stays on this machine: an endpoint the
  // operator marked `local: true`, or one that answers in process. Private
  // data goes only to these (the model router's privacy rule).
  virtual bool is_local() const noexcept { return false; }
  // The most output tokens one call may bring (the request's max_tokens);
  // 0: no limit is sent. What a budget reserves for the answer.
  virtual std::int64_t max_output_tokens() const noexcept { return 0; }
  // Starts one request. Must not block; must not throw (a failure is a reply).
  // `request` stays valid until `done` is called (the caller keeps it for
  // the whole call: a cascade tries each provider with the same request);
  // a provider that answers later copies what it needs of it.
  virtual void complete(const ProviderRequest& request, ProviderCompletion done) = 0;
};

}  // namespace passepartout
