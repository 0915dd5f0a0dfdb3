// The `offline` provider: what answers when no model is configured. It says
// so, honestly, and tells the user what this daemon can answer with instead.
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
      "This daemon's providers are 'scripted' and 'offline'; it connects to no hosted or local model "
      "(API keys and an Ollama server are not used). "
      "For tests and demos, start it with the scripted provider (passepartout daemon --script FILE): "
      "a YAML file of rules, each with 'match' (a regular expression searched in the prompt) and "
      "'reply' (the answer).";

  std::string_view name() const noexcept override { return kName; }
  bool is_local() const noexcept override { return true; }  // it answers itself
  void complete(const ProviderRequest& request, ProviderCompletion done) override;
};

}  // namespace passepartout
