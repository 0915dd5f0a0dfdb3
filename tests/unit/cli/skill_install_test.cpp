// Tests for the files behind `skills new`, `skills install` and `skills
// uninstall`: the project made from the template, the checked and atomic
// copy into a daemon's folders (and what it refuses), the upgrade and its
// undo, and the removal of exactly one skill's files.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli/client_commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/skill_install.hpp"
#include "skills/skill_manifest.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using namespace passepartout::cli;
using passepartout::testing::SkillFixtures;
using passepartout::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// The source tree's template, as a build tree's `skills new` finds it.
fs::path template_dir() { return fs::path(PP_SOURCE_DIR) / "sdk" / "template"; }

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void spit(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
}

bool contains(const std::string& text, std::string_view what) { return text.find(what) != std::string::npos; }

// Every file under `folder` (relative path -> bytes); a folder that is missing is empty.
std::map<std::string, std::string> snapshot(const fs::path& folder) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    const std::string relative = entry.path().lexically_relative(folder).string();
    files[relative] = entry.is_regular_file() ? slurp(entry.path()) : std::string("<folder>");
  }
  return files;
}

mode_t mode_of(const fs::path& file) {
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// A built skill as `skills new` + a build leave it: <dir>/<name>.yaml and
// <dir>/build/<library>, from the fixture library `fixture`.
fs::path built_skill(const fs::path& dir, const std::string& name, const std::string& fixture,
                     const std::string& library, const std::string& version = "1.0.0") {
  spit(dir / (name + ".yaml"), "name: " + name + "\nversion: " + version + "\nlibrary: " + library +
                                   "\nabi: 1\nisolation: in-process\npriority: 20\n");
  fs::create_directories(dir / "build");
  fs::copy_file(fs::path(PP_FIXTURE_DIR) / ("lib" + fixture + ".so"), dir / "build" / library,
                fs::copy_options::overwrite_existing);
  return dir / (name + ".yaml");
}

}  // namespace

TEST_CASE("skills new fills the skill's name into every file of the template", "[cli][install]") {
  TempDir parent;
  auto project = make_skill_project("word-guard", parent.path(), template_dir(), "/opt/passepartout");
  INFO((project ? std::string() : project.error().message));
  REQUIRE(project.has_value());
  const fs::path dir = parent.path() / "word-guard";
  CHECK(project->dir == dir);
  CHECK(project->files == std::vector<fs::path>{"CMakeLists.txt", "README.md", "word-guard.yaml", "word_guard.cpp"});
  for (const auto& file : project->files) {
    const std::string text = slurp(dir / file);
    INFO(file.string());
    CHECK_FALSE(contains(text, "my-skill"));
    CHECK_FALSE(contains(text, "my_skill"));
    CHECK_FALSE(contains(text, "MySkill"));
    CHECK(mode_of(dir / file) == 0644);
  }
  auto manifest = SkillManifest::load(dir / "word-guard.yaml");
  REQUIRE(manifest.has_value());
  CHECK(manifest->name == "word-guard");
  CHECK(manifest->library == "libword-guard.so");
  CHECK(manifest->version.to_string() == "1.0.0");
  const std::string source = slurp(dir / "word_guard.cpp");
  CHECK(contains(source, "kName[] = \"word-guard\""));
  CHECK(contains(source, "kVersion[] = \"1.0.0\""));
  CHECK(contains(source, "PASSEPARTOUT_SKILL(WordGuard);"));
  const std::string cmake = slurp(dir / "CMakeLists.txt");
  CHECK(contains(cmake, "project(word_guard CXX)"));
  CHECK(contains(cmake, "passepartout_add_skill(word-guard SOURCES word_guard.cpp)"));
  const std::string d = dir.string();
  CHECK(project->next == std::vector<std::string>{
                             "cmake -S " + d + " -B " + d + "/build -DCMAKE_PREFIX_PATH=/opt/passepartout",
                             "cmake --build " + d + "/build", "passepartout skills install " + d + "/word-guard.yaml"});
  // Nothing but the project is left in the parent (the folder it was built in was renamed).
  CHECK(snapshot(parent.path()).size() == 1 + project->files.size());
}

TEST_CASE("skills new names a class that C++ accepts for a name starting with a digit", "[cli][install]") {
  TempDir parent;
  auto project = make_skill_project("2fa", parent.path(), template_dir(), "");
  REQUIRE(project.has_value());
  CHECK(contains(slurp(parent.path() / "2fa" / "2fa.cpp"), "PASSEPARTOUT_SKILL(Skill2fa);"));
  CHECK(contains(project->next[0], "-DCMAKE_PREFIX_PATH=<prefix the SDK is installed under>"));
}

