// Provider: one LLM backend behind an asynchronous interface. A provider never
// blocks the calling thread: it answers through a completion, later, from any
// thread (seed D1, Decisions 9).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/inline_function.hpp"
#include "value/value.hpp"

namespace passepartout {

struct ProviderRequest {
  std::string system_prompt;  // seed default: "You are the Probabilistic engine."
  std::string prompt;
  std::string model;  // empty: the provider's default (the model selector's NIL)
  Value tools;        // NIL, or a list of tool descriptors (:NAME "x" :DESCRIPTION "..." :PARAMETERS (...))
  Value context;      // the signal being reasoned about
  // Called with each streamed delta before the completion, when the provider
  // streams and the caller wants chunks; may be empty.
  InlineFunction<void(std::string_view)> on_chunk;
};

struct ProviderReply {
  enum class Kind { content, tool_calls, failure };
  Kind kind = Kind::failure;
  std::string content;  // content: the text
  Value tool_calls;     // tool_calls: a list of (:NAME "tool" :ARGUMENTS plist)
  std::string error;    // failure: what went wrong, for the log

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
  static ProviderReply failed(std::string error) {
    ProviderReply reply;
    reply.error = std::move(error);
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
  // Starts one request. Must not block; must not throw (a failure is a reply).
  // `request` stays valid until `done` is called (the caller keeps it for
  // the whole call: a cascade tries each provider with the same request);
  // a provider that answers later copies what it needs of it.
  virtual void complete(const ProviderRequest& request, ProviderCompletion done) = 0;
};

}  // namespace passepartout
