#include "providers/provider_probe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <utility>

#include "providers/driver.hpp"
#include "providers/failure.hpp"
#include "providers/http_client.hpp"
#include "providers/http_provider.hpp"

namespace passepartout {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t kMaxListBody = std::size_t{8} << 20U;  // OpenRouter lists a few hundred models
constexpr std::string_view kNoList = "no model list at ";
// Below this the fallback request is not worth starting: it could not connect in time.
constexpr milliseconds kMinFallback{250};

std::string seconds(milliseconds ms) { return fmt::format("{:g} s", static_cast<double>(ms.count()) / 1000.0); }

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// One endpoint's probe: its settings and the exchange in flight. Lives on the
// probing thread; the transfer's callbacks run there too.
struct Probe {
  const ProviderConfig* config = nullptr;
  std::unique_ptr<Driver> driver;
  EndpointSettings settings;
  Clock::time_point deadline;
  Clock::time_point started;
  milliseconds total{0};
  milliseconds connect{0};
  ProbeResult result;
  bool finished = false;
  HttpTransfer transfer;
  // The exchange in flight.
  std::string url;  // never holds a credential (keys travel in headers)
  int status = 0;
  HttpHeaders headers;
  std::string body;
  std::unique_ptr<ReplyDecoder> decoder;  // the one-token fallback's

  void finish(bool usable, std::string detail, std::string hint = {}) {
    if (finished) return;
    finished = true;
    result.usable = usable;
    result.detail = std::move(detail);
    result.hint = std::move(hint);
    result.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - started);
  }
};

// "OPENAI_API_KEY is set", "the key in /etc/pp/openai.key is": the subject of "refused".
std::string key_phrase(const ProviderConfig& config) {
  if (config.key_source.find('/') != std::string::npos) return "the key in " + config.key_source + " is";
  return config.key_source + " is set but";
}

std::string where_configured(const ProviderConfig& config) {
  if (config.origin == "preset" || config.origin.empty()) return "";
  return " (configured at " + config.origin + ")";
}

std::string model_hint(const ProviderConfig& config, std::size_t listed) {
  if (config.kind == "ollama") return "ollama pull " + config.model;
  std::string hint = listed > 0 ? fmt::format("it lists {} models; check `model:`", listed) : "check `model:`";
  if (config.origin == "preset") {
    hint += " (a preset's model is changed by declaring a provider named " + config.name +
            " in the config file's providers: list)";
  } else {
    hint += where_configured(config);
  }
  return hint;
}

// A transfer that did not complete: which of refused, unresolved, TLS,
// timeout, said so that the next step is plain.
void explain_transport(Probe& probe, const HttpResult& result) {
  const ProviderConfig& config = *probe.config;
  const bool ollama = config.kind == "ollama";
  const std::string check_url = "check its base URL " + config.base_url + where_configured(config);
  switch (result.outcome) {
    case HttpOutcome::connect_timeout:
      probe.finish(false, "no connection to " + config.base_url + " within " + seconds(probe.connect),
                   ollama ? "is Ollama running there? (ollama serve; OLLAMA_HOST says where it listens)"
                          : "check the network (a proxy, a firewall) and the base URL" + where_configured(config));
      return;
    case HttpOutcome::first_byte_timeout:
    case HttpOutcome::idle_timeout:
    case HttpOutcome::cancelled:  // the probe's own deadline
      probe.finish(false, "no answer from " + probe.url + " within " + seconds(probe.total),
                   "the server took the connection but did not answer: overloaded, or still loading a model?");
      return;
    case HttpOutcome::too_large:
      probe.finish(false,
                   "the answer from " + probe.url + " is larger than " + std::to_string(kMaxListBody >> 20U) + " MiB",
                   check_url);
      return;
    case HttpOutcome::transport_error:
    case HttpOutcome::complete:
      break;
  }
  const std::string error = mask_credentials(result.error);
  if (contains(error, "refused") || contains(error, "Couldn't connect")) {
    probe.finish(false, "connection refused at " + config.base_url,
                 ollama ? "is Ollama running? (ollama serve; OLLAMA_HOST says where it listens)"
                        : "is the server running? " + check_url);
  } else if (contains(error, "resolve")) {
    probe.finish(false, "cannot resolve the host of " + config.base_url + " (" + error + ")", check_url);
  } else if (contains(error, "SSL") || contains(error, "TLS") || contains(error, "certificate")) {
    probe.finish(false, "TLS error with " + config.base_url + ": " + error,
                 "check the server's certificate and the system's CA bundle, and that " + config.base_url +
                     " speaks https (a local server usually wants http://)");
  } else {
    probe.finish(false, config.base_url + ": " + (error.empty() ? std::string("transport error") : error), check_url);
  }
}