TEST_CASE("skills new refuses a bad name, a missing template and a folder in use, writing nothing", "[cli][install]") {
  TempDir parent;
  for (const std::string& bad :
       std::vector<std::string>{"", "Word", "-x", "a_b", "a b", "../x", std::string(65, 'a')}) {
    auto project = make_skill_project(bad, parent.path(), template_dir(), "");
    INFO(bad);
    REQUIRE_FALSE(project.has_value());
    CHECK(project.error().code == ErrorCode::invalid_input);
    CHECK(contains(project.error().message, "not a valid skill name"));
  }
  CHECK(snapshot(parent.path()).empty());

  auto no_template = make_skill_project("ok", parent.path(), parent.path() / "nothing", "");
  REQUIRE_FALSE(no_template.has_value());
  CHECK(no_template.error().code == ErrorCode::not_found);
  CHECK(snapshot(parent.path()).empty());

  spit(parent.path() / "taken" / "notes.txt", "mine");
  const auto before = snapshot(parent.path());
  auto taken = make_skill_project("taken", parent.path(), template_dir(), "");
  REQUIRE_FALSE(taken.has_value());
  CHECK(taken.error().code == ErrorCode::refused);
  CHECK(contains(taken.error().message, "not an empty folder"));
  CHECK(snapshot(parent.path()) == before);

  spit(parent.path() / "file-in-the-way", "x");
  CHECK_FALSE(make_skill_project("file-in-the-way", parent.path(), template_dir(), "").has_value());

  fs::create_directory(parent.path() / "empty");
  CHECK(make_skill_project("empty", parent.path(), template_dir(), "").has_value());
  CHECK(fs::is_regular_file(parent.path() / "empty" / "empty.yaml"));
}

TEST_CASE("skills install checks the skill, then copies manifest and library into the folders with mode 0644",
          "[cli][install]") {
  TempDir root;
  const fs::path manifest = built_skill(root.path() / "src", "pass-gate-0", "pass-gate-0", "libpass-gate-0.so");
  const SkillFolders folders{root.path() / "daemon" / "manifests", root.path() / "daemon" / "plugins"};

  auto installed = install_skill_files(manifest, {}, folders);
  INFO((installed ? std::string() : installed.error().message));
  REQUIRE(installed.has_value());
  CHECK(installed->name == "pass-gate-0");
  CHECK(installed->version == "1.0.0");
  CHECK_FALSE(installed->upgrade);
  CHECK(contains(installed->check, "pass-gate-0 1.0.0 (priority 20)"));
  CHECK(installed->manifest == folders.manifest_dir / "pass-gate-0.yaml");
  CHECK(installed->library == folders.plugin_dir / "libpass-gate-0.so");
  CHECK(slurp(installed->manifest) == slurp(manifest));
  CHECK(slurp(installed->library) == slurp(root.path() / "src" / "build" / "libpass-gate-0.so"));
  CHECK(mode_of(installed->manifest) == 0644);
  CHECK(mode_of(installed->library) == 0644);
  // Exactly the two files: no temporary file is left behind.
  CHECK(snapshot(folders.manifest_dir).size() == 1);
  CHECK(snapshot(folders.plugin_dir).size() == 1);

  // The library may also be named, and be found beside the manifest.
  const fs::path beside = root.path() / "beside";
  spit(beside / "block-gate.yaml", SkillFixtures::yaml("block-gate"));
  fs::copy_file(fs::path(PP_FIXTURE_DIR) / "libblock-gate.so", beside / "libblock-gate.so");
  auto found = find_skill_library(beside / "block-gate.yaml", "libblock-gate.so");
  REQUIRE(found.has_value());
  CHECK(*found == beside / "libblock-gate.so");
  auto named = install_skill_files(beside / "block-gate.yaml", beside / "libblock-gate.so", folders);
  REQUIRE(named.has_value());
  CHECK(fs::is_regular_file(folders.plugin_dir / "libblock-gate.so"));
}

