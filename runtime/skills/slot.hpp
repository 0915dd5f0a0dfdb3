// Slot: one loaded skill — its manifest, its private copy of the library, its
// instance and its counters. Published to readers through immutable snapshots.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "base/crash_context.hpp"
#include "base/result.hpp"
#include "passepartout/abi.h"
#include "skills/gate_counters.hpp"
#include "skills/host_api.hpp"
#include "skills/skill_manifest.hpp"
#include "skills/skill_table.hpp"
#include "value/value.hpp"

namespace passepartout {

// Where a skill runs, for `status` and `skills list`.
struct IsolationStatus {
  Isolation tier = Isolation::in_process;
  int pid = 0;                 // the worker's, while it runs (0: none)
  std::uint64_t restarts = 0;  // worker restarts after deaths
  std::string last_death;      // why the worker last died ("" when it never did)
  bool quarantined = false;    // died too often: its hooks fail until a reload
  std::string quarantine_reason;
  std::uint64_t sandbox_denials = 0;  // system calls its sandbox denied (every one)
  // How long the worker answers a pipeline hook before it is killed (gate_timeout or the host's budget).
  std::chrono::milliseconds call_budget{0};
};

// A mapped private copy of a skill library. Unmapping it verifies the copy is
// really gone (RTLD_NOLOAD probe); one that stays mapped is counted, not crashed into.
class SkillLibrary {
 public:
  virtual ~SkillLibrary() = default;
  // The library as the operator named it (not the private copy).
  virtual const std::filesystem::path& source_path() const = 0;
  // For a skill in a worker process: the host-side object its proxy hooks
  // reach through pp_self at create (see isolated_skill.hpp); null otherwise.
  virtual void* proxy() noexcept { return nullptr; }
  // Where the skill's code runs and, for a worker process, how it fares.
  virtual IsolationStatus isolation_status() const { return {}; }
};

// Number of library copies that stayed mapped after their slot was destroyed
// although they were unloaded (something pinned them: see STYLE of skills).
std::uint64_t leaked_library_count() noexcept;
// Number of library copies kept mapped on purpose (manifest `never_unload: true`).
std::uint64_t pinned_library_count() noexcept;

// What a skill's error policy chose for a signal whose processing failed
// (seed F4's restarts): the host's default tiers, skip the signal, continue
// with `text` (as a :LOOP-ERROR signal carrying it), or abort the chain.
struct ErrorChoice {
  enum class Kind { standard, skip, fallback, abort };
  Kind kind = Kind::standard;
  Value text;  // fallback: a string; NIL otherwise
};

const char* to_string(ErrorChoice::Kind kind) noexcept;

// A gate's pp_verdict as the host reads it (seed D15). Inline: the verifier
// reads one per gate on its hot path, where a pass is a single compare.
enum class VerdictKind : std::uint8_t { pass, rewrite, block, approval, unknown };

inline VerdictKind verdict_kind(const pp_verdict& verdict) noexcept {
  switch (verdict.kind) {
    case PP_VERDICT_PASS:
      return VerdictKind::pass;
    case PP_VERDICT_REWRITE:
      return VerdictKind::rewrite;
    case PP_VERDICT_BLOCK:
      return VerdictKind::block;
    case PP_VERDICT_APPROVAL:
      return VerdictKind::approval;
    default:
      return VerdictKind::unknown;  // a kind this host does not know: the caller fails closed
  }
}
// REWRITE: the new action; APPROVAL: the action to approve. nullptr when the
// gate gave none or gave one that is no list. Owned by the gate call's pp_call.
inline const Value* verdict_action(const pp_verdict& verdict) noexcept {
  if (verdict.action == nullptr) return nullptr;
  const Value& action = from_handle(verdict.action);
  return action.is_list() ? &action : nullptr;
}
// BLOCK and APPROVAL: why (a string when the gate said; NIL when it gave none).
inline const Value& verdict_reason(const pp_verdict& verdict) noexcept { return from_handle(verdict.reason); }
// BLOCK: whether the rejection the user sees is a warning (else an error).
inline bool verdict_warns(const pp_verdict& verdict) noexcept { return verdict.level == PP_LOG_WARN; }

// Created by SkillLoader on the control thread; read from any thread through a
// Snapshot; destroyed (instance first, then the library) wherever the last
// snapshot holding it is released — the hot-swap layer routes that to the
// control thread.
class Slot {
 public:
  // `table` is what SkillTable::read accepted of the library's table;
  // `config` what create is handed: the manifest's config with its
  // placeholders expanded (expand_config_placeholders).
  Slot(SkillManifest manifest, std::string sha256, std::unique_ptr<SkillLibrary> library, SkillTable table,
       Value config);
  ~Slot();
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  // Creates the instance (control thread). On failure the slot stays unusable.
  Result<void> create_instance();
  // Runs the skill's self_test hook if it has one (control thread).
  Result<void> self_test();
  // Whether this version takes part in a state hand-over (has the hook).
  bool exports_state() const noexcept { return table_.hooks.export_state != nullptr; }
  bool imports_state() const noexcept { return table_.hooks.import_state != nullptr; }
  // The state this instance hands to its next version, copied out of the
  // call; failed with the skill's reason (control thread; exports_state()).
  Result<Value> export_state() const;
  // Gives this instance the state its previous version exported; failed with
  // the skill's reason (control thread; imports_state()).
  Result<void> import_state(const Value& state);

