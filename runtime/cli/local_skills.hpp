// The skills of a manifest folder loaded in this process, without a daemon:
// what `skills check`, `verify` and `verify --replay` run against.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "skills/skill_boot.hpp"
#include "skills/skill_loader.hpp"

namespace passepartout::cli {

// The loader owns the libraries' private copies: keep it as long as the slots.
struct LocalSkills {
  SkillLoader loader;
  BootResult boot;
};

// Loads every manifest of `manifest_dir` against `plugin_dir` in order.
// nullopt with `error` set when the folder is missing or the loader cannot
// start; a skill that fails to load is in the result's problems instead.
// `force_process`: every skill runs in a worker process of its own (started
// from this executable), whatever its manifest's `isolation` says.
std::optional<LocalSkills> load_local_skills(const std::filesystem::path& manifest_dir,
                                             const std::filesystem::path& plugin_dir, std::string& error,
                                             bool force_process = false);

// "shell-guard 1.0.0 (priority 90, depends on policy >=1.0) gate; offers ..., guarded by ...".
std::string describe_slot(const Slot& slot);

}  // namespace passepartout::cli
