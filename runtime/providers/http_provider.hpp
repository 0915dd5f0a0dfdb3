// HttpProvider: a real LLM endpoint (openai, ollama or anthropic) as a
// Provider: its driver encodes the request, the event loops' HTTP clients
// carry it, and the driver's decoder turns the answer into a reply while the
// text deltas stream to the caller. No thread waits on a model.
#pragma once

#include <memory>
#include <string_view>

#include "providers/driver.hpp"
#include "providers/provider.hpp"
#include "providers/provider_config.hpp"

namespace passepartout {

class HttpClients;

// The driver's view of `config` (what an endpoint needs to build a request).
EndpointSettings endpoint_settings(const ProviderConfig& config);

class HttpProvider final : public Provider {
 public:
  // `clients` must outlive every call (stop them after the cascade's last call).
  HttpProvider(ProviderConfig config, HttpClients& clients);

  std::string_view name() const noexcept override { return config_.name; }
  bool reads_transcript() const noexcept override { return true; }
  std::size_t context_window() const noexcept override {
    return config_.context_window > 0 ? static_cast<std::size_t>(config_.context_window) : 0;
  }
  std::string_view default_model() const noexcept override { return config_.model; }
  bool is_local() const noexcept override { return config_.local; }
  std::int64_t max_output_tokens() const noexcept override { return config_.max_tokens; }
  // Starts the transfer; the completion runs on an event loop once the
  // answer is in, failed (classified: transport, timeout, the status's
  // class, truncated, unparseable, too_large), or cancelled through
  // request.cancel.
  void complete(const ProviderRequest& request, ProviderCompletion done) override;

  const ProviderConfig& config() const noexcept { return config_; }

 private:
  ProviderConfig config_;
  EndpointSettings settings_;
  std::unique_ptr<Driver> driver_;
  HttpClients& clients_;
};

}  // namespace passepartout
