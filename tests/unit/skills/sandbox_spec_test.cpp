// Tests of the manifest's `sandbox:` section (every key, its defaults and each
// located mistake), the description of what a skill process gets, and the
// refusal of a skill that requires a layer this machine lacks.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <string>

#include "skills/sandbox_spec.hpp"
#include "skills/skill_loader.hpp"
#include "skills/skill_manifest.hpp"
#include "support/skill_fixtures.hpp"

using passepartout::ErrorCode;
using passepartout::SandboxCapabilities;
using passepartout::SandboxSpec;
using passepartout::SkillManifest;
using passepartout::testing::SkillFixtures;

namespace {

// The four required keys, on lines 1 to 4; test lines start at line 5.
const std::string kBase =
    "name: reader\n"
    "version: 1.0.0\n"
    "library: libreader.so\n"
    "abi: 1\n";

SandboxSpec sandbox_of(const std::string& yaml) {
  auto manifest = SkillManifest::parse(kBase + yaml, "skill.yaml");
  INFO((manifest ? std::string() : manifest.error().message));
  REQUIRE(manifest.has_value());
  return manifest->sandbox;
}

std::string error_of(const std::string& yaml) {
  auto manifest = SkillManifest::parse(kBase + yaml, "skill.yaml");
  REQUIRE_FALSE(manifest.has_value());
  CHECK(manifest.error().code == ErrorCode::invalid_input);
  return manifest.error().message;
}

SandboxCapabilities everything() {
  SandboxCapabilities all;
  all.seccomp = true;
  all.landlock_abi = 4;
  all.can_switch_user = true;
  return all;
}

SandboxCapabilities nothing() {
  SandboxCapabilities none;
  none.seccomp_reason = "the kernel has no seccomp filters (seccomp: Function not implemented)";
  none.landlock_reason = "the kernel has no Landlock (landlock_create_ruleset: Function not implemented)";
  none.user_reason = "the daemon does not run as root (uid 1000), so skill processes keep its user";
  none.memory_limit = false;
  none.memory_reason = "a sanitizer build (its shadow memory needs the address space), so no RLIMIT_AS";
  return none;
}

}  // namespace

TEST_CASE("a manifest without sandbox gets the defaults", "[skills][sandbox]") {
  const SandboxSpec spec = sandbox_of("");
  CHECK(spec.files.empty());
  CHECK_FALSE(spec.network);
  CHECK_FALSE(spec.processes);
  CHECK(spec.memory_bytes == std::uint64_t{512} << 20);
  CHECK(spec.open_files == 64);
  CHECK(spec.cpu_seconds == 600);
  CHECK(spec.require.empty());
}

TEST_CASE("manifest sandbox reads every key", "[skills][sandbox]") {
  const SandboxSpec spec = sandbox_of(
      "sandbox:\n"
      "  files: [/srv/models/, /etc/ssl/../ssl/certs]\n"
      "  network: true\n"
      "  processes: true\n"
      "  memory: 256MiB\n"
      "  open_files: 128\n"
      "  cpu_seconds: 30\n"
      "  require: [seccomp, Landlock, user]\n");
  REQUIRE(spec.files.size() == 2);
  CHECK(spec.files[0] == "/srv/models");
  CHECK(spec.files[1] == "/etc/ssl/certs");
  CHECK(spec.network);
  CHECK(spec.processes);
  CHECK(spec.memory_bytes == std::uint64_t{256} << 20);
  CHECK(spec.open_files == 128);
  CHECK(spec.cpu_seconds == 30);
  CHECK(spec.require == std::vector<std::string>{"seccomp", "landlock", "user"});
  CHECK(sandbox_of("sandbox: { memory: 1 GiB }\n").memory_bytes == std::uint64_t{1} << 30);
  CHECK(sandbox_of("sandbox: { memory: 33554432 }\n").memory_bytes == std::uint64_t{32} << 20);
}

TEST_CASE("manifest sandbox mistakes are reported at their position", "[skills][sandbox]") {
  CHECK(error_of("sandbox: { netwrk: true }\n") ==
        "skill.yaml:5:12: unknown key 'netwrk' in 'sandbox'; did you mean 'network'?");
  CHECK(error_of("sandbox:\n  fork: true\n") ==
        "skill.yaml:6:3: unknown key 'fork' in 'sandbox'; did you mean 'processes'?");
  CHECK(error_of("sandbox:\n  files: [data/models]\n") ==
        "skill.yaml:6:11: 'sandbox.files' entry 'data/models' is not an absolute path; write it from the root, "
        "such as /srv/data (the skill process does not share the daemon's working folder)");
  CHECK(error_of("sandbox:\n  files: /srv\n") ==
        "skill.yaml:6:10: 'sandbox.files' must be a list of absolute paths such as [/srv/data], found '/srv'");
  CHECK(error_of("sandbox:\n  require: [seccomp, landlok]\n") ==
        "skill.yaml:6:22: unknown sandbox layer 'landlok' in 'sandbox.require'; did you mean 'landlock'? the "
        "layers are seccomp, landlock and user");
  CHECK(error_of("sandbox:\n  require: [selinux]\n") ==
        "skill.yaml:6:13: unknown sandbox layer 'selinux' in 'sandbox.require'; the layers are seccomp, landlock "
        "and user");
  CHECK(error_of("sandbox:\n  memory: 256MB\n") ==
        "skill.yaml:6:11: 'sandbox.memory' '256MB': unknown unit 'MB' (units are powers of 1024); write bytes or "
        "a number with KiB, MiB or GiB, such as 256MiB");
  CHECK(error_of("sandbox:\n  memory: lots\n") ==
        "skill.yaml:6:11: 'sandbox.memory' 'lots': a size starts with digits; write bytes or a number with KiB, "
        "MiB or GiB, such as 256MiB");
  CHECK(error_of("sandbox:\n  memory: 1MiB\n") ==
        "skill.yaml:6:11: 'sandbox.memory' '1MiB' is out of range; use 16 MiB to 1024 GiB");
  CHECK(error_of("sandbox:\n  open_files: 0\n") ==
        "skill.yaml:6:15: 'sandbox.open_files' must be an integer from 1 to 1048576, found '0'");
  CHECK(error_of("sandbox:\n  network: sometimes\n") ==
        "skill.yaml:6:12: 'sandbox.network' must be true or false, found 'sometimes'");
  CHECK(error_of("sandbox: [files]\n") ==
        "skill.yaml:5:10: 'sandbox' must be a map such as { files: [/srv/data], network: false }, found a "
        "sequence");
  CHECK(error_of("sandbox:\n  files: [/a, /a/]\n") == "skill.yaml:6:15: 'sandbox.files' lists '/a' twice; keep one");
  // Every mistake at once, one line each.
  CHECK(error_of("sandbox:\n  network: maybe\n  processes: 3\n") ==
        "skill.yaml:6:12: 'sandbox.network' must be true or false, found 'maybe'\n"
        "skill.yaml:7:14: 'sandbox.processes' must be true or false, found '3'");
}

