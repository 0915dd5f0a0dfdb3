// The model router of one model call (seed D3): the session's privacy, which
// the host keeps, and the model-router hook of the skills (ABI 1.4), which
// chooses the model of each provider or skips it.
//
// Fail closed: a session that once reached private data (a router answered
// local-only) is sent to local providers only for the rest of the daemon's
// life, whatever router is loaded later, or none; a router that throws,
// answers garbage or is late fails that provider, which the cascade then does
// not call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "providers/provider.hpp"
#include "skills/registry.hpp"
#include "value/value.hpp"

namespace passepartout {

// Sessions that go to local providers only, and why. Thread-safe; marking is
// for good (a session stays local-only until the daemon stops).
class LocalOnlySessions {
 public:
  struct Entry {
    std::string session;
    std::string reason;     // the router's, "private data" when it gave none
    std::string since;      // UTC timestamp
    std::string marked_by;  // "model-router@1.0.0"
  };
  // Costs one atomic load while no session is local-only.
  bool contains(std::string_view session) const;
  // Marks `session`; true when it was not marked yet (the caller logs it once).
  bool mark(std::string_view session, std::string reason, std::string marked_by);
  std::size_t size() const noexcept { return count_.load(std::memory_order_acquire); }
  // Every marked session, oldest first.
  std::vector<Entry> list() const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view id) const noexcept { return std::hash<std::string_view>{}(id); }
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry, Hash, std::equal_to<>> sessions_;
  std::vector<std::string> order_;  // marking order, for list()
  std::atomic<std::size_t> count_{0};
};

// What the cascade asks before each provider of one call. Lives as long as
// the call (the Run that made it holds it); used by one thread at a time.
class CallRouter final : public ModelRouter {
 public:
  // `router` may have no slot (no skill routes); `signal` is the signal
  // reasoned about, `tools` the number of tools and actuators offered.
  CallRouter(const Snapshot::Router& router, LocalOnlySessions& local_only, std::string session, Value signal,
             std::size_t tools);

  ModelChoice choose(const Provider& provider, const ProviderRequest& request) override;

  // The request as the hook sees it (abi.h, select_model), built on first use.
  const Value& request_value(const ProviderRequest& request);

 private:
  Snapshot::Router router_;
  LocalOnlySessions& local_only_;
  std::string session_;
  Value signal_;
  std::size_t tools_;
  Value request_;  // NIL until built
};

// The estimated tokens of `request` (Transcript::estimate_tokens): its
// system prompt, transcript and prompt.
std::size_t estimated_prompt_tokens(const ProviderRequest& request);

}  // namespace passepartout
