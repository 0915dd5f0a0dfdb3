#include "pipeline/rule_book.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "base/digest.hpp"
#include "base/duration_text.hpp"
#include "base/file_io.hpp"

namespace passepartout {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxRulesFile = std::size_t{4} * 1024 * 1024;
constexpr std::string_view kHostRules = "rules@host";

std::size_t index_of(RuleDecision decision) { return static_cast<std::size_t>(decision); }

// The file's rules, or none when it does not exist.
Result<std::pair<std::vector<Rule>, std::string>> read_rules_file(const fs::path& file) {
  auto text = read_bounded_file(file, kMaxRulesFile);
  if (!text && text.error().code == ErrorCode::not_found) return std::pair<std::vector<Rule>, std::string>{};
  if (!text) return fail(text.error().code, file.string() + ": " + text.error().message);
  auto rules = parse_rules(*text, file.string());
  if (!rules) return fail(rules.error().code, rules.error().message);
  for (Rule& rule : *rules) {
    if (rule.taught_by.empty()) rule.taught_by = "file";
  }
  return std::pair{std::move(*rules), sha256_hex(*text)};
}

}  // namespace

fs::path rules_file(const fs::path& state_dir) { return state_dir / "rules.yaml"; }

RuleBook::RuleBook(fs::path file, Clock clock)
    : file_(std::move(file)), clock_(clock ? std::move(clock) : Clock(unix_ms_now)) {}

RuleBook::~RuleBook() = default;

Result<std::unique_ptr<RuleBook>> RuleBook::open(fs::path file, Clock clock) {
  auto read = read_rules_file(file);
  if (!read) return fail(read.error().code, read.error().message);
  std::unique_ptr<RuleBook> book(new RuleBook(std::move(file), std::move(clock)));
  Rules rules;
  for (Rule& rule : read->first) rules.push_back(std::make_shared<const Entry>(std::move(rule)));
  book->file_sha256_ = std::move(read->second);
  book->publish(std::move(rules));
  return book;
}

std::int64_t RuleBook::now_ms() const { return clock_(); }

std::shared_ptr<const RuleBook::Rules> RuleBook::current() const {
  const std::lock_guard lock(read_mutex_);
  return rules_;
}

void RuleBook::publish(Rules rules) {
  auto next = std::make_shared<const Rules>(std::move(rules));
  const std::size_t size = next->size();
  {
    const std::lock_guard lock(read_mutex_);
    rules_ = std::move(next);
  }
  size_.store(size, std::memory_order_release);
}

bool RuleBook::expired(const Rule& rule) const { return rule.expires_unix_ms != 0 && now_ms() >= rule.expires_unix_ms; }

bool RuleBook::in_force(const Rule& rule, std::string_view session) const {
  if (rule.scope == Rule::Scope::session && rule.session != session) return false;
  return !expired(rule);
}

std::shared_ptr<const RuleBook::Entry> RuleBook::deciding(RuleDecision decision, const Value& action,
                                                          std::string_view session) const {
  if (empty()) return nullptr;
  const std::shared_ptr<const Rules> rules = current();
  std::optional<RuleSubject> subject;
  for (const auto& entry : *rules) {
    if (entry->rule.decision != decision || !in_force(entry->rule, session)) continue;
    if (!subject) subject = rule_subject(action);
    if (!rule_matches(entry->rule, *subject)) continue;
    entry->hits.fetch_add(1, std::memory_order_relaxed);
    hits_[index_of(decision)].fetch_add(1, std::memory_order_relaxed);
    return entry;
  }
  return nullptr;
}

