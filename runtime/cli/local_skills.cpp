// Loading a manifest folder in this process, and the one-line description of a loaded skill.
#include "cli/local_skills.hpp"

#include <system_error>
#include <utility>

#include "base/state_paths.hpp"

namespace passepartout::cli {

namespace fs = std::filesystem;

std::optional<LocalSkills> load_local_skills(const fs::path& manifest_dir, const fs::path& plugin_dir,
                                             std::string& error, bool force_process) {
  std::error_code ec;
  if (!fs::is_directory(manifest_dir, ec)) {
    error = "manifest folder " + manifest_dir.string() + " does not exist; pass --manifests DIR";
    return std::nullopt;
  }
  LoaderOptions options = loader_options(plugin_dir, true, default_state_dir() / "workspace");
  options.force_process = force_process;
  auto loader = SkillLoader::create(std::move(options));
  if (!loader) {
    error = loader.error().message;
    return std::nullopt;
  }
  auto booted = boot_skill_dir(manifest_dir, *loader);
  if (!booted) {
    error = booted.error().message;
    return std::nullopt;
  }
  return LocalSkills{std::move(*loader), std::move(*booted)};
}

std::string describe_slot(const Slot& slot) {
  std::string line = slot.name() + " " + slot.version_text() + " (priority " + std::to_string(slot.priority());
  if (!slot.manifest().depends_on.empty()) {
    line += ", depends on ";
    for (std::size_t i = 0; i < slot.manifest().depends_on.size(); ++i) {
      if (i > 0) line += ", ";
      line += slot.manifest().depends_on[i].text;
    }
  }
  line += ")";
  if (slot.has_gate()) line += " gate";
  if (slot.has_prompt()) line += " prompt";
  if (slot.acts()) {
    line += "; offers " + slot.offers_text() + ", guarded by ";
    for (std::size_t i = 0; i < slot.manifest().guarded_by.size(); ++i) {
      if (i > 0) line += ", ";
      line += slot.manifest().guarded_by[i].text;
    }
  }
  return line;
}

}  // namespace passepartout::cli
