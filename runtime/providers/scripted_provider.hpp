// The `scripted` provider: answers from a YAML file of rules instead of a
// model, for tests, demos and skill authors who want a predictable reply.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/executor.hpp"
#include "base/result.hpp"
#include "base/thread_shards.hpp"
#include "providers/provider.hpp"
#include "value/value.hpp"

namespace re2 {
class RE2;
}  // namespace re2

namespace passepartout {

// One rule. A script looks like:
//
//   rules:
//     - match: '(?i)\bhello\b'     # RE2, searched anywhere in the prompt
//       reply: Hi there!
//     - match: weather
//       reply: (:TYPE :REQUEST :TARGET :CLI :PAYLOAD (:TEXT "sunny"))
//       delay_ms: 250              # answer later, from the executor
//       stream: true               # deliver the reply in a few on_chunk calls first
//     - match: outage
//       fail: true                 # answer with a failure; reply is its message
//       reply: simulated outage
//     - match: list files
//       tool_call: {name: shell, arguments: {cmd: ls -la}}
//
// A bare list of rules (without `rules:`) is accepted too. `arguments` is a
// map (it becomes a keyword plist) or a string passed on as is (JSON text).
struct ScriptedRule {
  std::string pattern;  // RE2 syntax; (?i) ignores case, (?s) lets . match newlines
  std::string reply;    // the content; with `fail`, the failure message
  Value tool_call;      // NIL, or (:NAME "tool" :ARGUMENTS plist-or-string)
  std::chrono::milliseconds delay{0};
  bool fail = false;
  bool stream = false;
  int line = 0;                           // where the rule starts in its script, 1-based
  std::shared_ptr<const re2::RE2> regex;  // compiled `pattern`; immutable, shared by copies
  // `pattern` has no RE2 metacharacter: it matches exactly where its text
  // occurs, and is searched as text (a regex search has a fixed cost of
  // about 900 instructions, a search for a short text a few dozen).
  bool plain_text = false;
};

// A parsed script: its rules in order. Immutable once parsed.
struct ScriptedScript {
  static constexpr std::size_t kMaxFileSize = std::size_t{1024} * 1024;
  static constexpr std::chrono::milliseconds kMaxDelay{60 * 60 * 1000};

  std::vector<ScriptedRule> rules;

  // Parses YAML text; `origin` names it in messages ("<string>" when empty).
  // Every problem is reported as `<origin>:<line>:<column>: <what and what to
  // do>`, one per line (ErrorCode::invalid_input).
  static Result<ScriptedScript> parse(std::string_view yaml, std::string_view origin = {});
  static Result<ScriptedScript> load(const std::filesystem::path& file);
};

// Answers each request from the first rule whose pattern is found in the
// prompt; no match is the failure "no scripted rule matches".
//
// Rules without a delay answer before complete() returns, on the caller's
// thread; delayed rules answer from `executor` (which must outlive every
// request in flight). Without an executor, a delayed rule answers with a
// failure saying so. Thread-safe: complete() may be called from any thread.
class ScriptedProvider final : public Provider {
 public:
  explicit ScriptedProvider(ScriptedScript script, Executor* executor = nullptr, std::string name = "scripted");
  ~ScriptedProvider() override;

  std::string_view name() const noexcept override { return name_; }
  // In process: nothing leaves the machine. A test plays a remote endpoint
  // with set_local(false).
  bool is_local() const noexcept override { return local_; }
  void set_local(bool local) noexcept { local_ = local; }
  void complete(const ProviderRequest& request, ProviderCompletion done) override;

  const std::vector<ScriptedRule>& rules() const noexcept { return script_.rules; }
  // How many requests rule `index` answered (0 for an index out of range).
  std::size_t hits(std::size_t index) const noexcept;
  // How many requests no rule matched.
  std::size_t misses() const noexcept { return static_cast<std::size_t>(misses_.sum()); }

 private:
  // The rules' patterns compiled again for each thread shard, when that shard
  // first asks: RE2 takes a lock inside every search, and two threads
  // searching with one object bounce that lock between their cores (about
  // four times slower per match).
  struct ShardPatterns {
    std::once_flag compiled;
    std::vector<std::unique_ptr<const re2::RE2>> regexes;  // one per rule
  };
  const std::vector<std::unique_ptr<const re2::RE2>>& patterns();

  ScriptedScript script_;
  Executor* executor_;
  std::string name_;
  bool local_ = true;
  std::unique_ptr<ShardPatterns[]> patterns_;  // kThreadShards
  std::unique_ptr<ShardedCounter[]> hits_;     // one per rule
  ShardedCounter misses_;
};

}  // namespace passepartout