TEST_CASE("skills install refuses what would not load or is in another skill's way, and changes no folder",
          "[cli][install]") {
  TempDir root;
  const SkillFolders folders{root.path() / "manifests", root.path() / "plugins"};
  // Another skill already installed.
  spit(folders.manifest_dir / "block-gate.yaml", SkillFixtures::yaml("block-gate"));
  fs::create_directories(folders.plugin_dir);
  fs::copy_file(fs::path(PP_FIXTURE_DIR) / "libblock-gate.so", folders.plugin_dir / "libblock-gate.so");
  const auto manifests_before = snapshot(folders.manifest_dir);
  const auto plugins_before = snapshot(folders.plugin_dir);
  auto unchanged = [&] {
    CHECK(snapshot(folders.manifest_dir) == manifests_before);
    CHECK(snapshot(folders.plugin_dir) == plugins_before);
  };

  SECTION("no library where it looks") {
    spit(root.path() / "src" / "pass-gate-0.yaml", SkillFixtures::yaml("pass-gate-0"));
    auto result = install_skill_files(root.path() / "src" / "pass-gate-0.yaml", {}, folders);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().code == ErrorCode::not_found);
    CHECK(contains(result.error().message, (root.path() / "src" / "libpass-gate-0.so").string()));
    CHECK(contains(result.error().message, (root.path() / "src" / "build" / "libpass-gate-0.so").string()));
  }
  SECTION("a manifest that does not parse") {
    spit(root.path() / "src" / "broken.yaml", "name: Broken!\n");
    auto result = install_skill_files(root.path() / "src" / "broken.yaml", {}, folders);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().code == ErrorCode::invalid_input);
  }
  SECTION("a library that is not the skill its manifest names (the check refuses it)") {
    const fs::path manifest = built_skill(root.path() / "src", "pass-gate-1", "pass-gate-0", "libpass-gate-1.so");
    auto result = install_skill_files(manifest, {}, folders);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().code == ErrorCode::refused);
    CHECK(contains(result.error().message, "skill 'pass-gate-1' would not load; nothing was installed"));
  }
  SECTION("a library another skill's manifest names") {
    const fs::path manifest = built_skill(root.path() / "src", "pass-gate-0", "pass-gate-0", "libblock-gate.so");
    auto result = install_skill_files(manifest, {}, folders);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().code == ErrorCode::refused);
    CHECK(contains(result.error().message, "belongs to skill 'block-gate'"));
  }
  SECTION("a manifest file of that name holding another skill") {
    // Installed as <name>.yaml; a file of that name that is another skill's is in the way.
    fs::rename(folders.manifest_dir / "block-gate.yaml", folders.manifest_dir / "pass-gate-0.yaml");
    const auto manifests_now = snapshot(folders.manifest_dir);
    const fs::path manifest = built_skill(root.path() / "src", "pass-gate-0", "pass-gate-0", "libpass-gate-0.so");
    auto result = install_skill_files(manifest, {}, folders);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().code == ErrorCode::refused);
    CHECK(contains(result.error().message, "is not a manifest of skill 'pass-gate-0'"));
    CHECK(snapshot(folders.manifest_dir) == manifests_now);
    CHECK(snapshot(folders.plugin_dir) == plugins_before);
    return;
  }
  SECTION("a library in the plugin folder that no manifest of the skill names") {
    fs::copy_file(fs::path(PP_FIXTURE_DIR) / "libpass-gate-0.so", folders.plugin_dir / "libpass-gate-0.so");
    const auto plugins_now = snapshot(folders.plugin_dir);
    const fs::path manifest = built_skill(root.path() / "src", "pass-gate-0", "pass-gate-0", "libpass-gate-0.so");
    auto result = install_skill_files(manifest, {}, folders);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().code == ErrorCode::refused);
    CHECK(contains(result.error().message, "no manifest of skill 'pass-gate-0'"));
    CHECK(snapshot(folders.manifest_dir) == manifests_before);
    CHECK(snapshot(folders.plugin_dir) == plugins_now);
    return;
  }
  unchanged();
}

TEST_CASE("skills install over the same skill is an upgrade, and undoing it puts the old files back",
          "[cli][install]") {
  TempDir root;
  const SkillFolders folders{root.path() / "manifests", root.path() / "plugins"};
  const fs::path v1 = built_skill(root.path() / "v1", "shadow-gate", "shadow-gate-1", "libshadow-gate.so", "1.0.0");
  const fs::path v2 = built_skill(root.path() / "v2", "shadow-gate", "shadow-gate-2", "libshadow-gate.so", "2.0.0");
  auto first = install_skill_files(v1, {}, folders);
  REQUIRE(first.has_value());
  // An operator may have named the manifest otherwise: the upgrade replaces that file.
  fs::rename(first->manifest, folders.manifest_dir / "gate.yaml");
  const auto before = snapshot(root.path() / "manifests");
  const auto plugins_before = snapshot(root.path() / "plugins");

  auto second = install_skill_files(v2, {}, folders);
  INFO((second ? std::string() : second.error().message));
  REQUIRE(second.has_value());
  CHECK(second->upgrade);
  CHECK(second->version == "2.0.0");
  CHECK(second->manifest == folders.manifest_dir / "gate.yaml");
  CHECK(snapshot(folders.manifest_dir).size() == 1);
  CHECK(slurp(second->manifest) == slurp(v2));
  CHECK(slurp(second->library) == slurp(root.path() / "v2" / "build" / "libshadow-gate.so"));
  CHECK(slurp(second->library) != plugins_before.at("libshadow-gate.so"));

  REQUIRE(undo_install(*second).has_value());
  CHECK(snapshot(folders.manifest_dir) == before);
  CHECK(snapshot(folders.plugin_dir) == plugins_before);
  CHECK(mode_of(folders.plugin_dir / "libshadow-gate.so") == 0644);

  CHECK_FALSE(second->stale_library.has_value());

  // A new version under another library's name: the old library is named stale, for removal once it loads.
  const fs::path renamed =
      built_skill(root.path() / "v3", "shadow-gate", "shadow-gate-2", "libshadow-gate-v3.so", "2.0.0");
  auto third = install_skill_files(renamed, {}, folders);
  REQUIRE(third.has_value());
  CHECK(third->upgrade);
  REQUIRE(third->stale_library.has_value());
  CHECK(*third->stale_library == folders.plugin_dir / "libshadow-gate.so");
  REQUIRE(undo_install(*third).has_value());
  CHECK(snapshot(folders.manifest_dir) == before);
  CHECK(snapshot(folders.plugin_dir) == plugins_before);

  // Undoing a first install removes what it added.
  TempDir other;
  const SkillFolders fresh{other.path() / "m", other.path() / "p"};
  auto added = install_skill_files(v1, {}, fresh);
  REQUIRE(added.has_value());
  REQUIRE(undo_install(*added).has_value());
  CHECK(snapshot(fresh.manifest_dir).empty());
  CHECK(snapshot(fresh.plugin_dir).empty());
}

