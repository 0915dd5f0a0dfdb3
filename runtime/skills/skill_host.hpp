// SkillHost: the live set of skills — boot, then swap, add, remove, reload and
// rescan while signals keep flowing, every change recorded in the audit log.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "skills/audit_log.hpp"
#include "skills/control_thread.hpp"
#include "skills/crash_record.hpp"
#include "skills/registry.hpp"
#include "skills/skill_boot.hpp"
#include "skills/skill_loader.hpp"

namespace passepartout {

struct SkillHostOptions {
  std::filesystem::path manifest_dir;
  std::filesystem::path plugin_dir;
  // Where changes are recorded durably; empty keeps them in memory only.
  std::filesystem::path audit_file;
  bool check_permissions = true;
  // What "${workspace}" in a manifest's config stands for (LoaderOptions::workspace).
  std::filesystem::path workspace;
  // Where the skills held back after a crash are kept across restarts
  // (held_skills_file); empty keeps them in memory only.
  std::filesystem::path held_file;
  // The largest `gate_timeout` a manifest may ask for (LoaderOptions::gate_timeout_max).
  std::chrono::milliseconds gate_timeout_max{std::chrono::seconds(10)};
  // Skills in worker processes (LoaderOptions): the executable started as
  // `<it> skill-worker` (empty: this one), and the budget of a pipeline hook
  // (the daemon's gate budget).
  std::filesystem::path worker_executable{};
  std::chrono::milliseconds call_budget{1000};
};

struct ChangeResult {
  SkillChange change;  // as recorded: outcome "ok", "refused" (a check said no) or "failed" (the skill's code did)
  // From the request (before the hand-over to the control thread) to the new
  // snapshot being published, minus the skill's own create and self-test;
  // -1 when nothing was published.
  std::int64_t publish_us = -1;
  bool ok() const { return change.outcome == "ok"; }
};

struct RescanResult {
  std::vector<ChangeResult> changes;
  // Skills of the folder's names that an operator loaded from elsewhere
  // (`skills load PATH`): a rescan leaves them as they are; one line each.
  std::vector<std::string> kept;
  std::vector<Error> manifest_errors;  // files that did not parse (their skills are left as they are)
  std::vector<std::string> deferred;   // libraries still being written; retried on the next rescan
};

// What remove() does with the skills that need the one removed.
enum class RemoveMode {
  refuse_if_needed,  // refuse while any loaded skill depends on it or is guarded by it
  cascade,           // remove those too, dependents first
  force,             // remove it alone when only guarded skills need it: they stay loaded
                     // and fail closed until a guard is back (audited as "force-remove")
};

// Thread affinity: every change runs on the host's control thread (the
// public methods hand it over and wait), so changes never interleave; the
// current snapshot is read from any thread. A signal holds the snapshot it
// took for its whole way through the pipeline; a retired slot is destroyed
// (instance, then dlclose, then the unmapping check) on the control thread
// once its last holder lets go.
class SkillHost {
 public:
  static Result<std::unique_ptr<SkillHost>> create(SkillHostOptions options);
  ~SkillHost();
  SkillHost(const SkillHost&) = delete;
  SkillHost& operator=(const SkillHost&) = delete;

  // Loads every manifest of the manifest folder in dependency order. A skill
  // held back after a crash (`crashed`, the previous run's crash record, and
  // those of the held file) whose library still has the bytes that crashed is
  // not loaded: disabled with the crash as the reason (CrashRecord::hold_reason),
  // audited as a refused load at step "crash", left out of rescans, and kept
  // in the held file across restarts until an operator loads it (add or
  // reload). One whose library changed since, or whose manifest is gone, is
  // let go (a library that changed is loaded as usual).
  BootResult boot(std::string_view requester = "boot", const CrashRecord* crashed = nullptr);
  // Names of the skills held back after a crash (control thread's copy; any thread).
  std::vector<std::string> held_back() const;

  std::shared_ptr<const Snapshot> snapshot() const noexcept { return registry_.snapshot(); }
  // The registry the pipeline reads snapshots from; only the host publishes to it.
  Registry& registry() noexcept { return registry_; }

