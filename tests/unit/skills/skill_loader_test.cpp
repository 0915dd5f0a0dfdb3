// SkillLoader: every refusal names the skill, what was found, what was expected
// and what to do; nothing half-loaded is left behind.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "base/log.hpp"
#include "skills/skill_loader.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using passepartout::testing::SkillFixtures;
namespace fs = std::filesystem;

namespace {

std::string load_error(SkillFixtures& fx, const SkillManifest& manifest) {
  auto slot = fx.loader().load(manifest);
  REQUIRE_FALSE(slot.has_value());
  return slot.error().message;
}

}  // namespace

TEST_CASE("loader loads a skill into a slot with its manifest, hash and hooks", "[skills][loader]") {
  SkillFixtures fx;
  auto slot = fx.loader().load(fx.manifest("pass-gate-0", 42));
  REQUIRE(slot.has_value());
  CHECK((*slot)->name() == "pass-gate-0");
  CHECK((*slot)->version_text() == "1.0.0");
  CHECK((*slot)->priority() == 42);
  CHECK((*slot)->has_gate());
  CHECK_FALSE((*slot)->has_prompt());
  CHECK((*slot)->instance() != nullptr);
  auto expected = sha256_file(fx.plugin_dir() / "libpass-gate-0.so");
  REQUIRE(expected.has_value());
  CHECK((*slot)->library_sha256() == *expected);
  CHECK((*slot)->library_sha256().size() == 64);
}

TEST_CASE("loader maps a private copy, so two loads of one file are independent", "[skills][loader]") {
  SkillFixtures fx;
  auto manifest = fx.manifest("pass-gate-1");
  auto a = fx.loader().load(manifest);
  auto b = fx.loader().load(manifest);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK((*a)->instance() != (*b)->instance());
  // The gate functions live at different addresses: two mappings, not one cached handle.
  CHECK(reinterpret_cast<const void*>((*a)->api().gate) != reinterpret_cast<const void*>((*b)->api().gate));
}

TEST_CASE("loader refuses a library built for another ABI major", "[skills][loader]") {
  SkillFixtures fx;
  CHECK(load_error(fx, fx.manifest("abi-major-mismatch")) ==
        "skill 'abi-major-mismatch': built for ABI 2.0, this host supports 1.x; rebuild it against the installed SDK");
}

TEST_CASE("loader refuses a library that needs a newer ABI minor than the host", "[skills][loader]") {
  SkillFixtures fx;
  const std::string host = "1." + std::to_string(PP_ABI_MINOR);
  const std::string needed = "1." + std::to_string(PP_ABI_MINOR + 1);
  CHECK(load_error(fx, fx.manifest("newer-minor")) ==
        "skill 'newer-minor': needs ABI " + needed + ", this host provides " + host +
            "; upgrade passepartout or rebuild the skill against this SDK");
}

TEST_CASE("loader refuses a skill table shorter than its ABI requires", "[skills][loader]") {
  SkillFixtures fx;
  // The fixture declares this SDK's minor, so it must hold every member up to it.
  CHECK(load_error(fx, fx.manifest("short-struct")) ==
        "skill 'short-struct': skill table is 16 bytes, ABI 1." + std::to_string(PP_ABI_MINOR) + " needs at least " +
            std::to_string(PP_SKILL_API_SIZE_1_4) + "; the library is damaged or was built with a broken SDK");
}

TEST_CASE("loader reports a constructor that throws as a failed create with its message", "[skills][loader]") {
  SkillFixtures fx;
  CHECK(load_error(fx, fx.manifest("create-fails")) ==
        "skill 'create-fails': create failed: cannot open the rules database");
}

TEST_CASE("loader reports a create that returns nothing without a reason", "[skills][loader]") {
  SkillFixtures fx;
  CHECK(load_error(fx, fx.manifest("create-null")) ==
        "skill 'create-null': create failed: it returned no instance and gave no reason");
}

TEST_CASE("loader refuses a library without the entry symbol and says how to export it", "[skills][loader]") {
  SkillFixtures fx;
  auto manifest = fx.manifest("no-entry");
  CHECK(load_error(fx, manifest) ==
        "skill 'no-entry': " + (fx.plugin_dir() / "libno-entry.so").string() +
            " does not export 'passepartout_skill_entry'; build it with passepartout_add_skill() and "
            "PASSEPARTOUT_SKILL(YourClass)");
}