  const SkillManifest& manifest() const noexcept { return manifest_; }
  // The config the instance was created with (placeholders expanded).
  const Value& config() const noexcept { return config_; }
  const std::string& name() const noexcept { return manifest_.name; }
  const std::string& version_text() const noexcept { return version_text_; }
  // name() and version_text() as string Values, built once.
  const Value& name_value() const noexcept { return name_value_; }
  const Value& version_value() const noexcept { return version_value_; }
  // This gate's entry in a gate trace for a plain pass,
  // (:GATE "name" :VERSION "1.2.0" :RESULT :PASSED): built and preprinted
  // once, shared by every trace that records one.
  const Value& passed_trace_entry() const noexcept { return passed_trace_entry_; }
  int priority() const noexcept { return manifest_.priority; }
  // Lower-case hex SHA-256 of the library bytes that were loaded.
  const std::string& library_sha256() const noexcept { return sha256_; }
  const std::filesystem::path& library_path() const noexcept { return library_->source_path(); }
  // Name, version and library digest as the crash writer names the skill
  // (set in t_running_hook around every call into it).
  const RunningSkill& running() const noexcept { return running_; }
  // In-process, or a worker process (with its pid, restarts, quarantine).
  IsolationStatus isolation_status() const { return library_->isolation_status(); }

  // The skill's hooks in a full-size table: members beyond the skill's ABI
  // minor read as NULL (a 1.0 skill has no tools, actuators or 1.1 hooks).
  const pp_skill_api& api() const noexcept { return table_.hooks; }
  void* instance() const noexcept { return instance_.ptr; }
  bool has_gate() const noexcept { return table_.hooks.gate != nullptr; }
  bool has_prompt() const noexcept { return table_.hooks.prompt != nullptr; }
  bool has_trigger_hook() const noexcept { return table_.hooks.trigger != nullptr; }
  bool has_observe() const noexcept { return table_.hooks.observe != nullptr; }
  bool has_error_policy() const noexcept { return table_.hooks.error_policy != nullptr; }
  bool has_mandate() const noexcept { return table_.hooks.mandate != nullptr; }
  bool has_router() const noexcept { return table_.hooks.select_model != nullptr; }

  // --- ABI 1.0: trigger and prompt -------------------------------------------
  // Any thread, concurrently.

  // Whether the skill's trigger hook takes `signal`; false when it has none,
  // or when the hook fails (a failing hook counts as not triggered).
  bool trigger(const Value& signal) const;
  // What the skill's prompt generator makes of `signal` (the raw prompt; the
  // caller reads a string), copied out of the call; NIL when it has none.
  // failed with the skill's error text, or "no reason given".
  Result<Value> prompt(const Value& signal) const;

  // --- ABI 1.1: tools, actuators, observe, error policy ----------------------
  // Any thread, concurrently. call_tool and act may block for as long as the
  // skill's tool or actuator takes: call them from blocking-work threads,
  // never from a pipeline strand.