  // Replaces the loaded skill of the same name with `next`. Steps: manifest,
  // dependencies (its own and its dependents' constraints), load (private
  // copy, checks), create, self-test, state (export from the old, import into
  // the new, when both implement it), publish. Any failure leaves the old
  // version serving.
  ChangeResult swap(const SkillManifest& next, std::string_view requester);
  // Loads a skill that is not loaded yet; its dependencies must be loaded.
  ChangeResult add(const SkillManifest& manifest, std::string_view requester);
  // Unloads a skill; refused while others depend on it or are guarded by it
  // (manifest guarded_by), unless `mode` says otherwise (one result per
  // skill removed, dependents first).
  std::vector<ChangeResult> remove(std::string_view name, RemoveMode mode, std::string_view requester);
  // Re-reads the skill's manifest from the manifest folder and swaps (or adds) it.
  ChangeResult reload(std::string_view name, std::string_view requester);
  // Applies what changed in the manifest folder to the skills loaded from it:
  // new skills are added, removed ones unloaded (refused, and reported, while
  // a loaded skill needs them), changed ones (version, library bytes,
  // settings) swapped. A skill loaded from anywhere else is left as it is.
  RescanResult rescan(std::string_view requester);

  // Records that the operator cleared skill `name`, which is not loaded (a
  // failed load left it disabled): a "remove" with outcome ok, `version` as
  // its from_version and `reason` (why it was disabled) as its details.
  ChangeResult forget_disabled(std::string_view name, std::string_view version, std::string_view reason,
                               std::string_view requester);

  // --- Shadow candidates (docs/operating.md, "Trying a new gate: shadow") ---

  // Loads `candidate`, another version of a loaded skill that has a gate,
  // beside the live one through the checks a load makes (its dependencies,
  // the library's sha256 and ABI, create, self-test) and publishes it as a
  // shadow candidate: every verification then also asks it, and never obeys
  // it. One candidate per skill. Audited as "shadow".
  ChangeResult shadow(const SkillManifest& candidate, std::string_view requester);
  // Drops skill `name`'s candidate. Audited as "shadow-stop", with its
  // statistics in `detail`. Swapping, reloading or unloading the live skill
  // drops its candidate the same way (audited, the step saying why).
  ChangeResult shadow_stop(std::string_view name, std::string_view requester);
  // Swaps skill `name`'s candidate in through the ordinary hot swap (its
  // manifest loaded again, checked as a swap checks, the live version's
  // state handed over), refused when its library's bytes changed since it
  // was shadowed. Audited as "promote", with its statistics in `detail`.
  ChangeResult promote(std::string_view name, std::string_view requester);

  struct ShadowStatus {
    std::string skill;
    std::string live_version;
    std::string candidate_version;
    std::string candidate_sha256;
    std::filesystem::path manifest;
    std::int64_t since_unix_ms = 0;
    std::string requester;
    ShadowCounts counts;
    std::vector<ShadowSample> latest;  // newest first
  };
  // The candidates being shadowed now, in gate order. Any thread.
  std::vector<ShadowStatus> shadow_status() const;
  // Per skill, what its candidates counted, stopped ones included (for
  // metrics: monotonic while the process lives). Any thread.
  std::map<std::string, ShadowCounts> shadow_counts() const;

  // What the versions of each skill that are no longer loaded counted
  // (GateCounters, read when each was swapped out or removed): added to the
  // loaded version's counts, a skill's totals across versions. Any thread.
  std::map<std::string, GateCounts> retired_counts() const;

  // Records a change the skills did not make but that is audited with
  // theirs (an MCP tool whose definition changed, an operator accepting it):
  // on the control thread, after the changes already queued. Any thread.
  void record_external(SkillChange change);

  // Changes, newest first. Read on the control thread, after any change in
  // progress: a change whose effect is visible is in the history too.
  Result<std::vector<SkillChange>> history(std::size_t limit = 100) const;