TEST_CASE("loader passes on the real dlerror text for a file that is not a shared object", "[skills][loader]") {
  SkillFixtures fx;
  auto manifest = fx.manifest("not-elf");
  std::string message = load_error(fx, manifest);
  std::string path = (fx.plugin_dir() / "libnot-elf.so").string();
  CHECK_THAT(message, Catch::StartsWith("skill 'not-elf': cannot load " + path + ": "));
  // dlerror's own words, with the private copy's path replaced by the operator's.
  CHECK_THAT(message, Catch::Contains("invalid ELF header") || Catch::Contains("file too short"));
  CHECK_THAT(message, !Catch::Contains("passepartout-libs-"));
}

TEST_CASE("loader refuses a library whose sha256 differs from the manifest's pin", "[skills][loader]") {
  SkillFixtures fx;
  std::string pin(64, 'a');
  auto manifest = fx.manifest("pass-gate-2", 10, "sha256: " + pin + "\n");
  auto actual = sha256_file(fx.plugin_dir() / "libpass-gate-2.so");
  REQUIRE(actual.has_value());
  CHECK(load_error(fx, manifest) ==
        "skill 'pass-gate-2': sha256 of " + (fx.plugin_dir() / "libpass-gate-2.so").string() + " is " + *actual +
            ", the manifest pins " + pin + "; rebuild the pinned version or update 'sha256' in pass-gate-2.yaml");
}

TEST_CASE("loader accepts a library whose sha256 matches the pin", "[skills][loader]") {
  SkillFixtures fx;
  fx.install_library("pass-gate-3");
  auto hash = sha256_file(fx.plugin_dir() / "libpass-gate-3.so");
  REQUIRE(hash.has_value());
  auto manifest = fx.manifest("pass-gate-3", 10, "sha256: " + *hash + "\n");
  CHECK(fx.loader().load(manifest).has_value());
}

TEST_CASE("loader refuses a library or folder writable by group or others", "[skills][loader]") {
  SkillFixtures fx;
  auto manifest = fx.manifest("pass-gate-4");
  fs::path library = fx.plugin_dir() / "libpass-gate-4.so";

  SECTION("group-writable file") {
    fs::permissions(library, fs::perms::group_write, fs::perm_options::add);
    CHECK(load_error(fx, manifest) == "skill 'pass-gate-4': library " + library.string() +
                                          " is writable by group or others (mode 0764); run 'chmod go-w " +
                                          library.string() + "'");
  }
  SECTION("world-writable folder") {
    fs::permissions(fx.plugin_dir(), fs::perms::others_write, fs::perm_options::add);
    std::string message = load_error(fx, manifest);
    CHECK_THAT(message, Catch::StartsWith("skill 'pass-gate-4': folder " + fx.plugin_dir().string() +
                                          " is writable by group or others (mode 0757)"));
    fs::permissions(fx.plugin_dir(), fs::perms::others_write, fs::perm_options::remove);
  }
}

TEST_CASE("loader refuses a library whose name or version differs from the manifest", "[skills][loader]") {
  SkillFixtures fx;
  fx.install_library("pass-gate-5");
  SECTION("name") {
    auto manifest =
        SkillManifest::parse("name: other\nversion: 1.0.0\nlibrary: libpass-gate-5.so\nabi: 1\nisolation: in-process\n",
                             fx.manifest_dir() / "other.yaml");
    REQUIRE(manifest.has_value());
    CHECK(load_error(fx, *manifest) ==
          "skill 'other': the library reports name 'pass-gate-5', the manifest other.yaml says 'other'; fix 'name' "
          "in the manifest or point 'library' at the right file");
  }
  SECTION("version") {
    auto manifest = SkillManifest::parse(
        "name: pass-gate-5\nversion: 2.0.0\nlibrary: libpass-gate-5.so\nabi: 1\nisolation: in-process\n",
        fx.manifest_dir() / "pass-gate-5.yaml");
    REQUIRE(manifest.has_value());
    CHECK(load_error(fx, *manifest) ==
          "skill 'pass-gate-5': the library reports version '1.0.0', the manifest says 2.0.0; rebuild the library "
          "or fix 'version' in pass-gate-5.yaml");
  }
}

TEST_CASE("loader says which library is missing and where it looked", "[skills][loader]") {
  SkillFixtures fx;
  auto manifest =
      SkillManifest::parse("name: ghost\nversion: 1.0.0\nlibrary: libghost.so\nabi: 1\nisolation: in-process\n",
                           fx.manifest_dir() / "ghost.yaml");
  REQUIRE(manifest.has_value());
  CHECK(load_error(fx, *manifest) == "skill 'ghost': library " + (fx.plugin_dir() / "libghost.so").string() +
                                         " not found; build it, or fix 'library' in ghost.yaml or the plugin folder");
}

