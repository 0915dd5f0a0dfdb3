// Snapshot and Registry: the loaded skills as an immutable snapshot, published
// atomically (read-copy-update) so a signal never sees half of a change.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/thread_shards.hpp"
#include "skills/shadow.hpp"
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
    // The manifest's `gate_timeout` in ms (at most kMaxGateBudgetMs);
    // 0: the host's default budget (GateWatchdog).
    std::uint32_t budget_ms = 0;
    // The call has a deadline of its own, shorter than `budget_ms` (a gate in
    // a worker process: the worker is killed at it and the call fails "no
    // answer in 200 ms"). A failed call then reports its own reason even when
    // the watchdog marked it late too: which of the two noticed first depends
    // on how busy the machine is, and the reason must not.
    bool own_deadline = false;

    // Whether a call the watchdog marked `late`, which returned `status`,
    // fails as late ("exceeded its time budget"): not when it failed at its
    // own deadline, which says so itself.
    bool failed_as_late(bool late, pp_status status) const noexcept {
      return late && !(own_deadline && status != PP_OK);
    }
  };
  static constexpr std::uint32_t kMaxGateBudgetMs = (1U << 23) - 1;  // what a GateWatch ticket carries

  // The smallest `gate_timeout` of any gate in any snapshot built so far, in
  // ms (UINT32_MAX: none set one): the watchdog scans often enough for it.
  static std::uint32_t finest_gate_budget_ms() noexcept;

  // A tool the model may call: tool `index` of `slot` (Slot::tools()).
  struct ToolEntry {
    const Slot* slot;
    std::size_t index;

    // Why the tool may not act in this snapshot (a guard its skill names is
    // not loaded, or has no gate); nullptr when it may. Owned by the snapshot.
    const std::string* unguarded = nullptr;

    const SkillTool& tool() const noexcept { return slot->tools()[index]; }
    const std::string& name() const noexcept { return tool().name; }
    // Slot::call_tool: may block; call it from a blocking-work thread.
    Result<Value> call(const Value& args, const Value& signal) const { return slot->call_tool(index, args, signal); }
  };

  // An actuator target a skill serves: actuator `index` of `slot` (Slot::actuators()).
  struct ActuatorEntry {
    const Slot* slot;
    std::size_t index;

    // As for ToolEntry: ":SHELL is guarded by shell-guard, which is not loaded".
    const std::string* unguarded = nullptr;

    // Upper-case, as the keyword prints ("SHELL").
    const std::string& name() const noexcept { return slot->actuators()[index]; }
    // Slot::act: may block; call it from a blocking-work thread.
    Result<Value> act(const Value& action, const Value& signal) const { return slot->act(index, action, signal); }
  };

  // A shadow candidate as the verifier runs it: the candidate's gate, and
  // the index in gates() of the live gate it shadows.
  struct Shadow {
    Gate gate;
    std::size_t live_gate;
    ShadowCandidate candidate;
  };

  // Logs (warn, component "registry") each tool or actuator name that two
  // skills offer: the one that runs first in gate order keeps it. Of
  // `candidates`, those whose live slot is among `slots` and has a gate (and
  // that have a gate themselves) are carried; the others are left out.
  Snapshot(std::vector<std::shared_ptr<const Slot>> slots, std::uint64_t generation,
           std::vector<ShadowCandidate> candidates = {});

  // Slots in load order (dependencies first).
  std::span<const std::shared_ptr<const Slot>> slots() const noexcept { return slots_; }
  // Skills with a gate: priority descending, ties by name (Decisions 2).
  std::span<const Gate> gates() const noexcept { return gates_; }
  // The :GATE-TRACE of a verification in which every gate passed, built and
  // preprinted once: each gate's Slot::passed_trace_entry() in gate order
  // (NIL without gates). One equal copy per thread shard, so that replies on
  // different threads do not count references on one list.
  const Value& passed_trace() const noexcept { return passed_traces_[thread_shard()]; }
  // Skills with a prompt generator, in the same order (trigger selection).
  std::span<const Slot* const> prompt_skills() const noexcept { return prompt_skills_; }
  const Slot* find(std::string_view name) const noexcept;
  std::uint64_t generation() const noexcept { return generation_; }
  // Unique among every snapshot this process creates (generations restart
  // with each Registry): a key for what callers derive from a snapshot.
  std::uint64_t id() const noexcept { return id_; }

  // Every tool the model may call, sorted by name. When two skills offer one
  // name, the skill of higher priority (ties: the name first in order) keeps
  // it and the other's is left out.
  std::span<const ToolEntry> tools() const noexcept { return tools_; }
  // The tool named `name`, ignoring ASCII case; nullptr when none.
  const ToolEntry* find_tool(std::string_view name) const noexcept;
  // Every actuator a skill serves, sorted by name; duplicates as for tools.
  std::span<const ActuatorEntry> actuators() const noexcept { return actuators_; }
  // The actuator for `target` ("shell", ":SHELL"), ignoring ASCII case and
  // one leading ':'; nullptr when no skill serves it.
  const ActuatorEntry* find_actuator(std::string_view target) const noexcept;
  // Why `action` may not act: the actuator its :TARGET names, or for
  // :TARGET :TOOL the tool its :PAYLOAD :TOOL names, is served by a skill
  // one of whose guards (manifest guarded_by) is not in this snapshot or has
  // no gate. nullptr when it may act, or when nothing serves the target (that
  // is dispatch's error). Costs one test while every guard is loaded.
  const std::string* unguarded(const Value& action) const noexcept;
  // "is guarded by x, which is not loaded" (or "..., which has no gate")
  // when a guard `slot` names is missing from this snapshot; "" when every
  // one is here, or the skill offers nothing that acts.
  std::string missing_guard(const Slot& slot) const;
  // Whether any actuator or tool of this snapshot lacks a guard.
  bool has_unguarded() const noexcept { return !unguarded_reasons_.empty(); }

  // Shadow candidates, in the order of the live gates they shadow; empty
  // unless an operator is trying one (`skills shadow`).
  std::span<const Shadow> shadows() const noexcept { return shadows_; }
  // The index in shadows() of the candidate shadowing gate `gate` (an index
  // in gates()), or -1. Only while shadows() is not empty.
  std::int32_t shadow_of_gate(std::size_t gate) const noexcept { return shadow_of_gate_[gate]; }
  // The candidates carried, for the next snapshot.
  std::vector<ShadowCandidate> candidates() const;

  // Skills with an observe hook, in gate order (priority descending, then name).
  std::span<const Slot* const> observers() const noexcept { return observers_; }
  // Skills with an error policy, in the same order: the first that chooses
  // something other than the default decides.
  std::span<const Slot* const> error_policies() const noexcept { return error_policies_; }
  // The model router (ABI 1.4): the skill of highest priority (ties: by
  // name) with a select_model hook, bounded like its gate would be; `slot`
  // is null when no loaded skill routes.
  struct Router {
    const Slot* slot = nullptr;
    std::uint32_t budget_ms = 0;  // as Gate::budget_ms: 0 is the host's default
  };
  const Router& router() const noexcept { return router_; }

 private:
  std::vector<std::shared_ptr<const Slot>> slots_;
  std::vector<Gate> gates_;
  std::array<Value, kThreadShards> passed_traces_;
  std::vector<const Slot*> prompt_skills_;
  std::uint64_t generation_;
  std::uint64_t id_;
  std::vector<ToolEntry> tools_;          // sorted by name (names are lower-case)
  std::vector<ActuatorEntry> actuators_;  // sorted by name (names are upper-case)
  std::vector<const Slot*> observers_;
  std::vector<const Slot*> error_policies_;
  Router router_;
  std::deque<std::string> unguarded_reasons_;  // what the entries' `unguarded` point to
  std::vector<Shadow> shadows_;
  std::vector<std::int32_t> shadow_of_gate_;  // per gate; empty without shadows
};

// Holds the current snapshot. snapshot() from any thread; publish() from the
// control thread. The previous snapshot lives on in whoever still holds it.
//
// Every signal takes a snapshot: the pointer is Published, so two threads
// taking one at once do not share a lock or a reference count.
class Registry {
 public:
  Registry();
  std::shared_ptr<const Snapshot> snapshot() const { return current_.get(); }
  // Publishes `slots` as the next generation, with the shadow candidates of
  // the current snapshot whose live slot is still among them; returns it.
  std::shared_ptr<const Snapshot> publish(std::vector<std::shared_ptr<const Slot>> slots);
  // Publishes `slots` with exactly `candidates` (those that fit, as Snapshot says).
  std::shared_ptr<const Snapshot> publish(std::vector<std::shared_ptr<const Slot>> slots,
                                          std::vector<ShadowCandidate> candidates);

 private:
  Published<const Snapshot> current_;
  std::uint64_t next_generation_ = 1;  // control thread only
};

}  // namespace passepartout