std::shared_ptr<const RuleBook::Entry> RuleBook::standing(const Value& action, std::span<const std::string> asked,
                                                          std::string_view session) const {
  if (empty() || asked.empty()) return nullptr;
  if (std::find(asked.begin(), asked.end(), kHostRules) != asked.end()) return nullptr;  // ask beats allow
  const std::shared_ptr<const Rules> rules = current();
  std::optional<RuleSubject> subject;
  for (const auto& entry : *rules) {
    const Rule& rule = entry->rule;
    if (rule.decision != RuleDecision::allow || !in_force(rule, session)) continue;
    const bool taught_for_all = std::all_of(asked.begin(), asked.end(), [&](const std::string& gate) {
      return std::find(rule.gates.begin(), rule.gates.end(), gate) != rule.gates.end();
    });
    if (!taught_for_all) continue;
    if (!subject) subject = rule_subject(action);
    if (!rule_matches(rule, *subject)) continue;
    entry->hits.fetch_add(1, std::memory_order_relaxed);
    hits_[index_of(RuleDecision::allow)].fetch_add(1, std::memory_order_relaxed);
    return entry;
  }
  return nullptr;
}

RuleBook::Verdict RuleBook::test(const Value& action, std::string_view session) const {
  Verdict verdict;
  const std::shared_ptr<const Rules> rules = current();
  const RuleSubject subject = rule_subject(action);
  for (const auto& entry : *rules) {
    const Rule& rule = entry->rule;
    if (!in_force(rule, session) || !rule_matches(rule, subject)) continue;
    if (rule.decision == RuleDecision::deny && !verdict.deny) verdict.deny = entry;
    if (rule.decision == RuleDecision::ask && !verdict.ask) verdict.ask = entry;
    if (rule.decision == RuleDecision::allow) verdict.allow.push_back(entry);
  }
  return verdict;
}

Result<void> RuleBook::commit(Rules rules) {
  std::vector<Rule> written;
  for (const auto& entry : rules) {
    if (entry->rule.scope == Rule::Scope::always) written.push_back(entry->rule);
  }
  const std::string text = rules_text(written);
  std::error_code ec;
  if (!file_.parent_path().empty()) std::filesystem::create_directories(file_.parent_path(), ec);
  if (auto ok = write_file_durably(file_, text, 0600); !ok) return ok;
  file_sha256_ = sha256_hex(text);
  publish(std::move(rules));
  return {};
}

Result<Rule> RuleBook::add(Rule rule, std::string_view who) {
  const std::lock_guard lock(write_mutex_);
  const std::shared_ptr<const Rules> rules = current();
  for (const auto& entry : *rules) {
    if (entry->rule.id == rule.id) {
      return fail(ErrorCode::refused, "a rule with the id " + rule.id + " is in force already (" +
                                          rule_summary(entry->rule) + "); remove it first, or choose another id");
    }
  }
  if (rule.scope == Rule::Scope::session && rule.session.empty()) {
    return fail(ErrorCode::invalid_input, "a rule of scope session names its session");
  }
  if (rule.taught_by.empty()) rule.taught_by = std::string(who);
  if (rule.taught_unix_ms == 0) rule.taught_unix_ms = now_ms();
  Rules next;
  for (const auto& entry : *rules) {
    if (!expired(entry->rule)) next.push_back(entry);  // an expired rule leaves at the next change
  }
  next.push_back(std::make_shared<const Entry>(rule));
  if (rule.scope == Rule::Scope::session) {
    publish(std::move(next));  // not in the file: it lives while its session does
  } else if (auto ok = commit(std::move(next)); !ok) {
    return fail(ok.error().code, ok.error().message);
  }
  return rule;
}

Result<Rule> RuleBook::remove(std::string_view id) {
  const std::lock_guard lock(write_mutex_);
  const std::shared_ptr<const Rules> rules = current();
  Rules next;
  std::optional<Rule> removed;
  for (const auto& entry : *rules) {
    if (entry->rule.id == id) {
      removed = entry->rule;
    } else {
      next.push_back(entry);
    }
  }
  if (!removed) return fail(ErrorCode::not_found, "no rule has the id " + std::string(id) + " (rules list shows them)");
  if (removed->scope == Rule::Scope::session) {
    publish(std::move(next));
  } else if (auto ok = commit(std::move(next)); !ok) {
    return fail(ok.error().code, ok.error().message);
  }
  return std::move(*removed);
}