TEST_CASE("loader leaves no private copies behind", "[skills][loader]") {
  SkillFixtures fx;
  {
    auto ok = fx.loader().load(fx.manifest("pass-gate-6"));
    REQUIRE(ok.has_value());
    auto bad = fx.loader().load(fx.manifest("not-elf"));
    REQUIRE_FALSE(bad.has_value());
  }
  std::size_t copies = 0;
  for ([[maybe_unused]] const auto& file : fs::directory_iterator(fx.loader().copy_dir())) ++copies;
  CHECK(copies == 0);
}

TEST_CASE("a loader's own copy folder carries its pid and goes when the loader goes", "[skills][loader]") {
  fs::path dir;
  {
    auto loader = SkillLoader::create(LoaderOptions{});
    REQUIRE(loader.has_value());
    dir = loader->copy_dir();
    CHECK(dir.filename().string().rfind("passepartout-libs-" + std::to_string(::getpid()) + "-", 0) == 0);
    CHECK(fs::is_directory(dir));
  }
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("copy folders left by processes that died are swept, and nothing else", "[skills][loader]") {
  passepartout::testing::TempDir parent;
  // A pid that runs no process: a child that has exited and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  const std::string dead_pid = std::to_string(child);
  const fs::path dead = parent.path() / ("passepartout-libs-" + dead_pid + "-aaaaaa");
  const fs::path dead_with_file = parent.path() / ("passepartout-libs-" + dead_pid + "-bbbbbb");
  const fs::path alive = parent.path() / ("passepartout-libs-" + std::to_string(::getpid()) + "-cccccc");
  const fs::path no_pid = parent.path() / "passepartout-libs-XyZ123";
  const fs::path unrelated = parent.path() / ("other-" + dead_pid + "-dddddd");
  for (const fs::path& dir : {dead, dead_with_file, alive, no_pid, unrelated}) fs::create_directory(dir);
  std::ofstream(dead_with_file / "kept.so") << "x";

  CHECK(sweep_stale_copy_dirs(parent.path()) == 1);
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(dead_with_file / "kept.so"));  // never removes anything but an empty folder
  CHECK(fs::exists(alive));
  CHECK(fs::exists(no_pid));
  CHECK(fs::exists(unrelated));
  CHECK(sweep_stale_copy_dirs(parent.path() / "absent") == 0);
}

TEST_CASE("an unloaded slot's library is really unmapped", "[skills][loader]") {
  SkillFixtures fx;
  auto before = leaked_library_count();
  {
    auto slot = fx.loader().load(fx.manifest("pass-gate-7"));
    REQUIRE(slot.has_value());
  }
  CHECK(leaked_library_count() == before);
}

TEST_CASE("a skill's log lines reach the host attributed to the skill", "[skills][loader]") {
  passepartout::LogCapture capture;
  SkillFixtures fx;
  auto slot = fx.loader().load(fx.manifest("logging-skill", 10, "config: { greeting: hello }\n"));
  REQUIRE(slot.has_value());
  CHECK(capture.contains("logging-skill: logging-skill created with hello"));
}

TEST_CASE("the loader warns about a library that exports STB_GNU_UNIQUE symbols", "[skills][loader]") {
  passepartout::LogCapture capture;
  SkillFixtures fx;
  fx.install_library("echo-v1-unique");
  auto manifest =
      SkillManifest::parse("name: echo\nversion: 1.0.2\nlibrary: libecho-v1-unique.so\nabi: 1\nisolation: in-process\n",
                           fx.manifest_dir() / "echo.yaml");
  REQUIRE(manifest.has_value());
  auto slot = fx.loader().load(*manifest);
  REQUIRE(slot.has_value());  // a warning, not a refusal
#if defined(__GNUC__) && !defined(__clang__)
  CHECK(capture.contains("exports STB_GNU_UNIQUE symbols"));
  CHECK(capture.contains("build it with -fno-gnu-unique"));
#endif
}

TEST_CASE("a well-built library draws no STB_GNU_UNIQUE warning", "[skills][loader]") {
  passepartout::LogCapture capture;
  SkillFixtures fx;
  REQUIRE(fx.loader().load(fx.manifest("pass-gate-8")).has_value());
  CHECK_FALSE(capture.contains("STB_GNU_UNIQUE"));
}