TEST_CASE("skills uninstall removes the skill's manifest and library and nothing else", "[cli][install]") {
  TempDir root;
  const SkillFolders folders{root.path() / "manifests", root.path() / "plugins"};
  spit(folders.manifest_dir / "mine.yaml", SkillFixtures::yaml("pass-gate-0"));
  spit(folders.manifest_dir / "other.yaml", SkillFixtures::yaml("block-gate"));
  spit(folders.manifest_dir / "notes.txt", "not a manifest");
  spit(folders.plugin_dir / "libpass-gate-0.so", "library 0");
  spit(folders.plugin_dir / "libblock-gate.so", "library b");
  spit(folders.plugin_dir / "libunrelated.so", "library u");

  auto missing = remove_skill_files("nobody", folders);
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK(snapshot(folders.manifest_dir).size() == 3);

  auto found = find_installed_manifest("pass-gate-0", folders);
  REQUIRE(found.has_value());
  CHECK(*found == folders.manifest_dir / "mine.yaml");

  auto removed = remove_skill_files("pass-gate-0", folders);
  REQUIRE(removed.has_value());
  CHECK(removed->manifest == folders.manifest_dir / "mine.yaml");
  REQUIRE(removed->library.has_value());
  CHECK(*removed->library == folders.plugin_dir / "libpass-gate-0.so");
  CHECK(snapshot(folders.manifest_dir) ==
        std::map<std::string, std::string>{{"notes.txt", "not a manifest"},
                                           {"other.yaml", SkillFixtures::yaml("block-gate")}});
  CHECK(snapshot(folders.plugin_dir) ==
        std::map<std::string, std::string>{{"libblock-gate.so", "library b"}, {"libunrelated.so", "library u"}});

  // A library another manifest still names stays.
  spit(folders.manifest_dir / "twin.yaml",
       "name: twin\nversion: 1.0.0\nlibrary: libblock-gate.so\nabi: 1\nisolation: in-process\npriority: 5\n");
  auto twin = remove_skill_files("twin", folders);
  REQUIRE(twin.has_value());
  CHECK_FALSE(twin->library.has_value());
  CHECK(fs::exists(folders.plugin_dir / "libblock-gate.so"));
}

TEST_CASE("skills new prints the project and the next commands, and exits 2 on what the caller must fix",
          "[cli][install]") {
  TempDir parent;
  std::ostringstream out;
  std::ostringstream err;
  const Output output{out, err, false};
  CHECK(run_skills_new({"greeter", parent.path(), template_dir()}, output) == kExitOk);
  INFO(out.str() << err.str());
  CHECK(contains(out.str(), "Created " + (parent.path() / "greeter").string() + " from the template in "));
  CHECK(contains(out.str(), "\nNext: configure, build, install (it loads into the running daemon):\n  cmake -S "));
  CHECK(contains(out.str(), "  passepartout skills install " + (parent.path() / "greeter" / "greeter.yaml").string()));
  // A template given by hand says nothing of where the SDK is: the note says what to do.
  CHECK(contains(out.str(), "--component sdk --prefix PREFIX"));

  CHECK(run_skills_new({"greeter", parent.path(), template_dir()}, output) == kExitUsage);
  CHECK(contains(err.str(), "exists and is not an empty folder"));
  CHECK(run_skills_new({"Greeter", parent.path(), template_dir()}, output) == kExitUsage);
  CHECK(contains(err.str(), "'Greeter' is not a valid skill name"));
}
