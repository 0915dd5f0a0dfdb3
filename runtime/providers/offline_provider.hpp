// The `offline` provider: what answers when no model is configured. It says
// so, honestly, and tells the user how to configure one.
#pragma once

#include <string_view>

#include "providers/provider.hpp"

namespace passepartout {

// Answers every request at once (before complete() returns, on the caller's
// thread) with kReply as content, so the user sees why nothing smarter
// happened. Stateless and thread-safe.
class OfflineProvider final : public Provider {
 public:
  static constexpr std::string_view kName = "offline";
  static constexpr std::string_view kReply =
      "No language model is reachable, so I cannot reason about this request. "
      "To configure one, list the providers to try in PROVIDER_CASCADE and give the provider its API key "
      "(for example OPENAI_API_KEY, ANTHROPIC_API_KEY or OPENROUTER_API_KEY), or run a local Ollama server. "
      "For tests and demos without a model, use the scripted provider: a YAML file of rules, each with "
      "'match' (a regular expression searched in the prompt) and 'reply' (the answer).";

  std::string_view name() const noexcept override { return kName; }
  void complete(ProviderRequest request, ProviderCompletion done) override;
};

}  // namespace passepartout
