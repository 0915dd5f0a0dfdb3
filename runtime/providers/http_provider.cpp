#include "providers/http_provider.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

#include "providers/http_client.hpp"

namespace passepartout {
namespace {

std::string seconds(std::chrono::milliseconds ms) {
  return fmt::format("{:g} s", static_cast<double>(ms.count()) / 1000.0);
}

// One call in flight: what the transfer's callbacks share, on one loop thread.
struct Call {
  std::unique_ptr<ReplyDecoder> decoder;
  InlineFunction<void(std::string_view)> on_chunk;  // the caller's, or empty
  ProviderCompletion done;
  int status = 0;
  HttpHeaders headers;
  std::string url;  // for messages (never holds a credential)
  HttpTimeouts timeouts;
  std::shared_ptr<CancelSignal> cancel;
};

// The transport's failure, classified, for the log and the cascade.
ProviderReply transport_failure(const Call& call, const HttpResult& result) {
  switch (result.outcome) {
    case HttpOutcome::cancelled:
      return ProviderReply::failed("cancelled", FailureClass::cancelled);
    case HttpOutcome::connect_timeout:
      return ProviderReply::failed("no connection to " + call.url + " within " + seconds(call.timeouts.connect),
                                   FailureClass::timeout);
    case HttpOutcome::first_byte_timeout:
      return ProviderReply::failed("no answer from " + call.url + " within " + seconds(call.timeouts.first_byte),
                                   FailureClass::timeout);
    case HttpOutcome::idle_timeout:
      return ProviderReply::failed(
          "the answer from " + call.url + " stalled for more than " + seconds(call.timeouts.idle),
          FailureClass::timeout);
    case HttpOutcome::too_large:
      return ProviderReply::failed("the answer from " + call.url + " is larger than the cap", FailureClass::too_large);
    case HttpOutcome::transport_error:
    case HttpOutcome::complete:
      break;
  }
  return ProviderReply::failed(call.url + ": " + (result.error.empty() ? "transport error" : result.error),
                               FailureClass::transport);
}

}  // namespace

EndpointSettings endpoint_settings(const ProviderConfig& config) {
  EndpointSettings settings;
  settings.name = config.name;
  settings.base_url = config.base_url;
  settings.model = config.model;
  settings.api_key = config.api_key;
  settings.headers = config.headers;
  settings.max_tokens = static_cast<int>(config.max_tokens);
  settings.token_limit_field = config.token_limit_field;
  settings.stream_usage = config.stream_usage;
  settings.tools = config.tools;
  settings.tool_choice = config.tool_choice;
  settings.parallel_tool_calls = config.parallel_tool_calls;
  return settings;
}

HttpProvider::HttpProvider(ProviderConfig config, HttpClients& clients)
    : config_(std::move(config)),
      settings_(endpoint_settings(config_)),
      driver_(make_driver(config_.kind)),
      clients_(clients) {
  if (!driver_) throw std::invalid_argument("provider " + config_.name + ": unknown kind '" + config_.kind + "'");
}

void HttpProvider::complete(const ProviderRequest& request, ProviderCompletion done) {
  HttpCall wire = driver_->encode(settings_, request, config_.stream);
  auto call = std::make_shared<Call>();
  call->decoder = driver_->decoder(config_.stream);
  call->on_chunk = request.on_chunk;
  call->done = std::move(done);
  call->url = wire.url;
  call->timeouts = HttpTimeouts{config_.timeouts.connect, config_.timeouts.first_byte, config_.timeouts.idle};
  call->cancel = request.cancel;

  HttpRequest http;
  http.method = std::move(wire.method);
  http.url = std::move(wire.url);
  http.headers = std::move(wire.headers);
  http.body = std::move(wire.body);
  http.timeouts = call->timeouts;

  HttpCallbacks callbacks;
  callbacks.on_head = [call](int status, HttpHeaders&& headers) {
    call->status = status;
    call->headers = std::move(headers);
  };
  callbacks.on_data = [call](std::string_view bytes) {
    // Text streams only from a successful answer; an error body is fed to
    // the decoder all the same, for finish() to classify.
    const bool ok = call->status >= 200 && call->status < 300;
    static const ReplyDecoder::OnText kNoText = nullptr;
    call->decoder->feed(bytes, ok ? call->on_chunk : kNoText);
  };
  callbacks.on_done = [call](HttpResult&& result) {
    ProviderReply reply = result.outcome == HttpOutcome::complete ? call->decoder->finish(result.status, call->headers)
                                                                  : transport_failure(*call, result);
    if (call->cancel) call->cancel->clear();
    ProviderCompletion completion = std::move(call->done);
    call->on_chunk = nullptr;
    completion(std::move(reply));
  };
  const HttpTransfer transfer = clients_.start(std::move(http), std::move(callbacks));
  if (request.cancel) request.cancel->on_cancel([transfer] { transfer.cancel(); });
}

}  // namespace passepartout
