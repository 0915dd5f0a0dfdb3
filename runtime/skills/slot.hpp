// Slot: one loaded skill — its manifest, its private copy of the library, its
// instance and its counters. Published to readers through immutable snapshots.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "passepartout/abi.h"
#include "skills/gate_counters.hpp"
#include "skills/host_api.hpp"
#include "skills/skill_manifest.hpp"

namespace passepartout {

// A mapped private copy of a skill library. Unmapping it verifies the copy is
// really gone (RTLD_NOLOAD probe); one that stays mapped is counted, not crashed into.
class SkillLibrary {
 public:
  virtual ~SkillLibrary() = default;
  // The library as the operator named it (not the private copy).
  virtual const std::filesystem::path& source_path() const = 0;
};

// Number of library copies that stayed mapped after their slot was destroyed
// although they were unloaded (something pinned them: see STYLE of skills).
std::uint64_t leaked_library_count() noexcept;
// Number of library copies kept mapped on purpose (manifest `never_unload: true`).
std::uint64_t pinned_library_count() noexcept;

// Created by SkillLoader on the control thread; read from any thread through a
// Snapshot; destroyed (instance first, then the library) wherever the last
// snapshot holding it is released — the hot-swap layer routes that to the
// control thread.
class Slot {
 public:
  Slot(SkillManifest manifest, std::string sha256, std::unique_ptr<SkillLibrary> library,
       const pp_skill_api* api);
  ~Slot();
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  // Creates the instance (control thread). On failure the slot stays unusable.
  Result<void> create_instance();
  // Runs the skill's self_test hook if it has one (control thread).
  Result<void> self_test();

  const SkillManifest& manifest() const noexcept { return manifest_; }
  const std::string& name() const noexcept { return manifest_.name; }
  const std::string& version_text() const noexcept { return version_text_; }
  int priority() const noexcept { return manifest_.priority; }
  // Lower-case hex SHA-256 of the library bytes that were loaded.
  const std::string& library_sha256() const noexcept { return sha256_; }
  const std::filesystem::path& library_path() const noexcept { return library_->source_path(); }

  const pp_skill_api& api() const noexcept { return *api_; }
  void* instance() const noexcept { return instance_.ptr; }
  bool has_gate() const noexcept { return api_->gate != nullptr; }
  bool has_prompt() const noexcept { return api_->prompt != nullptr; }
  bool has_trigger_hook() const noexcept { return api_->trigger != nullptr; }

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

  SkillManifest manifest_;
  std::string version_text_;
  std::string sha256_;
  pp_self self_;
  std::unique_ptr<SkillLibrary> library_;  // declared before instance_: dies after it
  const pp_skill_api* api_;
  Instance instance_;
  mutable GateCounters counters_;
};

}  // namespace passepartout
