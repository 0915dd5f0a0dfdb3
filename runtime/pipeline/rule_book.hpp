// RuleBook: the rules in force (pipeline/rules.hpp). Those of scope always
// live in the rules file (<state dir>/rules.yaml, or --rules FILE), which a
// change rewrites durably (a temporary file, fsync, rename, fsync of the
// folder) before it takes effect, so a restart or a kill -9 keeps every rule
// that was in force; a session's rules live here alone, while the session
// does. The file is read again when it changes (reload()); one that no longer
// reads keeps the rules in force and says why.
//
// Any thread: a verification reads the rules through a snapshot taken under
// a short lock (nothing at all while there is no rule); changes are
// serialized on another lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "pipeline/rules.hpp"
#include "value/value.hpp"

namespace passepartout {

class RuleBook {
 public:
  using Clock = std::function<std::int64_t()>;  // Unix milliseconds; replaceable for tests of expiry

  // A rule in force, and how often it decided.
  struct Entry {
    explicit Entry(Rule r) : rule(std::move(r)) {}
    Rule rule;
    mutable std::atomic<std::uint64_t> hits{0};
  };

  // Opens `file`: reads its rules when it exists (a file whose rules fail a
  // check is refused, with every problem located); else starts with none,
  // and the first change creates it (mode 0600).
  static Result<std::unique_ptr<RuleBook>> open(std::filesystem::path file, Clock clock = {});
  ~RuleBook();
  RuleBook(const RuleBook&) = delete;
  RuleBook& operator=(const RuleBook&) = delete;

  // No rule at all: what a verification asks first, without a lock.
  bool empty() const noexcept { return size_.load(std::memory_order_acquire) == 0; }

  // The first rule of `decision` (deny or ask) in force for `session` that
  // covers `action`, or null; a hit is counted.
  std::shared_ptr<const Entry> deciding(RuleDecision decision, const Value& action, std::string_view session) const;
  // The standing approval (an allow rule in force for `session`) covering
  // `action` when the gates `asked` ("name@version") asked for approval: it
  // covers the action and was taught for every gate that asked. Null when
  // none does, and always when an operator's ask rule asked (`asked` holds
  // the host's "rules@host"): ask beats allow. A hit is counted.
  std::shared_ptr<const Entry> standing(const Value& action, std::span<const std::string> asked,
                                        std::string_view session) const;
  // What the rules alone make of `action`: the deny rule that covers it,
  // else the ask rule, else the standing approvals that would answer an ask
  // (all of them). Nothing is counted. For `rules test`.
  struct Verdict {
    std::shared_ptr<const Entry> deny;
    std::shared_ptr<const Entry> ask;
    std::vector<std::shared_ptr<const Entry>> allow;
  };
  Verdict test(const Value& action, std::string_view session) const;

  // Adds `rule` (its id unique among the rules in force), stamping who and
  // when when it says neither; a rule of scope always is written to the file
  // first. Returns the rule as added.
  Result<Rule> add(Rule rule, std::string_view who);
  // Removes the rule `id`; returns it. not_found when there is none.
  Result<Rule> remove(std::string_view id);
  // The allow rules taught for another version of the gate `name` answer
  // `version` from now on (`rules carry`); returns how many changed.
  Result<std::size_t> carry(std::string_view name, std::string_view version);
  // Ends the session's rules; returns how many there were.
  std::size_t end_session(std::string_view session);

  // Reads the file again. Unchanged since it was last read or written:
  // nothing (false). Changed and readable: its rules replace those of scope
  // always (hits kept by id), true. Unreadable: an error, and nothing changes.
  Result<bool> reload();

  // The rules in force, those of the file first, then the sessions', each
  // with its hits; expired ones included (they decide nothing).
  std::vector<std::shared_ptr<const Entry>> rules() const;
  std::shared_ptr<const Entry> find(std::string_view id) const;
  bool expired(const Rule& rule) const;

  // For status and /metrics: rules by decision, hits by decision since the
  // book was opened, and the standing approvals in force (the CONFIG line's
  // "Rules learned").
  struct Counts {
    std::size_t deny = 0;
    std::size_t ask = 0;
    std::size_t allow = 0;
    std::uint64_t deny_hits = 0;
    std::uint64_t ask_hits = 0;
    std::uint64_t allow_hits = 0;
  };
  Counts counts() const;
  std::size_t standing_count() const;

  const std::filesystem::path& file() const noexcept { return file_; }
  std::int64_t now_ms() const;

 private:
  using Rules = std::vector<std::shared_ptr<const Entry>>;
  RuleBook(std::filesystem::path file, Clock clock);
  std::shared_ptr<const Rules> current() const;
  bool in_force(const Rule& rule, std::string_view session) const;
  // Writes the rules of scope always among `rules` to the file, then publishes `rules`.
  Result<void> commit(Rules rules);
  void publish(Rules rules);

  std::filesystem::path file_;
  Clock clock_;
  mutable std::mutex read_mutex_;  // guards rules_
  std::shared_ptr<const Rules> rules_;
  std::atomic<std::size_t> size_{0};
  std::mutex write_mutex_;   // serializes changes; guards file_sha256_
  std::string file_sha256_;  // of the text last read or written
  mutable std::atomic<std::uint64_t> hits_[3] = {};
};

// Where the daemon keeps its rules: <state dir>/rules.yaml.
std::filesystem::path rules_file(const std::filesystem::path& state_dir);

// The host's name and version for its rules in a gate trace (rules@host).
inline constexpr std::string_view kRulesName = "rules";

}  // namespace passepartout
