// Snapshot and Registry: the loaded skills as an immutable snapshot, published
// atomically (read-copy-update) so a signal never sees half of a change.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "skills/slot.hpp"

namespace passepartout {

// An immutable set of slots with the orders the pipeline needs precomputed.
// Created on the control thread; read from any thread; holds its slots alive.
class Snapshot {
 public:
  // What the verifier calls, laid out flat so a gate costs one indirect call.
  struct Gate {
    decltype(pp_skill_api::gate) fn;
    void* instance;
    const Slot* slot;
  };

  Snapshot(std::vector<std::shared_ptr<const Slot>> slots, std::uint64_t generation);

  // Slots in load order (dependencies first).
  std::span<const std::shared_ptr<const Slot>> slots() const noexcept { return slots_; }
  // Skills with a gate: priority descending, ties by name (Decisions 2).
  std::span<const Gate> gates() const noexcept { return gates_; }
  // Skills with a prompt generator, in the same order (trigger selection).
  std::span<const Slot* const> prompt_skills() const noexcept { return prompt_skills_; }
  const Slot* find(std::string_view name) const noexcept;
  std::uint64_t generation() const noexcept { return generation_; }

 private:
  std::vector<std::shared_ptr<const Slot>> slots_;
  std::vector<Gate> gates_;
  std::vector<const Slot*> prompt_skills_;
  std::uint64_t generation_;
};

// Holds the current snapshot. snapshot() from any thread; publish() from the
// control thread. The previous snapshot lives on in whoever still holds it.
//
// The pointer is guarded by a mutex held only to copy or replace it (an
// uncontended lock per signal entering the pipeline). libstdc++ 12's
// std::atomic<std::shared_ptr> would do the same with a lock bit that
// ThreadSanitizer cannot see, and the suite must run clean under it.
class Registry {
 public:
  Registry();
  std::shared_ptr<const Snapshot> snapshot() const noexcept {
    std::lock_guard lock(current_mutex_);
    return current_;
  }
  // Publishes `slots` as the next generation; returns it.
  std::shared_ptr<const Snapshot> publish(std::vector<std::shared_ptr<const Slot>> slots);

 private:
  mutable std::mutex current_mutex_;  // guards current_
  std::shared_ptr<const Snapshot> current_;
  std::uint64_t next_generation_ = 1;  // control thread only
};

}  // namespace passepartout