  // The tools the skill offers, in its order (call_tool's index).
  std::span<const SkillTool> tools() const noexcept { return table_.tools; }
  // The config keys the skill declares, in its order; declares_config() false:
  // it does not say, and its manifest's config was not checked.
  std::span<const SkillConfigKey> config_keys() const noexcept { return table_.config_keys; }
  bool declares_config() const noexcept { return !table_.config_keys.empty(); }
  // The actuator targets it serves, upper-cased as keywords print ("SHELL"),
  // in its order (act's index).
  std::span<const std::string> actuators() const noexcept { return table_.actuators; }
  // Parallel to actuators(): what each takes (ABI 1.3; not described for older skills).
  std::span<const SkillActuatorSpec> actuator_specs() const noexcept { return table_.actuator_specs; }
  // Whether it offers anything that acts on the world (an actuator or a
  // tool): then its manifest must name guards (guarded_by).
  bool acts() const noexcept { return table_.acts(); }
  // What it offers, for messages (SkillTable::offers_text).
  std::string offers_text() const { return table_.offers_text(); }

  // Runs tool `index` of tools() with `args` (the model's arguments, a plist
  // or NIL) for an action proposed in response to `signal`; the result is
  // copied out of the call. Errors: not_found when `index` is out of range;
  // failed when the tool failed, with exactly the skill's own error text
  // (what() for a C++ skill) as the message, ready to show the model, or
  // "tool '<name>' of skill '<skill>' failed without giving a reason".
  Result<Value> call_tool(std::size_t index, const Value& args, const Value& signal) const;
  // Carries out `action` through actuator `index` of actuators(), in response
  // to `signal`; what the skill returned (NIL: nothing to report). Errors as
  // for call_tool ("actuator '<NAME>' of skill '<skill>' failed ...").
  Result<Value> act(std::size_t index, const Value& action, const Value& signal) const;
  // Hands `signal` to the skill's observe hook (nothing when it has none).
  // failed with the skill's error text when the hook fails.
  Result<void> observe(const Value& signal) const;
  // Asks the skill's error policy about `signal`, whose processing failed
  // with `error` (a plist with at least :MESSAGE). nullopt when the skill has
  // no policy or the hook failed (logged, attributed to the skill); a kind
  // the host does not know, or a fallback without a string, reads as standard.
  std::optional<ErrorChoice> error_policy(const Value& signal, const Value& error) const;

  // --- ABI 1.3: standing mandates ---------------------------------------------
  // The skill's standing mandate for `signal` (seed D8): its line, or "" for
  // none (no hook, or the hook answered none). Any thread, concurrently.
  // failed with the skill's error text when the hook fails or answers
  // something other than a string; the caller bounds it in time.
  Result<std::string> mandate(const Value& signal) const;

  // --- ABI 1.4: the model router ----------------------------------------------
  // What the skill's select_model chose for `provider` (a plist: :NAME
  // :LOCAL :MODEL) in the model call `request` describes (abi.h). Any
  // thread, concurrently. failed with the skill's error text when the hook
  // fails, or answers a kind the host does not know, or USE without a
  // non-empty model name; the caller bounds it in time.
  struct ModelRoute {
    enum class Kind : std::uint8_t { provider_default, use, skip };
    Kind kind = Kind::provider_default;
    std::string model;   // use: the model
    std::string reason;  // skip, local_only: why (may be empty)
    bool local_only = false;
  };
  Result<ModelRoute> select_model(const Value& provider, const Value& request) const;

  GateCounters& counters() const noexcept { return counters_; }

 private:
  // Destroys the instance before the library that holds its code is unmapped.
  struct Instance {
    const pp_skill_api* api = nullptr;
    void* ptr = nullptr;
    ~Instance() {
      if (ptr != nullptr) api->destroy(ptr);
    }
  };

  // "tool 'read-file' of skill 'file-tools'", for messages.
  std::string tool_label(std::size_t index) const;
  std::string actuator_label(std::size_t index) const;

  SkillManifest manifest_;
  Value config_;
  std::string version_text_;
  Value name_value_;
  Value version_value_;
  Value passed_trace_entry_;
  std::string sha256_;
  RunningSkill running_;  // points into manifest_, version_text_ and sha256_
  pp_self self_;
  std::unique_ptr<SkillLibrary> library_;  // declared before instance_: dies after it
  SkillTable table_;                       // likewise: instance_ destroys through it
  Instance instance_;
  mutable GateCounters counters_;
};

}  // namespace passepartout
