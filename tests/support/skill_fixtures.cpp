// SkillFixtures: temporary plugin folders for loader, registry and verifier tests.
#include "support/skill_fixtures.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <random>

namespace passepartout::testing {
namespace fs = std::filesystem;

TempDir::TempDir() {
  static std::atomic<unsigned> counter{0};
  std::random_device random;
  path_ = fs::temp_directory_path() /
          ("passepartout-test-" + std::to_string(random()) + "-" + std::to_string(counter.fetch_add(1)));
  fs::create_directories(path_);
  fs::permissions(path_, fs::perms::owner_all);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

LoaderOptions loader_options_for_test(const fs::path& plugin_dir) {
  LoaderOptions options = loader_options(plugin_dir, true, plugin_dir.parent_path() / "workspace");
  options.worker_executable = PP_PASSEPARTOUT_EXE;  // the built executable serves `skill-worker`
  return options;
}

namespace {
SkillLoader make_loader(const fs::path& plugin_dir) {
  // ${workspace} in a manifest: a folder beside the plugins, made when a skill names it.
  auto loader = SkillLoader::create(loader_options_for_test(plugin_dir));
  REQUIRE(loader.has_value());
  return std::move(*loader);
}
}  // namespace

SkillFixtures::SkillFixtures()
    : plugin_dir_(root_.path() / "plugins"),
      manifest_dir_(root_.path() / "manifests"),
      loader_((fs::create_directories(root_.path() / "plugins"), make_loader(root_.path() / "plugins"))) {
  fs::create_directories(manifest_dir_);
  fs::permissions(plugin_dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                   fs::perms::others_read | fs::perms::others_exec);
}

void SkillFixtures::install_library(std::string_view library, const fs::path& from_dir) {
  std::string file = "lib" + std::string(library) + ".so";
  fs::path target = plugin_dir_ / file;
  fs::copy_file(from_dir / file, target, fs::copy_options::overwrite_existing);
  fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write | fs::perms::owner_exec |
                              fs::perms::group_read | fs::perms::others_read);
}

void SkillFixtures::add_bundled_requirements(std::vector<SkillManifest>& manifests) {
  for (std::size_t i = 0; i < manifests.size(); ++i) {  // grows as requirements are added
    for (const Dependency* dep : manifests[i].requirements()) {
      const std::string name = dep->name;
      const bool present =
          std::any_of(manifests.begin(), manifests.end(), [&](const SkillManifest& m) { return m.name == name; });
      if (present) continue;
      auto manifest = SkillManifest::load(fs::path(PP_MANIFEST_DIR) / (name + ".yaml"));
      INFO((manifest ? std::string() : manifest.error().message));
      REQUIRE(manifest.has_value());
      install_library(name, PP_PLUGIN_DIR);
      manifests.push_back(std::move(*manifest));
    }
  }
}

std::string SkillFixtures::yaml(std::string_view name, int priority, std::string_view extra, Isolation isolation) {
  std::string text = "name: " + std::string(name) + "\nversion: 1.0.0\nlibrary: lib" + std::string(name) +
                     ".so\nabi: 1\npriority: " + std::to_string(priority) + "\n";
  if (extra.find("isolation:") == std::string_view::npos)
    text += "isolation: " + std::string(to_string(isolation)) + "\n";
  text += extra;
  return text;
}

SkillManifest SkillFixtures::manifest(std::string_view name, int priority, std::string_view extra,
                                      Isolation isolation) {
  install_library(name);
  auto parsed =
      SkillManifest::parse(yaml(name, priority, extra, isolation), manifest_dir_ / (std::string(name) + ".yaml"));
  INFO((parsed ? std::string() : parsed.error().message));
  REQUIRE(parsed.has_value());
  return std::move(*parsed);
}

fs::path SkillFixtures::write_manifest(std::string_view file, std::string_view yaml) {
  fs::path path = manifest_dir_ / file;
  std::ofstream(path) << yaml;
  return path;
}

}  // namespace passepartout::testing
