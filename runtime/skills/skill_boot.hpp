// Boot-time loading: a folder (or list) of manifests, ordered by dependencies,
// loaded one by one; whatever cannot load is disabled with its reason.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "skills/dependency_graph.hpp"
#include "skills/skill_loader.hpp"
#include "skills/skill_manifest.hpp"

namespace passepartout {

struct BootResult {
  std::vector<SkillManifest> manifests;            // every manifest that parsed
  std::vector<Error> manifest_errors;              // files that did not parse
  std::vector<std::shared_ptr<const Slot>> slots;  // loaded, in load order
  std::vector<Disabled> disabled;                  // sorted by name, with reasons

  // True when every manifest parsed and every skill loaded.
  bool all_loaded() const { return manifest_errors.empty() && disabled.empty(); }
};

// Plans and loads `manifests`. A skill whose dependency failed to load is
// disabled as well ("depends on 'x', which failed to load"). The skills of
// `held_back` (name -> why) are not loaded: disabled with that reason, and
// their dependents as above. Control thread.
BootResult boot_skills(std::vector<SkillManifest> manifests, SkillLoader& loader,
                       const std::map<std::string, std::string>& held_back = {});

// Reads every manifest in `manifest_dir`, then as above. Fails only when the
// folder itself cannot be read.
Result<BootResult> boot_skill_dir(const std::filesystem::path& manifest_dir, SkillLoader& loader,
                                  const std::map<std::string, std::string>& held_back = {});

}  // namespace passepartout
