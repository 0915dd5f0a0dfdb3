// boot_skills: DependencyGraph's plan, then SkillLoader for each skill in order.
#include "skills/skill_boot.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "base/log.hpp"

namespace passepartout {

BootResult boot_skills(std::vector<SkillManifest> manifests, SkillLoader& loader,
                       const std::map<std::string, std::string>& held_back) {
  BootResult result;
  result.manifests = std::move(manifests);
  LoadPlan plan = DependencyGraph::plan(result.manifests);
  result.disabled = plan.disabled;

  std::map<std::string, std::string> failed;  // name -> why it did not load
  for (const auto& d : plan.disabled) failed.emplace(d.name, d.reason);

  for (const SkillManifest* manifest : plan.order) {
    const auto requirements = manifest->requirements();
    auto broken = std::find_if(requirements.begin(), requirements.end(),
                               [&](const Dependency* dep) { return failed.count(dep->name) != 0; });
    if (broken != requirements.end()) {
      std::string reason = std::string((*broken)->verb()) + " '" + (*broken)->name + "', which failed to load";
      failed.emplace(manifest->name, reason);
      result.disabled.push_back(Disabled{manifest->name, reason});
      continue;
    }
    if (auto held = held_back.find(manifest->name); held != held_back.end()) {
      failed.emplace(manifest->name, held->second);
      result.disabled.push_back(Disabled{manifest->name, held->second});
      continue;
    }
    auto slot = loader.load(*manifest);
    if (!slot) {
      failed.emplace(manifest->name, slot.error().message);
      result.disabled.push_back(Disabled{manifest->name, slot.error().message});
      log_message(LogLevel::error, "loader", slot.error().message);
      continue;
    }
    log_message(LogLevel::info, "loader", "loaded skill '{}' {} (priority {}, sha256 {})", manifest->name,
                manifest->version.to_string(), manifest->priority, (*slot)->library_sha256().substr(0, 12));
    result.slots.push_back(std::move(*slot));
  }
  std::sort(result.disabled.begin(), result.disabled.end(),
            [](const Disabled& a, const Disabled& b) { return a.name < b.name; });
  return result;
}

Result<BootResult> boot_skill_dir(const std::filesystem::path& manifest_dir, SkillLoader& loader,
                                  const std::map<std::string, std::string>& held_back) {
  auto set = load_manifest_dir(manifest_dir);
  if (!set) return fail(set.error().code, set.error().message);
  BootResult result = boot_skills(std::move(set->manifests), loader, held_back);
  result.manifest_errors = std::move(set->errors);
  return result;
}

}  // namespace passepartout
