// Probing configured providers for `passepartout doctor`: one bounded request
// per endpoint, all at once, each answered with what is wrong and what to do.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "providers/provider_config.hpp"

namespace passepartout {

struct ProbeLimits {
  std::chrono::milliseconds connect{3'000};  // name resolution and TCP (and TLS) connect
  std::chrono::milliseconds total{5'000};    // the whole probe of one endpoint, fallback included
};

// What one probe found. `detail` and `hint` never hold a credential: the key
// is named by where it came from (key_source) and server text is masked.
struct ProbeResult {
  bool usable = false;  // the endpoint answered and offers (or answered with) the model
  std::string detail;   // "gpt-4o-mini offered at http://...", "401 from openai: OPENAI_API_KEY is set but refused"
  std::string hint;     // what to do; empty when nothing
  int http_status = 0;  // the last HTTP status seen; 0 when none arrived
  std::chrono::milliseconds elapsed{0};
};

// Probes every provider concurrently, on the calling thread (its own event
// loop and HTTP client, both gone on return); returns one result per
// provider, in order, within about limits.total whatever the servers do.
// Each probe lists the endpoint's models (the driver's encode_model_list) and
// looks for the configured one; where the list is missing or unreadable it
// asks for one token instead (see provider_probe.cpp for why).
std::vector<ProbeResult> probe_providers(const std::vector<ProviderConfig>& providers, const ProbeLimits& limits);

// Whether `listed` (a name from a model list) is `model`: the same, or with
// Ollama's implicit ":latest" tag, or Gemini's "models/" prefix.
bool model_matches(std::string_view listed, std::string_view model) noexcept;

}  // namespace passepartout
