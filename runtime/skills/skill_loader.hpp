// SkillLoader: turns a manifest into a Slot — private copy of the library,
// permission and sha256 checks, dlopen, ABI and manifest checks, instance.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/result.hpp"
#include "skills/control_thread.hpp"
#include "skills/sandbox_spec.hpp"
#include "skills/skill_manifest.hpp"
#include "skills/slot.hpp"

namespace passepartout {

struct LoaderOptions {
  // Where manifests' `library` names are resolved.
  std::filesystem::path plugin_dir;
  // Where private copies are mapped from; created (mode 0700) when empty.
  std::filesystem::path copy_dir;
  // Refuse libraries (and their folders) writable by group or others.
  bool check_permissions = true;
  // When set, a slot whose last holder is another thread is destroyed on this
  // queue's thread (the control thread): instance destroy and dlclose happen there.
  std::shared_ptr<ControlThread::Queue> retire_queue;
  // What "${workspace}" in a manifest's config stands for (empty: the host
  // has none, and a manifest that uses it is refused). Created, mode 0700,
  // when a skill that names it is loaded and it does not exist yet.
  std::filesystem::path workspace;
  // What this machine's sandbox offers skill processes, against which a
  // manifest's `sandbox.require` is checked (unset: probed once per process).
  std::optional<SandboxCapabilities> sandbox_capabilities;
  // The largest `gate_timeout` a manifest may ask for; one above it is refused.
  std::chrono::milliseconds gate_timeout_max{std::chrono::seconds(10)};

  // --- skills whose manifest says `isolation: process` -----------------------
  // Run every skill in a worker process, whatever its manifest says
  // (`passepartout verify --isolate`).
  bool force_process = false;
  // The executable started as `<it> skill-worker` (empty: this process's own, /proc/self/exe).
  std::filesystem::path worker_executable{};
  // How long a pipeline hook (trigger, prompt, gate, observe, error_policy)
  // may take in the worker before it is killed and the call fails: the daemon
  // passes its gate budget (GateWatchdog::budget()). A manifest's
  // `gate_timeout` replaces it for that skill (SkillManifest::gate_budget).
  // The worker's limits (memory, open files, CPU) are the manifest's `sandbox:`.
  std::chrono::milliseconds call_budget{1000};
  // create, self_test, export_state, import_state, and starting the worker.
  std::chrono::milliseconds control_budget{10'000};
  // call_tool and act.
  std::chrono::milliseconds action_budget{600'000};
  // Concurrent calls one worker serves (a lane and a worker thread each).
  std::size_t worker_lanes = 4;
  // The clock restart backoff and quarantine read (empty: steady_clock::now).
  std::function<std::chrono::steady_clock::time_point()> clock{};
  // Told when a skill is quarantined (its worker died too often): skill name, reason.
  std::function<void(const std::string&, const std::string&)> on_quarantine{};
};

// Options for the common case: skills from `plugin_dir`, "${workspace}" standing for `workspace`.
LoaderOptions loader_options(std::filesystem::path plugin_dir, bool check_permissions, std::filesystem::path workspace);

// Loads skills. Control thread only (dlopen, static constructors of skills).
class SkillLoader {
 public:
  static Result<SkillLoader> create(LoaderOptions options);
  SkillLoader(SkillLoader&&) noexcept;
  SkillLoader& operator=(SkillLoader&&) noexcept;
  ~SkillLoader();

  // Every step of loading but creating the instance: the returned slot has the
  // library mapped, its table checked against the host and the manifest
  // (a skill that offers actuators or tools must name its guards in
  // `guarded_by`), and its config's placeholders expanded.
  Result<std::shared_ptr<Slot>> open(const SkillManifest& manifest);
  // The library checked and mapped into this process, its table read
  // against the manifest (what a worker process does with it; open() does
  // the rest for an in-process skill).
  struct MappedLibrary {
    std::unique_ptr<SkillLibrary> library;
    SkillTable table;
    std::string sha256;
  };
  Result<MappedLibrary> map(const SkillManifest& manifest);
  // open(), then create the instance and run its self-test.
  Result<std::shared_ptr<Slot>> load(const SkillManifest& manifest);

  // Slots opened from now on retire onto `queue` (see LoaderOptions::retire_queue).
  void set_retire_queue(std::shared_ptr<ControlThread::Queue> queue);

  // Skills opened from now on report a quarantine to `report` (see LoaderOptions::on_quarantine).
  void set_on_quarantine(std::function<void(const std::string&, const std::string&)> report);

  const std::filesystem::path& plugin_dir() const noexcept;
  // Where private copies are written (each is unlinked as soon as it is mapped).
  const std::filesystem::path& copy_dir() const noexcept;
  // The library a manifest names, resolved against the plugin directory.
  std::filesystem::path library_path(const SkillManifest& manifest) const;

 private:
  struct State;
  // The library's file checked (exists, permissions) and read, its digest against any pin.
  struct CheckedLibrary {
    std::filesystem::path source;
    std::string bytes;
    std::string sha256;
  };
  Result<CheckedLibrary> read_checked(const SkillManifest& manifest) const;
  explicit SkillLoader(std::unique_ptr<State> state);
  // The manifest's config with "${workspace}" expanded (the folder made when missing).
  Result<Value> expand_config(const SkillManifest& manifest, const std::string& who) const;
  std::unique_ptr<State> state_;
};

// Lower-case hex SHA-256 of a file's contents.
Result<std::string> sha256_file(const std::filesystem::path& file);

// A loader that creates its own copy folder names it
// "passepartout-libs-<pid>-XXXXXX" and removes it when destroyed. A process
// killed outright leaves it behind (empty: copies are unlinked once mapped);
// this removes such folders in `parent`: ours, empty, and named after a
// process that no longer exists. Returns how many it removed. Loaders call
// it on the folder they create theirs in.
std::size_t sweep_stale_copy_dirs(const std::filesystem::path& parent);

}  // namespace passepartout
