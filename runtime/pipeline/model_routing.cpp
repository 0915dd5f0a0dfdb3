// The model router of one call: the host's local-only rule first, then the
// routing skill's choice, each bounded and failing closed.
#include "pipeline/model_routing.hpp"

#include <utility>

#include "base/duration_text.hpp"
#include "base/log.hpp"
#include "pipeline/gate_watchdog.hpp"
#include "pipeline/signal.hpp"
#include "pipeline/transcript.hpp"
#include "skills/slot.hpp"

namespace passepartout {
namespace {

using namespace key_literals;

constexpr std::string_view kPrivateData = "private data";
constexpr std::string_view kComponent = "pipeline";

std::string router_label(const Slot& slot) { return slot.name() + "@" + slot.version_text(); }

}  // namespace

// --- LocalOnlySessions -------------------------------------------------------------

bool LocalOnlySessions::contains(std::string_view session) const {
  if (count_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard lock(mutex_);
  return sessions_.find(session) != sessions_.end();
}

bool LocalOnlySessions::mark(std::string_view session, std::string reason, std::string marked_by) {
  std::lock_guard lock(mutex_);
  if (sessions_.find(session) != sessions_.end()) return false;
  Entry entry{std::string(session), reason.empty() ? std::string(kPrivateData) : std::move(reason),
              utc_timestamp(unix_ms_now()), std::move(marked_by)};
  sessions_.emplace(entry.session, entry);
  order_.push_back(std::move(entry.session));
  count_.store(sessions_.size(), std::memory_order_release);
  return true;
}

std::vector<LocalOnlySessions::Entry> LocalOnlySessions::list() const {
  std::lock_guard lock(mutex_);
  std::vector<Entry> out;
  out.reserve(order_.size());
  for (const std::string& id : order_) out.push_back(sessions_.find(id)->second);
  return out;
}

// --- CallRouter ------------------------------------------------------------------

std::size_t estimated_prompt_tokens(const ProviderRequest& request) {
  std::size_t tokens = Transcript::estimate_tokens(request.system_prompt);
  for (const Turn& turn : request.transcript) tokens += Transcript::estimate_tokens(turn);
  if (!request.prompt_in_transcript) tokens += Transcript::estimate_tokens(request.prompt);
  return tokens;
}

CallRouter::CallRouter(const Snapshot::Router& router, LocalOnlySessions& local_only, std::string session, Value signal,
                       std::size_t tools)
    : router_(router),
      local_only_(local_only),
      session_(std::move(session)),
      signal_(std::move(signal)),
      tools_(tools) {}

const Value& CallRouter::request_value(const ProviderRequest& request) {
  if (!request_.is_nil()) return request_;
  request_ = Value::plist({
      {"SIGNAL", signal_},
      {"SESSION", Value::string(session_)},
      {"SENSOR", sensor_of(signal_)},
      {"PROMPT", Value::string(request.prompt)},
      {"SYSTEM", Value::string(request.system_prompt)},
      {"PROMPT-TOKENS", Value::integer(request.prompt_tokens)},
      {"TOOLS", Value::integer(static_cast<std::int64_t>(tools_))},
  });
  // :MODEL only when the client asked for one.
  if (const Value& asked = signal_.path("META"_key, "MODEL"_key); asked.is_string() && !asked.text().empty()) {
    request_ = std::move(request_).with("MODEL"_key, asked);
  }
  return request_;
}

ModelChoice CallRouter::choose(const Provider& provider, const ProviderRequest& request) {
  const std::string_view name = provider.name();
  if (!provider.is_local() && local_only_.contains(session_)) {
    return ModelChoice::skip("the session is local-only (private data), and " + std::string(name) +
                             " is not a local provider");
  }
  const Slot* slot = router_.slot;
  if (slot == nullptr) return ModelChoice::provider_default();

  const Value described = Value::plist({{"NAME", Value::string(name)},
                                        {"LOCAL", provider.is_local() ? Value::t() : Value()},
                                        {"MODEL", Value::string(provider.default_model())}});
  GateWatch& watch = GateWatchdog::this_thread();
  const std::uint64_t ticket = watch.start(router_.budget_ms);
  Result<Slot::ModelRoute> route = slot->select_model(described, request_value(request));
  const bool late = watch.finish(ticket);
  const std::string label = router_label(*slot);
  if (late || !route) {
    const std::string why = late ? "took longer than its budget of " +
                                       std::to_string(GateWatchdog::budget_of(router_.budget_ms).count()) + " ms"
                                 : route.error().message;
    log_message(LogLevel::warn, slot->name(), "the model router {} failed for {}, which is not called: {}", label, name,
                why);
    return ModelChoice::failed("the model router " + label + " failed: " + why);
  }
  if (route->local_only && local_only_.mark(session_, route->reason, label)) {
    log_message(LogLevel::warn, kComponent, "session {} is local-only from now on ({}, said {})", session_,
                route->reason.empty() ? kPrivateData : std::string_view(route->reason), label);
  }
  // The host's rule over the router's answer: a local-only session never
  // reaches a remote provider, whatever the router chose for it.
  if (!provider.is_local() && (route->local_only || local_only_.contains(session_))) {
    return ModelChoice::skip("the session is local-only (" +
                             (route->reason.empty() ? std::string(kPrivateData) : route->reason) + ", said " + label +
                             "), and " + std::string(name) + " is not a local provider");
  }
  switch (route->kind) {
    case Slot::ModelRoute::Kind::use:
      return ModelChoice::use(std::move(route->model));
    case Slot::ModelRoute::Kind::skip:
      return ModelChoice::skip("skipped by " + label + (route->reason.empty() ? "" : ": " + route->reason));
    case Slot::ModelRoute::Kind::provider_default:
      break;
  }
  return ModelChoice::provider_default();
}

}  // namespace passepartout
