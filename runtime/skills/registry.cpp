// Snapshot construction (gate and prompt orders) and atomic publication.
#include "skills/registry.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <utility>

#include "base/ascii.hpp"
#include "base/log.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

// Highest priority first, ties by name: deterministic (the Lisp left ties to hash order).
bool runs_before(const Slot* a, const Slot* b) {
  if (a->priority() != b->priority()) return a->priority() > b->priority();
  return a->name() < b->name();
}

// Three-way comparison of `name` (stored folded by `fold`) with `query` folded the same way.
template <char (*Fold)(char)>
int compare_folded(std::string_view name, std::string_view query) {
  const std::size_t n = std::min(name.size(), query.size());
  for (std::size_t i = 0; i < n; ++i) {
    const char a = name[i];
    const char b = Fold(query[i]);
    if (a != b) return static_cast<unsigned char>(a) < static_cast<unsigned char>(b) ? -1 : 1;
  }
  if (name.size() == query.size()) return 0;
  return name.size() < query.size() ? -1 : 1;
}

// Binary search of `entries` (sorted by their folded names) for `query`.
template <char (*Fold)(char), class Entry>
const Entry* find_folded(const std::vector<Entry>& entries, std::string_view query) {
  auto it = std::lower_bound(entries.begin(), entries.end(), query, [](const Entry& entry, std::string_view q) {
    return compare_folded<Fold>(entry.name(), q) < 0;
  });
  if (it == entries.end() || compare_folded<Fold>(it->name(), query) != 0) return nullptr;
  return &*it;
}

// The entries of `ordered` slots (gate order), one per name: the first slot
// offering a name keeps it; each later one is logged as hidden.
template <class Entry, class Names>
std::vector<Entry> first_by_name(const std::vector<const Slot*>& ordered, Names names, const char* what) {
  std::map<std::string, Entry> kept;
  for (const Slot* slot : ordered) {
    const auto offered = names(*slot);
    for (std::size_t i = 0; i < offered.size(); ++i) {
      const std::string& name = offered[i];
      auto [it, inserted] = kept.try_emplace(name, Entry{slot, i});
      if (!inserted) {
        const Slot& owner = *it->second.slot;
        log_message(
            LogLevel::warn, "registry",
            "{} '{}' of skill '{}' (priority {}) is hidden by skill '{}' (priority {}), which offers the same name",
            what, name, slot->name(), slot->priority(), owner.name(), owner.priority());
      }
    }
  }
  std::vector<Entry> entries;
  entries.reserve(kept.size());
  for (auto& [name, entry] : kept) entries.push_back(entry);  // std::map: sorted by name
  return entries;
}

}  // namespace

namespace {
std::atomic<std::uint64_t> next_snapshot_id{1};
std::atomic<std::uint32_t> finest_gate_budget{UINT32_MAX};
constexpr std::int64_t kWorkerDeadlineMarginMs = 100;

// The gate of `slot` as the verifier calls it, with its own budget. A gate in
// a worker process has its deadline there (the worker is killed and the call
// fails "no answer in 200 ms"); the watchdog's budget for it is that deadline
// plus a margin, so the worker's answer is what reports and the watchdog stays
// the backstop (for a call that does not come back; a call that comes back
// failed reports its own reason, however late: Gate::own_deadline).
Snapshot::Gate gate_of(const Slot& slot) {
  std::int64_t wanted = 0;
  if (const auto& timeout = slot.manifest().gate_timeout) wanted = timeout->count();
  bool own_deadline = false;
  if (slot.manifest().isolation == Isolation::process) {
    const std::int64_t deadline = slot.isolation_status().call_budget.count();
    if (deadline > 0) {
      wanted = deadline + std::max<std::int64_t>(kWorkerDeadlineMarginMs, deadline / 4);
      own_deadline = true;
    }
  }
  std::uint32_t budget = 0;
  if (wanted > 0) {
    budget = static_cast<std::uint32_t>(std::clamp<std::int64_t>(wanted, 1, Snapshot::kMaxGateBudgetMs));
    std::uint32_t finest = finest_gate_budget.load(std::memory_order_relaxed);
    while (budget < finest && !finest_gate_budget.compare_exchange_weak(finest, budget, std::memory_order_relaxed)) {
    }
  }
  return Snapshot::Gate{slot.api().gate, slot.instance(), &slot, budget, own_deadline};
}
}  // namespace

std::uint32_t Snapshot::finest_gate_budget_ms() noexcept { return finest_gate_budget.load(std::memory_order_relaxed); }

