// SkillHost: the live set of skills — boot, then swap, add, remove, reload and
// rescan while signals keep flowing, every change recorded in the audit log.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "result.hpp"
#include "skills/audit_log.hpp"
#include "skills/control_thread.hpp"
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
  std::vector<Error> manifest_errors;  // files that did not parse (their skills are left as they are)
  std::vector<std::string> deferred;   // libraries still being written; retried on the next rescan
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

  // Loads every manifest of the manifest folder in dependency order.
  BootResult boot(std::string_view requester = "boot");

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
  // Unloads a skill; refused while others depend on it unless `cascade`,
  // which removes the dependents first (one result each, dependents first).
  std::vector<ChangeResult> remove(std::string_view name, bool cascade, std::string_view requester);
  // Re-reads the skill's manifest from the manifest folder and swaps (or adds) it.
  ChangeResult reload(std::string_view name, std::string_view requester);
  // Applies what changed in the manifest folder: new skills are added,
  // removed ones unloaded, changed ones (version, library bytes, settings) swapped.
  RescanResult rescan(std::string_view requester);

  // Changes, newest first. Read on the control thread, after any change in
  // progress: a change whose effect is visible is in the history too.
  Result<std::vector<SkillChange>> history(std::size_t limit = 100) const;

  const SkillHostOptions& options() const noexcept { return options_; }
  // Where private library copies are mapped from (they show in /proc/self/maps as "(deleted)").
  const std::filesystem::path& library_copy_dir() const noexcept { return loader_.copy_dir(); }
  ControlThread& control() noexcept { return control_; }

 private:
  SkillHost(SkillHostOptions options, SkillLoader loader, std::unique_ptr<AuditLog> audit);

  // Control thread only:
  using TimePoint = std::chrono::steady_clock::time_point;
  ChangeResult swap_now(const SkillManifest& next, std::string_view requester, TimePoint requested);
  ChangeResult add_now(const SkillManifest& manifest, std::string_view requester, TimePoint requested);
  std::vector<ChangeResult> remove_now(std::string_view name, bool cascade, std::string_view requester);
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
  std::deque<SkillChange> memory_log_;  // control thread only; when there is no audit file
  std::map<std::string, std::filesystem::path> manifest_paths_;  // control thread only
};

}  // namespace passepartout