TEST_CASE("sandbox description says what a skill process gets and what this machine lacks", "[skills][sandbox]") {
  SandboxSpec spec;
  CHECK(describe(spec, everything()) ==
        "files: none; network: denied; processes: denied; memory: 512 MiB; open files: 64; cpu: 600 s; layers: "
        "no_new_privs, limits, user nobody (uid 65534), Landlock ABI 4, seccomp");
  spec.files = {"/srv/data"};
  spec.network = true;
  spec.require = {"seccomp"};
  CHECK(describe(spec, nothing()) ==
        "files: /srv/data (read-only; not confined to them: Landlock is off); network: allowed; processes: denied; "
        "memory: not limited (a sanitizer build (its shadow memory needs the address space), so no RLIMIT_AS); "
        "open files: 64; cpu: 600 s; layers: no_new_privs, limits; requires seccomp");
  CHECK(describe(everything()) ==
        "skill sandbox: seccomp on; Landlock ABI 4; user switch to nobody (uid 65534); memory limit on");
  CHECK(describe(nothing()) ==
        "skill sandbox: seccomp off: the kernel has no seccomp filters (seccomp: Function not implemented); "
        "Landlock off: the kernel has no Landlock (landlock_create_ruleset: Function not implemented); no user "
        "switch: the daemon does not run as root (uid 1000), so skill processes keep its user; memory limit off: "
        "a sanitizer build (its shadow memory needs the address space), so no RLIMIT_AS");
}

TEST_CASE("sandbox requirements refuse a missing layer naming it and why", "[skills][sandbox]") {
  SandboxSpec spec;
  spec.require = {"landlock", "user"};
  CHECK(check_requirements(spec, everything()).has_value());
  auto refused = check_requirements(spec, nothing());
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::refused);
  CHECK(refused.error().message ==
        "the manifest requires Landlock (sandbox.require), which is unavailable here: the kernel has no Landlock "
        "(landlock_create_ruleset: Function not implemented); the manifest requires a user switch "
        "(sandbox.require), which is unavailable here: the daemon does not run as root (uid 1000), so skill "
        "processes keep its user");
  CHECK(check_requirements(SandboxSpec{}, nothing()).has_value());  // nothing required
}

TEST_CASE("the sandbox probe agrees with the kernel's answers", "[skills][sandbox]") {
  const SandboxCapabilities found = passepartout::probe_sandbox();
  CHECK(found.seccomp == found.seccomp_reason.empty());
  CHECK((found.landlock_abi > 0) == found.landlock_reason.empty());
  CHECK(found.can_switch_user == (::geteuid() == 0));
  CHECK(describe(found).rfind("skill sandbox: ", 0) == 0);
}

TEST_CASE("loader refuses a skill whose manifest requires a sandbox layer this machine lacks", "[skills][loader]") {
  SkillFixtures fx;
  auto loader =
      passepartout::SkillLoader::create(passepartout::LoaderOptions{fx.plugin_dir(), {}, true, {}, {}, nothing()});
  REQUIRE(loader.has_value());
  auto refused = loader->load(fx.manifest("pass-gate-0", 10, "sandbox: { require: [seccomp] }\n"));
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::refused);
  CHECK(refused.error().message ==
        "skill 'pass-gate-0': the manifest requires seccomp (sandbox.require), which is unavailable here: the "
        "kernel has no seccomp filters (seccomp: Function not implemented)");
  auto loaded = loader->load(fx.manifest("pass-gate-0", 10, "sandbox: { network: true }\n"));
  CHECK(loaded.has_value());
}

TEST_CASE("sizes print in the largest whole unit and parse with binary units", "[skills][sandbox]") {
  CHECK(passepartout::size_text(std::uint64_t{1} << 30) == "1 GiB");
  CHECK(passepartout::size_text(std::uint64_t{1536} << 10) == "1536 KiB");
  CHECK(passepartout::size_text(1000) == "1000 bytes");
  CHECK(*passepartout::parse_size("64KiB") == 65536);
  CHECK(*passepartout::parse_size("2 TiB") == std::uint64_t{2} << 40);
  CHECK_FALSE(passepartout::parse_size("99999999999999999999GiB").has_value());
}
