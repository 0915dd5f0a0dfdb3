// Test support: a private temporary plugin folder with copies of fixture or
// bundled skill libraries, manifests written for them, and a loader.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "skills/skill_loader.hpp"
#include "skills/skill_manifest.hpp"

namespace passepartout::testing {

// A folder under the system temp dir, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Loader options for a test's plugin folder: "${workspace}" beside it, and
// workers (isolation: process) started from the built `passepartout`.
LoaderOptions loader_options_for_test(const std::filesystem::path& plugin_dir);

class SkillFixtures {
 public:
  SkillFixtures();

  // Copies lib<library>.so from `from_dir` into the private plugin folder.
  void install_library(std::string_view library, const std::filesystem::path& from_dir = PP_FIXTURE_DIR);
  // Manifest YAML for the fixture `name` (library lib<name>.so), version 1.0.0,
  // saying `isolation: <isolation>` unless `extra` has an `isolation:` line.
  // In-process unless asked: what most tests look at (mapped copies, pins,
  // crashes, timings) is that tier's, and a worker per skill costs time.
  static std::string yaml(std::string_view name, int priority = 10, std::string_view extra = "",
                          Isolation isolation = Isolation::in_process);
  // Installs the fixture library and parses a manifest for it (REQUIREs success).
  SkillManifest manifest(std::string_view name, int priority = 10, std::string_view extra = "",
                         Isolation isolation = Isolation::in_process);
  // Adds to `manifests` the bundled manifests (from manifests/, libraries
  // installed from the build's plugin dir) of every skill they depend on or
  // are guarded by and that is not among them yet, with their own config:
  // a bundled actuator or tool cannot load without its guards.
  void add_bundled_requirements(std::vector<SkillManifest>& manifests);
  // Writes `yaml` as <manifest dir>/<file>.
  std::filesystem::path write_manifest(std::string_view file, std::string_view yaml);

  SkillLoader& loader() { return loader_; }
  const std::filesystem::path& plugin_dir() const { return plugin_dir_; }
  const std::filesystem::path& manifest_dir() const { return manifest_dir_; }

 private:
  TempDir root_;
  std::filesystem::path plugin_dir_;
  std::filesystem::path manifest_dir_;
  SkillLoader loader_;
};

}  // namespace passepartout::testing