Snapshot::Snapshot(std::vector<std::shared_ptr<const Slot>> slots, std::uint64_t generation,
                   std::vector<ShadowCandidate> candidates)
    : slots_(std::move(slots)), generation_(generation), id_(next_snapshot_id.fetch_add(1, std::memory_order_relaxed)) {
  std::vector<const Slot*> ordered;
  ordered.reserve(slots_.size());
  for (const auto& slot : slots_) ordered.push_back(slot.get());
  std::sort(ordered.begin(), ordered.end(), runs_before);
  for (const Slot* slot : ordered) {
    if (slot->has_gate()) gates_.push_back(gate_of(*slot));
    if (slot->has_prompt()) prompt_skills_.push_back(slot);
    if (slot->has_observe()) observers_.push_back(slot);
    if (slot->has_error_policy()) error_policies_.push_back(slot);
    if (slot->has_router() && router_.slot == nullptr) router_ = Router{slot, gate_of(*slot).budget_ms};
  }
  std::vector<Value> passed;
  passed.reserve(gates_.size());
  for (const Gate& gate : gates_) passed.push_back(gate.slot->passed_trace_entry());
  passed_traces_[0] = preprint(Value::list(passed));  // in every reply: printed once
  for (std::size_t i = 1; i < kThreadShards; ++i) passed_traces_[i] = preprinted_copy(passed_traces_[0]);
  tools_ = first_by_name<ToolEntry>(
      ordered,
      [](const Slot& slot) {
        std::vector<std::string> names;
        for (const SkillTool& tool : slot.tools()) names.push_back(tool.name);
        return names;
      },
      "tool");
  actuators_ = first_by_name<ActuatorEntry>(
      ordered, [](const Slot& slot) { return slot.actuators(); }, "actuator");

  // The guard rule: what a skill offers acts only while every guard it names
  // is here and judges actions (has a gate).
  for (ToolEntry& entry : tools_) {
    std::string missing = missing_guard(*entry.slot);
    if (missing.empty()) continue;
    entry.unguarded = &unguarded_reasons_.emplace_back("the tool '" + entry.name() + "' " + missing);
  }
  for (ActuatorEntry& entry : actuators_) {
    std::string missing = missing_guard(*entry.slot);
    if (missing.empty()) continue;
    entry.unguarded = &unguarded_reasons_.emplace_back(":" + entry.name() + " " + missing);
  }
  for (const std::string& reason : unguarded_reasons_) {
    log_message(LogLevel::warn, "registry", "{}; it fails closed until the guard is loaded", reason);
  }

  // Shadow candidates, in the order of the live gates they shadow.
  for (std::size_t g = 0; g < gates_.size() && !candidates.empty(); ++g) {
    for (ShadowCandidate& candidate : candidates) {
      if (candidate.live != gates_[g].slot || candidate.slot == nullptr || !candidate.slot->has_gate()) continue;
      const Slot& slot = *candidate.slot;
      // Taken: the emptied candidate matches no later gate.
      shadows_.push_back(Shadow{gate_of(slot), g, std::exchange(candidate, {})});
      break;
    }
  }
  if (!shadows_.empty()) {
    shadow_of_gate_.assign(gates_.size(), -1);
    for (std::size_t s = 0; s < shadows_.size(); ++s) {
      shadow_of_gate_[shadows_[s].live_gate] = static_cast<std::int32_t>(s);
    }
  }
}

std::vector<ShadowCandidate> Snapshot::candidates() const {
  std::vector<ShadowCandidate> out;
  out.reserve(shadows_.size());
  for (const Shadow& shadow : shadows_) out.push_back(shadow.candidate);
  return out;
}

std::string Snapshot::missing_guard(const Slot& slot) const {
  for (const Dependency& guard : slot.manifest().guarded_by) {
    const Slot* found = find(guard.name);
    if (found == nullptr) return "is guarded by " + guard.name + ", which is not loaded";
    if (!found->has_gate()) return "is guarded by " + guard.name + ", which has no gate";
    if (!guard.constraint.matches(found->manifest().version)) {
      return "is guarded by '" + guard.text + "', but " + guard.name + " " + found->version_text() + " is loaded";
    }
  }
  if (slot.manifest().guarded_by.empty() && slot.acts()) return "names no guard";
  return {};
}

const std::string* Snapshot::unguarded(const Value& action) const noexcept {
  if (unguarded_reasons_.empty()) [[likely]]
    return nullptr;
  const Value& target = action.at("TARGET");
  if (!target.is_keyword() && !target.is_string() && !target.is_symbol()) return nullptr;
  std::string_view name = target.text();
  if (!name.empty() && name.front() == ':') name.remove_prefix(1);
  if (compare_folded<ascii_upper>("TOOL", name) == 0) {
    const Value& tool = action.at("PAYLOAD").at("TOOL");
    if (!tool.is_keyword() && !tool.is_string() && !tool.is_symbol()) return nullptr;
    const ToolEntry* entry = find_tool(tool.text());
    return entry != nullptr ? entry->unguarded : nullptr;
  }
  const ActuatorEntry* entry = find_actuator(name);
  return entry != nullptr ? entry->unguarded : nullptr;
}

const Snapshot::ToolEntry* Snapshot::find_tool(std::string_view name) const noexcept {
  return find_folded<ascii_lower>(tools_, name);
}

const Snapshot::ActuatorEntry* Snapshot::find_actuator(std::string_view target) const noexcept {
  if (!target.empty() && target.front() == ':') target.remove_prefix(1);
  return find_folded<ascii_upper>(actuators_, target);
}

const Slot* Snapshot::find(std::string_view name) const noexcept {
  for (const auto& slot : slots_) {
    if (slot->name() == name) return slot.get();
  }
  return nullptr;
}

Registry::Registry() : current_(std::make_shared<const Snapshot>(std::vector<std::shared_ptr<const Slot>>{}, 0)) {}

std::shared_ptr<const Snapshot> Registry::publish(std::vector<std::shared_ptr<const Slot>> slots) {
  return publish(std::move(slots), current_.get()->candidates());
}

std::shared_ptr<const Snapshot> Registry::publish(std::vector<std::shared_ptr<const Slot>> slots,
                                                  std::vector<ShadowCandidate> candidates) {
  auto next = std::make_shared<const Snapshot>(std::move(slots), next_generation_++, std::move(candidates));
  current_.publish(next);
  return next;
}

}  // namespace passepartout