  // Changes recorded since the host was made, by SkillChange::action and
  // outcome (change_kinds() x change_outcomes(); a value not listed counts
  // as the last, "other"), for metrics. Any thread, without a lock.
  static std::span<const std::string_view> change_kinds() noexcept;
  static std::span<const std::string_view> change_outcomes() noexcept;
  std::uint64_t change_count(std::size_t kind, std::size_t outcome) const noexcept;

  const SkillHostOptions& options() const noexcept { return options_; }
  // Where private library copies are mapped from (they show in /proc/self/maps as "(deleted)").
  const std::filesystem::path& library_copy_dir() const noexcept { return loader_.copy_dir(); }
  ControlThread& control() noexcept { return control_; }

 private:
  SkillHost(SkillHostOptions options, SkillLoader loader, std::unique_ptr<AuditLog> audit);

  // Control thread only:
  using TimePoint = std::chrono::steady_clock::time_point;
  // A promotion: the swap is audited as "promote", refused unless the
  // library still has the bytes that were shadowed.
  struct Promotion {
    std::string sha256;
    std::string detail;
  };
  ChangeResult swap_now(const SkillManifest& next, std::string_view requester, TimePoint requested,
                        const Promotion* promotion = nullptr);
  // Publishes `slots`; the shadow candidates whose live slot is gone are
  // dropped, each audited as "shadow-stop" (but the one being promoted).
  void publish_slots(std::vector<std::shared_ptr<const Slot>> slots, std::string_view requester);
  // Adds a dropped candidate's counts to its skill's shadow totals.
  void retire_shadow(const ShadowCandidate& candidate);
  ChangeResult add_now(const SkillManifest& manifest, std::string_view requester, TimePoint requested);
  std::vector<ChangeResult> remove_now(std::string_view name, RemoveMode mode, std::string_view requester);
  static std::string removal_refusal(const Snapshot& snapshot, std::string_view name,
                                     const std::set<std::string>& doomed);
  // Whether `manifest` is a file of the manifest folder.
  bool in_manifest_dir(const std::filesystem::path& manifest) const;
  RescanResult rescan_now(std::string_view requester);
  struct NewSlot {
    std::shared_ptr<Slot> slot;
    std::int64_t skill_us;  // the skill's own create and self-test
  };
  Result<NewSlot> prepare(const SkillManifest& manifest, SkillChange& change, std::string& step);
  ChangeResult refuse(SkillChange change, std::string_view step, const Error& error, TimePoint start);
  // Records changes durably (or in memory without an audit log), assigns their
  // ids and logs them; changes made together are written in one transaction.
  void record(SkillChange& change);
  void record_all(std::span<SkillChange> changes);

  SkillHostOptions options_;
  mutable ControlThread control_;  // declared before the loader and registry: slots retire onto it
  SkillLoader loader_;
  Registry registry_;
  std::unique_ptr<AuditLog> audit_;
  std::deque<SkillChange> memory_log_;                           // control thread only; when there is no audit file
  std::map<std::string, std::filesystem::path> manifest_paths_;  // control thread only
  std::string promoting_;                         // control thread only: the skill whose candidate is being promoted
  std::map<std::string, CrashRecord> held_back_;  // guarded by held_mutex_
  // Writes held_back_ to options_.held_file (held_mutex_ held).
  void save_held_locked();
  mutable std::mutex held_mutex_;
  static constexpr std::size_t kChangeKinds = 10;
  static constexpr std::size_t kChangeOutcomes = 4;
  std::array<std::atomic<std::uint64_t>, kChangeKinds * kChangeOutcomes>
      change_counts_{};  // written on the control thread
  // Adds `slot`'s counts to its skill's retired counts (control thread).
  void retire_counts(const Slot& slot);
  mutable std::mutex retired_mutex_;  // guards retired_counts_
  std::map<std::string, GateCounts> retired_counts_;
  std::map<std::string, ShadowCounts> retired_shadow_counts_;  // guarded by retired_mutex_
};

}  // namespace passepartout