// A failed answer (classified like a call's) as what is wrong and what to do.
void explain_failure(Probe& probe, const ProviderReply& reply) {
  const ProviderConfig& config = *probe.config;
  const std::string from =
      (reply.http_status != 0 ? std::to_string(reply.http_status) + " from " : std::string()) + config.name + ": ";
  const std::string server = " (" + mask_credentials(reply.error) + ")";
  probe.result.http_status = reply.http_status != 0 ? reply.http_status : probe.result.http_status;
  switch (reply.failure) {
    case FailureClass::authentication:
      if (config.key_source.empty()) {
        probe.finish(false, from + "the endpoint wants a key and none is configured" + server,
                     "give it one with api_key_env or api_key_file in its providers: entry" + where_configured(config));
      } else {
        probe.finish(false, from + key_phrase(config) + " refused" + server,
                     "check that the key is current and meant for " + config.base_url);
      }
      return;
    case FailureClass::quota:
      probe.finish(false, from + "the account's quota or credit is exhausted" + server,
                   "add credit or raise the limit in the provider's console, or use another key");
      return;
    case FailureClass::rate_limited: {
      std::string hint = "wait and try again";
      if (reply.retry_after.count() >= 0) hint += " (it asks for " + seconds(reply.retry_after) + ")";
      probe.finish(false, from + "rate limited" + server, hint + "; the daemon retries these by itself");
      return;
    }
    case FailureClass::unknown_model:
      probe.finish(false, "model '" + config.model + "' not found at " + config.base_url + server,
                   model_hint(config, 0));
      return;
    case FailureClass::overloaded:
    case FailureClass::server_error:
      probe.finish(false, from + "the server failed" + server,
                   "try again later; the daemon retries these and moves on to the next provider");
      return;
    default:
      probe.finish(false, from + mask_credentials(reply.error),
                   "check that " + config.base_url + " speaks the " + config.kind + " API" + where_configured(config));
      return;
  }
}

HttpTimeouts remaining_timeouts(const Probe& probe) {
  const auto left = std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(probe.deadline - Clock::now()));
  return HttpTimeouts{std::min(probe.connect, left), left, left};
}

void start_fallback(HttpClient& client, const std::shared_ptr<Probe>& probe, const std::string& why);

void start_list(HttpClient& client, const std::shared_ptr<Probe>& probe) {
  HttpCall call = probe->driver->encode_model_list(probe->settings);
  probe->url = call.url;
  HttpRequest request;
  request.method = std::move(call.method);
  request.url = std::move(call.url);
  request.headers = std::move(call.headers);
  request.timeouts = remaining_timeouts(*probe);
  request.max_body = kMaxListBody;
  HttpCallbacks callbacks;
  callbacks.on_head = [probe](int status, HttpHeaders&& headers) {
    probe->status = status;
    probe->result.http_status = status;
    probe->headers = std::move(headers);
  };
  callbacks.on_data = [probe](std::string_view bytes) { probe->body.append(bytes); };
  callbacks.on_done = [probe, &client](HttpResult&& result) {
    if (probe->finished) return;
    if (result.outcome != HttpOutcome::complete) return explain_transport(*probe, result);
    const ProviderConfig& config = *probe->config;
    const int status = result.status;
    // No list where the API has one: a server speaking only part of the API
    // (a proxy, an older llama.cpp). Asking it for one token checks the key
    // and the model all the same, which a bare "list unavailable" would not.
    if (status == 404) return start_fallback(client, probe, std::string(kNoList) + probe->url);
    if (status < 200 || status >= 300) {
      return explain_failure(*probe, classify_failure(status, probe->body, probe->headers));
    }
    auto names = probe->driver->decode_model_list(probe->body);
    if (!names) return start_fallback(client, probe, "its model list is unreadable: " + names.error().message);
    const bool listed = std::any_of(names->begin(), names->end(),
                                    [&](const std::string& name) { return model_matches(name, config.model); });
    if (listed) {
      return probe->finish(
          true, fmt::format("model '{}' offered at {} ({} models)", config.model, config.base_url, names->size()));
    }
    // Anthropic's list holds dated ids only, not the aliases it accepts
    // (claude-3-5-sonnet-latest): only a request can tell.
    if (config.kind == "anthropic") return start_fallback(client, probe, "the model list does not name it");
    probe->finish(false, fmt::format("model '{}' is not offered at {}", config.model, config.base_url),
                  model_hint(config, names->size()));
  };
  probe->transfer = client.start(std::move(request), std::move(callbacks));
}

