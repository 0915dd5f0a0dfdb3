// The files behind `skills new`, `skills install` and `skills uninstall`: a
// skill project made from the installed template, and a built skill's
// manifest and library checked, then put into (or taken out of) the
// manifest and plugin folders a daemon reads. No daemon is involved here.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace passepartout::cli {

// --- skills new ------------------------------------------------------------------

struct NewProject {
  std::filesystem::path dir;                 // the project folder made: <parent>/<name>
  std::vector<std::filesystem::path> files;  // what it holds, relative to dir, sorted
  std::vector<std::string> next;             // the commands to run next: configure, build, install
};

// Makes <parent>/<name> from the template in `template_dir`: my-skill.yaml
// becomes <name>.yaml, my_skill.cpp <name with '-' as '_'>.cpp, and the name
// is filled in everywhere the template has its own (the manifest's name and
// library, the skill's kName, the CMake project and library lib<name>.so).
// `sdk_prefix` is what the configure command passes as CMAKE_PREFIX_PATH
// (empty: a placeholder the caller explains). Refuses (writing nothing) an
// invalid name (invalid_input), a missing template or parent folder
// (not_found), or a <parent>/<name> that exists and is not an empty folder
// (refused). The folder appears whole or not at all (built beside it, then renamed).
Result<NewProject> make_skill_project(const std::string& name, const std::filesystem::path& parent,
                                      const std::filesystem::path& template_dir,
                                      const std::filesystem::path& sdk_prefix);

// `text` as one shell word: unchanged when it is safe, else in single quotes.
std::string shell_word(const std::string& text);

// --- skills install / uninstall ----------------------------------------------------

// The folders a daemon reads its manifests and skill libraries from.
struct SkillFolders {
  std::filesystem::path manifest_dir;
  std::filesystem::path plugin_dir;
};

// Where a manifest's library is, when not given: next to the manifest, then
// in a build/ folder next to it. not_found (saying where it looked) when in neither.
Result<std::filesystem::path> find_skill_library(const std::filesystem::path& manifest, const std::string& library);

// A skill installed into the folders, and what was there before it.
struct InstalledSkill {
  std::string name;
  std::string version;
  std::string check;               // how `skills check` describes it: "name 1.0.0 (priority 50) gate"
  std::filesystem::path manifest;  // where it was written
  std::filesystem::path library;
  bool upgrade = false;  // it replaced the same skill's files
  // The replaced files' bytes (an upgrade), for undo_install().
  std::optional<std::string> previous_manifest;
  std::optional<std::string> previous_library;
  // An upgrade whose manifest names another library than the old one did:
  // the old library, which no other manifest names (for the caller to
  // remove once the new version is accepted).
  std::optional<std::filesystem::path> stale_library;
};

// Checks `manifest` with `library` (empty: find_skill_library) as `skills
// check` does, in a private folder with the manifests and libraries of the
// skills it needs from `folders` (what it depends on or is guarded by),
// then writes the library into folders.plugin_dir and the manifest into
// folders.manifest_dir (each written to a temporary file, synced and
// renamed; mode 0644). The manifest goes where the folder already has the
// same skill's (an upgrade), else to <name>.yaml. Refuses, changing
// nothing: a manifest that does not parse or a library missing (invalid_input,
// not_found); a skill the check would not load (refused, with the check's
// messages); a file of another skill in the way, or a library no manifest of
// the skill names (refused).
Result<InstalledSkill> install_skill_files(const std::filesystem::path& manifest, const std::filesystem::path& library,
                                           const SkillFolders& folders);

// Puts back what install_skill_files() replaced (or removes what it added).
Result<void> undo_install(const InstalledSkill& installed);

struct RemovedSkill {
  std::string name;
  std::string version;
  std::filesystem::path manifest;                // removed
  std::optional<std::filesystem::path> library;  // removed; nullopt when another manifest still names it or it was gone
};

// The manifest in folders.manifest_dir whose name: is `name`; not_found when none.
Result<std::filesystem::path> find_installed_manifest(const std::string& name, const SkillFolders& folders);

// Removes the manifest in folders.manifest_dir whose name: is `name`, then
// the library it names in folders.plugin_dir unless another skill's
// manifest names it too; nothing else. not_found when no manifest has that name.
Result<RemovedSkill> remove_skill_files(const std::string& name, const SkillFolders& folders);

}  // namespace passepartout::cli
