// Snapshot construction (gate and prompt orders) and atomic publication.
#include "skills/registry.hpp"

#include <algorithm>
#include <utility>

namespace passepartout {
namespace {

// Highest priority first, ties by name: deterministic (the Lisp left ties to hash order).
bool runs_before(const Slot* a, const Slot* b) {
  if (a->priority() != b->priority()) return a->priority() > b->priority();
  return a->name() < b->name();
}

}  // namespace

Snapshot::Snapshot(std::vector<std::shared_ptr<const Slot>> slots, std::uint64_t generation)
    : slots_(std::move(slots)), generation_(generation) {
  std::vector<const Slot*> ordered;
  ordered.reserve(slots_.size());
  for (const auto& slot : slots_) ordered.push_back(slot.get());
  std::sort(ordered.begin(), ordered.end(), runs_before);
  for (const Slot* slot : ordered) {
    if (slot->has_gate()) gates_.push_back(Gate{slot->api().gate, slot->instance(), slot});
    if (slot->has_prompt()) prompt_skills_.push_back(slot);
  }
}

const Slot* Snapshot::find(std::string_view name) const noexcept {
  for (const auto& slot : slots_) {
    if (slot->name() == name) return slot.get();
  }
  return nullptr;
}

Registry::Registry() : current_(std::make_shared<const Snapshot>(std::vector<std::shared_ptr<const Slot>>{}, 0)) {}

std::shared_ptr<const Snapshot> Registry::publish(std::vector<std::shared_ptr<const Slot>> slots) {
  auto next = std::make_shared<const Snapshot>(std::move(slots), next_generation_++);
  std::shared_ptr<const Snapshot> previous;
  {
    std::lock_guard lock(current_mutex_);
    previous = std::exchange(current_, next);
  }
  return next;  // `previous` is released outside the lock: it may be the last holder of retired slots
}

}  // namespace passepartout