// One token through the driver, not streamed: the answer (any answer) says
// that the key and the model are good.
void start_fallback(HttpClient& client, const std::shared_ptr<Probe>& probe, const std::string& why) {
  if (probe->deadline - Clock::now() < kMinFallback) {
    return probe->finish(false, "no time left to ask for a token (" + why + ")", "run doctor again");
  }
  EndpointSettings settings = probe->settings;
  settings.max_tokens = 1;
  ProviderRequest ping;
  ping.prompt = "Say OK.";
  HttpCall call = probe->driver->encode(settings, ping, false);
  probe->url = call.url;
  probe->status = 0;
  probe->headers.clear();
  probe->body.clear();
  probe->decoder = probe->driver->decoder(false);
  HttpRequest request;
  request.method = std::move(call.method);
  request.url = std::move(call.url);
  request.headers = std::move(call.headers);
  request.body = std::move(call.body);
  request.timeouts = remaining_timeouts(*probe);
  HttpCallbacks callbacks;
  callbacks.on_head = [probe](int status, HttpHeaders&& headers) {
    probe->status = status;
    probe->result.http_status = status;
    probe->headers = std::move(headers);
  };
  callbacks.on_data = [probe](std::string_view bytes) { probe->decoder->feed(bytes, nullptr); };
  callbacks.on_done = [probe, why](HttpResult&& result) {
    if (probe->finished) return;
    if (result.outcome != HttpOutcome::complete) return explain_transport(*probe, result);
    ProviderReply reply = probe->decoder->finish(result.status, probe->headers);
    // 404 for the list and for the chat, and no word about a model: the base
    // URL is wrong (a missing /v1, another API), not the model.
    if (result.status == 404 && why.starts_with(kNoList) && !contains(reply.error, "model")) {
      probe->result.http_status = 404;
      return probe->finish(false,
                           "404 from " + probe->config->name + " for both its model list and a chat request at " +
                               probe->config->base_url,
                           "check that the base URL is where the " + probe->config->kind + " API answers" +
                               (probe->config->kind == "openai" ? " (usually ending in /v1)" : "") +
                               where_configured(*probe->config));
    }
    if (reply.failure != FailureClass::none) return explain_failure(*probe, reply);
    probe->finish(true,
                  "model '" + probe->config->model + "' answered at " + probe->config->base_url + " (" + why + ")");
  };
  probe->transfer = client.start(std::move(request), std::move(callbacks));
}

}  // namespace

bool model_matches(std::string_view listed, std::string_view model) noexcept {
  if (listed == model) return true;
  constexpr std::string_view kLatest = ":latest";
  if (listed.size() == model.size() + kLatest.size() && listed.starts_with(model) && listed.ends_with(kLatest)) {
    return true;
  }
  constexpr std::string_view kModels = "models/";
  return listed.starts_with(kModels) && listed.substr(kModels.size()) == model;
}

std::vector<ProbeResult> probe_providers(const std::vector<ProviderConfig>& providers, const ProbeLimits& limits) {
  boost::asio::io_context context;
  std::vector<std::shared_ptr<Probe>> probes;
  const auto start = Clock::now();
  const auto deadline = start + limits.total;
  {
    HttpClient client(context);
    for (const ProviderConfig& config : providers) {
      auto probe = std::make_shared<Probe>();
      probe->config = &config;
      probe->driver = make_driver(config.kind);
      probe->settings = endpoint_settings(config);
      probe->started = start;
      probe->deadline = deadline;
      probe->total = limits.total;
      probe->connect = limits.connect;
      probes.push_back(probe);
      if (!probe->driver) {
        probe->finish(false, "unknown kind '" + config.kind + "'", "kind: openai, ollama or anthropic");
        continue;
      }
      start_list(client, probe);
    }
    auto pending = [&] {
      return std::any_of(probes.begin(), probes.end(), [](const auto& p) { return !p->finished; });
    };
    // Each transfer's timeouts end it by the deadline; the grace lets curl's
    // own timer fire first, so that its outcome (connect or answer) is named.
    const auto cutoff = deadline + milliseconds(500);
    while (pending() && Clock::now() < cutoff) {
      if (context.run_one_until(cutoff) == 0 && context.stopped()) break;
    }
    for (const auto& probe : probes) {
      if (probe->finished) continue;
      explain_transport(*probe, HttpResult{HttpOutcome::cancelled, 0, {}});
      probe->transfer.cancel();
    }
    context.stop();
    client.stop();
  }
  // The transfers' callbacks hold their probes: let both go.
  for (const auto& probe : probes) probe->transfer = {};
  std::vector<ProbeResult> results;
  results.reserve(probes.size());
  for (const auto& probe : probes) results.push_back(std::move(probe->result));
  return results;
}

}  // namespace passepartout