Result<std::size_t> RuleBook::carry(std::string_view name, std::string_view version) {
  const std::lock_guard lock(write_mutex_);
  const std::shared_ptr<const Rules> rules = current();
  const std::string prefix = std::string(name) + "@";
  const std::string to = prefix + std::string(version);
  Rules next;
  std::size_t changed = 0;
  bool in_file = false;
  for (const auto& entry : *rules) {
    Rule rule = entry->rule;
    bool touched = false;
    for (std::string& gate : rule.gates) {
      if (gate.starts_with(prefix) && gate != to) {
        gate = to;
        touched = true;
      }
    }
    if (!touched) {
      next.push_back(entry);
      continue;
    }
    std::sort(rule.gates.begin(), rule.gates.end());
    rule.gates.erase(std::unique(rule.gates.begin(), rule.gates.end()), rule.gates.end());
    in_file = in_file || rule.scope == Rule::Scope::always;
    auto carried = std::make_shared<Entry>(std::move(rule));
    carried->hits.store(entry->hits.load(std::memory_order_relaxed), std::memory_order_relaxed);
    next.push_back(std::move(carried));
    ++changed;
  }
  if (changed == 0) return changed;
  if (!in_file) {
    publish(std::move(next));
  } else if (auto ok = commit(std::move(next)); !ok) {
    return fail(ok.error().code, ok.error().message);
  }
  return changed;
}

std::size_t RuleBook::end_session(std::string_view session) {
  const std::lock_guard lock(write_mutex_);
  const std::shared_ptr<const Rules> rules = current();
  Rules next;
  std::size_t ended = 0;
  for (const auto& entry : *rules) {
    if (entry->rule.scope == Rule::Scope::session && entry->rule.session == session) {
      ++ended;
    } else {
      next.push_back(entry);
    }
  }
  if (ended != 0) publish(std::move(next));
  return ended;
}

Result<bool> RuleBook::reload() {
  const std::lock_guard lock(write_mutex_);
  auto read = read_rules_file(file_);
  if (!read) return fail(read.error().code, read.error().message);
  if (read->second == file_sha256_) return false;
  const std::shared_ptr<const Rules> rules = current();
  Rules next;
  for (Rule& rule : read->first) {
    auto entry = std::make_shared<Entry>(std::move(rule));
    for (const auto& old : *rules) {
      if (old->rule.id == entry->rule.id) entry->hits.store(old->hits.load(std::memory_order_relaxed));
    }
    next.push_back(std::move(entry));
  }
  for (const auto& old : *rules) {
    if (old->rule.scope == Rule::Scope::session) next.push_back(old);
  }
  file_sha256_ = std::move(read->second);
  publish(std::move(next));
  return true;
}

std::vector<std::shared_ptr<const RuleBook::Entry>> RuleBook::rules() const { return *current(); }

std::shared_ptr<const RuleBook::Entry> RuleBook::find(std::string_view id) const {
  // Held here: a range-for keeps the vector, not the pointer that owns it, alive.
  const std::shared_ptr<const Rules> rules = current();
  for (const auto& entry : *rules) {
    if (entry->rule.id == id) return entry;
  }
  return nullptr;
}

RuleBook::Counts RuleBook::counts() const {
  Counts counts;
  const std::shared_ptr<const Rules> rules = current();
  for (const auto& entry : *rules) {
    if (expired(entry->rule)) continue;
    switch (entry->rule.decision) {
      case RuleDecision::deny:
        ++counts.deny;
        break;
      case RuleDecision::ask:
        ++counts.ask;
        break;
      case RuleDecision::allow:
        ++counts.allow;
        break;
    }
  }
  counts.deny_hits = hits_[index_of(RuleDecision::deny)].load(std::memory_order_relaxed);
  counts.ask_hits = hits_[index_of(RuleDecision::ask)].load(std::memory_order_relaxed);
  counts.allow_hits = hits_[index_of(RuleDecision::allow)].load(std::memory_order_relaxed);
  return counts;
}

std::size_t RuleBook::standing_count() const { return counts().allow; }

}  // namespace passepartout
