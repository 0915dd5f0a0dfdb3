// Consensus on actions: several model answers must agree on what to do
// before the gates see it. The pieces that need no pipeline: the rule
// (ConsensusConfig), the canonical form answers are compared in, the check
// of an answer's arguments against the schema it was offered, the tally that
// decides, and the counters status and /metrics show. The round that asks
// the providers is the pipeline's (consensus_round.cpp).
//
// The votes are structured steps, not text: two answers agree when they
// name the same actuator or tool with the same arguments, whatever the
// models wrote around them. A malformed answer never votes (red flag).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "value/value.hpp"

namespace passepartout {

struct ConsensusConfig {
  enum class When : std::uint8_t {
    acting,  // only for a proposal that acts (a tool, an actuator other than the reply channel)
    always,  // for every proposal, a reply too
  };
  // Who votes, in order; empty: the cascade's providers. A quorum round asks
  // each once; an ahead-by round goes round them as often as it needs.
  std::vector<std::string> providers;
  // Decided when this many answers agree (quorum rule), 0: not this rule.
  int quorum = 0;
  // First-to-ahead-by-k: decided when one action leads every other by
  // `ahead_by` votes, or undecided once `max_calls` calls were made. 0: not this rule.
  int ahead_by = 0;
  int max_calls = 0;
  When when = When::acting;

  bool enabled() const noexcept { return quorum > 0 || ahead_by > 0; }
  // "quorum 2 of a, b, c", "ahead by 2 (at most 5 calls) of a": for logs and status.
  std::string describe() const;
};

// `action` (an aimed action: a tool's :TARGET :TOOL, an actuator's its
// keyword) in the form answers are compared in: the target, or "TOOL
// <name>", then the payload or the tool's arguments with :EXPLANATION left
// out, keys upper-cased and sorted, numbers in one form (1, 1.0 and 1e0 are
// one number), keywords and symbols by their upper-cased name, a command's
// (:CMD) surrounding whitespace dropped. `acts` false (the reply channel):
// "REPLY" whatever was said, since a vote is about what is done.
std::string canonical_action(const Value& action, bool acts);

// Why `value` (arguments as the JSON bridge reads them: objects are plists
// with upper-cased keys; false, null, {} and [] are NIL) does not match the
// JSON Schema `schema_json`, or "" when it does. Checks type, properties,
// required, additionalProperties, enum, const, items, minItems, maxItems,
// minLength, maxLength, minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, pattern, anyOf, oneOf, allOf and not; other keywords
// (format, default, description, $ref ...) are not checked. A schema that is
// not JSON, or empty, checks nothing. The reason names where:
// "/path: expected string, got integer".
std::string schema_mismatch(const Value& value, std::string_view schema_json);

// The votes of one round and whether they decide it.
class ConsensusTally {
 public:
  enum class State : std::uint8_t { open, agreed, disagreed };
  struct Candidate {
    std::string key;     // canonical_action()
    std::size_t answer;  // the first answer that voted for it (the caller's index)
    int votes = 0;
    std::vector<std::string> providers;  // who voted for it, in order
  };

  explicit ConsensusTally(const ConsensusConfig& config) : config_(&config) {}

  void vote(std::string key, std::size_t answer, std::string provider);
  // An answer that was discarded (red flag) or a call that did not answer.
  void discard() noexcept { ++discarded_; }

  // Decided with `remaining` calls still to come (in flight or yet to be
  // made): agreed when the rule is met; disagreed when it can no longer be.
  State state(int remaining) const;
  // How many more votes the leading action needs at best (ahead-by: k minus
  // its lead; quorum: the quorum minus its votes), at least 0.
  int needed() const;
  // The candidate with the most votes (the first to reach it on a tie); null
  // when none voted.
  const Candidate* leader() const;
  const std::vector<Candidate>& candidates() const noexcept { return candidates_; }
  int votes() const noexcept { return votes_; }
  int discarded() const noexcept { return discarded_; }

 private:
  // The leader's votes minus the runner-up's.
  int lead() const;

  const ConsensusConfig* config_;
  std::vector<Candidate> candidates_;
  int votes_ = 0;
  int discarded_ = 0;
};

// What consensus rounds came to, per set of voting providers. Thread-safe.
class ConsensusStats {
 public:
  struct Figures {
    std::uint64_t agreed = 0;
    std::uint64_t disagreed = 0;
    std::uint64_t calls = 0;      // calls made by the rounds (a proposal that opened one included)
    std::uint64_t cancelled = 0;  // calls cancelled once the round was decided
    std::map<std::string, std::uint64_t, std::less<>> red_flags;  // per provider
  };
  void agreed(std::string_view set);
  void disagreed(std::string_view set);
  void calls(std::string_view set, std::uint64_t made, std::uint64_t cancelled);
  void red_flag(std::string_view set, std::string_view provider);
  // Every set's figures, by set ("a,b,c").
  std::map<std::string, Figures, std::less<>> figures() const;

 private:
  Figures& of(std::string_view set);  // under mutex_
  mutable std::mutex mutex_;
  std::map<std::string, Figures, std::less<>> sets_;
};

}  // namespace passepartout
